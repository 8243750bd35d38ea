"""``python -m bench autoscale``: the closed-loop autoscaler on a run that falls behind.

A real run on the engine runtime (Spark ``local[2]``, the Redis control channel of the
product's settings): a generator offers ``rate`` rows/s by the wall clock into a keyed
sliding-window count, at parallelism 1. By default ``rate`` is ``overload`` times what
the same job at parallelism 1 processes end to end, measured in a warm-up that runs it
flat out (rows consumed per second of wall time, every stage and the driver included). The
autoscaler policy (``engine.policies.autoscale.AutoscaleLoop``, the code the product's
``auto`` mode runs) reads each epoch's published metrics and sends its rescales on the
control channel. After the backlog stops growing the run is watched for ``observe_s``.
Then a calm phase: a new run of the same job offered a third of what it processes at
parallelism 1, started with 2 instances of the count, under the same loop for ``calm_s``
(5 minutes); a CPU-bound neighbour process spins through the middle half of it, as other
work on the machine does.

Figures (the JSON line):
- ``detect_epochs``: epochs from the first (the overload starts with the run) until the
  autoscaler decided to scale up, counting the epoch it decided on;
- ``decisions``: changes decided until the backlog stopped growing;
- ``backlog_drained``: whether the backlog came back under one epoch of offered rows;
- ``flaps``: decisions during the observation that reverse the previous one's direction;
- ``calm_scale_ups``: scale-ups decided in the calm phase;
- ``calm_flaps``: decisions in the calm phase that reverse the previous one's direction;
- ``calm_scale_downs``: scale-downs decided in the calm phase;
- ``exact``: the sink equals a batch computation over the rows the run consumed;
- ``final_parallelism``: of every operator when the run stopped.
The defaults are for 2 cores: the autoscaler's max is 2 (``--max``), since a third
instance of a CPU-bound operator only queues behind the other two; and the run at
parallelism 2 processes less than twice what it does at 1 (the driver's share of each epoch
does not shrink), so the default overload is 1.4x: a 2x overload could not be drained at any
parallelism on 2 cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from engine.dag import JobGraph
from engine.policies.autoscale import AutoscaleLoop, AutoscaleSettings, Decision
from engine.policies.load import load_model
from engine.runtime.api import load_graph, request_reconfiguration, start_run
from engine.runtime.control.channel import RedisControlChannel
from engine.runtime.driver.job_run import JobRun
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from engine.runtime.spark.session import build_session

SINK = "bench_autoscale"
WINDOW, SLIDE, WATERMARK = "30 seconds", "1 second", "2 seconds"
WINDOW_S, SLIDE_S = 30, 1
KEYS = 1000
WARM_ROWS_PER_EPOCH = 2_000_000
WARM_EPOCHS, CALIBRATION_EPOCHS = 4, 8


def overload_job(rate: int) -> dict[str, Any]:
    """generator -> sliding-window count per campaign (30 windows per row) -> memory."""
    return {
        "name": "bench-autoscale",
        "operators": [
            {"id": "events", "type": "source.generator",
             "params": {"rows_per_second": rate, "keys": KEYS}},
            {"id": "counts", "type": "window_aggregate",
             "params": {"key": ["campaign_id"], "time": "event_time", "window": WINDOW,
                        "slide": SLIDE, "watermark": WATERMARK,
                        "aggregates": {"events": "count(*)"}}},
            {"id": "out", "type": "sink.memory", "params": {"name": SINK}},
        ],
        "edges": [{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}],
    }


def _progress(message: str) -> None:
    print(f"[bench autoscale] {message}", flush=True)


def _redis_url() -> str:
    url = os.environ.get("REDIS_URL")
    if url:
        return url
    from webapp import embedded
    from webapp.config import load_config

    return embedded.ensure_redis(var_dir=load_config().var_dir)


class Observer:
    """Runs the loop on each new epoch and keeps what the figures need."""

    def __init__(self, run: JobRun, publisher: CollectingPublisher,
                 recorder: CollectingRecorder, loop: AutoscaleLoop) -> None:
        self.run, self.publisher, self.recorder, self.loop = run, publisher, recorder, loop
        self.seen = -1
        self.decisions: list[dict[str, Any]] = []
        self._sent: dict[str, str] = {}

    def step(self) -> dict[str, Any] | None:
        """Handles the newest epoch, if there is a new one; returns its metrics."""
        epochs = list(self.publisher.epochs)
        if not epochs or epochs[-1]["epoch"] <= self.seen:
            return None
        self._take_acks()
        latest = epochs[-1]
        self.seen = latest["epoch"]
        decision = self.loop.decide(epochs, time.time())
        if decision.action in ("up", "down"):
            self._apply(decision, latest["epoch"])
        _progress(_line(self.run, latest, decision))
        return latest

    def _take_acks(self) -> None:
        for ack in self.recorder.acks:
            if ack.request_id in self._sent and ack.status == "applied":
                self._sent.pop(ack.request_id)
                if not self._sent:
                    self.loop.took_effect(ack.applied_epoch, time.time())

    def _apply(self, decision: Decision, epoch: int) -> None:
        for operator, parallelism in decision.changes.items():
            request = request_reconfiguration(
                self.run.channel, kind="rescale", operator=operator, parallelism=parallelism)
            self._sent[request] = operator
        self.loop.requested(decision.action, time.time())
        self.decisions.append({"epoch": epoch, "at": time.time(), **decision.to_dict()})


@contextlib.contextmanager
def observed_run(spark: Any, graph: JobGraph, loop: AutoscaleLoop, *, trigger_ms: int,
                 name: str) -> Iterator[Observer]:
    """A run of ``graph`` on the Redis control channel with ``loop`` observing it; stopped
    and its channel and sink cleared on the way out."""
    publisher, recorder = CollectingPublisher(), CollectingRecorder()
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as checkpoint:
        run = start_run(graph, checkpoint=checkpoint, publisher=publisher, recorder=recorder,
                        spark=spark, epoch_ms=trigger_ms, control_url=_redis_url(),
                        control_prefix=f"streamscale-bench-{name}-{os.getpid()}:")
        try:
            yield Observer(run, publisher, recorder, loop)
        finally:
            if run.status != "stopped":
                run.stop()
            if isinstance(run.channel, RedisControlChannel):
                run.channel.delete()
    clear_memory_sink(SINK)


def _line(run: JobRun, m: dict[str, Any], decision: Decision) -> str:
    src = m["sources"]["events"]
    counts = m["operators"]["counts"]
    unit = decision.figures.get("units", {}).get("counts", {})
    return (f"epoch {m['epoch']:3d} p={run.parallelism()} batch {m['batch_duration_ms']:.0f} ms "
            f"offered {src['offered_rate']:.0f}/s consumed {src['consumed_rate']:.0f}/s "
            f"backlog {src['backlog']} ({src['backlog_growth_per_s']:+.0f}/s) counts demand "
            f"{counts['demand_rate']:.0f}/s busy {max(counts['busy_ms'] or [0]):.0f} ms "
            f"congested={counts['congested']} bottleneck={m['bottleneck']} "
            f"util={unit.get('utilisation', '-')} "
            f"busy={decision.figures.get('busy_utilisation', '-')} "
            f"run={decision.figures.get('run_utilisation', '-')} -> {decision.action} "
            f"{decision.changes or ''}"
            f"{' ' + decision.note if decision.note else ''}")


def measure(*, overload: float = 1.4, rate: int | None = None, max_parallelism: int = 2,
            trigger_ms: int = 2000, observe_s: float = 300.0,
            give_up_s: float = 300.0, calm_s: float = 300.0) -> dict[str, Any]:
    """Runs the job offering ``overload`` x what it processes at parallelism 1 (or
    ``rate`` rows/s) under the autoscaler and returns the figures."""
    spark = build_session(master="local[2]", app_name="bench-autoscale")
    capacity = calibrate(spark)
    rate = rate or int(overload * capacity)
    _progress(f"the job at parallelism 1 processes {capacity:.0f} rows/s end to end")
    graph = load_graph(overload_job(rate))
    settings = AutoscaleSettings(max_parallelism=max_parallelism)
    loop = AutoscaleLoop(graph, settings, cooldown_s=2 * trigger_ms / 1000.0)
    _progress(f"offering {rate} rows/s, trigger {trigger_ms} ms, autoscaler max "
              f"{max_parallelism}, drain {settings.drain_s:.0f} s")
    with observed_run(spark, graph, loop, trigger_ms=trigger_ms, name="autoscale") as observer:
        stable_epoch = _until_stable(observer, give_up_s)
        _progress(f"backlog stopped growing at epoch {stable_epoch}; observing {observe_s:.0f} s")
        decided_before = len(observer.decisions)
        _observe(observer, observe_s)
        observer.run.stop()
        final = observer.run.parallelism()
        exact = _exact(spark, observer.run)
    from bench.autoscale_calm import calm_figures, measure_calm  # it builds on this module

    calm = measure_calm(spark, capacity, max_parallelism=max_parallelism,
                        trigger_ms=trigger_ms, calm_s=calm_s)
    epochs = observer.publisher.epochs
    first_up = next((d for d in observer.decisions if d["action"] == "up"), None)
    return {
        "detect_epochs": None if first_up is None else first_up["epoch"] + 1,
        "decisions": decided_before,
        "backlog_drained": _drained(epochs),
        "flaps": _flaps(observer.decisions),
        **calm_figures(calm["decisions"]),
        "exact": exact,
        "final_parallelism": final,
        "rate": rate,
        "overload": round(rate / capacity, 2),
        "capacity_at_parallelism_1": round(capacity),
        "stable_epoch": stable_epoch,
        "decisions_detail": [_summary(d) for d in observer.decisions],
        "utilisation_at_decisions": [d["figures"]["run_utilisation"]
                                     for d in observer.decisions],
        "final_model": _final_model(graph, epochs),
        "calm_rate": calm["rate"],
        "calm_decisions_detail": [_summary(d) for d in calm["decisions"]],
    }


def calibrate(spark: Any) -> float:
    """Warms up and measures: the same job at parallelism 1, epochs of about the size the
    measured run's take when it is behind, back to back on its own checkpoint (the
    JVM compiles the hot code, Spark starts its Python workers, so the measured run's
    first epoch is a normal one); returns the lower quartile of rows consumed per second of
    each epoch's wall time over the last ``CALIBRATION_EPOCHS`` epochs. An epoch that ran
    fast overstates what the run sustains, and an overload computed from an overstated
    capacity can exceed what parallelism 2 drains on two cores; one that ran slow only
    makes the overload a little milder."""
    _progress("warming up and measuring what the job processes at parallelism 1")
    publisher = CollectingPublisher()
    job = overload_job(WARM_ROWS_PER_EPOCH)  # back to back: a second's worth per epoch
    with tempfile.TemporaryDirectory(prefix="bench-autoscale-warm-") as checkpoint:
        run = start_run(job, checkpoint=checkpoint, publisher=publisher,
                        spark=spark, trigger_ms=0,
                        stop_after_epoch=WARM_EPOCHS + CALIBRATION_EPOCHS - 1)
        run.wait(900)
    clear_memory_sink(SINK)
    rates = sorted(e["sources"]["events"]["consumed"] / (e["interval_ms"] / 1000.0)
                   for e in publisher.epochs[WARM_EPOCHS:])
    for epoch in publisher.epochs:
        _progress(f"warm-up epoch {epoch['epoch']}: {epoch['sources']['events']['consumed']} "
                  f"rows in {epoch['interval_ms']:.0f} ms")
    return float(rates[len(rates) // 4])


def _until_stable(observer: Observer, give_up_s: float) -> int | None:
    """Steps the loop until, after a scale-up, the backlog has not grown over 3 epochs."""
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        if observer.step() is None:
            time.sleep(0.05)
            continue
        epochs = observer.publisher.epochs
        ups = [d for d in observer.decisions if d["action"] == "up"]
        if ups and observer.loop.applied_epoch >= 0 and len(epochs) >= 3:
            last = epochs[-3:]
            after = all(e["epoch"] > observer.loop.applied_epoch for e in last)
            backlogs = [e["sources"]["events"]["backlog"] for e in last]
            if after and backlogs[-1] <= backlogs[0]:
                return int(last[-1]["epoch"])
    return None


def _observe(observer: Observer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if observer.step() is None:
            time.sleep(0.05)


def _drained(epochs: list[dict[str, Any]]) -> bool:
    """The backlog came back under one epoch's offered rows after it had built up."""
    peak = max(range(len(epochs)), key=lambda i: epochs[i]["sources"]["events"]["backlog"])
    return any(e["sources"]["events"]["backlog"] <= e["sources"]["events"]["offered"]
               for e in epochs[peak:])


def _flaps(decisions: list[dict[str, Any]]) -> int:
    """Decisions that reverse the direction of the previous one."""
    actions = [d["action"] for d in decisions]
    return sum(1 for a, b in zip(actions, actions[1:], strict=False) if a != b)


def _summary(decision: dict[str, Any]) -> dict[str, Any]:
    return {"epoch": decision["epoch"], "action": decision["action"],
            "changes": decision["changes"], "reasons": decision["reasons"]}


def _final_model(graph: Any, epochs: list[dict[str, Any]]) -> dict[str, Any]:
    model = load_model(graph, epochs[-3:])
    return {u: load.to_dict() for u, load in model.units.items()}


def _exact(spark: Any, run: JobRun) -> bool:
    """The sink against a Spark batch computation over the rows the run consumed, for the
    windows the run's last watermark closed. Hundreds of millions of rows times 30 windows
    each is too much to explode on two cores, so the batch counts rows per (campaign,
    second) and sums 30 consecutive seconds per window (the windows start on whole
    seconds: the slide is 1 s)."""
    from pyspark.sql import functions as F

    from engine.runtime.io.sources import GeneratorSpec, generator_rows
    from engine.runtime.io.taken import ClockRange

    last = run.last_epoch
    assert last is not None
    plan = run.log.plan(last)
    assert plan is not None
    events = plan.sources["events"]
    assert isinstance(events, ClockRange)
    end, watermark = events.end, plan.watermarks["counts"]
    params = run.graph.operator("events").params
    spec = GeneratorSpec.from_params(params, run.start_ms)
    rows = generator_rows(spark, spec, 0, end, 2)
    per_second = rows.groupBy(
        "campaign_id", F.floor(F.unix_micros("event_time") / 1_000_000).alias("second")
    ).agg(F.count(F.lit(1)).alias("n"))
    width = WINDOW_S // SLIDE_S
    expected = (
        per_second.withColumn("offset", F.explode(F.sequence(F.lit(0), F.lit(width - 1))))
        .withColumn("start_s", F.col("second") - F.col("offset"))
        .groupBy("campaign_id", "start_s").agg(F.sum("n").alias("events"))
        .where((F.col("start_s") + WINDOW_S) * 1_000_000 <= watermark)
        .collect()
    )
    want = {(r["campaign_id"], r["start_s"] * 1_000_000): r["events"] for r in expected}
    table = memory_sink_rows(SINK)
    got: dict[tuple[int, int], int] = {}
    if table is not None:
        import pyarrow as pa
        import pyarrow.compute as pc

        starts = pc.cast(table["window_start"], pa.int64()).to_pylist()
        for start, row in zip(starts, table.to_pylist(), strict=True):
            key = (row["campaign_id"], start)
            if key in got:
                return False  # a window emitted twice
            got[key] = row["events"]
    _progress(f"exactness: {len(got)} windows emitted, {len(want)} expected")
    return bool(want) and got == want


if __name__ == "__main__":
    print(json.dumps(measure()), file=sys.stdout)
