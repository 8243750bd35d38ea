"""What a running run can be reconfigured with, for the run page's controls: the operators
whose params may change (with their catalog params and the values they run with), the keyed
operators that can be rebalanced (with the key groups a weighted rebalance would give each
instance, estimated from the rows each recorded), and the newer version of the job it may
move to. The services decide; these reads only say what to offer and why not."""

from __future__ import annotations

from typing import Any

from webapp import engine_gateway
from webapp.errors import NotFound
from webapp.jobs.models import JobVersion, Run
from webapp.runs import inspection

NOT_KEYED = "only keyed operators have key groups to rebalance"


def _document(run: Run) -> dict[str, Any]:
    return run.target_dag or run.version.dag


def _catalog() -> dict[str, dict[str, Any]]:
    return {entry["type"]: entry for entry in engine_gateway.operator_catalog()}


# ---- logic changes ----------------------------------------------------------------------

def run_logic_operators(*, run: Run) -> list[dict[str, Any]]:
    """The run's operators but its sources, in document order, each with its type, the state
    it keeps and, for a sink, why its params cannot change while the run runs."""
    catalog, kinds = _catalog(), engine_gateway.dag_state_kinds(_document(run))
    found = []
    for op in _document(run)["operators"]:
        role = catalog[op["type"]]["role"]
        if role == "source":
            continue
        found.append({"id": op["id"], "type": op["type"], "state_kind": kinds[op["id"]],
                      "refused": engine_gateway.LOGIC_FIXED if role == "sink" else None})
    return found


def operator_param_fields(*, run: Run, operator_id: str) -> dict[str, Any]:
    """One operator as the logic-change form shows it: per param of its type in the catalog,
    the kind, whether required, the default, the upper bound, the doc and the value the run
    has now (None when left out)."""
    operator = next((o for o in run_logic_operators(run=run) if o["id"] == operator_id), None)
    if operator is None:
        raise NotFound(f"run {run.pk} has no operator {operator_id!r} whose params may change")
    current = next(o for o in _document(run)["operators"] if o["id"] == operator_id)
    params = current.get("params", {})
    fields = [{**spec, "value": params.get(spec["name"])}
              for spec in _catalog()[operator["type"]]["params"]]
    return {**operator, "fields": fields, "params": params}


# ---- rebalance --------------------------------------------------------------------------

def run_rebalance_operators(*, run: Run) -> list[dict[str, Any]]:
    """The run's operators with key groups, each with why it cannot be rebalanced (a global
    aggregate's one instance owns them all) or None."""
    kinds = engine_gateway.dag_state_kinds(_document(run))
    return [{**op, "refused": None if kinds.get(op["id"]) == "keyed" else NOT_KEYED}
            for op in inspection.run_keyed_operators(run=run)]


def rebalance_estimate(*, run: Run, operator_id: str) -> dict[str, Any]:
    """The instances of a keyed operator as they are (key groups, rows and busy share over
    its recent epochs, the rows' skew) and, estimated, after a weighted rebalance: each
    instance's rows are spread evenly over the key groups it owns and the weighted
    assignment is taken of those loads. The driver weighs each key group by the rows it had
    in the last epoch, so what it installs may differ; an instance's rows are measured, the
    loads per key group are not."""
    operators = {o["id"]: o for o in run_rebalance_operators(run=run)}
    if operator_id not in operators:
        raise NotFound(f"run {run.pk} has no keyed operator {operator_id!r}")
    found = inspection.operator_instances(run=run, operator_id=operator_id)
    instances = [i for i in found["instances"] if i["key_groups"]]
    refused = operators[operator_id]["refused"]
    if refused is None and len(instances) < 2:
        refused = f"{operator_id!r} runs one instance, which owns every key group"
    loads = _key_group_loads(instances)
    after = _weighted_after(instances, loads) if loads is not None and not refused else None
    return {
        "operator": operators[operator_id], "epochs": found["epochs"], "refused": refused,
        "instances": [{**i, "after": after[n] if after else None}
                      for n, i in enumerate(instances)],
        "rows_skew": found["rows_skew"], "busy_skew": found["busy_skew"],
        "estimated": after is not None,
        "rows_skew_after": inspection.skew([a["rows"] for a in after]) if after else None,
        "moves": sum(a["moved"] for a in after) if after else None,
    }


def _key_group_loads(instances: list[dict[str, Any]]) -> list[float] | None:
    """Rows per key group, each instance's rows spread evenly over its key groups; None
    without rows recorded for every instance."""
    if not instances or any(i["rows"] is None for i in instances):
        return None
    count = sum(len(i["key_groups"]) for i in instances)
    loads = [0.0] * count
    for i in instances:
        for group in i["key_groups"]:
            if group < count:
                loads[group] = i["rows"] / len(i["key_groups"])
    return loads if sum(loads) > 0 else None


def _weighted_after(instances: list[dict[str, Any]], loads: list[float]) -> list[dict[str, Any]]:
    owners = engine_gateway.rebalance_weighted_owners(key_group_loads=loads,
                                                      parallelism=len(instances))
    total = sum(loads)
    after = []
    for n, i in enumerate(instances):
        groups = [g for g, owner in enumerate(owners) if owner == n]
        rows = sum(loads[g] for g in groups)
        after.append({"key_groups": len(groups), "rows": rows, "rows_share": rows / total,
                      "moved": len(set(groups) - set(i["key_groups"]))})
    return after


# ---- a newer version --------------------------------------------------------------------

def run_newer_version(*, run: Run) -> JobVersion | None:
    """The job's newest version if it is newer than the one the run started from."""
    newest = run.job.versions.order_by("-number").first()
    if newest is None or newest.number <= run.version.number:
        return None
    return newest


def run_plan_version(*, run: Run) -> int | None:
    """The number of the job's version whose plan the run has now (the one it started from,
    or one it moved to), None when its plan has changed since (a rescale, new params)."""
    document = _document(run)
    if document == run.version.dag:
        return run.version.number
    same = run.job.versions.filter(number__gt=run.version.number).order_by("-number")
    return next((v.number for v in same if v.dag == document), None)
