"""Per-epoch metrics (DESIGN.md section 6) and the publishers the CLI and tests use.

Shape of one epoch's metrics::

    {"run_id", "epoch", "batch_duration_ms", "interval_ms", "backlog_rows", "source_rows",
     "latency_ms": {"p50", "p99", "max"},
     "operators": {op_id: {"instances", "rows_in", "rows_out", "busy_ms": [per instance],
                           "input_rate", "processing_rate", "output_rate",
                           "congested", "etp"}}}

Rates are rows per second: input and output over the epoch's interval (wall time between
epoch starts), processing = DS2's true rate, rows per *busy* second summed over instances.
Stateless operators fused by Spark into one stage share that stage's busy time.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, TextIO

from engine.dag import JobGraph
from engine.policies.etp import compute_etp
from engine.policies.rates import OperatorRates
from engine.runtime.pipeline import EpochResult
from engine.runtime.run_config import RunConfig


def epoch_metrics(
    run_id: str,
    epoch: int,
    graph: JobGraph,
    config: RunConfig,
    result: EpochResult,
    batch_ms: float,
    interval_ms: float,
    backlog_rows: int | None,
) -> dict[str, Any]:
    """The metrics dict of one epoch."""
    operators: dict[str, dict[str, Any]] = {}
    keyed_busy = max(
        (max((r["busy_ms"] for r in reps), default=0.0) for reps in result.stage_reports.values()),
        default=0.0,
    )
    shared_busy = max(batch_ms - keyed_busy, 1.0)
    for op_id in graph.topological_order():
        rows_in = _rows_in(graph, op_id, operators)
        if op_id in result.stage_reports:
            operators[op_id] = _keyed(result.stage_reports[op_id], config[op_id].parallelism)
        else:
            rows_out = result.sink_rows.get(op_id, result.rows_out.get(op_id))
            if rows_out is None or rows_out < 0:
                rows_out = rows_in
            operators[op_id] = _fused(config[op_id].parallelism, rows_in, rows_out, shared_busy)
        _add_rates(operators[op_id], interval_ms, is_source=not graph.parents(op_id))
    _add_etp(graph, operators)
    return {
        "run_id": run_id,
        "epoch": epoch,
        "batch_duration_ms": round(batch_ms, 1),
        "interval_ms": round(interval_ms, 1),
        "backlog_rows": backlog_rows,
        "source_rows": sum(operators[s]["rows_out"] or 0 for s in graph.sources()),
        "latency_ms": result.latency_ms,
        "operators": operators,
    }


def _rows_in(graph: JobGraph, op_id: str, operators: dict[str, dict[str, Any]]) -> int | None:
    parents = graph.parents(op_id)
    if not parents:
        return None
    return sum(operators[p]["rows_out"] or 0 for p in parents)


def _keyed(reports: list[dict[str, Any]], parallelism: int) -> dict[str, Any]:
    busy = [0.0] * parallelism
    for report in reports:
        if report["instance"] < parallelism:
            busy[report["instance"]] = round(report["busy_ms"], 1)
    capacity = sum(r["rows_in"] / (r["busy_ms"] / 1000.0) for r in reports if r["busy_ms"] > 0)
    return {
        "instances": parallelism,
        "rows_in": sum(r["rows_in"] for r in reports),
        "rows_out": sum(r["rows_out"] for r in reports),
        "busy_ms": busy,
        "processing_rate": round(capacity, 1),
        "state_bytes_written": sum(r["bytes_written"] for r in reports),
    }


def _fused(
    parallelism: int, rows_in: int | None, rows_out: int | None, busy_ms: float
) -> dict[str, Any]:
    rows = rows_in if rows_in is not None else rows_out
    return {
        "instances": parallelism,
        "rows_in": rows_in,
        "rows_out": rows_out,
        "busy_ms": [round(busy_ms, 1)] * parallelism,
        "processing_rate": round((rows or 0) / (busy_ms / 1000.0), 1),
    }


def _add_rates(op: dict[str, Any], interval_ms: float, is_source: bool) -> None:
    seconds = max(interval_ms, 1.0) / 1000.0
    op["input_rate"] = None if is_source else round((op["rows_in"] or 0) / seconds, 1)
    op["output_rate"] = round((op["rows_out"] or 0) / seconds, 1)


def _add_etp(graph: JobGraph, operators: dict[str, dict[str, Any]]) -> None:
    rates = {
        op_id: OperatorRates(m["input_rate"], m["processing_rate"], m["output_rate"])
        for op_id, m in operators.items()
    }
    etp = compute_etp(graph, rates)
    for op_id, values in operators.items():
        values["etp"] = round(etp.etp.get(op_id, 0.0), 4)
        values["congested"] = op_id in etp.congested


class PrintingPublisher:
    """Prints one compact line per epoch (the CLI's publisher)."""

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
        self.acks: list[dict[str, Any]] = []

    def acknowledge(self, run_id: str, ack: dict[str, Any]) -> None:
        """Appends unless the request id is already recorded."""
        if all(a["request_id"] != ack["request_id"] for a in self.acks):
            self.acks.append(ack)
