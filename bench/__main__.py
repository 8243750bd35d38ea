"""``python -m bench NAME``: prints progress, then one line of JSON (NAME: see ``--help``),
which it also keeps in ``docs/benchmarks/results/``; ``python -m bench report`` rebuilds
``docs/benchmarks.md`` from those results."""

from __future__ import annotations

import argparse
import json
import sys

from bench.results import bench_command, result_name, result_record, result_save
from bench.workload import KEYS, WINDOW


def main(argv: list[str] | None = None) -> int:
    """Runs one benchmark, prints its JSON figures as the last line and keeps them as the
    bench's result; or, for ``report``, rebuilds ``docs/benchmarks.md`` from the results."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument(
        "benchmark",
        choices=["throughput", "rescale", "control", "state", "durability", "api",
                 "autoscale", "recovery", "startup", "report"],
    )
    parser.add_argument("--rows-per-batch", type=int, default=200_000)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--clients", type=int, help="websocket clients (control, default 20) "
                        "or HTTP clients (api, default 50)")
    parser.add_argument("--seconds", type=float, default=30.0, help="load duration (api)")
    parser.add_argument("--rescales", type=int, default=20, help="API rescales (control)")
    parser.add_argument("--only", choices=["redis_stream", "nats"],
                        help="throughput: measure only this row (Redis stream or NATS source)")
    parser.add_argument("--overload", type=float, default=1.4,
                        help="offered over what the job takes at parallelism 1 (autoscale)")
    parser.add_argument("--rate", type=int, help="rows/s offered, instead of --overload")
    parser.add_argument("--max", type=int, default=2, help="autoscaler's max (autoscale)")
    parser.add_argument("--observe-s", type=float, default=300.0,
                        help="seconds watched after the backlog stops growing (autoscale)")
    parser.add_argument("--calm-s", type=float, default=300.0,
                        help="seconds of the calm phase, a neighbour spinning through its "
                             "middle half (autoscale)")
    parser.add_argument("--kills", type=int, default=5,
                        help="kills of the embedded-store run's driver (recovery)")
    parser.add_argument("--redis-kills", type=int, default=2,
                        help="kills of the Redis-store run's driver, on a loopback standalone "
                             "cluster; 0 leaves that run out (recovery)")
    parser.add_argument("--samples", type=int, default=3,
                        help="driver starts each way, with and without the archive (startup)")
    parser.add_argument("--large-keys", type=int, default=10_000_000, help="keys (state)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of the VSN runs, small and large alternating (state)")
    parser.add_argument("--keys", type=int, default=KEYS,
                        help="distinct keys of the events (rescale)")
    parser.add_argument("--window", default=WINDOW, help="window length (rescale)")
    args = parser.parse_args(argv)
    if args.benchmark == "report":
        from bench.report import write_report

        print(write_report())
        return 0
    if args.benchmark == "autoscale":
        from bench.autoscale import measure as measure_autoscale

        result = measure_autoscale(overload=args.overload, rate=args.rate,
                                   max_parallelism=args.max, observe_s=args.observe_s,
                                   calm_s=args.calm_s)
    elif args.benchmark == "recovery":
        from bench.recovery import measure as measure_recovery

        result = measure_recovery(kills=args.kills, redis_kills=args.redis_kills)
    elif args.benchmark == "startup":
        from bench.startup import measure as measure_startup

        result = measure_startup(samples=args.samples)
    elif args.benchmark == "durability":
        from bench.state_durability import measure as measure_durability

        result = measure_durability(epochs=args.epochs or 60)
    elif args.benchmark == "control":
        from bench.control_plane import measure as measure_control

        result = measure_control(clients=args.clients or 20, rescales=args.rescales)
    elif args.benchmark == "api":
        from bench.api import measure as measure_api

        result = measure_api(clients=args.clients or 50, seconds=args.seconds)
    elif args.benchmark == "throughput" and args.only == "redis_stream":
        from bench.redis_source import measure_redis_row
        from engine.runtime.spark.session import build_session

        result = measure_redis_row(build_session(app_name="bench-throughput"))
    elif args.benchmark == "throughput" and args.only == "nats":
        from bench.nats_source import measure_nats_row
        from engine.runtime.spark.session import build_session

        result = measure_nats_row(build_session(app_name="bench-throughput"))
    elif args.benchmark == "state":
        from bench.state import measure as measure_state

        result = measure_state(
            rows_per_batch=args.rows_per_batch,
            large_keys=args.large_keys,
            measured=args.epochs or 9,
            rounds=args.rounds,
        )
    elif args.benchmark == "throughput":
        from bench.throughput import measure

        result = measure(rows_per_batch=args.rows_per_batch, epochs=args.epochs or 15)
    else:
        from bench.rescale import measure as measure_rescale

        sizes = {"rows_per_batch": args.rows_per_batch, "keys": args.keys,
                 "window": args.window}
        result = (
            measure_rescale(epochs=args.epochs, **sizes) if args.epochs
            else measure_rescale(**sizes)
        )
    print(json.dumps(result), flush=True)
    saved = result_save(result_record(result, command=bench_command(argv)),
                        name=result_name(args.benchmark,
                                          args.only if args.benchmark == "throughput" else None))
    print(f"[bench] result kept in {saved}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
