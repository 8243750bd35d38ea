"""The driver process of one run: `python -m webapp.runs.driver RUN_ID`.

It hosts the engine's Spark runtime and implements the ports the engine needs: every epoch's
metrics go to Postgres and to the run's websocket subscribers, every acknowledgement completes
its reconfiguration record, and status changes are kept true in the run's row. It is started by
the supervision task in a process of its own (a SparkSession must not live in a forked worker)
and restarted from its checkpoint if it dies.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any

import django

log = logging.getLogger("streamscale.driver")


class RunHost:
    """The web application's side of a running job: implements the engine's ports."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id

    def publish_epoch(self, run_id: str, epoch_metrics: dict[str, Any]) -> None:
        from webapp.runs.live import run_epoch_publish

        try:
            run_epoch_publish(run_id=self.run_id, metrics=epoch_metrics)
        except Exception:  # noqa: BLE001 - a dashboard hiccup must not stop the job
            log.exception("could not publish the metrics of epoch %s", epoch_metrics.get("epoch"))

    def acknowledge(self, run_id: str, ack: dict[str, Any]) -> None:
        from webapp.reconfigurations.services import reconfiguration_acknowledge

        reconfiguration_acknowledge(run_id=self.run_id, ack=ack)

    def run_status(self, run_id: str, status: str, detail: str | None = None) -> None:
        from webapp.runs.services import run_status_set

        run_status_set(run_id=self.run_id, status=status, detail=detail or "")


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
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    django.setup()
    from webapp import engine_gateway
    from webapp.jobs.models import RunStatus
    from webapp.runs.selectors import run_get

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    run = run_get(run_id=int(argv[0]))
    host = RunHost(run.pk)
    stop_requested, running = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, _on_sigterm(stop_requested, running))
    log.info("run %s: starting %s on %s (restart %s)", run.pk, run.job.name,
             run.spark_master, run.restarts)
    status = engine_gateway.run_driver(
        document=run.version.dag, run_id=run.pk, checkpoint=run.checkpoint_location,
        master=run.spark_master, host=host, stop_requested=stop_requested, running=running,
    )
    log.info("run %s: driver ended %s", run.pk, status)
    if status == "suspended":
        return 0  # the product is shutting down; the run resumes at its next start
    if status == "stopped":
        host.run_status(str(run.pk), RunStatus.STOPPED)
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
