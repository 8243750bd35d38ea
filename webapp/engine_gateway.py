"""The one place the web application calls the engine. Plain data crosses: dicts and JSON.

Engine errors become `ServiceError`s here, so views and services see one error family.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from engine.dag import JobGraph, max_parallelism, parse_job_graph, pinned_reason
from engine.dag.document import document_in_order
from engine.dag.expressions import ExpressionParserUnavailable
from engine.dag.secrets import masked_document, unmasked_document
from engine.errors import DagValidationError, EngineError
from engine.planner import diff_plans, plan_job
from engine.policies import compute_etp, parse_rates, plan_scale_out, recommend_parallelism
from engine.policies.instances_in import plan_scale_in_instances
from webapp.errors import ServiceError

CONTROL_PREFIX = "streamscale:"
# Parameters that shape a keyed operator's stored state: changing them live would corrupt it.
STATE_SHAPING_PARAMS = ("key", "time", "window", "slide", "aggregates", "within")



def prepare() -> None:
    """Imports the engine modules that requests import on first use (none of them loads
    Spark), so that a server's first requests do not pay for them."""
    import engine.dag  # noqa: F401
    import engine.policies.autoscale  # noqa: F401
    import engine.runtime.control.channel  # noqa: F401
    import engine.runtime.control.commands  # noqa: F401
    import engine.runtime.control.run_config  # noqa: F401

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
        parse_job_graph(document)
    except DagValidationError as error:
        return [{"where": p.where, "message": p.message} for p in error.problems]
    except ExpressionParserUnavailable as error:
        raise ParserUnavailable(str(error)) from None
    return []


class ParserUnavailable(ServiceError):
    status = 503


def dag_normalized(document: dict[str, Any]) -> dict[str, Any]:
    """The canonical form of a valid document (defaults filled in)."""
    return parse_job_graph(document).to_dict()


def dag_parallelism(document: dict[str, Any]) -> dict[str, int]:
    """Instances per operator."""
    return {op.id: op.parallelism for op in parse_job_graph(document).operators}


def dag_assignment(document: dict[str, Any]) -> dict[str, list[list[int]]]:
    """Key-group owners of each keyed operator at the start of a run, as the driver's acks
    show them: [[first key group, last key group, instance], ...]."""
    from engine.runtime.control.run_config import describe, initial_config

    config = initial_config(parse_job_graph(document))
    return {op: describe(config, op)["ranges"] for op, c in config.items() if c.owners is not None}


def dag_limits(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per operator: the largest parallelism it may take, if pinned to 1 why, and if its
    parallelism cannot change live (sinks, sources Spark reads itself) why."""
    from engine.policies.autoscale import parallelism_limits

    graph = parse_job_graph(document)
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


def _check_headroom(document: dict[str, Any], instances: Any, direction: str) -> None:
    if not isinstance(instances, int) or isinstance(instances, bool):
        return  # _graph_and_rates names the problem
    room = dag_headroom(document)[direction]
    if instances > room:
        verb = "added" if direction == "add" else "removed"
        raise _problem("field instances", f"at most {room} instance(s) can be {verb} now "
                                          f"(asked for {instances})")


def plan_rescale(document: dict[str, Any], *, operator: Any, parallelism: Any) -> dict[str, Any]:
    """The document with `operator` at `parallelism`, or a ServiceError naming the limit."""
    graph = parse_job_graph(document)
    op = _operator(graph, operator)
    if not isinstance(parallelism, int) or isinstance(parallelism, bool):
        raise _problem("field parallelism", "must be a whole number")
    from engine.policies.autoscale import parallelism_limits

    fixed = parallelism_limits(graph)[1].get(op.id)
    if fixed is not None and pinned_reason(op) is None:
        raise _problem("field operator", f"{operator!r} {fixed}")
    limit = max_parallelism(graph, op)
    if parallelism < 1 or parallelism > limit:
        reason = pinned_reason(op)
        why = f"{operator!r} is pinned to 1: {reason}" if reason else (
            f"{operator!r} takes 1 to {limit} instances (key_groups is {graph.key_groups})")
        raise _problem("field parallelism", f"{parallelism} is out of range: {why}")
    if parallelism == op.parallelism:
        raise _problem("field parallelism", f"{operator!r} already runs {parallelism} instance(s)")
    return graph.with_parallelism(op.id, parallelism).to_dict()


def plan_scale_out_instances(
    document: dict[str, Any], *, rates: dict[str, Any], instances: Any
) -> dict[str, Any]:
    """Stela scale-out: `instances` new instances placed by ETP on congested operators."""
    return _instances_planned(document, rates, instances, "add", plan_scale_out,
                              "no operator that may take another instance is congested")


def plan_scale_in_by_instances(
    document: dict[str, Any], *, rates: dict[str, Any], instances: Any
) -> dict[str, Any]:
    """Remove `instances` instances from the operators of lowest ETP."""
    return _instances_planned(document, rates, instances, "remove", plan_scale_in_instances,
                              "every operator already runs a single instance")


def _instances_planned(
    document: dict[str, Any], rates: dict[str, Any], instances: Any, direction: str,
    plan: Callable[..., Any], nothing_to_do: str,
) -> dict[str, Any]:
    """The document after ``plan`` places (``direction``: add or remove) ``instances``."""
    _check_headroom(document, instances, direction)
    graph, parsed = _graph_and_rates(document, rates, instances)
    result = plan(graph, parsed, instances, fixed=_fixed(graph))
    if not result.steps:
        raise _problem("field instances", nothing_to_do)
    return _with_parallelism(graph, result.parallelism)


def plan_logic(document: dict[str, Any], *, operator: Any, params: Any) -> dict[str, Any]:
    """The document with new params for `operator`, validated; a change that would corrupt a
    keyed operator's state is refused with the parameter named."""
    graph = parse_job_graph(document)
    op = _operator(graph, operator)
    if not isinstance(params, dict):
        raise _problem("field params", "must be a JSON object")
    if op.type.startswith(("source.", "sink.")):
        raise _problem(f"operator {operator}", "sources and sinks change only with a restart")
    if _is_keyed(graph, op.id):
        for name in STATE_SHAPING_PARAMS:
            if op.params.get(name) != params.get(name):
                raise _problem(
                    f"operator {operator}",
                    f"changing {name!r} of a stateful operator would corrupt its state",
                )
    after = graph.with_params(op.id, params).to_dict()
    problems = dag_problems(after)
    if problems:
        raise ServiceError(f"the new params have {len(problems)} problem(s)", problems=problems)
    if after == graph.to_dict():
        raise _problem("field params", f"{operator!r} already has these params")
    return after


def plan_check_rebalance(document: dict[str, Any], *, operator: Any, assignment: Any) -> Any:
    """Check a rebalance request: a keyed operator and an owner per key group (or 'weighted')."""
    graph = parse_job_graph(document)
    op = _operator(graph, operator)
    if not _is_keyed(graph, op.id):
        raise _problem(f"operator {operator}", "only keyed operators have key groups to rebalance")
    if assignment in (None, "weighted"):
        return "weighted"
    if not isinstance(assignment, list) or len(assignment) != graph.key_groups:
        raise _problem("field assignment", f"must list an owner for each of the "
                                           f"{graph.key_groups} key groups, or be 'weighted'")
    if any(not isinstance(o, int) or isinstance(o, bool) or not 0 <= o < op.parallelism
           for o in assignment):
        raise _problem("field assignment", f"owners must be instances 0..{op.parallelism - 1}")
    return assignment


def plan_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changes between two documents: workload, resources and logic, by operator."""
    return diff_plans(plan_job(parse_job_graph(before)), plan_job(parse_job_graph(after))).to_dict()


def plan_acknowledged(before: dict[str, Any], *, acks: list[dict[str, Any]]) -> dict[str, Any]:
    """`before` with exactly what the driver acknowledged as applied: each applied command's
    operator at the parallelism and params its ack reports."""
    graph = original = parse_job_graph(before)
    for ack in acks:
        after, op_id = ack.get("after") or {}, ack.get("operator")
        if ack.get("status") != "applied" or not op_id or "parallelism" not in after:
            continue
        if int(after["parallelism"]) != graph.operator(op_id).parallelism:
            graph = graph.with_parallelism(op_id, int(after["parallelism"]))
        if "params" in after and after["params"] != dict(graph.operator(op_id).params):
            graph = graph.with_params(op_id, after["params"])
    return before if graph is original else graph.to_dict()


def commands_between(
    before: dict[str, Any], after: dict[str, Any], *, request_id: str
) -> list[dict[str, str]]:
    """Control-channel commands that turn a running `before` into `after`."""
    from engine.runtime.control.commands import command_message

    old = {op["id"]: op for op in before["operators"]}
    now_ms = time.time() * 1000.0
    commands = []
    for op in after["operators"]:
        previous = old[op["id"]]
        if op.get("params") != previous.get("params"):
            commands.append(command_message("logic", op["id"], "", now_ms, params=op["params"]))
        if op.get("parallelism", 1) != previous.get("parallelism", 1):
            commands.append(command_message("rescale", op["id"], "", now_ms,
                                            parallelism=op.get("parallelism", 1)))
    return _numbered(commands, request_id)


def rebalance_command(*, operator: str, assignment: Any, request_id: str) -> list[dict[str, str]]:
    from engine.runtime.control.commands import command_message

    message = command_message("rebalance", operator, "", time.time() * 1000.0,
                              assignment=assignment)
    return _numbered([message], request_id)


def control_send(*, run_id: int, messages: list[dict[str, str]]) -> None:
    """Append commands to the run's durable control channel, stamped with the send time."""
    channel = _channel(run_id)
    for message in messages:
        channel.send(dict(message, requested_at=f"{time.time() * 1000.0:.3f}"))


def control_stop(*, run_id: int) -> None:
    """Ask the run's driver to stop after its current epoch."""
    from engine.runtime.control.commands import command_message

    _channel(run_id).send(command_message("stop", None, f"stop-{run_id}", time.time() * 1000.0))


def rates_etp(document: dict[str, Any], rates: dict[str, Any]) -> dict[str, Any]:
    """ETP and congestion of each operator under measured rates."""
    graph = parse_job_graph(document)
    result = compute_etp(graph, _rates(rates, graph))
    return {"etp": dict(result.etp), "congested": list(result.congested)}


def rates_recommend(document: dict[str, Any], rates: dict[str, Any]) -> dict[str, int]:
    """DS2's parallelism for each non-source operator at the measured source rates."""
    graph = parse_job_graph(document)
    return recommend_parallelism(graph, _rates(rates, graph))


def load_decide(
    document: dict[str, Any], *, epochs: list[dict[str, Any]], min_parallelism: int,
    max_parallelism: int | None, window_epochs: int = 3,
) -> dict[str, Any]:
    """The autoscaler's decision (up, down, hold or wait, with its changes, reasons and the
    figures that drove it) from the stored load of the epochs since the last change."""
    from engine.policies.autoscale import (
        AutoscaleSettings,
        autoscale_decide,
        parallelism_limits,
    )

    graph = parse_job_graph(document)
    settings = AutoscaleSettings(min_parallelism=min_parallelism,
                                 max_parallelism=max_parallelism, window_epochs=window_epochs)
    limits, fixed = parallelism_limits(graph)
    usable = [e for e in epochs if e.get("operators") and set(e["operators"]) == set(limits)]
    return autoscale_decide(graph, usable, settings, limits, fixed).to_dict()


def _channel(run_id: int):
    from engine.runtime.control.channel import RedisControlChannel

    url = settings.REDIS_URL
    return RedisControlChannel(url, str(run_id), CONTROL_PREFIX, client=_control_redis(url))


@functools.cache
def _control_redis(url: str):
    """One connection pool per server for control sends (no TCP set-up per command)."""
    import redis

    return redis.Redis.from_url(url, decode_responses=True)


def _numbered(commands: list[dict[str, str]], request_id: str) -> list[dict[str, str]]:
    if len(commands) == 1:
        return [dict(commands[0], request_id=request_id)]
    return [dict(c, request_id=f"{request_id}.{i + 1}") for i, c in enumerate(commands)]


def _fixed(graph: JobGraph) -> set[str]:
    """Operators whose parallelism a running job cannot change (the engine refuses them)."""
    from engine.policies.autoscale import parallelism_limits

    return set(parallelism_limits(graph)[1])


def _graph_and_rates(document, rates, instances):
    if not isinstance(instances, int) or isinstance(instances, bool) or instances < 1:
        raise _problem("field instances", "must be a whole number of at least 1")
    graph = parse_job_graph(document)
    return graph, _rates(rates, graph)


def _rates(rates: dict[str, Any], graph: JobGraph):
    try:
        return parse_rates(rates, graph)
    except EngineError as error:
        raise ServiceError(f"no usable measured rates yet: {error}") from None


def _with_parallelism(graph: JobGraph, parallelism: dict[str, int]) -> dict[str, Any]:
    for op_id, n in parallelism.items():
        if graph.operator(op_id).parallelism != n:
            graph = graph.with_parallelism(op_id, n)
    return graph.to_dict()


def _operator(graph: JobGraph, operator: Any):
    if not isinstance(operator, str) or not operator:
        raise _problem("field operator", "is required")
    if operator not in {op.id for op in graph.operators}:
        raise _problem("field operator", f"there is no operator {operator!r} in this job")
    return graph.operator(operator)


def _is_keyed(graph: JobGraph, op_id: str) -> bool:
    from engine.dag import state_kind_of

    return state_kind_of(graph.operator(op_id)) == "keyed"


def _problem(where: str, message: str) -> ServiceError:
    return ServiceError(f"{where}: {message}", problems=[{"where": where, "message": message}])


def run_driver(
    *, document: dict[str, Any], run_id: int, checkpoint: str, master: str, host: Any,
    stop_requested: Any, running: Any = None,
) -> tuple[str, str]:
    """Run a job on Spark in this process until it ends; returns its status and, for a failure,
    the cause in one line. The status is "stopped" (asked through the control channel),
    "failed", or "suspended" (when `stop_requested` was set: the query stops cleanly after its
    epoch in progress and the run resumes from its checkpoint when a driver starts again).

    `host` implements the engine's ports (metrics publisher, reconfiguration recorder);
    `running` (an Event), if given, is set once the query runs. Imports PySpark, so only the
    driver process calls it.
    """
    from engine.runtime.api import start_run, stop_run
    from engine.runtime.errors import failure_summary

    # On a cluster the executors may sit on other machines: state goes to the networked store.
    on_cluster = master.startswith("spark://")
    run = start_run(
        document, checkpoint=checkpoint, publisher=host, recorder=host, run_id=str(run_id),
        master=master, control_url=settings.REDIS_URL, control_prefix=CONTROL_PREFIX,
        state_url=settings.STATE_REDIS_URL if on_cluster else None,
    )
    if running is not None:
        running.set()
    while True:
        status = run.wait(timeout_s=0.5)
        if status == "failed" and run.error is not None:
            return status, failure_summary(run.error)
        if status in ("stopped", "failed"):
            return status, ""
        if stop_requested.is_set():
            stop_run(run)
            return "suspended", ""


def document_limits() -> dict[str, int]:
    """The bounds of a document's own fields, for the editor to show."""
    from engine.dag.document import MAX_KEY_GROUPS, MAX_NAME_LENGTH

    return {"name": MAX_NAME_LENGTH, "key_groups": MAX_KEY_GROUPS}


def operator_catalog() -> list[dict[str, Any]]:
    """The operator types with their param schemas, for the editor's palette and forms."""
    from engine.dag import OPERATOR_TYPES

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
    problems = dag_problems(document)
    if problems:
        return {"valid": False, "problems": problems}
    from engine.dag import output_columns

    graph = parse_job_graph(document)
    return {"valid": True, "problems": [], "plan": plan_job(graph).to_dict(),
            "columns": {op: dict(cols) for op, cols in output_columns(graph).items()}}
