"""The driver process of one run: `python -m webapp.runs.driver RUN_ID` (or a warm standby
that a run takes over, `python -m webapp.runs.driver standby TOKEN`).

It hosts the engine's Spark runtime and implements the ports the engine needs: every epoch's
metrics go to Postgres and to the run's websocket subscribers, every acknowledgement completes
its reconfiguration record (or answers a data preview), and status changes are kept true in
the run's row. It is started by the supervision task in a process of its own (a SparkSession
must not live in a forked worker) and restarted from its checkpoint if it dies.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import django

from webapp.runs.process import STANDBY_ARG

if TYPE_CHECKING:
    from webapp.engine_gateway import Ack

log = logging.getLogger("streamscale.driver")


class RunHost:
    """The web application's side of a running job: implements the engine's ports.

    The engine calls `publish_epoch` and `acknowledge` from its delivery queue, off the epoch's
    path, and retries a call that raises; so they raise on failure, after dropping a database
    connection that may be broken so that the retry opens a new one.
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.began = time.monotonic()  # when this driver took the run
        self.published = False

    def publish_epoch(self, run_id: str, epoch_metrics: dict[str, Any]) -> None:
        from webapp.runs.live import run_epoch_publish

        with _fresh_connection_after_failure():
            run_epoch_publish(run_id=self.run_id, metrics=epoch_metrics)
        if not self.published:
            self.published = True
            log.info("run %s: first epoch (%s) recorded %.1f s after this driver took the run",
                     self.run_id, epoch_metrics.get("epoch"), time.monotonic() - self.began)

    def acknowledge(self, run_id: str, ack: Ack) -> None:
        from webapp.reconfigurations.services import reconfiguration_acknowledge
        from webapp.samples.services import operator_sample_record

        with _fresh_connection_after_failure():
            if ack.kind == "sample":
                operator_sample_record(run_id=self.run_id, ack=ack)
            else:
                reconfiguration_acknowledge(run_id=self.run_id, ack=ack)

    def run_status(self, run_id: str, status: str, detail: str | None = None) -> None:
        from webapp.runs.services import run_status_set

        run_status_set(run_id=self.run_id, status=status, detail=detail or "")


@contextlib.contextmanager
def _fresh_connection_after_failure() -> Iterator[None]:
    from django.db import connection

    try:
        yield
    except Exception:
        connection.close()
        raise


HEARTBEAT_S = 5.0


def _heartbeat(run_id: int, running: threading.Event, ended: threading.Event) -> None:
    """Once the query runs, the run is running (data or not) and the driver says it lives
    every ``HEARTBEAT_S``; a failed write (the database restarting) is retried next beat."""
    from django.db import connection

    from webapp.runs.services import run_heartbeat_record, run_query_started

    began = time.monotonic()
    while not running.wait(0.2):
        if ended.is_set():
            return
    log.info("run %s: epoch loop started %.1f s after this driver took the run", run_id,
             time.monotonic() - began)
    record = run_query_started
    while not ended.is_set():
        try:
            record(run_id=run_id, pid=os.getpid())
            record = run_heartbeat_record
        except Exception as error:  # noqa: BLE001 - a beat is retried, never fatal
            log.warning("run %s: heartbeat not recorded (retried in %.0f s): %s",
                        run_id, HEARTBEAT_S, error)
            connection.close()
        ended.wait(HEARTBEAT_S)
    connection.close()


def _on_sigterm(stop_requested: threading.Event, running: threading.Event):
    """SIGTERM stops a running query cleanly at its next check; before the query runs there
    is nothing to stop cleanly (Spark's start-up can take many seconds), so the driver leaves
    at once and the run resumes from its checkpoint next time."""

    def handler(signum: int, frame: Any) -> None:
        stop_requested.set()
        if not running.is_set():
            raise SystemExit(0)

    return handler


def main(argv: list[str]) -> int:
    """``RUN_ID``: drive that run; ``standby TOKEN``: start Spark, then drive the run a
    launch gives this standby (see ``webapp.runs.standby``)."""
    standby = argv[0] == STANDBY_ARG
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    if not standby:
        # Names the connections of the driver and its sinks (pg_stat_activity.application_name).
        os.environ["PGAPPNAME"] = f"streamscale-driver-{argv[0]}"
    django.setup()
    from django.conf import settings

    # Sources with `url: env:REDIS_URL` (the demo's) read the product's own Redis.
    os.environ.setdefault("REDIS_URL", settings.REDIS_URL)
    os.environ.setdefault("NATS_URL", settings.NATS_URL)  # and `env:NATS_URL` its NATS
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # The control listener is one of several threads here (the epoch's, the delivery queue's):
    # a shorter switch interval bounds its wait for the interpreter to 1 ms instead of 5.
    sys.setswitchinterval(0.001)
    stop_requested, running = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, _on_sigterm(stop_requested, running))
    if not standby:
        return _drive(int(argv[0]), stop_requested, running, spark=None)
    from webapp import engine_gateway
    from webapp.runs.standby import standby_wait

    started = time.monotonic()
    spark = engine_gateway.driver_session(master=settings.SPARK_MASTER)
    log.info("standby %s: Spark up in %.1f s, waiting for a run", argv[1],
             time.monotonic() - started)
    run_id = standby_wait(argv[1])
    if run_id is None:
        log.info("standby %s: its folder is gone, nothing to wait for", argv[1])
        return 0
    _take_run(run_id)
    return _drive(run_id, stop_requested, running, spark=spark)


def _take_run(run_id: int) -> None:
    """From now on this process is the run's driver: its output goes to the run's log and
    its new database connections carry the run's name."""
    from django.db import connections

    from webapp.runs.services import run_dir

    folder = run_dir(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    log_fd = os.open(folder / "driver.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.environ["PGAPPNAME"] = f"streamscale-driver-{run_id}"
    connections.close_all()
    log.info("run %s: taken over by a warm standby driver", run_id)


def _drive(run_id: int, stop_requested: threading.Event, running: threading.Event, *,
           spark: Any) -> int:
    from webapp import engine_gateway
    from webapp.jobs.models import RunStatus
    from webapp.runs.exits import SUSPENDED
    from webapp.runs.selectors import run_get

    run = run_get(run_id=run_id)
    host = RunHost(run.pk)
    ended = threading.Event()
    threading.Thread(target=_heartbeat, args=(run.pk, running, ended), daemon=True,
                     name="heartbeat").start()
    log.info("run %s: starting %s on %s (restart %s)", run.pk, run.job.name,
             run.spark_master, run.restarts)
    try:
        status, failure = engine_gateway.run_driver(
            document=run.version.dag, run_id=run.pk, checkpoint=run.checkpoint_location,
            master=run.spark_master, host=host, stop_requested=stop_requested, running=running,
            spark=spark,
        )
    except Exception as error:
        failure = engine_gateway.failure_of_start(error, run.version.dag)
        log.exception("run %s: the run could not start: %s", run.pk, failure.describe())
        return _failed(run.pk, f"the run could not start: {failure.cause}", failure)
    finally:
        ended.set()  # the heartbeat ends with the query: an ended driver is never "running"
    log.info("run %s: driver ended %s", run.pk, status)
    if status == "suspended":
        return SUSPENDED  # the product is shutting down; the run resumes at its next start
    if status == "stopped":
        host.run_status(str(run.pk), RunStatus.STOPPED)
        return 0
    assert failure is not None
    log.error("run %s: the query failed: %s", run.pk, failure.describe())
    return _failed(run.pk, f"the query failed: {failure.cause}", failure)


def _failed(run_id: int, cause: str, failure) -> int:  # noqa: ANN001 - a RunFailure
    """Records the failure for the watcher and returns the exit status that tells it whether
    to restart: ``JOB_ERROR`` for the job's own error, 1 for a transient one."""
    from webapp.runs.exits import JOB_ERROR, driver_cause_record
    from webapp.runs.services import run_dir

    driver_cause_record(run_dir(run_id), cause=cause, operator=failure.operator)
    return 1 if failure.retried else JOB_ERROR


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
