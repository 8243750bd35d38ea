"""``python -m bench throughput|rescale|control``: prints progress, then one line of JSON."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    """Runs one benchmark and prints its JSON figures as the last line."""
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("benchmark", choices=["throughput", "rescale", "control"])
    parser.add_argument("--rows-per-batch", type=int, default=200_000)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--clients", type=int, default=20, help="websocket clients (control)")
    parser.add_argument("--rescales", type=int, default=20, help="API rescales (control)")
    args = parser.parse_args(argv)
    if args.benchmark == "control":
        from bench.control_plane import measure as measure_control

        result = measure_control(clients=args.clients, rescales=args.rescales)
    elif args.benchmark == "throughput":
        from bench.throughput import measure

        result = measure(rows_per_batch=args.rows_per_batch, epochs=args.epochs or 15)
    else:
        from bench.rescale import measure as measure_rescale

        result = (
            measure_rescale(rows_per_batch=args.rows_per_batch, epochs=args.epochs)
            if args.epochs
            else measure_rescale(rows_per_batch=args.rows_per_batch)
        )
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
