"""Reads the pages need beyond the API's: the run page's starting context, its chart series,
and the per-operator limits that decide which scaling controls are offered."""

from __future__ import annotations

from typing import Any

from django.db.models import Case, F, OuterRef, Subquery, Sum, When
from django.db.models.functions import Coalesce

from webapp import engine_gateway
from webapp.audit.models import AuditEntry
from webapp.audit.selectors import AuditFilter, audit_entries_narrowed
from webapp.errors import ServiceError
from webapp.jobs.models import OperatorEpoch, Reconfiguration, Run
from webapp.reconfigurations import figures
from webapp.runs.broker import run_broker_sources
from webapp.runs.inspection import run_keyed_operators
from webapp.runs.selectors import SNAPSHOT_EPOCHS, reconfiguration_as_json
from webapp.runs.services import failure_parts, first_line

SERIES_LIMIT = 3600  # an hour of 1-second epochs
# The run page shows rates, ETP and latency over a window of epochs: per epoch, a windowed
# job's sinks get rows only when a window closes. The longest choice fits the snapshot.
SMOOTHING_CHOICES = (10, 30, SNAPSHOT_EPOCHS)
SMOOTHING_EPOCHS = 30


def dag_endpoints(document: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The sources (no inputs) and sinks (no outputs) of a document, in document order."""
    targets = {e["to"] for e in document.get("edges", [])}
    origins = {e["from"] for e in document.get("edges", [])}
    ids = [o["id"] for o in document.get("operators", [])]
    return [i for i in ids if i not in targets], [i for i in ids if i not in origins]


def operator_limits(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per operator: the largest parallelism and, if pinned to 1, why; empty if unreadable."""
    try:
        return engine_gateway.dag_limits(document)
    except Exception:  # noqa: BLE001 - an unplannable document still renders, without limits
        return {}


def policy_bounds(*, run: Run) -> dict[str, Any]:
    """How many instances the page's Add… and Remove… may ask for: the bounds the server
    enforces for this run's current plan, and of those to add, as many as the ETP policy
    would place now (with ``add_reason`` saying why none, in the words of its refusal)."""
    document = run.target_dag or run.version.dag
    try:
        bounds: dict[str, Any] = dict(engine_gateway.dag_headroom(document))
    except Exception:  # noqa: BLE001 - an unplannable document offers no policy change
        return {"add": 0, "remove": 0}
    if bounds["add"]:
        bounds["add"], bounds["add_reason"] = _placeable(run, document, bounds["add"])
    return bounds


def _placeable(run: Run, document: dict[str, Any], room: int) -> tuple[int, str]:
    """Instances the ETP policy places now, out of ``room``, and why it places none."""
    rates = figures.measured_rates(run=run)
    if not rates:
        return 0, "no epoch has been measured yet"
    try:
        after = engine_gateway.plan_scale_out_instances(document, rates=rates, instances=room)
    except ServiceError as error:
        return 0, "; ".join(p.get("message", "") for p in error.problems) or str(error)
    before = engine_gateway.dag_parallelism(document)
    return sum(n - before.get(op, n) for op, n in engine_gateway.dag_parallelism(after).items()
               ), ""


def run_page_config(*, run: Run, can_operate: bool) -> dict[str, Any]:
    """What the run page's script starts from (the live numbers come over the websocket)."""
    document = run.target_dag or run.version.dag
    sources, sinks = dag_endpoints(document)
    return {
        "run": run.pk,
        "job": run.job_id,
        "status": run.status,
        # Since when the run is doing what it does before its first epoch (the progress line).
        "status_since": (run.driver_launched_at or run.created_at).isoformat(),
        "dag": engine_gateway.dag_shown(document),
        # What the driver acknowledged (the document may hold requests still pending).
        "parallelism": run.parallelism,
        "assignment": run.assignment,
        "limits": operator_limits(document),
        "sources": sources,
        "sinks": sinks,
        "broker": run_broker_sources(run_id=run.pk, document=document),
        "can_operate": can_operate,
        "keyed": [op["id"] for op in run_keyed_operators(run=run)],
        "smoothing_epochs": SMOOTHING_EPOCHS,
        "smoothing_choices": list(SMOOTHING_CHOICES),
        "ws": f"/ws/runs/{run.pk}/",
        "series": f"/runs/{run.pk}/series.json",
    }


def run_restarts(*, run: Run, limit: int = 50) -> list[dict[str, Any]]:
    """The run's restarts, oldest first: when, the cause in one line, the driver's last
    output."""
    entries = (AuditEntry.objects.filter(run_id_ref=run.pk, action="run.recovering")
               .order_by("at", "id")[:limit])
    return [{"at": e.at, "cause": first_line(e.reason),
             "output": (e.details or {}).get("output", "")} for e in entries]


def run_failure(*, run: Run) -> dict[str, str] | None:
    """A failed run's cause in one line and the driver's last output; None if it did not fail."""
    if run.status != "failed":
        return None
    cause, output = failure_parts(run.failure_reason)
    return {"cause": cause or "the run failed without a recorded cause", "output": output}


def run_series(*, run: Run, limit: int = SERIES_LIMIT) -> dict[str, list]:
    """The charts' history, column-wise and oldest first: time, ingest and sink rates, latency."""
    epochs = list(run.epochs.order_by("-epoch").values_list(
        "epoch", "recorded_at", "latency_p50_ms", "latency_p99_ms")[:limit])[::-1]
    if not epochs:
        return {"epoch": [], "t": [], "in": [], "out": [], "p50": [], "p99": []}
    sources, sinks = dag_endpoints(run.target_dag or run.version.dag)
    first = epochs[0][0]
    ingest = _rate_by_epoch(run, first, sources, "output_rate")
    egress = _rate_by_epoch(run, first, sinks, "input_rate")
    return {
        "epoch": [e[0] for e in epochs],
        "t": [round(e[1].timestamp(), 3) for e in epochs],
        "in": [ingest.get(e[0]) for e in epochs],
        "out": [egress.get(e[0]) for e in epochs],
        "p50": [e[2] for e in epochs],
        "p99": [e[3] for e in epochs],
    }


def _rate_by_epoch(run: Run, first: int, operators: list[str], field: str) -> dict[int, float]:
    rows = (OperatorEpoch.objects.filter(run=run, epoch__gte=first, operator_id__in=operators)
            .values("epoch").annotate(rate=Sum(field)).values_list("epoch", "rate"))
    return {epoch: None if rate is None else round(rate, 1) for epoch, rate in rows}


def preview_rows(preview: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The operators a preview touches (instances, predicted ETP or congestion change), changed
    instances first, and how many others stay as they are."""
    now = (preview.get("predicted") or {}).get("now") or {}
    after = (preview.get("predicted") or {}).get("after") or {}
    rows = []
    for op, before in preview.get("parallelism_before", {}).items():
        row = {
            "operator": op, "before": before,
            "after": preview.get("parallelism_after", {}).get(op, before),
            "etp_now": (now.get("etp") or {}).get(op),
            "etp_after": (after.get("etp") or {}).get(op),
            "congested_now": op in (now.get("congested") or []),
            "congested_after": op in (after.get("congested") or []),
        }
        row["changed"] = row["after"] != row["before"]
        if row["changed"] or row["etp_now"] != row["etp_after"] or (
                row["congested_now"] != row["congested_after"]) or row["congested_now"]:
            rows.append(row)
    rows.sort(key=lambda r: not r["changed"])
    return rows, len(preview.get("parallelism_before", {})) - len(rows)


def run_reconfigurations(*, run: Run, limit: int = 50) -> list[dict[str, Any]]:
    """The run's reconfigurations, newest first, as the API shows them."""
    found = run.reconfigurations.select_related("actor", "run").order_by("-requested_at", "-id")
    # A rollback to a version names it: moving a run to a newer version is one of those.
    return [{**reconfiguration_as_json(r), "to_version": (r.request or {}).get("to_version")}
            for r in found[:limit]]


def reconfigurations_by_id(ids: set[int]) -> dict[int, Reconfiguration]:
    return {r.pk: r for r in Reconfiguration.objects.filter(pk__in=ids)}


# History: audit entries with the current state of the reconfiguration or run each one records.

HISTORY_PAGE = 100
SETTLED = ("reconfiguration.applied", "reconfiguration.rejected", "reconfiguration.failed")
"""The entries that record how a change ended: History shows that on the change's own entry."""


def history_entries(*, filters: AuditFilter, limit: int = HISTORY_PAGE, offset: int = 0) -> list:
    """Audit entries newest first, each with `current_outcome` (a reconfiguration's status as it
    is now; for a run's start, the run's status now; else the entry's outcome),
    `reconfiguration` (the record, or None) and `prediction` (its predicted against measured
    figures); the outcome filter matches the current outcome.
    A change appears once: the entry of its request, with how it ended."""
    status = Reconfiguration.objects.filter(pk=OuterRef("reconfiguration_id_ref")).values("status")
    run_status = Run.objects.filter(pk=OuterRef("run_id_ref")).values("status")
    entries = AuditEntry.objects.exclude(
        action__in=SETTLED, reconfiguration_id_ref__isnull=False,
    ).annotate(current_outcome=Coalesce(
        Subquery(status[:1]),
        Case(When(action="run.started", then=Subquery(run_status[:1]))),
        F("outcome")))
    entries = audit_entries_narrowed(entries=entries, filters=filters,
                                     outcome_field="current_outcome")
    found = list(entries.order_by("-at", "-id")[offset:offset + limit])
    records = reconfigurations_by_id({e.reconfiguration_id_ref for e in found
                                      if e.reconfiguration_id_ref is not None})
    for entry in found:
        entry.reconfiguration = record = records.get(entry.reconfiguration_id_ref)
        entry.prediction = [] if record is None else figures.prediction_rows(
            predicted=record.predicted, after=record.after, operators=record.operators)
    return found


def history_choices() -> dict[str, list[str]]:
    """The values the history filters offer: actors and kinds that occur, known outcomes."""
    # order_by() drops the model's ordering, which DISTINCT would otherwise take into account.
    entries = AuditEntry.objects.order_by()
    actions = sorted(entries.values_list("action", flat=True).distinct())
    prefixes = sorted({a.split(".", 1)[0] + "." for a in actions})
    return {
        "actors": sorted(entries.values_list("actor_name", flat=True).distinct()),
        "kinds": sorted(set(actions) | set(prefixes)),
        "outcomes": ["requested", "pending", "applied", "rejected", "failed", "done",
                     "starting", "running", "recovering", "stopped"],
    }


CSV_COLUMNS = ("at", "actor", "trigger", "action", "job", "run", "reconfiguration", "reason",
               "outcome", "plan_changes", "applied_epoch", "control_latency_ms",
               "throughput_before", "throughput_after", "p99_before_ms", "p99_after_ms")


def history_csv_rows(entries) -> list[list[Any]]:
    """One row per entry in CSV_COLUMNS order."""
    rows = []
    for e in entries:
        r = e.reconfiguration
        before, after = (r.before or {}, r.after or {}) if r else ({}, {})
        changes = "; ".join(c.get("detail", "") for c in (e.plan_diff or {}).get("changes", []))
        rows.append([
            e.at.isoformat(), e.actor_name, e.trigger, e.action, e.job_name, e.run_id_ref or "",
            e.reconfiguration_id_ref or "", e.reason, e.current_outcome, changes,
            _blank(r and r.applied_epoch), _blank(r and r.control_latency_ms),
            _blank(before.get("throughput_rows_per_s")), _blank(after.get("throughput_rows_per_s")),
            _blank(before.get("latency_p99_ms")), _blank(after.get("latency_p99_ms")),
        ])
    return rows


def _blank(value: Any) -> Any:
    return "" if value is None else value
