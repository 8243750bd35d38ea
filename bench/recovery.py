"""``python -m bench recovery``: how soon a run computes again after its driver is killed.

The whole product on a private stack (web server, Celery worker and beat, embedded Postgres
and Redis): a keyed window job with a Postgres sink is started through the API, then its
driver process is killed with SIGKILL ``kills`` times, at a random moment of an epoch, each
time once the run is running again. One run keeps its keyed state in the embedded store
(Spark ``local``); with ``redis_kills`` a second stack runs the same job on a loopback
standalone cluster, whose runs keep their state in the Redis store; the cluster has room for
the warm standby's application beside the run's (``WARM_STANDBY_CLUSTER``). Everything is seen
through the product: the API's run and its epochs' metrics (recorded in Postgres).

Figures (the JSON line):
- ``kills``: drivers killed, over both runs;
- ``recover_s_p50`` / ``recover_s_p99`` / ``recover_s_max``: from a kill to the first epoch
  a successor driver finished (its metrics recorded once the run counted the restart);
- ``first_epoch_s_p50``: from the start request to the run's first finished epoch (the stack
  started, its warm standby up);
- ``standby_ready_s`` (per run): after each recovery, until the next warm standby was up, when
  the next kill came;
- ``collisions``: restarts spent on anything but the kills (a successor meeting a driver still
  alive, say): every restart recorded must name the kill of its predecessor;
- ``exact``: each run's sink holds exactly the windows its logged epochs closed;
- ``failed``: runs that failed (none should).
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.webapp.driver_kills import (
    driver_kill,
    epochs_after,
    recorded_at,
    restarts_not_on_a_kill,
    standbys_ready,
    successor_epoch,
)
from tests.webapp.private_stack import ApiClient, PrivateStack, wait_for

RUN_TIMEOUT_S = 900.0  # a busy machine starts Spark slowly: the figures say how slowly
SEED = 45


def measure(*, kills: int = 5, redis_kills: int = 2) -> dict[str, Any]:
    """Kill the embedded-store run's driver ``kills`` times and the Redis-store run's
    ``redis_kills`` times; return the figures."""
    rng = random.Random(SEED)
    load_before = os.getloadavg()[0]
    runs = [_measure_stack("embedded", kills, rng, cluster=False)]
    if redis_kills:
        runs.append(_measure_stack("redis", redis_kills, rng, cluster=True))
    recoveries = sorted(s for run in runs for s in run["recover_s"])
    firsts = sorted(run["first_epoch_s"] for run in runs)
    return {
        "kills": sum(len(run["recover_s"]) for run in runs),
        "recover_s_p50": _pct(recoveries, 50),
        "recover_s_p99": _pct(recoveries, 99),
        "recover_s_max": recoveries[-1] if recoveries else None,
        "first_epoch_s_p50": _pct(firsts, 50),
        "collisions": sum(run["collisions"] for run in runs),
        "exact": all(run["exact"] for run in runs),
        "failed": sum(run["failed"] for run in runs),
        "runs": {run["store"]: {k: v for k, v in run.items() if k != "store"} for run in runs},
        # Spark's start dominates a recovery, and a busy machine slows it many times over.
        "context": {"load_average_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
                    "cpus": os.cpu_count()},
    }


def _measure_stack(store: str, kills: int, rng: random.Random, *, cluster: bool) -> dict:
    with contextlib.ExitStack() as cleanup:
        stack = PrivateStack(demo=False)
        if cluster:
            stack.env["SPARK_MASTER"] = cleanup.enter_context(_loopback_cluster())
            stack.env["WARM_STANDBY_CLUSTER"] = "true"
        stack.start()
        cleanup.callback(stack.stop)
        _progress(f"{store}: stack up at {stack.url}")
        return _measure_run(stack, store, kills, rng)


@contextlib.contextmanager
def _loopback_cluster():
    from tests.engine.runtime.cluster import LoopbackCluster

    with tempfile.TemporaryDirectory(prefix="bench-recovery-cluster-") as workdir:
        # Room for the run's application and the warm standby's, two cores each (the
        # standby's executors idle until it takes a run over).
        cluster = LoopbackCluster(Path(workdir), workers=1, cores=4, memory="3g", app_cores=2)
        cluster.start()
        try:
            yield cluster.url
        finally:
            cluster.stop()


def _measure_run(stack: PrivateStack, store: str, kills: int, rng: random.Random) -> dict:
    from tests.engine.runtime.jobs import window_job

    api = stack.client(username="bench", role="admin")
    table = f"recovery_{store}"
    # Saving a job checks its expressions on a JVM of the web server's, started on first use.
    job = api.post("/api/jobs", window_job({"type": "sink.postgres", "params": {"table": table}},
                                           parallelism=2), timeout=RUN_TIMEOUT_S)
    wait_for(lambda: standbys_ready(stack), timeout=RUN_TIMEOUT_S, what="a warm standby")
    pressed = time.time()
    run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
    first = wait_for(lambda: epochs_after(api, run_id, -1, pressed), timeout=RUN_TIMEOUT_S,
                     what="the first epoch", interval=0.1)[0]
    first_epoch_s = recorded_at(first) - pressed
    _progress(f"{store}: run {run_id}: first epoch {first_epoch_s:.1f} s after its start")
    recover_s, ready_s = [], []
    for kill in range(1, kills + 1):
        # Each kill meets the product as a crash would in its steady state: the run running
        # and its warm standby up (how long that took after the
        # last recovery is ``standby_ready_s``).
        since = time.time()
        wait_for(lambda: standbys_ready(stack), timeout=RUN_TIMEOUT_S,
                 what="a warm standby", interval=0.2)
        ready_s.append(round(time.time() - since, 2))
        # A random moment of an epoch (they start a second apart, after a few of the driver's)
        time.sleep(1.0 + rng.random() * 2.0)
        restarts = api.get(f"/api/runs/{run_id}")["restarts"]
        killed_at = driver_kill(stack, run_id)
        epoch = successor_epoch(api, run_id, restarts=restarts, killed_at=killed_at,
                                timeout=RUN_TIMEOUT_S)
        recover_s.append(round(recorded_at(epoch) - killed_at, 2))
        _progress(f"{store}: kill {kill}: epoch {epoch['epoch']} {recover_s[-1]:.1f} s after")
    return {"store": store, "first_epoch_s": round(first_epoch_s, 2), "recover_s": recover_s,
            "standby_ready_s": ready_s,
            **_end_run(stack, api, run_id, job["id"], table, kills)}


def _end_run(stack: PrivateStack, api: ApiClient, run_id: int, job_id: int, table: str,
             kills: int) -> dict:
    from tests.webapp.sink_check import check_sink_is_exact

    api.post(f"/api/runs/{run_id}/stop", {"reason": "end of bench"})
    run = wait_for(lambda: (lambda r: r if r["status"] in ("stopped", "failed") else None)(
        api.get(f"/api/runs/{run_id}")), timeout=RUN_TIMEOUT_S, what="the run to stop")
    collisions = restarts_not_on_a_kill(api, job_id)
    for reason in collisions:
        _progress(f"a restart not spent on a kill: {reason}")
    try:
        check_sink_is_exact(stack, table, run_id, run["epoch"])
        exact = True
    except AssertionError as error:
        _progress(f"the sink of run {run_id} is not exact: {str(error)[:500]}")
        exact = False
    return {"restarts": run["restarts"], "collisions": len(collisions) + max(
        0, run["restarts"] - kills - len(collisions)), "exact": exact,
        "failed": int(run["status"] == "failed")}


def _pct(ordered: list[float], q: int) -> float | None:
    if not ordered:
        return None
    return round(statistics.quantiles(ordered, n=100, method="inclusive")[q - 1]
                 if len(ordered) > 1 else ordered[0], 2)


def _progress(message: str) -> None:
    print(f"[bench recovery] {message}", file=sys.stderr, flush=True)
