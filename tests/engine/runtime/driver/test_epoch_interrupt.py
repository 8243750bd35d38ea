"""A rescale that arrives while an epoch's keyed stage runs interrupts that epoch: its Spark
jobs are cancelled, or its stage is let to end and replayed, whichever ends the epoch first,
and it runs again under the new plan, with exactly the results of one attempt."""

from __future__ import annotations

import threading
import time
import uuid
from functools import partial
from typing import Any

import pytest

from engine.runtime.api import request_reconfiguration
from engine.runtime.driver.epoch import RerunCosts
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from engine.runtime.stage.regions import EpochInterrupted, StageClock
from tests.engine.runtime.jobs import (
    actual_windows,
    expected_windows,
    start_collected_run,
    wait_epoch,
    window_job,
)

pytestmark = pytest.mark.spark


def _until(condition: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_an_interrupt_cancels_the_running_action_and_frees_the_cores(spark) -> None:
    clock = StageClock(spark, f"interrupt-{uuid.uuid4().hex[:6]}")
    clock.begin(4, 0)
    answers: list[bool] = []

    def interrupt_once_running() -> None:
        _until(lambda: clock.running == "counts")
        time.sleep(0.5)  # the job's tasks are under way
        answers.append(clock.interrupt("counts"))

    threading.Thread(target=interrupt_once_running).start()
    started = time.monotonic()
    with pytest.raises(EpochInterrupted), clock.action("counts", cancellable=True):
        # A minute of work on both cores if nothing stops it.
        spark.range(0, 10**11, numPartitions=2).selectExpr("sum(id % 7)").collect()
    assert answers == [True]
    assert time.monotonic() - started < 20
    freed = time.monotonic()
    assert spark.range(0, 1000, numPartitions=2).count() == 1000
    assert time.monotonic() - freed < 10
    assert clock.running is None


def _touch_then_sleep(path: str, rows: Any) -> Any:
    open(path, "w").close()
    time.sleep(30)
    yield from rows


def test_an_interrupt_before_the_action_submits_its_job_stops_it_before_its_tasks(
    spark, tmp_path
) -> None:
    # A keyed stage's action plans its query on the driver for 30-65 ms before Spark has
    # a job to cancel: the job it then submits fails before any task of it starts.
    prefix = f"interrupt-{uuid.uuid4().hex[:6]}"
    clock = StageClock(spark, prefix)
    clock.begin(3, 0)
    started = tmp_path / "task-started"
    began = time.monotonic()
    with pytest.raises(EpochInterrupted), clock.action("counts", cancellable=True):
        assert clock.interrupt("counts")
        time.sleep(0.3)  # still planning
        spark.sparkContext.parallelize(range(2), 2).mapPartitions(
            partial(_touch_then_sleep, str(started))).collect()
    assert time.monotonic() - began < 10
    assert not started.exists()
    # Failed as it was submitted: Spark never started it (no job of the group to report).
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(f"{prefix}:3:counts")) == []
    assert spark.range(0, 1000, numPartitions=2).count() == 1000


def _worker_pids(sleep_s: float, started: str | None, batches: Any) -> Any:
    import os

    import pyarrow as pa

    for _ in batches:
        pass
    if started is not None:
        open(started, "w").close()
    time.sleep(sleep_s)
    yield pa.RecordBatch.from_pydict({"pid": [os.getpid()]})


def _pids_job(spark: Any, sleep_s: float = 0.0, started: str | None = None) -> Any:
    """A keyed stage's shape: a shuffle, then Python instances (``sleep_s`` each; each
    touches ``started`` once it has its input)."""
    rows = spark.range(0, 1000, numPartitions=2).repartition(2)
    return rows.mapInArrow(partial(_worker_pids, sleep_s, started), "pid long")


def test_an_interrupt_leaves_running_instances_to_end_and_keeps_their_workers(
    spark, tmp_path
) -> None:
    warm = {r.pid for r in _pids_job(spark).collect()}
    clock = StageClock(spark, f"interrupt-{uuid.uuid4().hex[:6]}")
    clock.begin(2, 0)
    instances = tmp_path / "instances-started"
    interrupted: list[float] = []

    def interrupt_once_instances_run() -> None:
        _until(instances.exists)
        time.sleep(1.0)  # Spark's status tracker reports the stage's start a little later
        interrupted.append(time.monotonic())
        clock.interrupt("counts")

    threading.Thread(target=interrupt_once_instances_run).start()
    with pytest.raises(EpochInterrupted), clock.action("counts", cancellable=True):
        _pids_job(spark, sleep_s=3.0, started=str(instances)).collect()
    assert time.monotonic() - interrupted[0] >= 1.5  # not cancelled: the instances ended
    assert {r.pid for r in _pids_job(spark).collect()} <= warm  # no worker was killed


def _routed_then_pids(spark: Any, routing_s: float, sleep_s: float = 0.0) -> Any:
    """A keyed stage's shape whose routing (JVM tasks, one row each) takes ``routing_s``."""
    millis = int(routing_s * 1000)
    rows = spark.range(0, 2, numPartitions=2).selectExpr(
        "id", f"reflect('java.lang.Thread', 'sleep', cast({millis} as bigint)) as slept"
    ).repartition(2)
    return rows.mapInArrow(partial(_worker_pids, sleep_s, None), "pid long")


def test_an_interrupt_late_in_the_routing_lets_the_instances_run(spark) -> None:
    # Spark's status tracker reports the instances' start a little behind them: an
    # interrupt is taken as a cancel only while the routing has a margin left to run, as
    # long as the recent epochs' routing took, so that no cancel reaches the instances.
    warm = {r.pid for r in _pids_job(spark).collect()}
    clock = StageClock(spark, f"interrupt-{uuid.uuid4().hex[:6]}")
    for epoch in range(3):  # routing of ~2 s each
        clock.begin(epoch, 0)
        with clock.action("counts", cancellable=True):
            _routed_then_pids(spark, 2.0).collect()
        clock.end()

    def attempt(epoch: int, interrupt_after_s: float) -> float:
        clock.begin(epoch, 0)

        def interrupt() -> None:
            _until(lambda: clock.running == "counts")
            time.sleep(interrupt_after_s)
            assert clock.interrupt("counts")

        threading.Thread(target=interrupt).start()
        began = time.monotonic()
        with pytest.raises(EpochInterrupted), clock.action("counts", cancellable=True):
            _routed_then_pids(spark, 2.0, sleep_s=1.0).collect()
        clock.end()
        return time.monotonic() - began

    # Early in the routing: cancelled, the instances never run.
    assert attempt(3, 0.2) < 2.0
    # In its last quarter (the routing still runs): left to run, and the instances (1 s
    # each) with it; no worker killed.
    assert attempt(4, 1.75) >= 2.9
    assert {r.pid for r in _pids_job(spark).collect()} <= warm


def test_an_interrupt_voids_only_an_attempt_that_has_not_passed_the_operator(spark) -> None:
    clock = StageClock(spark, f"interrupt-{uuid.uuid4().hex[:6]}")
    clock.begin(1, 0)
    with clock.action("counts"):
        spark.range(10).count()
    assert not clock.interrupt("counts")  # its stage is done: the next epoch takes it
    assert clock.interrupt("pairs")  # not run yet: it must not run under the old plan
    ran = []
    with pytest.raises(EpochInterrupted), clock.action("pairs"):
        ran.append(True)
    assert not ran
    clock.end()
    assert not clock.interrupt("pairs")  # no attempt runs
    clock.begin(1, 2, interruptible=False)
    assert not clock.interrupt("pairs")  # the last attempt always ends
    clock.end()


def test_an_interrupt_that_lets_the_stage_end_voids_the_attempt_at_its_end(spark) -> None:
    clock = StageClock(spark, f"interrupt-{uuid.uuid4().hex[:6]}")
    clock.begin(3, 0)
    assert clock.interrupt("counts", cancel=False)
    with clock.action("views"):  # another operator's action runs as if nothing came
        assert spark.range(10).count() == 10
    ran = []
    started = time.monotonic()
    with pytest.raises(EpochInterrupted), clock.action("counts", cancellable=True):
        # Two seconds of Python tasks, whose jobs a cancelling interrupt would kill.
        spark.range(0, 2, numPartitions=2).mapInArrow(
            partial(_worker_pids, 2.0, None), "pid long").collect()
        ran.append(True)
    assert ran and time.monotonic() - started >= 2.0
    assert not clock.interrupt("counts")  # the attempt is void already
    clock.end()

    clock.begin(3, 1)  # the next attempt: a cancelling interrupt stops the next action
    assert clock.interrupt("counts")
    with pytest.raises(EpochInterrupted), clock.action("counts", cancellable=True):
        ran.append(False)
    assert ran == [True]
    clock.end()


def test_an_epoch_is_cancelled_only_when_running_it_again_ends_it_sooner() -> None:
    costs = RerunCosts()
    assert costs.cancel("counts", 3, 4, elapsed_ms=50.0, emits=False)  # nothing to weigh yet
    for ms in (290.0, 300.0, 310.0):
        costs.epoch_ran("counts", 3, False, ms)
    assert not costs.cancel("counts", 3, 4, elapsed_ms=50.0, emits=False)
    costs.replayed("counts", False, 80.0)
    assert costs.cancel("counts", 3, 4, elapsed_ms=50.0, emits=False)  # 350 < 300 + 80
    assert not costs.cancel("counts", 3, 4, elapsed_ms=100.0, emits=False)  # 400 > 380
    for ms in (140.0, 150.0, 160.0):
        costs.epoch_ran("counts", 4, False, ms)
    assert costs.cancel("counts", 3, 4, elapsed_ms=200.0, emits=False)  # 350 < 380
    assert not costs.cancel("counts", 3, 4, elapsed_ms=250.0, emits=False)
    assert not costs.cancel("counts", 3, 3, elapsed_ms=100.0, emits=False)  # a rebalance


def test_epochs_that_emit_are_weighed_apart_from_those_that_do_not() -> None:
    costs = RerunCosts()
    for ms in (300.0, 300.0, 300.0):
        costs.epoch_ran("counts", 3, False, ms)
        costs.epoch_ran("counts", 4, False, ms / 2)
        costs.epoch_ran("counts", 3, True, 3 * ms)
    costs.replayed("counts", False, 20.0)
    assert not costs.cancel("counts", 3, 4, elapsed_ms=200.0, emits=False)  # 350 > 320
    # An epoch that closes windows replays by a Spark job: none measured yet, it cancels.
    assert costs.cancel("counts", 3, 8, elapsed_ms=800.0, emits=True)
    costs.replayed("counts", True, 500.0)
    # The epoch at 8 that closes windows is unknown: as long as the one at 3.
    assert costs.cancel("counts", 3, 8, elapsed_ms=400.0, emits=True)  # 1300 < 1400
    assert not costs.cancel("counts", 3, 8, elapsed_ms=550.0, emits=True)  # 1450 > 1400
    costs.epoch_ran("counts", 4, True, 500.0)
    assert costs.cancel("counts", 3, 4, elapsed_ms=850.0, emits=True)  # 1350 < 1400
    assert not costs.cancel("counts", 3, 4, elapsed_ms=950.0, emits=True)  # 1450 > 1400
    # The replays of one kind say nothing of the other's.
    assert costs.cancel("counts", 3, 4, elapsed_ms=100.0, emits=False)  # 250 < 320


def test_a_window_aggregate_whose_replay_reemits_an_output_is_not_cancelled_blind() -> None:
    # A window aggregate's replay in an epoch that closes windows emits the void attempt's
    # output again, no Spark job: with none measured, it is weighed as free, as the replay
    # of an epoch that closes none is; a dedupe's replay there is a Spark job, cancelled.
    costs = RerunCosts(reemits=frozenset({"counts"}))
    for ms in (900.0, 1000.0, 1100.0):
        costs.epoch_ran("counts", 3, True, ms)
        costs.epoch_ran("firsts", 3, True, ms)
    assert not costs.cancel("counts", 3, 8, elapsed_ms=100.0, emits=True)  # 1100 > 1000
    assert costs.cancel("firsts", 3, 8, elapsed_ms=100.0, emits=True)
    costs.epoch_ran("counts", 8, True, 500.0)
    assert costs.cancel("counts", 3, 8, elapsed_ms=400.0, emits=True)  # 900 < 1000
    assert not costs.cancel("counts", 3, 8, elapsed_ms=600.0, emits=True)  # 1100 > 1000
    costs.replayed("counts", True, 300.0)  # once measured, weighed as measured
    assert costs.cancel("counts", 3, 8, elapsed_ms=700.0, emits=True)  # 1200 < 1300
    assert costs.cancel("counts", 5, 8, elapsed_ms=100.0, emits=True)  # none at 5 to go by


def test_a_rescale_during_the_stage_takes_effect_in_the_running_epoch(spark, tmp_path) -> None:
    name = f"sink_{uuid.uuid4().hex[:8]}"
    job = window_job({"type": "sink.memory", "params": {"name": name}}, parallelism=8)
    last = 14
    cached_before = spark.sparkContext._jsc.getPersistentRDDs().size()
    run, publisher, recorder = start_collected_run(spark, tmp_path, job, last_epoch=last)
    interrupts: list[tuple[int, bool]] = []
    weighed: list[bool] = []  # whether a whole epoch of the kind at the old parallelism ran
    interrupt = run.epochs.interrupt

    def recorded(command: Any) -> bool:
        kind = ("counts", run.epochs._config["counts"].parallelism, run.epochs._emits("counts"))
        weighed.append(kind in run.epochs.costs.epochs_ms)
        epoch, taken = run.epochs.clock.epoch, interrupt(command)
        interrupts.append((epoch, taken))
        return taken

    run.epochs.interrupt = recorded  # type: ignore[method-assign]
    cancels: list[bool] = []
    clock_interrupt = run.epochs.clock.interrupt

    def clock_recorded(op_id: str, cancel: bool = True) -> bool:
        cancels.append(cancel)
        return clock_interrupt(op_id, cancel=cancel)

    run.epochs.clock.interrupt = clock_recorded  # type: ignore[method-assign]
    wait_epoch(run, 2)
    requests = {}
    for parallelism, closes in ((3, False), (5, True), (4, False)):
        # Sent the moment the keyed stage of an epoch that closes windows (or not) starts:
        # picked up long before its instances start.
        while True:
            _until(lambda: run.epochs.clock.running != "counts")
            _until(lambda: run.epochs.clock.running == "counts")
            if run.log.plan(run.epochs.clock.epoch)["closes"]["counts"] == closes:
                break
        request = request_reconfiguration(
            run.channel, kind="rescale", operator="counts", parallelism=parallelism
        )
        requests[request] = parallelism
        assert run.channel.wait_for_ack(request, 60)["status"] == "applied"
    assert run.wait(180) == "stopped"

    assert [taken for _, taken in interrupts] == [True, True, True]
    # With no replay measured yet, the first lets its stage end (a replay on the driver,
    # deemed free), and its replay is measured. The one in an epoch that closes windows
    # is deemed free too (the rerun emits the void attempt's output again), so it is
    # cancelled only with no whole epoch of its kind at the old parallelism to go by.
    assert weighed[0] and cancels[0] is False
    assert cancels[1] is not weighed[1]
    assert run.epochs.costs.replays_ms[("counts", False)]
    # Whole epochs were weighed apart by whether they closed windows, at each parallelism
    # they ran at.
    kinds = {(p, emits) for (_, p, emits) in run.epochs.costs.epochs_ms}
    assert {emits for _, emits in kinds} == {False, True}
    assert (4, False) in kinds and {p for p, _ in kinds} <= {8, 3, 5, 4}
    # The void attempts' partly computed outputs were released with the attempts.
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == cached_before
    acks = {a["request_id"]: a for a in recorder.acks}
    epochs = {m["epoch"]: m for m in publisher.epochs}
    for (interrupted, _), (request, parallelism), cancelled in zip(
        interrupts, requests.items(), cancels, strict=True
    ):
        applied = acks[request]["applied_epoch"]
        assert applied == interrupted  # the epoch that ran when it came, not the next
        assert epochs[applied]["attempts"] == 2
        assert epochs[applied]["last_attempt_ms"] < epochs[applied]["batch_duration_ms"]
        assert epochs[applied]["operators"]["counts"]["instances"] == parallelism
        assert run.log.plan(applied)["config"]["counts"]["parallelism"] == parallelism
        assert acks[request]["state_bytes_copied"] == 0
        # A stage let to its end was replayed, every key group from the store; a cancelled
        # one's new instances computed every group.
        replayed = epochs[applied]["operators"]["counts"]["groups_replayed"]
        assert replayed == (0 if cancelled else 32)
    assert all(
        m["attempts"] == 1
        for e, m in epochs.items()
        if e not in {a["applied_epoch"] for a in acks.values()}
    )
    expected = expected_windows(spark, run.start_ms, last, [(0, "event_type = 'view'")])
    assert expected and actual_windows(memory_sink_rows(name)) == expected
    clear_memory_sink(name)


def test_a_stage_output_voided_as_its_stage_ends_is_still_released(spark, tmp_path) -> None:
    """An interrupt that comes once the instances run lets the stage end, then voids the
    attempt: the stage's cached output must still be released with the epoch's."""
    from engine.dag import parse_job_graph
    from engine.planner import plan_job
    from engine.runtime.control.run_config import initial_config
    from engine.runtime.stage.pipeline import EpochPipeline, EpochResult
    from engine.runtime.stage.vsn_stage import StageResult
    from engine.runtime.state import StoreSpec

    graph = parse_job_graph(window_job({"type": "sink.memory", "params": {}}))
    clock = StageClock(spark, f"voided-{uuid.uuid4().hex[:6]}")
    clock.begin(1, 0)
    pipeline = EpochPipeline(graph, initial_config(plan_job(graph)), 1, {},
                             StoreSpec("sqlite", str(tmp_path)), {}, clock=clock)
    cached_before = spark.sparkContext._jsc.getPersistentRDDs().size()

    def stage(spec: Any, inputs: Any, at: Any) -> StageResult:
        output = spark.range(10).persist()
        output.count()
        assert clock.interrupt("counts")  # the instances have run: nothing is cancelled
        return StageResult(cached=output, reports=[], emitted=output.schema)

    with pytest.raises(EpochInterrupted):
        pipeline._keyed("counts", stage, None, None, EpochResult())
    clock.end()
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == cached_before + 1
    pipeline.release()
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == cached_before


def test_a_window_stage_run_to_its_end_hands_its_output_to_the_next_attempt(
    spark, tmp_path
) -> None:
    """A window aggregate's stage run to its end in a void attempt: its output, kept on the
    executors, is what the next attempt to reach the stage emits, under its own plan, with
    no Spark job; an interrupt before that attempt's action leaves it for the one after,
    and what no attempt takes is released with the epoch."""
    from dataclasses import replace

    from engine.dag import parse_job_graph
    from engine.planner import plan_job
    from engine.runtime.control.run_config import initial_config
    from engine.runtime.stage.pipeline import EarlierAttempts, EpochPipeline, EpochResult
    from engine.runtime.stage.vsn_stage import StageResult
    from engine.runtime.stage.vsn_worker import REPORT
    from engine.runtime.state import StoreSpec

    graph = parse_job_graph(window_job({"type": "sink.memory", "params": {}}, parallelism=2))
    config = initial_config(plan_job(graph))
    owners = tuple(kg % 3 for kg in range(graph.key_groups))
    rescaled = {**config, "counts": replace(config["counts"], parallelism=3, owners=owners)}
    clock = StageClock(spark, f"handed-{uuid.uuid4().hex[:6]}")
    store = StoreSpec("sqlite", str(tmp_path))

    def persisted() -> int:
        return spark.sparkContext._jsc.getPersistentRDDs().size()

    cached_before = persisted()
    ran: list[int] = []

    def instances(spec: Any, inputs: Any, at: Any) -> StageResult:
        ran.append(at.parallelism)
        # Three rows emitted and two reports, as two instances' output.
        output = spark.range(0, 5, 1, 2).selectExpr(
            "if(id < 3, id + 1, null) AS campaign_id", "if(id < 3, id * 10 + 10, null) AS views",
            f"if(id < 3, null, '{{}}') AS {REPORT}").persist()
        output.count()
        assert clock.interrupt("counts")  # its instances have run: nothing is cancelled
        reports = [{"instance": i, "rows_in": 5, "rows_out": n, "groups_replayed": 0}
                   for i, n in enumerate((1, 2))]
        return StageResult(cached=output, reports=reports, emitted=output.drop(REPORT).schema)

    def attempt(number: int, earlier: EarlierAttempts, plan: Any, stage: Any,
                interrupt: bool = False) -> tuple[EpochResult, list[tuple] | None]:
        clock.begin(7, number, interruptible=number < 3)
        if interrupt:
            assert clock.interrupt("counts", cancel=number != 2)
        pipeline = EpochPipeline(graph, plan, 7, {}, store, {}, clock=clock, earlier=earlier)
        result = EpochResult()
        rows = None
        try:
            frame = pipeline._keyed("counts", stage, None, None, result, replays=True)
            rows = sorted(tuple(r) for r in frame.collect())
        except EpochInterrupted:
            pipeline.hand_on()
        finally:
            clock.end()
        pipeline.release()
        return result, rows

    def never(spec: Any, inputs: Any, at: Any) -> StageResult:
        raise AssertionError("the stage ran again")

    earlier = EarlierAttempts()
    attempt(0, earlier, config, instances)  # ran to its end, then voided
    assert ran == [2] and set(earlier.stages) == {"counts"}
    assert persisted() == cached_before + 1  # kept for the next attempt
    attempt(1, earlier, rescaled, never, interrupt=True)  # voided before its action
    assert set(earlier.stages) == {"counts"} and persisted() == cached_before + 1
    # Voided at the end of its action: it took the output and hands it on again.
    attempt(2, earlier, rescaled, never, interrupt=True)
    assert set(earlier.stages) == {"counts"} and persisted() == cached_before + 1
    result, rows = attempt(3, earlier, rescaled, never)
    assert earlier.stages == {}
    reports = result.stage_reports["counts"]
    # The first attempt's reports (its input, nothing emitted), then the three instances'
    # of this plan, each naming the groups it owns, the rows emitted counted once.
    assert [r["rows_out"] for r in reports[:2]] == [0, 0]
    assert [r["instance"] for r in reports[2:]] == [0, 1, 2]
    assert [r["groups_replayed"] for r in reports[2:]] == [owners.count(i) for i in range(3)]
    assert result.rows_out["counts"] == 3
    assert rows == [(1, 10), (2, 20), (3, 30)]
    assert ran == [2]
    assert persisted() == cached_before  # released with the epoch that took it

    # An output no attempt took is released with the epoch.
    left = EarlierAttempts()
    attempt(0, left, config, instances)
    assert persisted() == cached_before + 1
    left.release()
    assert persisted() == cached_before and left.stages == {}


def test_a_stage_run_to_its_end_is_replayed_without_its_input(spark, tmp_path, monkeypatch):
    """A rescale whose interrupt comes once the window's instances ran: every key group
    holds the epoch, so its run under the new plan routes no input and the new instances
    re-emit what the groups stored; the epoch counts its input once and stays exact."""
    import engine.runtime.stage.pipeline as pipeline_module

    name = f"sink_{uuid.uuid4().hex[:8]}"
    job = window_job({"type": "sink.memory", "params": {"name": name}}, parallelism=2)
    steps = {4: 5, 5: 3, 6: 4, 7: 2}  # epoch -> parallelism: one of any four closes windows
    holder: dict[str, Any] = {}
    requests: dict[int, str] = {}
    real = pipeline_module.run_window_stage

    replays: dict[int, list[dict[str, Any]]] = {}
    replay_jobs: dict[int, bool] = {}
    reemits: list[int] = []
    real_reemitted = pipeline_module.reemitted

    def reemitted(earlier: Any, at: Any) -> Any:
        stage = real_reemitted(earlier, at)
        reemits.append(at.epoch)
        replays[at.epoch], replay_jobs[at.epoch] = stage.reports, stage.ran
        return stage

    def stage_then_rescale(spec: Any, rows: Any, at: Any) -> Any:
        stage = real(spec, rows, at)
        if at.replay:
            replays[at.epoch] = stage.reports
            replay_jobs[at.epoch] = stage.ran
        if at.epoch in steps and at.epoch not in requests:
            run = holder["run"]
            requests[at.epoch] = request_reconfiguration(
                run.channel, kind="rescale", operator="counts", parallelism=steps[at.epoch])
            # Picked up while the stage's action has yet to end: the attempt is void.
            _until(lambda: run.epochs.clock._interrupted)
        return stage

    monkeypatch.setattr(pipeline_module, "run_window_stage", stage_then_rescale)
    monkeypatch.setattr(pipeline_module, "reemitted", reemitted)
    last = 10
    cached_before = spark.sparkContext._jsc.getPersistentRDDs().size()
    run, publisher, recorder = start_collected_run(spark, tmp_path, job, last_epoch=last)
    holder["run"] = run
    assert run.wait(180) == "stopped"
    run.flush()

    acks = {a["request_id"]: a for a in recorder.acks}
    epochs = {m["epoch"]: m for m in publisher.epochs}
    closing = [e for e in steps if run.log.plan(e) and run.log.plan(e)["closes"]["counts"]]
    for epoch, parallelism in steps.items():
        assert acks[requests[epoch]]["applied_epoch"] == epoch
        counts = epochs[epoch]["operators"]["counts"]
        assert epochs[epoch]["attempts"] == 2
        assert counts["instances"] == parallelism
        assert counts["groups_replayed"] == 32  # every key group, by the new instances
        assert len(replays[epoch]) == parallelism
        assert all(r["rows_in"] == 0 for r in replays[epoch])  # no input was routed to them
        # The input counted once: by the void attempt, none routed to the replay.
        assert counts["rows_in"] == epochs[epoch]["operators"]["views"]["rows_out"] > 0
        loads = run.log.outcome(epoch)["kg_rows"]["counts"]
        assert sum(loads) == counts["rows_in"]
    assert any(epochs[e]["operators"]["counts"]["rows_out"] > 0 for e in closing), closing
    # No replay runs the instances: one that may emit emits the void attempt's output
    # again, the others the driver checks in the store.
    assert replay_jobs == {e: False for e in steps} and 0 < len(closing) < len(steps)
    assert sorted(reemits) == sorted(closing)
    # The void attempts' outputs handed on were released with their epochs.
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == cached_before
    expected = expected_windows(spark, run.start_ms, last, [(0, "event_type = 'view'")])
    assert expected and actual_windows(memory_sink_rows(name)) == expected
    clear_memory_sink(name)
