"""``python -m engine produce REDIS_URL --stream NAME --keys K (--count N | --rate R)``.

Writes the generator's events into a Redis stream; progress and, at the end, the rate it
wrote at on stderr. Event ids continue where the stream's last producer ended (a counter
kept in Redis); a broker that goes away while it writes is waited for. Exit 0 when done (or
stopped by a signal), 2 on bad arguments or a broker unreachable at the start.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import redis

from engine.runtime.errors import StreamRuntimeError
from engine.runtime.io.broker.event_draws import EventDraws
from engine.runtime.io.broker.producer import next_event_id, produce
from engine.runtime.io.broker.spec import masked_url, resolve_url

EXIT_OK, EXIT_INVALID = 0, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INVALID, f"{self.prog}: {message} (see --help)\n")


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The arguments of ``produce``."""
    parser = _Parser(prog="python -m engine produce",
                     description="Write the generator's events into a Redis stream.")
    parser.add_argument("url", metavar="REDIS_URL",
                        help="e.g. redis://HOST:PORT/0, or env:NAME for the URL in "
                             "environment variable NAME (keeps a password out of the process list)")
    parser.add_argument("--stream", required=True, help="the stream key")
    parser.add_argument("--keys", type=_positive(int), default=1000,
                        help="distinct campaign_id values (default 1000)")
    parser.add_argument("--skew", type=float, default=0.0, help="power-law exponent; 0 uniform")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same events")
    parser.add_argument("--first-id", type=int, default=None,
                        help="event_id of the first event (default: the stream's next id, "
                             "kept in Redis beside it)")
    parser.add_argument("--maxlen", type=_positive(int),
                        help="trim the stream to about N entries (default: never trim)")
    parser.add_argument("--progress-every", type=_positive(float), default=1.0,
                        metavar="SECONDS", help="progress line interval on stderr (default 1)")
    amount = parser.add_mutually_exclusive_group(required=True)
    amount.add_argument("--count", type=_positive(int), help="write N events, then exit")
    amount.add_argument("--rate", type=_positive(float), help="write R events/s until stopped")
    return parser


def main_produce(argv: Sequence[str]) -> int:
    """Runs the producer; returns the exit status."""
    args = build_parser().parse_args(list(argv))
    if not args.stream.strip() or args.skew < 0:
        print("produce: --stream must be non-empty and --skew >= 0", file=sys.stderr)
        return EXIT_INVALID
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        args.url = resolve_url("produce", args.url)
        client = redis.Redis.from_url(args.url, socket_timeout=10)
        first = next_event_id(client, args.stream) if args.first_id is None else args.first_id
    except StreamRuntimeError as error:
        print(f"produce: {error}", file=sys.stderr)
        return EXIT_INVALID
    except (ValueError, redis.RedisError) as error:
        print(f"produce: cannot use Redis at {masked_url(args.url)}: {error}", file=sys.stderr)
        return EXIT_INVALID
    report = _Progress(args.stream, masked_url(args.url), args.progress_every)
    try:
        written = produce(client, args.stream, EventDraws(args.keys, args.skew, args.seed),
                          first, args.count, args.rate, report, args.maxlen, stop.is_set,
                          report.waiting)
    except redis.RedisError as error:
        print(f"produce: writing to {masked_url(args.url)} failed after {report.written} "
              f"events: {error}", file=sys.stderr)
        return 1
    seconds = report.elapsed_s()
    print(f"produce: wrote {written} events to {args.stream!r} in {seconds:.2f} s "
          f"({written / max(seconds, 1e-9):.0f} events/s)", file=sys.stderr)
    return EXIT_OK


class _Progress:
    """Reports progress on stderr at most once every ``every_s`` seconds."""

    def __init__(self, stream: str, where: str, every_s: float) -> None:
        self.stream, self.where, self.every_s = stream, where, every_s
        self.written = 0
        self._started = self._last = time.monotonic()

    def waiting(self, error: Exception, delay_s: float) -> None:
        """A batch could not be written (the broker restarting?): said, and retried."""
        print(f"produce: Redis at {self.where} unreachable after {self.written} events "
              f"({error}); retrying in {delay_s:.1f} s", file=sys.stderr, flush=True)

    def elapsed_s(self) -> float:
        """Seconds since the producer started writing."""
        return time.monotonic() - self._started

    def __call__(self, written: int) -> None:
        self.written = written
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            rate = written / max(now - self._started, 1e-9)
            print(f"produce: {written} events to {self.stream!r} at {self.where} "
                  f"({rate:.0f}/s)", file=sys.stderr, flush=True)
