"""``run`` subcommand: ``python -m engine run DAG.json --checkpoint DIR [--master URL]``;
and ``class-archive``, which makes the JVM class archive drivers start from.

Runs the job, prints one line per epoch and takes reconfiguration commands from the
run's control channel (``--control redis://...``; stream ``<prefix>run:<id>:control``),
printing what became of each as an ``ack {json}`` line.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence

from engine.errors import EngineError
from engine.runtime.api import DEFAULT_CONTROL_PREFIX, make_class_archive, start_run
from engine.runtime.driver.metrics import PrintingPublisher
from engine.runtime.errors import failure_summary
from engine.runtime.spark.class_archive import archive_path


def build_parser() -> argparse.ArgumentParser:
    """Arguments of the ``run`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="python -m engine run", description="Run a job graph on Spark."
    )
    parser.add_argument("dag", help="job graph document (JSON)")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    parser.add_argument("--master", default="local[2]", help="Spark master URL")
    parser.add_argument("--run-id", help="run id (default: kept in the checkpoint)")
    parser.add_argument("--epoch-ms", type=int, default=1000, help="event time per epoch")
    parser.add_argument("--trigger-ms", type=int, help="trigger interval (default: epoch-ms)")
    parser.add_argument("--control", help="redis:// URL of the control channel")
    parser.add_argument("--control-prefix", default=DEFAULT_CONTROL_PREFIX)
    parser.add_argument("--state", help="redis:// URL of the networked state store")
    parser.add_argument("--stop-after-epoch", type=int, help="stop after this epoch")
    parser.add_argument("--json", action="store_true", help="print metrics as JSON lines")
    return parser


def main_run(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``run``: 0 when stopped, 2 on a bad job graph, 1 on failure."""
    args = build_parser().parse_args(argv)
    try:
        with open(args.dag, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"error: cannot read {args.dag}: {exc}", file=sys.stderr)
        return 2
    host = PrintingPublisher(as_json=args.json)
    try:
        run = start_run(
            document,
            checkpoint=args.checkpoint,
            publisher=host,
            recorder=host,
            run_id=args.run_id,
            master=args.master,
            epoch_ms=args.epoch_ms,
            trigger_ms=args.trigger_ms,
            state_url=args.state,
            control_url=args.control,
            control_prefix=args.control_prefix,
            stop_after_epoch=args.stop_after_epoch,
        )
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"run {run.run_id} started; control stream {getattr(run.channel, 'control_key', '-')}",
        flush=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: run.stop())
    try:
        status = run.wait()
    except KeyboardInterrupt:
        run.stop()
        status = run.status
    if status == "failed":
        reason = failure_summary(run.error) if run.error else "unknown error"
        print(f"error: run failed: {reason}", file=sys.stderr)
        return 1
    print(f"run {run.run_id} {status} at epoch {run.last_epoch}", flush=True)
    return 0


def main_class_archive() -> int:
    """Entry point of ``class-archive``: 0 when the archive is there (or no Java is found)."""
    if (path := archive_path()) is not None and not path.is_file():
        print("making the JVM class archive drivers start from (once, in under a minute)",
              flush=True)
    try:
        print(f"JVM class archive: {make_class_archive() or 'none, no java found'}")
    except Exception as error:  # the edge: say what failed, not where
        print(f"error: the JVM class archive was not made: {error}", file=sys.stderr)
        return 1
    return 0
