"""Dedupe and join epochs as their state grows from 100k to 10M keys (``bench state``'s
``dedupe_growth`` and ``join_growth``): one instance owning 64 key groups on the embedded
store, run without Spark, so the figure is what the state costs an epoch.

The state is written first in bulk commits of every key's entry, as the operator keeps it
(dedupe: each key remembered; join: one buffered left row per key, timed so that it stays
buffered throughout). Each measured epoch then takes the same number of rows with keys
uniform over twice the key space (half of them stored keys, half new ones, which the epoch
puts), after warm-up epochs; the join's rows are half left, half right, and its bound is
one epoch of event time, so a key buffers a few epochs' rows at most at either size. An
epoch's time is the instance's wall time, the median over the measured epochs."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from bench.instances import keyed_task
from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.dedupe import parse_dedupe_spec
from engine.runtime.operators.dedupe_worker import process_dedupe_instance
from engine.runtime.operators.entries import encode
from engine.runtime.operators.join import SIDE, parse_join_spec
from engine.runtime.operators.join_worker import process_join_instance
from engine.runtime.stage.vsn_worker import InstanceReport
from engine.runtime.state import KeyedChanges, StateStore, StoreSpec, open_store

KEY_GROUPS = 64
WARMUP = 2
T0_US = 1_767_225_600_000_000
EPOCH_US = 1_000_000  # event time between epochs
DEDUPE = parse_dedupe_spec("dedupe", {"key": ["k"], "time": "t", "within": "1 hour"})
JOIN = parse_join_spec("join", {"key": ["k"], "time": "t", "within": "1 second"}).with_layout(
    ["k", "t", "a"], ["k", "t", "b"])
BUFFERED_US = T0_US + 3600 * EPOCH_US  # the loaded join rows: never expired while measured
BULK_KEYS = 2_000_000  # keys per bulk commit: bounds the memory a load takes


def _dedupe_rows(keys: np.ndarray, at_us: int) -> pa.Table:
    times = pa.array(np.full(len(keys), at_us), pa.int64())
    return pa.table({KG: pa.array(keys % KEY_GROUPS, pa.int32()), "k": pa.array(keys, pa.int64()),
                     "t": times, TIME_US: times})


def _join_rows(keys: np.ndarray, at_us: int, sides: np.ndarray) -> pa.Table:
    times = pa.array(np.full(len(keys), at_us), pa.int64())
    payload = pa.array(np.char.add("p", keys.astype(str)), pa.string())
    return pa.table({KG: pa.array(keys % KEY_GROUPS, pa.int32()),
                     SIDE: pa.array(sides, pa.int8()), "k": pa.array(keys, pa.int64()),
                     "t": times, TIME_US: times,
                     "a": pa.compute.if_else(pa.array(sides == 0), payload, None),
                     "b": pa.compute.if_else(pa.array(sides == 1), payload, None)})


def _load(store: StateStore, operator: str, rows: pa.Table, timer_after_us: int,
          value: Callable[[pa.Table], pa.Array], epoch: int) -> None:
    """Every row's key entry in one commit per key group (the instance's way of writing
    them, without an epoch's reads)."""
    puts = pa.table({KG: rows[KG], "timer": pa.compute.add(rows[TIME_US], timer_after_us),
                     "field": encode(rows, ["k"]), "value": value(rows)})
    changes = {}
    for kg in range(KEY_GROUPS):
        part = puts.filter(pa.compute.equal(puts[KG], kg)).drop_columns([KG])
        changes[kg] = KeyedChanges(puts=part)
    store.commit_entries(operator, epoch, changes)


def _epochs(keys: int, rows: int, measured: int, made: Callable[[np.ndarray, int], pa.Table],
            run: Callable[[int, pa.Table, int], Any]) -> list[float]:
    """The measured epochs' wall times, each epoch's rows made before its clock starts."""
    rng = np.random.default_rng(7)
    took = []
    for epoch in range(1, WARMUP + measured + 1):
        at_us = T0_US + epoch * EPOCH_US
        table = made(rng.integers(0, 2 * keys, rows), at_us)
        started = time.perf_counter()
        run(epoch, table, at_us)
        took.append((time.perf_counter() - started) * 1000.0)
    return took[WARMUP:]


def _dedupe_ms(keys: int, rows: int, measured: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="bench-lookups-") as folder:
        store = open_store(StoreSpec("sqlite", folder, f"dedupe-{uuid.uuid4().hex[:6]}"))
        for epoch, start in enumerate(range(0, keys, BULK_KEYS)):
            loaded = _dedupe_rows(np.arange(start, min(keys, start + BULK_KEYS)), T0_US)
            _load(store, DEDUPE.operator, loaded, DEDUPE.within_us,
                  lambda r: r[TIME_US].cast(pa.string()), -1000 + epoch)
        output = pa.schema([("k", pa.int64()), ("t", pa.int64())])

        def run(epoch: int, table: pa.Table, at_us: int) -> None:
            task = keyed_task(DEDUPE, output, epoch, owners=(0,) * KEY_GROUPS,
                              watermark_us=T0_US)
            process_dedupe_instance(task, InstanceReport(instance=0), table, store)

        return _epochs(keys, rows, measured, _dedupe_rows, run)


def _join_ms(keys: int, rows: int, measured: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="bench-lookups-") as folder:
        store = open_store(StoreSpec("sqlite", folder, f"join-{uuid.uuid4().hex[:6]}"))
        for epoch, start in enumerate(range(0, keys, BULK_KEYS)):
            ids = np.arange(start, min(keys, start + BULK_KEYS))
            loaded = _join_rows(ids, BUFFERED_US, np.zeros(len(ids), np.int8))
            columns = [c for c in loaded.column_names if c != KG]
            _load(store, JOIN.operator, loaded, JOIN.within_us + 1,
                  lambda r, c=columns: encode(r, c), -1000 + epoch)  # type: ignore[misc]
        output = pa.schema([("k", pa.int64()), ("t", pa.int64()), ("a", pa.string()),
                            ("b", pa.string())])
        sides = np.random.default_rng(3).integers(0, 2, rows).astype(np.int8)

        def run(epoch: int, table: pa.Table, at_us: int) -> None:
            task = keyed_task(JOIN, output, epoch, owners=(0,) * KEY_GROUPS,
                              watermark_us=at_us - EPOCH_US)
            process_join_instance(task, InstanceReport(instance=0), table, store)

        return _epochs(keys, rows, measured, lambda ids, at: _join_rows(ids, at, sides), run)


def measure_lookups(
    small_keys: int = 100_000, large_keys: int = 10_000_000, rows: int = 100_000,
    measured: int = 9,
) -> dict[str, Any]:
    """Dedupe's and join's epoch at both sizes, and the growth of each."""
    result: dict[str, Any] = {"lookup_rows_per_epoch": rows}
    for name, epochs in (("dedupe", _dedupe_ms), ("join", _join_ms)):
        ms = {}
        for size, keys in (("small", small_keys), ("large", large_keys)):
            began = time.monotonic()
            times = epochs(keys, rows, measured)
            ms[size] = statistics.median(times)
            print(f"[bench state] {name} {size} ({keys} keys): measured ms "
                  f"{[round(t) for t in times]} ({time.monotonic() - began:.0f} s with the load)",
                  file=sys.stderr, flush=True)
        result[f"{name}_epoch_ms_small"] = round(ms["small"], 1)
        result[f"{name}_epoch_ms_large"] = round(ms["large"], 1)
        result[f"{name}_growth"] = round(ms["large"] / ms["small"], 3)
    return result


if __name__ == "__main__":
    print(measure_lookups())
