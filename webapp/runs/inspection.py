"""Reads for a run's inspection views: its epochs (newest first, a page at a time), the
instances of one keyed operator (busy share, rows, key groups owned, skew, congestion over
recent epochs) and its exceptions (failure, restarts, refused or failed changes). They read
what the product records already: per-epoch metrics, the run's key-group assignment, the
audit trail and the reconfigurations."""

from __future__ import annotations

from statistics import fmean
from typing import Any

from webapp import engine_gateway
from webapp.errors import NotFound
from webapp.jobs.models import OperatorEpoch, ReconfigurationStatus, Run, RunEpoch
from webapp.runs.services import first_line

EPOCH_PAGE = 50
INSTANCE_EPOCHS = 30
# A keyed operator's event-time parameters, shown next to its watermark.
EVENT_TIME_PARAMS = ("window", "slide", "watermark", "within")


def run_keyed_operators(*, run: Run) -> list[dict[str, Any]]:
    """The run's keyed operators in document order, each with its event-time parameters
    (a window's length and slide, the watermark delay, a dedupe's time bound)."""
    document = run.target_dag or run.version.dag
    try:
        keyed = set(engine_gateway.dag_assignment(document))
    except Exception:  # noqa: BLE001 - an unplannable document shows no keyed operator
        keyed = set()
    return [{"id": op["id"], "type": op["type"],
             "params": {name: op.get("params", {}).get(name) for name in EVENT_TIME_PARAMS
                        if op.get("params", {}).get(name)}}
            for op in document.get("operators", []) if op["id"] in keyed]


# ---- epochs -----------------------------------------------------------------------------

def run_epochs_page(*, run: Run, before: int | None = None,
                    limit: int = EPOCH_PAGE) -> dict[str, Any]:
    """A page of the run's recorded epochs, newest first, before epoch ``before`` (the
    newest when None); with the ``before`` of the older and newer pages (None: none)."""
    epochs = run.epochs.order_by("-epoch")
    if before is not None:
        epochs = epochs.filter(epoch__lt=before)
    found = list(epochs[:limit + 1])
    rows, more = found[:limit], len(found) > limit
    newer = None
    if before is not None and rows:
        above = list(run.epochs.filter(epoch__gt=rows[0].epoch).order_by("epoch")
                     .values_list("epoch", flat=True)[:limit])
        newer = (above[-1] + 1) if above else None
    changes = _changes_at(run, [r.epoch for r in rows])
    return {
        "rows": [_epoch_row(e, changes.get(e.epoch, [])) for e in rows],
        "older": rows[-1].epoch if more and rows else None,
        "newer": newer,
        "rolled_up_minutes": run.minutes.count(),
    }


def _epoch_row(e: RunEpoch, changes: list[str]) -> dict[str, Any]:
    return {
        "epoch": e.epoch, "at": e.recorded_at, "duration_ms": e.batch_duration_ms,
        "rows_in": e.rows_in, "rows_out": e.rows_out, "backlog": e.backlog_rows,
        "p99_ms": e.latency_p99_ms,
        # Figures are recorded once the epoch's state, marker and sink writes committed.
        "committed": True, "changes": changes,
    }


def _changes_at(run: Run, epochs: list[int]) -> dict[int, list[str]]:
    if not epochs:
        return {}
    found: dict[int, list[str]] = {}
    for r in run.reconfigurations.filter(applied_epoch__in=epochs).order_by("id"):
        ops = ", ".join(r.operators or [])
        found.setdefault(r.applied_epoch, []).append(f"#{r.pk} {r.kind} {ops}".strip())
    return found


# ---- instances of a keyed operator ------------------------------------------------------

def operator_instances(*, run: Run, operator_id: str,
                       epochs: int = INSTANCE_EPOCHS) -> dict[str, Any]:
    """One keyed operator's instances over its last ``epochs`` recorded epochs: per instance
    the key groups it owns, its busy share (busy time over the epoch's interval) and rows;
    the skew of rows and busy time (busiest over mean); and per epoch, newest first, each
    instance's busy share and whether the operator was congested."""
    keyed = {op["id"]: op for op in run_keyed_operators(run=run)}
    if operator_id not in keyed:
        raise NotFound(f"run {run.pk} has no keyed operator {operator_id!r}")
    rows = list(OperatorEpoch.objects.filter(run=run, operator_id=operator_id)
                .order_by("-epoch")[:epochs])
    loads = {e.epoch: e for e in RunEpoch.objects.filter(
        run=run, epoch__in=[r.epoch for r in rows]).only("epoch", "load", "batch_duration_ms")}
    owned = _key_groups_owned(run, operator_id)
    count = max([len(owned)] + [r.instances for r in rows[:1]])
    timeline = [_instance_epoch(r, loads.get(r.epoch), count) for r in rows]
    instances = _instance_summary(timeline, owned, count)
    return {
        "operator": keyed[operator_id], "instances": instances, "timeline": timeline,
        "epochs": len(timeline),
        "rows_skew": skew([i["rows"] for i in instances if i["rows"] is not None]),
        "busy_skew": skew([i["busy"] for i in instances if i["busy"] is not None]),
        "congested_epochs": sum(1 for t in timeline if t["congested"]),
        "key_groups": sum(len(i["key_groups"]) for i in instances),
    }


def _key_groups_owned(run: Run, operator_id: str) -> list[list[int]]:
    """Key groups per instance, from the ranges the driver last acknowledged (or, before
    any acknowledgement, the ranges the run started with)."""
    ranges = (run.assignment or {}).get(operator_id)
    if ranges is None:
        ranges = engine_gateway.dag_assignment(run.target_dag or run.version.dag).get(
            operator_id, [])
    owned: list[list[int]] = []
    for first, last, instance in ranges:
        while len(owned) <= instance:
            owned.append([])
        owned[instance].extend(range(first, last + 1))
    return owned


def _instance_epoch(row: OperatorEpoch, epoch: RunEpoch | None, count: int) -> dict[str, Any]:
    load = (epoch.load or {}) if epoch is not None else {}
    interval = load.get("interval_ms") or (epoch.batch_duration_ms if epoch else None)
    per_instance = ((load.get("operators") or {}).get(row.operator_id) or {}).get(
        "rows_in_per_instance")
    busy = list(row.busy_ms or [])
    return {
        "epoch": row.epoch, "at": row.recorded_at, "instances": row.instances,
        "congested": row.congested, "rows_in": row.rows_in,
        "busy": [busy[i] / interval if interval and i < len(busy) else None
                 for i in range(count)],
        "rows": [per_instance[i] if per_instance and i < len(per_instance) else None
                 for i in range(count)],
    }


def _instance_summary(timeline: list[dict[str, Any]], owned: list[list[int]],
                      count: int) -> list[dict[str, Any]]:
    total = sum(r for t in timeline for r in t["rows"] if r is not None)
    summary = []
    for i in range(count):
        busy = [t["busy"][i] for t in timeline if t["busy"][i] is not None]
        rows = [t["rows"][i] for t in timeline if t["rows"][i] is not None]
        groups = owned[i] if i < len(owned) else []
        summary.append({
            "instance": i, "key_groups": groups, "ranges": _ranges(groups),
            "busy": fmean(busy) if busy else None,
            "rows": sum(rows) if rows else None,
            "rows_share": sum(rows) / total if rows and total else None,
        })
    return summary


def _ranges(groups: list[int]) -> str:
    """Key groups as ranges: "0–31, 64–95"."""
    spans: list[list[int]] = []
    for g in sorted(groups):
        if spans and g == spans[-1][1] + 1:
            spans[-1][1] = g
        else:
            spans.append([g, g])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def skew(values: list[float]) -> float | None:
    """The busiest over the mean (1.0: even); None without two values or with a zero mean."""
    if len(values) < 2 or not fmean(values):
        return None
    return max(values) / fmean(values)


# ---- exceptions -------------------------------------------------------------------------

def run_refused_changes(*, run: Run, limit: int = 50) -> list[dict[str, Any]]:
    """The run's reconfigurations that were rejected or failed, newest first, each with its
    reason in one line."""
    found = run.reconfigurations.select_related("actor").filter(
        status__in=(ReconfigurationStatus.REJECTED, ReconfigurationStatus.FAILED),
    ).order_by("-requested_at", "-id")[:limit]
    return [{"id": r.pk, "kind": r.kind, "operators": r.operators, "status": r.status,
             "at": r.finished_at or r.requested_at, "actor": r.actor.username if r.actor else None,
             "trigger": r.trigger, "cause": first_line(r.status_reason) or "no reason recorded"}
            for r in found]
