"""Measured figures around a reconfiguration: the rates the policies plan with, and throughput
and latency over a window of epochs before and after it took effect."""

from __future__ import annotations

from typing import Any

from django.db.models import Avg, Sum

from webapp.jobs.models import OperatorEpoch, Run, RunEpoch

WINDOW_EPOCHS = 5


def recent_loads(*, run: Run, epochs: int = WINDOW_EPOCHS) -> list[dict[str, Any]]:
    """The stored load of the run's last epochs, oldest first, if each has what the load
    model reads (its interval, its operators as the plan has them); [] otherwise."""
    loads = list(run.epochs.order_by("-epoch").values_list("load", flat=True)[:epochs])[::-1]
    return _modelled(loads, run.target_dag)


def _modelled(loads: list[dict[str, Any]], document: dict[str, Any]) -> list[dict[str, Any]]:
    """``loads`` if each has what the load model reads of ``document``'s run; else []."""
    operators = {o["id"] for o in document.get("operators", [])}
    usable = [load for load in loads if load and load.get("interval_ms")
              and set(load.get("operators") or {}) == operators]
    return usable if usable and len(usable) == len(loads) else []


def measured_rates(*, run: Run, epochs: int = WINDOW_EPOCHS) -> dict[str, dict[str, float]]:
    """Per-operator rates (the rates document of the what-if commands) over the last epochs:
    from the load model of their stored load (what the run page's congestion is judged by),
    or, for epochs recorded without one, the averages of their input, true processing (rows
    per busy second, all instances) and output rates."""
    loads = recent_loads(run=run, epochs=epochs)
    if loads:
        from webapp import engine_gateway

        return engine_gateway.load_rates_json(run.target_dag, loads)
    last = run.epochs.order_by("-epoch").values_list("epoch", flat=True)[:epochs]
    rows = (OperatorEpoch.objects.filter(run=run, epoch__in=list(last))
            .values("operator_id")
            .annotate(i=Avg("input_rate"), p=Avg("processing_rate"), o=Avg("output_rate")))
    sources = _sources(run.target_dag)
    regions = _region_rates(run, list(last))
    rates: dict[str, dict[str, float]] = {}
    for row in rows:
        entry = {"output_rate": row["o"] or 0.0}
        if row["operator_id"] not in sources:
            entry["input_rate"] = row["i"] or 0.0
            # An operator fused into a region has no rate of its own: the region's stands in.
            processing = row["p"] if row["p"] is not None else regions.get(row["operator_id"])
            entry["processing_rate"] = processing or 0.0
        rates[row["operator_id"]] = entry
    return rates


def _region_rates(run: Run, epochs: list[int]) -> dict[str, float]:
    """Per fused operator, the mean true rate of the region it runs in."""
    sums: dict[str, list[float]] = {}
    for load in RunEpoch.objects.filter(run=run, epoch__in=epochs).values_list("load", flat=True):
        for region in (load or {}).get("regions", {}).values():
            for op in region.get("operators", []):
                if region.get("processing_rate") is not None:
                    sums.setdefault(op, []).append(region["processing_rate"])
    return {op: sum(values) / len(values) for op, values in sums.items()}


def window_before(*, run_id: int) -> dict[str, Any]:
    """Throughput and latency over the last epochs before now."""
    last = list(RunEpoch.objects.filter(run_id=run_id).order_by("-epoch")
                .values_list("epoch", flat=True)[:WINDOW_EPOCHS])
    return _summary(RunEpoch.objects.filter(run_id=run_id, epoch__in=last))


def window_after(*, run_id: int, applied_epoch: int,
                 document: dict[str, Any] | None = None) -> dict[str, Any]:
    """Throughput and latency over the epochs after the change took effect, and as
    ``outlook`` what the load model measures over them with plan ``document`` (congestion,
    ETP, capacity, backlog drain: the terms of the preview's prediction)."""
    epochs = RunEpoch.objects.filter(
        run_id=run_id, epoch__gt=applied_epoch, epoch__lte=applied_epoch + WINDOW_EPOCHS)
    summary = _summary(epochs)
    loads = _modelled(list(epochs.order_by("epoch").values_list("load", flat=True)),
                      document or {})
    if summary and loads:
        from webapp import engine_gateway

        summary["outlook"] = engine_gateway.load_outlook(document, document, loads)["now"]
    return summary


def _summary(epochs) -> dict[str, Any]:
    agg = epochs.aggregate(rows=Sum("rows_in"), ms=Sum("batch_duration_ms"),
                           p50=Avg("latency_p50_ms"), p99=Avg("latency_p99_ms"),
                           duration=Avg("batch_duration_ms"))
    if not agg["ms"]:
        return {}
    return {
        "epochs": epochs.count(),
        "throughput_rows_per_s": round(agg["rows"] / (agg["ms"] / 1000.0), 1),
        "latency_p50_ms": _round(agg["p50"]),
        "latency_p99_ms": _round(agg["p99"]),
        "batch_duration_ms": _round(agg["duration"]),
    }


def _round(value):
    return None if value is None else round(value, 1)


def _sources(document: dict[str, Any]) -> set[str]:
    targets = {e["to"] for e in document.get("edges", [])}
    return {o["id"] for o in document.get("operators", []) if o["id"] not in targets}


def predicted_of_instances(*, run: Run, before: dict[str, Any],
                           after: dict[str, Any]) -> dict[str, Any]:
    """The preview's prediction, kept with a change when it is requested: only for one that
    changes instances, the one thing the model predicts from (a rebalance's or a logic
    change's effect is not projected; {})."""
    from webapp import engine_gateway

    if engine_gateway.dag_parallelism(before) == engine_gateway.dag_parallelism(after):
        return {}
    return predicted_effect(run=run, before=before, after=after)


def prediction_rows(*, predicted: dict[str, Any], after: dict[str, Any],
                    operators: list[str]) -> list[dict[str, Any]]:
    """What a change's prediction said against what the epochs after it measured, a row per
    figure: ``unit`` rate (rows/s), drain (seconds; None: it grows), etp or text, and
    whether it was measured yet (``measured_known``). [] without a prediction."""
    said, seen = predicted.get("after") or {}, after.get("outlook") or {}
    if not said:
        return []
    # Measured: the throughput once the epochs after it are summed, the rest once the load
    # model could read them.
    rows = [
        ("throughput", "rate", _throughput(said), after.get("throughput_rows_per_s")),
        ("capacity", "rate", said.get("capacity_rate"), seen.get("capacity_rate")),
        ("backlog drained in", "drain", said.get("drain_s"), seen.get("drain_s")),
        ("bottleneck", "text", said.get("bottleneck") or "none",
         (seen.get("bottleneck") or "none") if seen else None),
        *[(f"ETP of {op}", "etp", (said.get("etp") or {}).get(op),
           (seen.get("etp") or {}).get(op)) for op in operators],
    ]
    return [{"figure": figure, "unit": unit, "predicted": p, "measured": m,
             "measured_known": bool(after) if figure == "throughput" else bool(seen)}
            for figure, unit, p, m in rows]


def _throughput(outlook: dict[str, Any]) -> float | None:
    """The rows per second the model predicts processed: the offered rate, or the run's
    capacity where that is less."""
    offered, capacity = outlook.get("offered_rate"), outlook.get("capacity_rate")
    if offered is None or capacity is None:
        return offered
    return min(offered, capacity)


def predicted_effect(*, run: Run, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """ETP and congestion now and as projected after the change, with the run's capacity and
    its backlog's drain time, from the load model of the last epochs (the run page's); for
    epochs recorded without a load, each operator's processing and output rates scaled with
    its parallelism (the Stela projection)."""
    from webapp import engine_gateway

    loads = recent_loads(run=run)
    if loads:
        try:
            return engine_gateway.load_outlook(before, after, loads)
        except Exception:  # noqa: BLE001 - a prediction is advisory, as below
            return {}

    rates = measured_rates(run=run)
    if not rates:
        return {}
    old = {o["id"]: o.get("parallelism", 1) for o in before["operators"]}
    projected = {}
    for op in after["operators"]:
        entry = dict(rates.get(op["id"], {}))
        factor = op.get("parallelism", 1) / old.get(op["id"], 1)
        for name in ("processing_rate", "output_rate"):
            if name in entry and op["id"] not in _sources(before):
                entry[name] = entry[name] * (factor if name == "processing_rate" else 1.0)
        projected[op["id"]] = entry
    try:
        return {"now": engine_gateway.rates_etp(before, rates),
                "after": engine_gateway.rates_etp(after, projected)}
    except Exception:  # noqa: BLE001 - a prediction is advisory; no rates means no prediction
        return {}
