"""Per-epoch metrics and the publishers the CLI and tests use.

Shape of one epoch's metrics::

    {"run_id", "epoch", "batch_duration_ms", "interval_ms", "backlog_rows", "source_rows",
     "latency_ms": {"p50", "p99", "max"},
     "sources": {op_id: {"unit", "offered", "consumed", "backlog", "backlog_growth_per_s",
                         "offered_rate", "consumed_rate", "period_ms", "target_rate"}},
     "operators": {op_id: {"instances", "rows_in", "rows_out", "busy_ms", "region",
                           "input_rate", "processing_rate", "output_rate",
                           "demand_rate", "congested", "etp"}},
     keyed operators also: {"rows_in_per_instance", "watermark_ms", "max_event_ms",
                            "watermark_delay_ms", "watermark_lag_ms", "state_bytes_written",
                            "state_bytes_read"},
     "regions": {region_id: {"operators", "leader", "instances", "rows_in", "busy_ms",
                             "processing_rate", "demand_rate", "congested", "etp"}},
     "bottleneck": unit id or None}

Every figure is measured where it is shown. Rows in and out are counted per operator.
Busy time is measured per keyed instance (in the workers) and per region of fused
stateless operators (the run time of the Spark tasks that ran the region); an operator
inside a region has ``busy_ms`` and ``processing_rate`` None and names its ``region``.
Rates are rows per second over the epoch's interval (wall time between epoch starts), a
source's over the time between its readings at the ends of epochs (``period_ms``);
``processing_rate`` is DS2's true rate, rows per *busy* second summed over instances.
``demand_rate`` is the rate the sources' offered load asks of the operator (see
``engine.policies.load``); ``congested`` and ``etp`` are judged against it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, TextIO

from engine.dag import JobGraph
from engine.policies.load import LoadModel, load_model
from engine.runtime.control.messages import Ack
from engine.runtime.control.run_config import RunConfig
from engine.runtime.stage.pipeline import EpochResult
from engine.runtime.stage.regions import EpochTimes, FusedRegion, fused_regions


def epoch_metrics(
    run_id: str,
    epoch: int,
    graph: JobGraph,
    config: RunConfig,
    result: EpochResult,
    batch_ms: float,
    interval_ms: float,
    sources: dict[str, dict[str, Any]],
    clock: EpochTimes | None = None,
    *,
    watermarks: Mapping[str, int | None] | None = None,
    ended_ms: float | None = None,
) -> dict[str, Any]:
    """The metrics dict of one epoch; ``watermarks`` (event-time micros per keyed operator)
    are those the epoch ran with, ``ended_ms`` the wall clock at its end (default: now)."""
    operators: dict[str, dict[str, Any]] = {}
    ended_ms = time.time() * 1000.0 if ended_ms is None else ended_ms
    seconds = max(interval_ms, 1.0) / 1000.0  # rates are per second of the epoch's interval
    for op_id in graph.topological_order():
        parents = graph.parents(op_id)
        rows_in = sum(operators[p]["rows_out"] or 0 for p in parents) if parents else None
        if op_id in result.stage_reports:
            reports = result.stage_reports[op_id]
            operators[op_id] = _keyed(reports, config[op_id].parallelism)
            operators[op_id].update(event_time_progress(
                (watermarks or {}).get(op_id), stage_max_event_us(reports), ended_ms))
        else:
            rows_out = result.sink_rows.get(op_id, result.rows_out.get(op_id))
            if rows_out is None or rows_out < 0:
                rows_out = rows_in
            # A stateless operator's or clock source's instances are the partitions its rows
            # ran on this epoch (the pipeline splits them as the plan says).
            instances = result.instances.get(op_id, config[op_id].parallelism)
            operators[op_id] = {"instances": instances, "rows_in": rows_in,
                                "rows_out": rows_out, "busy_ms": None,
                                "processing_rate": None, "region": None}
        op = operators[op_id]
        op["input_rate"] = round((op["rows_in"] or 0) / seconds, 1) if parents else None
        op["output_rate"] = round((op["rows_out"] or 0) / seconds, 1)
    regions = {
        region.region_id: _region(region, config, operators, result, clock)
        for region in fused_regions(graph)
    }
    for region_id, region in regions.items():
        for op_id in region["operators"]:
            operators[op_id]["region"] = region_id
    metrics = {
        "run_id": run_id,
        "epoch": epoch,
        "batch_duration_ms": round(batch_ms, 1),
        "interval_ms": round(interval_ms, 1),
        "backlog_rows": sum(s["backlog"] for s in sources.values() if s["unit"] == "rows"),
        "source_rows": sum(operators[s]["rows_out"] or 0 for s in graph.sources()),
        "latency_ms": result.latency_ms,
        "sources": sources,
        "operators": operators,
        "regions": regions,
    }
    _add_load(graph, metrics, load_model(graph, [metrics]))
    return metrics


def event_time_progress(
    watermark_us: int | None, max_event_us: int | None, ended_ms: float
) -> dict[str, float | None]:
    """A keyed operator's watermark (None before the first rows), newest event and how far
    the watermark is behind the wall clock and behind that event, in milliseconds: why its
    sinks may get nothing for a while (a window emits once the watermark passes its end)."""
    watermark = None if watermark_us is None else watermark_us / 1000.0
    newest = None if max_event_us is None else max_event_us / 1000.0
    return {
        "watermark_ms": None if watermark is None else round(watermark, 1),
        "max_event_ms": None if newest is None else round(newest, 1),
        "watermark_delay_ms": None if watermark is None else round(ended_ms - watermark, 1),
        "watermark_lag_ms": (None if watermark is None or newest is None
                             else round(max(0.0, newest - watermark), 1)),
    }


def stage_max_event_us(reports: list[dict[str, Any]]) -> int | None:
    """The epoch's latest event time of a stage, which its watermark follows. A join
    takes the earlier of its two sides' latest times, so rows of the slower side are not
    made late by the faster one (Spark's default ``min`` policy for several inputs)."""
    sides = [r["max_event_sides"] for r in reports if r.get("max_event_sides")]
    if sides:
        latest = [[s[i] for s in sides if s[i] is not None] for i in (0, 1)]
        return min(max(latest[0]), max(latest[1])) if all(latest) else None
    events = [r["max_event_us"] for r in reports if r.get("max_event_us") is not None]
    return max(events) if events else None


def _keyed(reports: list[dict[str, Any]], parallelism: int) -> dict[str, Any]:
    busy = [0.0] * parallelism
    rows = [0] * parallelism
    for report in reports:
        if report["instance"] < parallelism:
            busy[report["instance"]] = round(report["busy_ms"], 1)
            rows[report["instance"]] += report["rows_in"]
    capacity = sum(r["rows_in"] / (r["busy_ms"] / 1000.0) for r in reports if r["busy_ms"] > 0)
    return {
        "instances": parallelism,
        "rows_in": sum(r["rows_in"] for r in reports),
        "rows_out": sum(r["rows_out"] for r in reports),
        "busy_ms": busy,
        "rows_in_per_instance": rows,
        "processing_rate": round(capacity, 1),
        "region": None,
        "state_bytes_written": sum(r["bytes_written"] for r in reports),
        "state_bytes_read": sum(r.get("bytes_read", 0) for r in reports),
    }


def _region(
    region: FusedRegion,
    config: RunConfig,
    operators: dict[str, dict[str, Any]],
    result: EpochResult,
    clock: EpochTimes | None,
) -> dict[str, Any]:
    """A region's measured figures: its tasks' run time per partition (a sink written on
    the driver, with no Spark job, is timed there) and rows per busy second."""
    first = operators[region.operators[0]]
    rows = first["rows_out"] if first["rows_in"] is None else first["rows_in"]
    busy = None if clock is None else clock.busy_ms(
        region.consumer, skip_last_stage=not region.includes_consumer
    )
    if busy is None and region.consumer in result.sink_wall_ms:
        busy = [round(result.sink_wall_ms[region.consumer], 1)]
    busy = busy or [0.0]
    total_s = sum(busy) / 1000.0
    return {
        "operators": list(region.operators),
        "leader": region.operators[0],
        "instances": len(busy) if busy != [0.0] else config[region.operators[0]].parallelism,
        "rows_in": rows or 0,
        "busy_ms": busy,
        "processing_rate": round(rows * len(busy) / total_s, 1) if total_s and rows else None,
    }


def _add_load(graph: JobGraph, metrics: dict[str, Any], model: LoadModel) -> None:
    """Demanded rates, congestion and ETP on operators and regions; the bottleneck."""
    for op_id, values in metrics["operators"].items():
        unit = model.unit_of(op_id)
        demand = model.demand_out[op_id] if op_id in model.sources else model.demand_in[op_id]
        values["demand_rate"] = round(demand, 1)
        values["congested"] = bool(unit is not None and unit.congested)
        values["etp"] = round(model.etp.get(op_id, 0.0), 4)
    for region_id, region in metrics["regions"].items():
        unit = model.units[region_id]
        region["demand_rate"] = round(unit.demand_rate, 1)
        region["congested"] = unit.congested
        region["etp"] = max(model.etp.get(op, 0.0) for op in region["operators"])
    for op_id, trend in model.sources.items():
        if op_id in metrics["sources"]:
            metrics["sources"][op_id]["target_rate"] = round(trend.target_rate, 1)
    congested = model.congested_units()
    metrics["bottleneck"] = congested[0].unit_id if congested else None


class PrintingPublisher:
    """Prints one compact line per epoch and one ``ack {json}`` line per acknowledgement
    (the CLI's host: its publisher and recorder)."""

    def __init__(self, stream: TextIO | None = None, as_json: bool = False) -> None:
        self._stream = stream or sys.stdout
        self._json = as_json

    def publish_epoch(self, run_id: str, epoch_metrics: dict[str, Any]) -> None:
        """Writes the line and flushes."""
        if self._json:
            line = json.dumps(epoch_metrics)
        else:
            ops = " ".join(
                f"{op}[p={m['instances']} in={m['rows_in']} out={m['rows_out']} etp={m['etp']}]"
                for op, m in epoch_metrics["operators"].items()
            )
            lat = epoch_metrics["latency_ms"]
            line = (
                f"epoch={epoch_metrics['epoch']} batch_ms={epoch_metrics['batch_duration_ms']}"
                f" backlog={epoch_metrics['backlog_rows']} latency_p99_ms={lat.get('p99')} "
                f"{ops}"
            )
        print(line, file=self._stream, flush=True)

    def acknowledge(self, run_id: str, ack: Ack) -> None:
        """Writes the ack as ``ack`` and its JSON; a restarted run writes it again."""
        print(f"ack {json.dumps(ack.to_dict())}", file=self._stream, flush=True)


class CollectingPublisher:
    """Keeps every epoch's metrics in a list (tests, benchmarks)."""

    def __init__(self) -> None:
        self.epochs: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def publish_epoch(self, run_id: str, epoch_metrics: dict[str, Any]) -> None:
        """Appends a copy."""
        with self._lock:
            self.epochs.append(epoch_metrics)


class CollectingRecorder:
    """Keeps every acknowledgement (tests, benchmarks)."""

    def __init__(self) -> None:
        self.acks: list[Ack] = []

    def acknowledge(self, run_id: str, ack: Ack) -> None:
        """Appends unless the request id is already recorded."""
        if all(a.request_id != ack.request_id for a in self.acks):
            self.acks.append(ack)

    def wait_for(self, request_id: str, timeout_s: float = 60.0) -> Ack | None:
        """The ack of ``request_id`` once recorded; None if none comes within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = next((a for a in self.acks if a.request_id == request_id), None)
            if found is not None:
                return found
            time.sleep(0.02)
        return None
