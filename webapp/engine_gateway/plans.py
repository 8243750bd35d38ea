"""Reconfigurations planned against a running document: rescales, ETP scale-out and -in,
logic changes, rebalances, and the commands that carry them to the driver.

The documents planned against (a run's target, a job's version) and the plans made from them
were checked whole when they were made, so they are read here as stored (``stored_job_graph``),
not checked again; only what a request brings (a parallelism, an assignment, new params) is."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from engine.api import (
    CommandRequest,
    JobGraph,
    describe,
    diff_plans,
    initial_config,
    logic_change_refused,
    max_parallelism,
    parallelism_limits,
    pinned_reason,
    plan_job,
    plan_scale_in_instances,
    plan_scale_out,
    ranges_moves_detail,
    state_kind_of,
    stored_job_graph,
    weighted_assignment,
)
from webapp.engine_gateway.documents import dag_headroom, dag_problems
from webapp.engine_gateway.rates import measured_rates
from webapp.errors import Conflict, ServiceError

LOGIC_FIXED = "sources and sinks change only with a restart"
"""Why a source's or a sink's params cannot change while the run runs."""


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
    graph = stored_job_graph(document)
    op = _operator(graph, operator)
    if not isinstance(parallelism, int) or isinstance(parallelism, bool):
        raise _problem("field parallelism", "must be a whole number")

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
    graph = stored_job_graph(document)
    op = _operator(graph, operator)
    if not isinstance(params, dict):
        raise _problem("field params", "must be a JSON object")
    if op.type.startswith(("source.", "sink.")):
        raise _problem(f"operator {operator}", LOGIC_FIXED)
    if state_kind_of(op) != "stateless":

        reason = logic_change_refused(op.type, op.id, op.params, params)
        if reason is not None:
            raise _problem(f"operator {operator}", f"refused while it runs: {reason}")
    after = graph.with_params(op.id, params).to_dict()
    problems = dag_problems(after)
    if problems:
        raise ServiceError(f"the new params have {len(problems)} problem(s)", problems=problems)
    if after == graph.to_dict():
        raise _problem("field params", f"{operator!r} already has these params")
    return after


def rebalance_moves_diff(document: dict[str, Any], *, operator: str,
                         before: list[list[int]] | None, after: list[list[int]]) -> dict[str, Any]:
    """A rebalance's plan diff once applied: the key groups that moved, from the ranges before
    (``None``: the run's first assignment) and after, as the driver acknowledged them."""
    graph = stored_job_graph(document)
    if before is None:
        config = initial_config(plan_job(graph))
        before = describe(config, operator)["ranges"]
    detail = ranges_moves_detail(operator, graph.key_groups, before, after) or \
        f"no key group of {operator} changes instance"
    return {"kinds": ["workload"], "affected_operators": [operator],
            "changes": [{"kind": "workload", "operators": [operator], "detail": detail}]}


def plan_upgrade_check(before: dict[str, Any], after: dict[str, Any], *, version: int) -> None:
    """Whether ``after`` (version ``version``) can start from the state of a run that ran
    ``before`` (its target: live changes included). Each keyed operator's new params are
    judged by the rule of live logic changes; state is addressed by key group, and a
    source's position is kept with the state, so neither ``key_groups`` nor a source may
    change. Conflict names each operator and parameter at fault."""
    old, new = stored_job_graph(before), stored_job_graph(after)
    problems = []
    if old.key_groups != new.key_groups:
        problems.append({"where": "field key_groups",
                         "message": f"is {new.key_groups} in version {version}, "
                                    f"{old.key_groups} in the kept state: state is addressed "
                                    "by key group"})
    for op in old.operators:
        problem = _upgrade_problem(op, new, version)
        if problem is not None:
            problems.append(problem)
    if problems:
        first = problems[0]
        raise Conflict(f"version {version} cannot start from this run's state: "
                       f"{first['where']}: {first['message']}", problems=problems)


def _upgrade_problem(op, new: JobGraph, version: int) -> dict[str, str] | None:  # noqa: ANN001
    source = op.type.startswith("source.")
    if not source and state_kind_of(op) == "stateless":
        return None
    where = f"operator {op.id}"
    found = next((o for o in new.operators if o.id == op.id), None)
    if found is None:
        return {"where": where, "message": f"holds state and is not in version {version}"}
    if found.type != op.type:
        return {"where": where, "message": f"is {found.type} in version {version}, "
                                           f"{op.type} in the kept state"}
    changed = sorted(name for name in {*op.params, *found.params}
                     if op.params.get(name) != found.params.get(name))
    if not changed:
        return None
    named = "param" + ("s " if len(changed) > 1 else " ") + ", ".join(changed)
    if source:
        return {"where": where, "message": f"{named} changed: where the source reads from "
                                           "is kept with the state"}
    reason = logic_change_refused(op.type, op.id, op.params, found.params)
    if reason is None:
        return None
    return {"where": where, "message": f"{named} changed: {reason}"}


def plan_check_rebalance(document: dict[str, Any], *, operator: Any, assignment: Any) -> Any:
    """Check a rebalance request: a keyed operator and an owner per key group (or 'weighted')."""
    graph = stored_job_graph(document)
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


def rebalance_weighted_owners(*, key_group_loads: list[float], parallelism: int) -> list[int]:
    """The owner of each key group under the weighted assignment a driver installs for a
    rebalance with ``assignment: "weighted"`` (contiguous ranges of even summed load), for
    ``key_group_loads`` (one load per key group)."""

    return list(weighted_assignment(key_group_loads, parallelism).owners)


def plan_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changes between two documents: workload, resources and logic, by operator."""
    return diff_plans(plan_job(stored_job_graph(before)),
                      plan_job(stored_job_graph(after))).to_dict()


def plan_acknowledged(before: dict[str, Any], *, acks: list[dict[str, Any]]) -> dict[str, Any]:
    """`before` with exactly what the driver acknowledged as applied: each applied command's
    operator at the parallelism and params its ack reports."""
    graph = original = stored_job_graph(before)
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

    old = {op["id"]: op for op in before["operators"]}
    now_ms = time.time() * 1000.0
    requests = []
    for op in after["operators"]:
        previous = old[op["id"]]
        if op.get("params") != previous.get("params"):
            requests.append(CommandRequest(kind="logic", operator=op["id"], request_id=request_id,
                                           requested_at_ms=now_ms, params=op["params"]))
        if op.get("parallelism", 1) != previous.get("parallelism", 1):
            requests.append(CommandRequest(kind="rescale", operator=op["id"],
                                           request_id=request_id, requested_at_ms=now_ms,
                                           parallelism=op.get("parallelism", 1)))
    return _numbered(requests, request_id)


def rebalance_command(*, operator: str, assignment: Any, request_id: str) -> list[dict[str, str]]:
    """The command of a checked rebalance (``plan_check_rebalance``)."""
    request = CommandRequest(
        kind="rebalance", operator=operator, request_id=request_id,
        requested_at_ms=time.time() * 1000.0,
        assignment=assignment if assignment == "weighted" else tuple(assignment))
    return _numbered([request], request_id)


def _numbered(requests: list[CommandRequest], request_id: str) -> list[dict[str, str]]:
    """The wire form of each request, numbered under ``request_id`` when there are several."""
    if len(requests) > 1:
        requests = [replace(r, request_id=f"{request_id}.{i + 1}")
                    for i, r in enumerate(requests)]
    return [r.to_message() for r in requests]


def _fixed(graph: JobGraph) -> set[str]:
    """Operators whose parallelism a running job cannot change (the engine refuses them)."""

    return set(parallelism_limits(graph)[1])


def _graph_and_rates(document, rates, instances):
    if not isinstance(instances, int) or isinstance(instances, bool) or instances < 1:
        raise _problem("field instances", "must be a whole number of at least 1")
    graph = stored_job_graph(document)
    return graph, measured_rates(rates, graph)


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
    return state_kind_of(graph.operator(op_id)) == "keyed"


def _problem(where: str, message: str) -> ServiceError:
    return ServiceError(f"{where}: {message}", problems=[{"where": where, "message": message}])
