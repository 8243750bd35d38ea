"""One epoch's work, once its plan is fixed: the pipeline over the batch, the outcome in
the epoch log, then the metrics and the acks, which leave off the epoch's path. A command
picked up while an epoch runs applies to the next one; a sample is served from the epoch's
output after it (``samples``)."""

from __future__ import annotations

import functools
import itertools
import time
from typing import Any

from pyspark.sql import DataFrame

from engine.dag import JobGraph
from engine.runtime.control.epoch_plan import EpochOutcome, EpochPlan
from engine.runtime.control.outbox import RunDeliveries
from engine.runtime.driver.metrics import epoch_metrics, stage_max_event_us
from engine.runtime.driver.planning import EpochPlanner
from engine.runtime.driver.samples import EpochSamples, answered_later
from engine.runtime.driver.source_readings import SourceReadings
from engine.runtime.io.broker.lag import broker_lags, broker_report
from engine.runtime.io.sinks import Sink, build_sink
from engine.runtime.io.streams import source_rows
from engine.runtime.stage.pipeline import EpochPipeline, EpochResult
from engine.runtime.stage.regions import EpochJobs, EpochTimes

# Epochs this process's Spark session ran, over every run it drove (a warm standby's
# warm-up job's included): its first ones carry the session's start-up cost.
_SESSION_EPOCHS = itertools.count()


class EpochRunner:
    """Runs an epoch's plan and reports it."""

    def __init__(self, planner: EpochPlanner, deliveries: RunDeliveries) -> None:
        self.planner, self.deliveries = planner, deliveries
        self.graph: JobGraph = planner.graph
        self.sinks: dict[str, Sink] = {
            s: build_sink(self.graph.operator(s).type, s, dict(self.graph.operator(s).params),
                          planner.run_id)
            for s in self.graph.sinks()
        }
        self.clock = EpochJobs(planner.spark, f"streamscale-{planner.run_id}")
        self.readings = SourceReadings(planner.meters)
        self.samples = EpochSamples(deliveries.acks)
        self._last_start: float | None = None
        self._ran = 0  # epochs of this run in this process: its first starts the query

    def run(self, batch: DataFrame, epoch: int) -> EpochPlan | None:
        """Fixes the epoch's plan, runs it, logs the outcome and sends metrics and acks;
        returns the plan run, or None, and nothing run, while the run is idle (no new data,
        no command)."""
        started = time.time()
        plan = self.planner.plan(epoch, batch)
        if plan is None:
            return None
        interval_ms = (started - self._last_start) * 1000.0 if self._last_start else None
        self._last_start = started
        self.clock.begin(epoch)
        samples = self.samples.due(plan.acks)
        pipeline = self._pipeline(plan, frozenset(a.operator for a in samples if a.operator))
        result = pipeline.run(batch)
        self.planner.log.write_outcome(epoch, epoch_outcome(result, self.graph.key_groups))
        ended = time.time()
        batch_ms = (ended - started) * 1000.0
        # The epoch is committed: its acks can say when the change took effect.
        self.deliveries.acks([a for a in plan.acks if not answered_later(a)],
                             ended_at_ms=ended * 1000.0)
        self.samples.serve(samples, epoch, {**result.rows_out, **result.sink_rows},
                           result.samples, pipeline.release, ended * 1000.0)
        # What is read now (the sources' load); the tasks' run times, read back from
        # Spark's status store once its listener has them, are left to the deliveries'
        # thread, off the next epoch's path.
        sources = self._sources(batch, epoch, plan, result, interval_ms or batch_ms)
        extra = {"driver_epoch": self._ran, "session_epoch": next(_SESSION_EPOCHS)}
        self.deliveries.metrics(epoch, functools.partial(
            self._metrics, plan, result, batch_ms, interval_ms or batch_ms,
            sources, self.clock.times(), ended * 1000.0, extra))
        self._ran += 1
        return plan

    def _pipeline(self, plan: EpochPlan, sampled: frozenset[str]) -> EpochPipeline:
        taken, config = plan.sources, plan.config
        frames = source_rows(self.planner.spark, self.graph, self.planner.start_ms, taken,
                             {op: config[op].parallelism for op in taken})
        return EpochPipeline(
            self.graph, config, plan.epoch, plan.watermarks, self.planner.store,
            self.sinks, self.planner.running_plan(config), source_frames=frames,
            clock=self.clock, closes=plan.closes, sampled=sampled,
            source_counts={op: part.count for op, part in taken.items()
                           if op in self.planner.clocks},
        )

    def _sources(self, batch: DataFrame, epoch: int, plan: EpochPlan,
                 result: EpochResult, interval_ms: float) -> dict[str, Any]:
        """Each source's load at the end of the epoch, with its broker lags, if any."""
        lags = broker_lags(self.graph, plan.sources)
        return {
            "figures": {
                **self.readings.sources(epoch, plan.sources, interval_ms),
                **self.readings.brokers(lags, result, interval_ms),
            },
            "report": broker_report(lags, result.dead_letters),
        }

    def _metrics(self, plan: EpochPlan, result: EpochResult, batch_ms: float,
                 interval_ms: float, sources: dict[str, Any], times: EpochTimes,
                 ended_ms: float, extra: dict[str, Any]) -> dict[str, Any]:
        metrics = epoch_metrics(
            self.planner.run_id, plan.epoch, self.graph, plan.config, result, batch_ms,
            interval_ms, sources["figures"], times, watermarks=plan.watermarks,
            ended_ms=ended_ms,
        )
        metrics.update(sources["report"])
        metrics.update(extra)
        return metrics


def epoch_outcome(result: EpochResult, key_groups: int) -> EpochOutcome:
    """What the next epoch's plan needs of this one: each keyed operator's newest event
    time and its rows per key group (the loads a rebalance weighs)."""
    kg_rows: dict[str, list[int]] = {}
    for op_id, reports in result.stage_reports.items():
        loads = kg_rows[op_id] = [0] * key_groups
        for report in reports:
            for kg, rows in (report.get("kg_rows") or {}).items():
                loads[int(kg)] += rows
    max_event = {op: stage_max_event_us(reports) for op, reports in result.stage_reports.items()}
    return EpochOutcome(max_event_us=max_event, kg_rows=kg_rows)
