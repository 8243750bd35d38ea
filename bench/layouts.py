"""``python -m bench layouts``: what one VSN instance's epoch costs on each window-state
layout and store, without Spark (the choice of ``StateStore.keyed_windows``).

One instance owns 64 key groups and gets 100k rows per epoch, keys uniform over the key
space, all in one ten-minute window (so the state only grows); the figure is the median CPU
time of the instance's epoch (``process_time``: this process only, so a busy machine does
not inflate it; a Redis server's own work is not in it) over the measured epochs, after
the state was filled with each key once. On the Redis store it also prints the median CPU
time the Redis server spent in those epochs (``INFO cpu``).

It also measures the epochs that close a window on the keyed layout (``..._closing_cpu_ms``):
ten-second windows, each filled by five epochs of 100k rows (one run of deltas each), then
an epoch whose watermark passes the window's end, which fires every key of it (the
entries' deltas folded) and merges the runs the fired timers hide, with the next window's
first 100k rows; the figure is the median CPU time of those epochs.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa
import redis

from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.window_groups import process_group_instance
from engine.runtime.operators.window_spec import (
    WINDOW_END,
    WINDOW_START,
    WindowSpec,
    parse_window_spec,
)
from engine.runtime.operators.window_worker import process_window_instance, window_state_schema
from engine.runtime.stage.vsn_worker import REPORT, EpochTask, InstanceReport
from engine.runtime.state import StoreSpec, open_store

ROWS = 100_000
SPEC = parse_window_spec(
    "counts",
    {"key": ["k"], "time": "t", "window": "10 minutes", "aggregates": {"n": "count(*)"}},
)
INPUT = pa.schema([(KG, pa.int32()), ("k", pa.int64()), (TIME_US, pa.int64())])
LAYOUTS = {"keyed": process_window_instance, "groups": process_group_instance}
CLOSING_SPEC = parse_window_spec(
    "closing",
    {"key": ["k"], "time": "t", "window": "10 seconds", "aggregates": {"n": "count(*)"}},
)
WINDOW_S = 10
FILLS = 5  # epochs of rows into a window before the one that closes it


def window_task(
    spec: WindowSpec,
    input_schema: pa.Schema,
    epoch: int,
    *,
    owners: tuple[int, ...],
    watermark_us: int | None = None,
) -> EpochTask:
    """The epoch's task of a window instance run outside Spark, with the schemas the window
    stage gives it for input rows of ``input_schema``: its output (keys, window bounds in
    micros, aggregates and the report column) and its entries'. It names no store: the caller
    hands the instance one."""
    entries = window_state_schema(spec, input_schema)
    aggregates = [
        (a.name, pa.float64() if a.func == "avg" else entries.field(a.partials[0]).type)
        for a in spec.aggregates
    ]
    output = pa.schema(
        [
            *(input_schema.field(k) for k in spec.keys),
            (WINDOW_START, pa.int64()),
            (WINDOW_END, pa.int64()),
            *aggregates,
            (REPORT, pa.string()),
        ]
    )
    return EpochTask(spec, None, epoch, watermark_us, owners, output, entries)  # type: ignore[arg-type]


def _epoch_ms(
    store: Any, process: Any, epoch: int, keys: np.ndarray, *, spec: WindowSpec = SPEC,
    time_s: int | None = None, watermark_us: int | None = None,
) -> float:
    """CPU ms of one instance's epoch over rows of ``keys``, all at ``time_s`` (the epoch's
    number of seconds if not given)."""
    at_us = (epoch if time_s is None else time_s) * 1_000_000
    rows = pa.table(
        {
            KG: pa.array(keys % 64, pa.int32()),
            "k": pa.array(keys, pa.int64()),
            TIME_US: pa.array(np.full(len(keys), at_us), pa.int64()),
        }
    )
    task = window_task(spec, INPUT, epoch, owners=(0,) * 64, watermark_us=watermark_us)
    started = time.process_time()
    process(task, InstanceReport(instance=0), rows, store)
    return (time.process_time() - started) * 1000.0


def measure_closing(kind: str, location: str, keys: int, measured: int) -> float:
    """Median CPU ms of ``measured`` epochs that close a window of ``keys`` keys (see the
    module's doc), on the keyed layout."""
    store = open_store(StoreSpec(kind, location, f"bench-layouts-closing-{keys}"))
    store.clear()
    rng = np.random.default_rng(1)
    epoch, times = 0, []
    for window in range(measured + 1):
        start_s = window * WINDOW_S
        closes = window > 0  # the first window's first epoch closes nothing
        watermark = start_s * 1_000_000 if closes else None
        ms = _epoch_ms(store, process_window_instance, epoch, rng.integers(0, keys, ROWS),
                       spec=CLOSING_SPEC, time_s=start_s, watermark_us=watermark)
        if closes:
            times.append(ms)
        epoch += 1
        for fill in range(1, FILLS):
            _epoch_ms(store, process_window_instance, epoch, rng.integers(0, keys, ROWS),
                      spec=CLOSING_SPEC, time_s=start_s + fill, watermark_us=watermark)
            epoch += 1
    store.clear()
    return statistics.median(times)


def measure_one(
    kind: str, location: str, layout: str, keys: int, measured: int
) -> tuple[float, float | None]:
    """Median CPU ms of ``measured`` epochs with ``keys`` keys of state: the instance's,
    and the Redis server's (``INFO cpu``) for the Redis store."""
    store = open_store(StoreSpec(kind, location, f"bench-layouts-{layout}-{keys}"))
    store.clear()
    rng = np.random.default_rng(0)
    order = rng.permutation(keys)
    epoch = 0
    for start in range(0, keys, 500_000):
        _epoch_ms(store, LAYOUTS[layout], epoch, order[start : start + 500_000])
        epoch += 1
    server = redis.Redis.from_url(location) if kind == "redis" else None
    times, server_times = [], []
    for _ in range(measured):
        before = _server_cpu_ms(server)
        times.append(_epoch_ms(store, LAYOUTS[layout], epoch, rng.integers(0, keys, ROWS)))
        server_times.append(_server_cpu_ms(server) - before)
        epoch += 1
    store.clear()
    return statistics.median(times), statistics.median(server_times) if server else None


def _server_cpu_ms(server: redis.Redis | None) -> float:
    if server is None:
        return 0.0
    cpu = server.info("cpu")
    return (float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])) * 1000.0


def measure(
    redis_url: str, keys: tuple[int, ...] = (100_000, 2_000_000), measured: int = 5
) -> dict[str, Any]:
    """CPU ms per instance-epoch for every (store, layout, state size)."""
    figures: dict[str, Any] = {"rows_per_instance": ROWS}
    with tempfile.TemporaryDirectory(prefix="bench-layouts-") as directory:
        for kind, location in (("sqlite", directory), ("redis", redis_url)):
            for layout in LAYOUTS:
                for count in keys:
                    ms, server_ms = measure_one(kind, location, layout, count, measured)
                    name = f"{kind}_{layout}_cpu_ms_{count}"
                    figures[name] = round(ms, 1)
                    print(f"[bench layouts] {name} = {ms:.1f}", file=sys.stderr, flush=True)
                    if server_ms is not None:
                        name = f"{kind}_{layout}_server_cpu_ms_{count}"
                        figures[name] = round(server_ms, 1)
                        print(f"[bench layouts] {name} = {server_ms:.1f}", file=sys.stderr)
            for count in keys:
                name = f"{kind}_keyed_closing_cpu_ms_{count}"
                figures[name] = round(measure_closing(kind, location, count, measured), 1)
                print(f"[bench layouts] {name} = {figures[name]}", file=sys.stderr, flush=True)
    return figures
