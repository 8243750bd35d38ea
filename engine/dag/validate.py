"""parse_job_graph: a DAG document in, a JobGraph out, or every problem at once."""

from __future__ import annotations

from typing import Any

from engine.dag.catalog import OPERATOR_TYPES
from engine.dag.document import read_document
from engine.dag.model import JobGraph
from engine.dag.params import param_problems
from engine.dag.schema import infer_schemas
from engine.dag.structure import (
    cycle_problems,
    parallelism_problems,
    reachability_problems,
    role_problems,
    source_reachability_problems,
)
from engine.errors import DagValidationError, Problem


def parse_job_graph(doc: Any) -> JobGraph:
    """Build a JobGraph from a DAG document (DESIGN.md section 4).

    Raises DagValidationError listing every problem found, each naming the operator or
    edge at fault.
    """
    raw = read_document(doc)
    graph = JobGraph(name=raw.name, key_groups=raw.key_groups,
                     operators=tuple(raw.operators), edges=tuple(raw.edges))
    problems = list(raw.problems)
    if raw.operators:
        problems += validate_graph(graph)
    if problems:
        raise DagValidationError(_unique(problems))
    return graph


def validate_graph(graph: JobGraph) -> list[Problem]:
    """Every problem of an already-built graph (types, params, structure, columns)."""
    problems = _type_problems(graph)
    cycles = cycle_problems(graph)
    problems += cycles + role_problems(graph) + reachability_problems(graph)
    problems += source_reachability_problems(graph)
    problems += parallelism_problems(graph)
    # Column inference needs an order and known types; skip it rather than guess.
    if not cycles and all(op.type in OPERATOR_TYPES for op in graph.operators):
        problems += infer_schemas(graph)[1]
    return problems


def _type_problems(graph: JobGraph) -> list[Problem]:
    problems = []
    for op in graph.operators:
        op_type = OPERATOR_TYPES.get(op.type)
        if op_type is None:
            known = ", ".join(sorted(OPERATOR_TYPES))
            problems.append(Problem(f"operator {op.id!r}",
                                    f"unknown type {op.type!r} (known: {known})"))
        else:
            problems += param_problems(op, op_type)
    return problems


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
