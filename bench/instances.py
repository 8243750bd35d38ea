"""Epoch tasks of keyed operator instances run outside Spark (benches and tests): the
schemas the VSN stage would give each instance, and no store (the caller hands one)."""

from __future__ import annotations

import pyarrow as pa

from engine.runtime.operators.window_spec import WINDOW_END, WINDOW_START, WindowSpec
from engine.runtime.operators.window_worker import window_state_schema
from engine.runtime.stage.vsn_worker import REPORT, EpochTask


def window_task(spec: WindowSpec, input_schema: pa.Schema, epoch: int, *,
                owners: tuple[int, ...], watermark_us: int | None = None) -> EpochTask:
    """The epoch's task of a window instance for input rows of ``input_schema``: its output
    (keys, window bounds in micros, aggregates) and its entries'."""
    entries = window_state_schema(spec, input_schema)
    aggregates = [
        (a.name, pa.float64() if a.func == "avg" else entries.field(a.partials[0]).type)
        for a in spec.aggregates
    ]
    output = pa.schema([
        *(input_schema.field(k) for k in spec.keys),
        (WINDOW_START, pa.int64()),
        (WINDOW_END, pa.int64()),
        *aggregates,
    ])
    return keyed_task(spec, output, epoch, owners=owners, watermark_us=watermark_us,
                      entries=entries)


def keyed_task(
    spec: object,
    output: pa.Schema,
    epoch: int,
    *,
    owners: tuple[int, ...],
    watermark_us: int | None = None,
    entries: pa.Schema | None = None,
) -> EpochTask:
    """The epoch's task of a keyed instance whose rows out are ``output`` (the report column
    added); a window's has its ``entries``' schema too."""
    schema = output.append(pa.field(REPORT, pa.string()))
    return EpochTask(spec, None, epoch, watermark_us, owners, schema, entries)  # type: ignore[arg-type]
