"""Job graph documents as the pages and the API show and check them: validation, the
plan, limits and headroom, the operator catalog."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from engine.api import (  # noqa: F401 - parser_warm, STAGING_SUFFIX, SinkTarget...: re-exported
    BROKER_SOURCE_TYPES,
    MAX_KEY_GROUPS,
    MAX_NAME_LENGTH,
    OPERATOR_TYPES,
    STAGING_SUFFIX,
    DagValidationError,
    ExpressionParserUnavailable,
    JobGraph,
    SinkTarget,
    ValidationBudgetExceeded,
    describe,
    document_in_order,
    initial_config,
    known_output_columns,
    masked_document,
    max_parallelism,
    output_columns,
    parallelism_limits,
    parse_job_graph,
    parser_warm,
    pinned_reason,
    plan_job,
    reserved_target_reason,
    sink_targets,
    state_kind_of,
    stored_job_graph,
    unmasked_document,
    warm_up_parser,
)
from webapp.errors import ServiceError

logger = logging.getLogger(__name__)


def prepare(*, then: Callable[[], None] | None = None) -> threading.Thread:
    """Starts Spark's expression parser in the background (its JVM takes seconds to start,
    more on a loaded machine), so that a server's first requests do not pay for it: a
    request that checks a job's expressions, a rescale among them, would otherwise wait for
    the parser while it holds its run's lock. ``then`` is called once the parser has started
    (or could not). Returns the parser's start-up thread."""
    starting = threading.Thread(target=_start_parser, args=(then,),
                                name="expression-parser-start", daemon=True)
    starting.start()
    return starting


def _start_parser(then: Callable[[], None] | None) -> None:
    try:
        warm_up_parser()
    except ExpressionParserUnavailable as error:  # the first check that needs it says so
        logger.warning("%s", error)
    if then is not None:
        then()


def dag_shown(document: Any) -> Any:
    """The document as pages and API answers show it: keys in reading order, broker
    passwords masked."""
    return masked_document(document_in_order(document))


def dag_with_secrets(document: Any, previous: Any) -> Any:
    """A saved document with the passwords it shows masked taken from ``previous``."""
    return unmasked_document(document, previous)


def dag_problems(document: Any) -> list[dict[str, str]]:
    """Every problem of a DAG document, each naming the operator or edge; empty when valid."""
    try:
        _budgeted_graph(document)
    except DagValidationError as error:
        return [{"where": p.where, "message": p.message} for p in error.problems]
    except ExpressionParserUnavailable as error:
        raise ParserUnavailable(str(error)) from None
    return []


def _budgeted_graph(document: Any) -> JobGraph:
    """``parse_job_graph``, its time budget running out answered as ValidationTooCostly."""
    try:
        return parse_job_graph(document)
    except ValidationBudgetExceeded as error:
        raise ValidationTooCostly(error.problems[0].message, problems=[
            {"where": p.where, "message": p.message} for p in error.problems]) from None


class ParserUnavailable(ServiceError):
    status = 503


class ValidationTooCostly(ServiceError):
    """A document whose check ran over its time budget: refused (400) rather than answered as
    invalid, since nothing is known to be wrong with it."""


def dag_normalized(document: dict[str, Any]) -> dict[str, Any]:
    """The canonical form of a valid document (defaults filled in)."""
    return _budgeted_graph(document).to_dict()


# The helpers below read a document checked when it was stored (a run's target, a job's
# version, a plan made from one) without checking it again (``stored_job_graph``): the run
# page and an ETP scale-out or -in need no answer from Spark's parser.


def dag_parallelism(document: dict[str, Any]) -> dict[str, int]:
    """Instances per operator."""
    return {op.id: op.parallelism for op in stored_job_graph(document).operators}


def dag_assignment(document: dict[str, Any]) -> dict[str, list[list[int]]]:
    """Key-group owners of each keyed operator at the start of a run, as the driver's acks
    show them: [[first key group, last key group, instance], ...]."""

    config = initial_config(plan_job(stored_job_graph(document)))
    return {op: describe(config, op)["ranges"] for op, c in config.items() if c.owners is not None}


def dag_state_kinds(document: dict[str, Any]) -> dict[str, str]:
    """Per operator, the state it keeps: stateless, keyed (by key group) or global."""
    return {op.id: state_kind_of(op) for op in stored_job_graph(document).operators}


def dag_limits(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per operator: the largest parallelism it may take, if pinned to 1 why, and if its
    parallelism cannot change live (sinks, sources Spark reads itself) why."""

    graph = stored_job_graph(document)
    _, fixed = parallelism_limits(graph)
    return {
        op.id: {"max": max_parallelism(graph, op), "pinned_reason": pinned_reason(op),
                "fixed_reason": None if pinned_reason(op) else fixed.get(op.id)}
        for op in graph.operators
    }


def dag_headroom(document: dict[str, Any]) -> dict[str, int]:
    """How many instances the ETP policy may add (up to each operator's limit) and remove
    (down to 1 each) in one request, over the operators whose parallelism may change."""
    limits = dag_limits(document)
    parallelism = dag_parallelism(document)
    movable = [op for op, lim in limits.items()
               if not lim["pinned_reason"] and not lim["fixed_reason"]]
    return {"add": sum(max(0, limits[op]["max"] - parallelism[op]) for op in movable),
            "remove": sum(max(0, parallelism[op] - 1) for op in movable)}


def document_limits() -> dict[str, int]:
    """The bounds of a document's own fields, for the editor to show."""

    return {"name": MAX_NAME_LENGTH, "key_groups": MAX_KEY_GROUPS}


def operator_catalog() -> list[dict[str, Any]]:
    """The operator types with their param schemas, for the editor's palette and forms."""

    return [
        {
            "type": t.name, "role": t.role, "state_kind": t.state_kind,
            "selectivity": t.selectivity, "inputs": t.inputs, "doc": t.doc,
            "params": [{"name": p.name, "kind": p.kind, "required": p.required,
                        "default": p.default, "doc": p.doc, "maximum": p.maximum}
                       for p in t.params],
        }
        for t in OPERATOR_TYPES.values()
    ]


def dag_check(document: Any) -> dict[str, Any]:
    """Validation for the editor: every problem, and when valid the plan and output columns."""
    try:
        graph = _budgeted_graph(document)
    except DagValidationError as error:
        return {"valid": False, "problems": [{"where": p.where, "message": p.message}
                                             for p in error.problems],
                "columns": known_output_columns(document, list(error.problems))}
    except ExpressionParserUnavailable as error:
        raise ParserUnavailable(str(error)) from None
    return {"valid": True, "problems": [], "plan": plan_job(graph).to_dict(),
            "columns": {op: dict(cols) for op, cols in output_columns(graph).items()}}


def dag_sink_targets(document: Any) -> tuple[SinkTarget, ...]:
    """The tables and folders a checked document's sinks write to (frozen dataclasses)."""
    return sink_targets(document)


def sink_target_reserved(target: SinkTarget) -> str | None:
    """Why no job may write to ``target``, or None."""
    return reserved_target_reason(target)
