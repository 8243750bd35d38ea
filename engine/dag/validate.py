"""parse_job_graph: a DAG document in, a JobGraph out, or every problem at once."""

from __future__ import annotations

import time
from typing import Any

from engine.dag.catalog import OPERATOR_TYPES
from engine.dag.document import RawDocument, read_document
from engine.dag.expressions import warm_up_parser
from engine.dag.model import JobGraph
from engine.dag.params import param_problems
from engine.dag.schema import infer_schemas
from engine.dag.source_params import source_param_problems
from engine.dag.structure import (
    cycle_problems,
    parallelism_problems,
    reachability_problems,
    role_problems,
    source_reachability_problems,
)
from engine.errors import DagValidationError, Problem, ValidationBudgetExceeded


def parse_job_graph(doc: Any) -> JobGraph:
    """Build a JobGraph from a DAG document (DESIGN.md section 4).

    Raises DagValidationError listing every problem found, each naming the operator or
    edge at fault.
    """
    raw = read_document(doc)
    graph = _graph_of(raw)
    problems = list(raw.problems)
    if raw.operators:
        problems += validate_graph(graph)
    if problems:
        raise DagValidationError(_unique(problems))
    return graph


def stored_job_graph(doc: Any) -> JobGraph:
    """A JobGraph of a document that passed ``parse_job_graph`` before it was stored (a run's
    target, a job's version, a plan made from one): its shape is read again, but its params,
    expressions, structure and columns are not checked again. Checking them costs a process
    Spark's parser's first look at each expression (~5 to 20 ms each beside a run), which
    the first rescale a web server process planned for a run paid before its record.

    Raises DagValidationError if the document does not even have a job graph's shape.
    """
    raw = read_document(doc)
    if raw.problems:
        raise DagValidationError(_unique(raw.problems))
    return _graph_of(raw)


def planning_job_graph(doc: Any) -> JobGraph:
    """A JobGraph checked for what planning reads (its shape, its operators' types, its
    structure and pinned parallelism), not its params, expressions or columns: the policies
    (ETP, scale-out, scale-in, DS2) need the graph's structure alone, and checking
    expressions starts Spark's SQL parser, a JVM. ``parse_job_graph`` does the full check.

    Raises DagValidationError listing every structural problem found.
    """
    raw = read_document(doc)
    graph = _graph_of(raw)
    problems = list(raw.problems)
    if raw.operators:
        problems += [_unknown_type(op.id, op.type) for op in graph.operators
                     if op.type not in OPERATOR_TYPES]
        problems += cycle_problems(graph) + role_problems(graph) + reachability_problems(graph)
        problems += source_reachability_problems(graph) + parallelism_problems(graph)
    if problems:
        raise DagValidationError(_unique(problems))
    return graph


def known_output_columns(doc: Any, problems: list[Problem]) -> dict[str, dict[str, str]]:
    """Column -> type of the output of every operator that ``problems`` (the document's, from
    ``parse_job_graph``) leave known: neither it nor any operator upstream of it has a
    problem. An unfinished graph thus shows each operator its input's columns as soon as
    that input is sound. Nothing while the graph has a cycle or an unknown type."""
    graph = _graph_of(read_document(doc))
    if cycle_problems(graph) or any(op.type not in OPERATOR_TYPES for op in graph.operators):
        return {}
    # Where an operator sits in an unfinished graph says nothing about its columns.
    placement = set(role_problems(graph) + reachability_problems(graph)
                    + source_reachability_problems(graph) + parallelism_problems(graph))
    at_fault = {p.where.split("'")[1] for p in problems
                if p.where.startswith("operator '") and p not in placement}
    unknown: set[str] = set()
    for op_id in graph.topological_order():
        if op_id in at_fault or any(parent in unknown for parent in graph.parents(op_id)):
            unknown.add(op_id)
    schemas, _ = infer_schemas(graph)
    return {op_id: dict(schema) for op_id, schema in schemas.items()
            if schema is not None and op_id not in unknown}


def _graph_of(raw: RawDocument) -> JobGraph:
    return JobGraph(name=raw.name, key_groups=raw.key_groups,
                    operators=tuple(raw.operators), edges=tuple(raw.edges))


VALIDATION_BUDGET_S = 2.0
"""Validation of one document stops (ValidationBudgetExceeded) once it has taken this long,
so that one request cannot hold a web thread for long: Spark's parser takes ~3 ms for a
short new expression and ~50 ms for one of 20 terms (measured), so a document of hundreds
of new long expressions would take tens of seconds. Expressions already parsed cost
nothing (cached per text), so sending the document again continues the work."""


def validate_graph(graph: JobGraph) -> list[Problem]:
    """Every problem of an already-built graph (types, params, structure, columns)."""
    if any(op.type in ("filter", "map") for op in graph.operators):
        warm_up_parser()  # starting the parser's JVM is not the document's cost
    deadline = time.monotonic() + VALIDATION_BUDGET_S
    problems = _type_problems(graph, deadline)
    cycles = cycle_problems(graph)
    problems += cycles + role_problems(graph) + reachability_problems(graph)
    problems += source_reachability_problems(graph)
    problems += parallelism_problems(graph)
    _check_budget(deadline)
    # Column inference needs an order and known types; skip it rather than guess.
    if not cycles and all(op.type in OPERATOR_TYPES for op in graph.operators):
        problems += infer_schemas(graph)[1]
    return problems


def _check_budget(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise ValidationBudgetExceeded([Problem(
            "document", f"validation took over {VALIDATION_BUDGET_S:g} s: send it again to "
                        "go on (expressions already checked are remembered), or split the job "
                        "or simplify its expressions")])


def _type_problems(graph: JobGraph, deadline: float) -> list[Problem]:
    problems = []
    for op in graph.operators:
        _check_budget(deadline)
        op_type = OPERATOR_TYPES.get(op.type)
        if op_type is None:
            problems.append(_unknown_type(op.id, op.type))
        else:
            problems += param_problems(op, op_type) + source_param_problems(op)
    return problems


def _unknown_type(op_id: str, op_type: str) -> Problem:
    known = ", ".join(sorted(OPERATOR_TYPES))
    return Problem(f"operator {op_id!r}", f"unknown type {op_type!r} (known: {known})")


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
