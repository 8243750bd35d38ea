"""``python -m bench rescale``: what a user waits for when a running stateful job rescales,
live on VSN vs Spark's stop, offline repartition and restart.

VSN: the window-count job runs at steady load (epochs back to back, 1 s of events each) with
2 instances and is rescaled 2 -> 8 -> 3, then alternated 3 <-> 4, through the run's control
channel on Redis, as in a product run (the Redis the product's settings name: the embedded one
unless ``REDIS_URL`` is set). A request comes at any point of an epoch and applies to the
next one: the requests are sent at 0.1, 0.3, 0.5, 0.7 and 0.9 of the epoch that runs (of the
median of the last epochs), in turn, each parallelism at every point. Both sides write to a
sink that computes the rows and discards them (``sink.noop``, Spark's ``noop``).
Baseline, same job and state size, same session: Spark's built-in aggregation is stopped,
its state repartitioned offline with
``spark._streamingCheckpointManager.repartition(checkpoint, n)`` (Spark 4.2+) and restarted,
``RESTARTS`` times.

Headline figures:
- ``time_to_effect_s``: request -> the end of the first epoch committed at the new
  parallelism (the ack's ``epoch_ended_at_ms``), p50 and p99 over the rescales;
- ``steady_epoch_s_p99``: the p99 of the steady epochs at the rescales' new parallelisms;
  the target is ``time_to_effect_s_p99`` <= 2 x that + 0.2 s (the rest of the running epoch,
  then one epoch at the new parallelism) and ``epochs_to_apply`` <= 1
  (``time_to_effect_target_met``);
- ``restart_time_to_effect_s``: the median of ``restart_samples``, each stop request -> the end
  of the first epoch after the restart; ``speedup_time_to_effect`` the ratio of the medians;
- ``epochs_to_apply``: 1 when the epoch after the one running at the request takes it;
- ``rescale_epoch_vs_same_parallelism``: the rescale epoch over the median steady epoch at
  that parallelism doing the same work (closing the windows, or not: an epoch that closes
  them emits 100k rows) (median and max over the rescales);
- ``state_bytes_copied``: what the acks report copied between owners (state is addressed
  by key group, so a rescale has nothing to copy).

Context (noise on a shared 2-core machine, not headline): each rescale epoch's excess over
the steady median it is compared with, the excess 1 steady epoch in 12 reaches with no rescale
at all, and the ratio over the steady median of every phase (``..._any_phase``).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from bench.builtin import builtin_checkpoint, start_builtin, use_rocksdb
from bench.workload import KEYS, WINDOW, generator_source, window_count_job
from engine.runtime.api import request_reconfiguration, start_run
from engine.runtime.control.channel import RedisControlChannel
from engine.runtime.driver.job_run import JobRun
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.spark.session import build_session

STEPS = (8, 3, 4, 3, 4, 3, 4, 3, 4, 3, 4, 3)
WARMUP = 40  # epochs before the first rescale: JIT and Python workers warm up
# Rescales within the warm-up, not measured: the JVM compiles the paths a rescale takes
# (routing to another partition count) over a process's first rescales, as it did those of
# the steady epochs over the first epochs. (epoch the request comes in, parallelism, point of
# that epoch); none to a parallelism of ``STEPS``, whose routing the measured rescale compiles.
WARMUP_STEPS = ((16, 6, 0.1), (23, 5, 0.7), (30, 2, 0.3))
# Epochs at each parallelism. The 10 s windows close every 10th epoch (100k rows out), an
# epoch that costs more than the others at any parallelism. A step of 7 epochs (not a
# divisor of 10) moves each parallelism's rescale across the window cycle, and leaves
# steady epochs that close windows and steady epochs that do not at 3 and at 4; the first
# step's 11 hold both at 8 whichever epoch the rescale lands on.
EPOCHS_PER_STEP = 7
FIRST_STEP = 11
REQUEST_AT = (0.1, 0.3, 0.5, 0.7, 0.9)  # of an epoch, in turn: 3 and 4 each get all five
RESTARTS = (8, 3, 4)  # the baseline's repartitions, one restart sample each


def product_redis_url() -> str:
    """The Redis of the product's settings: ``REDIS_URL``, else the embedded server."""
    import os

    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    from webapp import embedded
    from webapp.config import load_config

    return embedded.ensure_redis(var_dir=load_config().var_dir)


def step_epoch(step: int) -> int:
    """The last epoch before the ``step``-th rescale request (0-based)."""
    return WARMUP if step == 0 else WARMUP + FIRST_STEP + (step - 1) * EPOCHS_PER_STEP


def _wait_epoch(run: JobRun, epoch: int) -> None:
    while (run.last_epoch if run.last_epoch is not None else -1) < epoch:
        time.sleep(0.002)


def request_delay_s(step: int, epochs: list[dict[str, Any]]) -> float:
    """How long after an epoch starts the ``step``-th request is sent: its point of
    ``REQUEST_AT`` of the median of the last five epochs' durations."""
    return _delay_s(REQUEST_AT[step % len(REQUEST_AT)], epochs)


def _delay_s(point: float, epochs: list[dict[str, Any]]) -> float:
    """``point`` (a share) of the median of the last five epochs' durations, in seconds."""
    recent = [m["batch_duration_ms"] for m in epochs[-5:]]
    return point * statistics.median(recent) / 1000.0


def run_vsn_rescales(
    spark: Any, rows_per_batch: int, epochs: int, keys: int = KEYS, window: str = WINDOW
) -> dict[str, Any]:
    """Rescales a running VSN job through its Redis control channel; returns the acks, the
    epochs' metrics and the epoch running at each request."""
    publisher, recorder = CollectingPublisher(), CollectingRecorder()
    url, prefix = product_redis_url(), f"bench-rescale-{uuid.uuid4().hex[:8]}:"
    with tempfile.TemporaryDirectory(prefix="bench-rescale-") as checkpoint:
        # The events made by as many tasks as the baseline's source reads them in.
        source = generator_source(rows_per_batch, keys,
                                  parallelism=spark.sparkContext.defaultParallelism)
        job = window_count_job(source, 2, "bench_rescale", window=window)
        # Rows computed and discarded, as the baseline's noop sink does (the memory sink
        # would collect a closed window's 100k rows to the driver).
        job["operators"][-1] = {"id": "out", "type": "sink.noop", "params": {}}
        run = start_run(job, checkpoint=checkpoint, publisher=publisher, recorder=recorder,
                        spark=spark, epoch_ms=1000, trigger_ms=0, stop_after_epoch=epochs - 1,
                        control_url=url, control_prefix=prefix)
        assert isinstance(run.channel, RedisControlChannel)
        requested_during: dict[str, int] = {}
        request_at: dict[str, float] = {}
        warmup: set[str] = set()
        try:
            for before, parallelism, point in WARMUP_STEPS:
                _wait_epoch(run, before)
                time.sleep(_delay_s(point, publisher.epochs))
                request = request_reconfiguration(
                    run.channel, kind="rescale", operator="counts", parallelism=parallelism)
                warmup.add(request)
                recorder.wait_for(request, 60)
            for i, parallelism in enumerate(STEPS):
                _wait_epoch(run, step_epoch(i))  # the next epoch starts now
                time.sleep(request_delay_s(i, publisher.epochs))
                running = (run.last_epoch or 0) + 1
                request = request_reconfiguration(
                    run.channel, kind="rescale", operator="counts", parallelism=parallelism)
                requested_during[request] = running
                request_at[request] = REQUEST_AT[i % len(REQUEST_AT)]
                recorder.wait_for(request, 60)
            run.wait()
        finally:
            run.channel.delete()
    return {"acks": [a.to_dict() for a in recorder.acks if a.request_id not in warmup],
            "warmup_acks": [a.to_dict() for a in recorder.acks if a.request_id in warmup],
            "epochs": publisher.epochs, "during": requested_during, "request_at": request_at}


def epoch_kind(m: dict[str, Any]) -> tuple[int, bool, bool]:
    """An epoch's parallelism, whether it closed windows (emitted rows) and whether its
    store read runs (merged them, or fired the windows)."""
    counts = m["operators"]["counts"]
    return counts["instances"], bool(counts["rows_out"]), bool(counts.get("state_bytes_read"))


def steady_medians(result: dict[str, Any], by_phase: bool = True) -> dict[Any, float]:
    """Median steady epoch (no rescale applied in it) of each parallelism and, ``by_phase``,
    of each kind of work at it: 8 instances on 2 cores cost more per epoch than 3, an epoch
    that closes the windows more than one that does not, and one whose store merges runs
    (size-tiered: every other epoch or so, in step for every key group, as each gets one
    run an epoch) more than one that does not, rescale or not. Keyed by ``epoch_kind`` and,
    for the kinds of work, by (parallelism, closes) too."""
    applied = {a["applied_epoch"] for a in result["acks"]}
    groups: dict[Any, list[float]] = {}
    for m in result["epochs"]:
        if m["epoch"] >= WARMUP - 2 and m["epoch"] not in applied:
            kind = epoch_kind(m)
            for key in ((kind, kind[:2]) if by_phase else (kind[0],)):
                groups.setdefault(key, []).append(m["batch_duration_ms"])
    return {k: statistics.median(ds) for k, ds in groups.items()}


def same_work(kind: tuple[int, bool, bool], steady: dict[Any, float]) -> Any:
    """The key of ``steady`` to compare an epoch of ``kind`` with: the same parallelism
    and work, or the same parallelism and closing when no steady epoch merged (or did not)
    as it did."""
    return kind if kind in steady else kind[:2]


def vsn_figures(result: dict[str, Any]) -> dict[str, Any]:
    """Time to effect, epochs to apply, bytes copied and the rescale epochs' cost."""
    durations = {m["epoch"]: m["batch_duration_ms"] for m in result["epochs"]}
    kinds = {m["epoch"]: epoch_kind(m) for m in result["epochs"]}
    by_kind, by_p = steady_medians(result), steady_medians(result, by_phase=False)
    acks = result["acks"]
    effects = sorted(effect_s(a) for a in acks)
    applied = [a["applied_epoch"] for a in acks]
    missing = {kinds[e][:2] for e in applied} - set(by_kind)
    if missing:
        raise ValueError(f"no steady epoch to compare a rescale epoch with: {sorted(missing)} "
                         "(parallelism, closes windows); run more epochs per step")
    same_p = [durations[e] / by_kind[same_work(kinds[e], by_kind)] for e in applied]
    any_phase = [durations[e] / by_p[kinds[e][0]] for e in applied]
    return {
        "control_channel": "redis",
        "rescales": len(acks),
        "epochs_to_apply": max(
            a["applied_epoch"] - result["during"][a["request_id"]] for a in acks
        ),
        "time_to_effect_s_p50": round(_percentile(effects, 50), 3),
        "time_to_effect_s_p99": round(_percentile(effects, 99), 3),
        "time_to_effect_s_median": statistics.median(effects),
        "steady_epoch_s_p99": round(steady_epoch_s_p99(result) / 1000.0, 3),
        "rescale_epoch_vs_same_parallelism": round(statistics.median(same_p), 3),
        "rescale_epoch_vs_same_parallelism_max": round(max(same_p), 3),
        "state_bytes_copied": sum(int(a["state_bytes_copied"]) for a in acks),
        "context": {
            **_noise(acks, durations, kinds, by_kind),
            "rescale_epoch_excess_ms": [
                round(durations[e] - by_kind[same_work(kinds[e], by_kind)])
                for e in sorted(applied)],
            "vsn_median_epoch_ms_by_parallelism": {p: round(v, 1) for p, v in sorted(by_p.items())},
            "rescale_epochs_closing_windows": sum(1 for e in applied if kinds[e][1]),
            "time_to_effect_s_by_request_point": _by_request_point(result),
            "rescale_epoch_vs_same_parallelism_any_phase": round(statistics.median(any_phase), 3),
            "rescale_epoch_vs_same_parallelism_any_phase_max": round(max(any_phase), 3),
        },
    }


def steady_epoch_s_p99(result: dict[str, Any]) -> float:
    """The p99 (ms) of the steady epochs (no rescale applied in them, past the warm-up) at
    the parallelisms the rescales went to: what a request waits for at most is the rest of
    the epoch running when it comes and one whole epoch at the new parallelism."""
    applied = {a["applied_epoch"] for a in result["acks"]}
    targets = {epoch_kind(m)[0] for m in result["epochs"] if m["epoch"] in applied}
    steady = [m["batch_duration_ms"] for m in result["epochs"]
              if m["epoch"] >= WARMUP - 2 and m["epoch"] not in applied
              and epoch_kind(m)[0] in targets]
    return _percentile(steady, 99)


def effect_s(ack: dict[str, Any]) -> float:
    """A rescale's time to effect: request -> the end of the epoch that took it."""
    return (ack["epoch_ended_at_ms"] - ack["requested_at_ms"]) / 1000.0


def _by_request_point(result: dict[str, Any]) -> dict[str, list[float]]:
    """Each rescale's time to effect by the point of the epoch its request came at."""
    points: dict[str, list[float]] = {}
    for ack in sorted(result["acks"], key=lambda a: a["applied_epoch"]):
        at = result.get("request_at", {}).get(ack["request_id"])
        if at is not None:
            points.setdefault(f"{at:.1f}", []).append(round(effect_s(ack), 3))
    return dict(sorted(points.items()))


def _noise(acks, durations, kinds, steady) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """How much single epochs vary on this machine, with and without a rescale."""
    applied = {a["applied_epoch"] for a in acks}
    steady_excess = sorted(
        d - steady[same_work(kinds[e], steady)]
        for e, d in durations.items()
        if e >= WARMUP - 2 and e not in applied
    )
    latencies = sorted(a["control_latency_ms"] for a in acks)
    return {
        "pickup_ms_p50": round(_percentile(latencies, 50), 2),
        "pickup_ms_p99": round(_percentile(latencies, 99), 2),
        "vsn_median_epoch_ms_by_kind": {
            f"p={kind[0]}{' closing' if kind[1] else ' merging' if kind[2] else ''}": round(v, 1)
            for kind, v in sorted(steady.items()) if len(kind) == 3},
        "steady_epoch_excess_ms_p92": round(_percentile(steady_excess, 100 * 11 / 12), 1),
    }


def _percentile(values: list[float], pct: float) -> float:
    """Nearest rank (p99 of 12 values is the largest)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(-(-len(ordered) * pct // 100)) - 1))]


def run_restarts(
    spark: Any, rows_per_batch: int, warmup: int = 8, keys: int = KEYS, window: str = WINDOW
) -> dict[str, Any]:
    """Stop, offline state repartition, restart, once per entry of ``RESTARTS``; each sample
    is a stop request -> the end of the first epoch after the restart."""
    start_ms = int(time.time() * 1000)
    use_rocksdb(spark, True)
    samples: list[float] = []
    exactly_once = True
    with builtin_checkpoint("bench-restart-") as checkpoint:
        query = start_builtin(spark, rows_per_batch, checkpoint, start_ms, keys, window=window)
        for partitions in RESTARTS:
            _await_batches(query, warmup)
            stop_at = time.time()
            query.stop()
            exactly_once &= _repartition(spark, checkpoint, partitions)
            query = start_builtin(spark, rows_per_batch, checkpoint, start_ms, keys, window=window)
            _await_batches(query, 1)
            samples.append(round(time.time() - stop_at, 3))
            _progress(f"restart to {partitions} partitions: {samples[-1]} s")
            warmup = 4
        last: Any = query.lastProgress
        state_rows = last["stateOperators"][0]["numRowsTotal"]
        query.stop()
    use_rocksdb(spark, False)
    return {"restart_samples": samples, "restart_state_rows": state_rows,
            "restart_exactly_once_repartition": exactly_once}


def _await_batches(query: Any, batches: int) -> None:
    """Waits until the query completed ``batches`` micro-batches since it started."""
    while len(query.recentProgress) < batches:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        time.sleep(0.02)


def _repartition(spark: Any, checkpoint: str, partitions: int) -> bool:
    try:
        spark._streamingCheckpointManager.repartition(checkpoint, partitions)
        return True
    except Exception:  # noqa: BLE001  # a stop mid-batch blocks the exactly-once mode
        spark._streamingCheckpointManager.repartition(checkpoint, partitions, False)
        return False


def measure(
    rows_per_batch: int = 200_000,
    epochs: int = step_epoch(len(STEPS)) + 3,
    keys: int = KEYS,
    window: str = WINDOW,
) -> dict[str, Any]:
    """Both sides in one session, on the same events (``keys`` distinct keys, ``window``
    long windows: the state both sides hold); the last line of ``python -m bench rescale``."""
    spark = build_session(app_name="bench-rescale")
    raw = run_vsn_rescales(spark, rows_per_batch, epochs, keys, window)
    for m in raw["epochs"]:
        p, closing, _ = epoch_kind(m)
        _progress(f"epoch {m['epoch']} p={p} ms={m['batch_duration_ms']}"
                  f"{' closes windows' if closing else ''}")
    by_epoch = {m["epoch"]: m for m in raw["epochs"]}
    for ack in sorted(raw["acks"], key=lambda a: a["applied_epoch"]):
        m = by_epoch[ack["applied_epoch"]]
        counts = m["operators"]["counts"]
        _progress(
            f"rescale to {counts['instances']} requested at "
            f"{raw['request_at'][ack['request_id']]} of epoch {raw['during'][ack['request_id']]}"
            f", applied in epoch {ack['applied_epoch']}: time to effect "
            f"{effect_s(ack):.3f} s, epoch {m['batch_duration_ms']} ms"
            f"{', closes windows' if counts['rows_out'] else ''}")
    vsn = vsn_figures(raw)
    _progress(f"vsn: {vsn}")
    restarts = run_restarts(spark, rows_per_batch, keys=keys, window=window)
    restart_median = statistics.median(restarts["restart_samples"])
    effect_median = vsn.pop("time_to_effect_s_median")
    context = vsn.pop("context")
    return {
        "keys": keys,
        "window": window,
        **vsn,
        "restart_samples": restarts["restart_samples"],
        "restart_time_to_effect_s": round(restart_median, 3),
        "speedup_time_to_effect": round(restart_median / effect_median, 1),
        "time_to_effect_target_met": (
            vsn["epochs_to_apply"] <= 1
            and vsn["time_to_effect_s_p99"] <= 2 * vsn["steady_epoch_s_p99"] + 0.2),
        "context": {**context,
                    "warmup_time_to_effect_s": [
                        round(effect_s(a), 3) for a in raw.get("warmup_acks", [])],
                    "restart_state_rows": restarts["restart_state_rows"],
                    "restart_exactly_once_repartition":
                        restarts["restart_exactly_once_repartition"]},
    }


def _progress(message: str) -> None:
    print(f"[bench rescale] {message}", file=sys.stderr, flush=True)
