"""What a private stack's window job wrote to its Postgres sink, checked against the windows
computed from the generator for the epochs its checkpoint planned."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tests.engine.runtime.jobs import actual_windows, expected_windows_planned
from tests.webapp.private_stack import PrivateStack


def sink_rows(stack: PrivateStack, table: str) -> pa.Table | None:
    # Sinks write the sink schema, never the product's tables.
    rows = stack.query("SELECT campaign_id, window_start, views, users, top "
                       f"FROM streamscale_sink.{table}")
    if not rows:
        return None
    columns = list(zip(*rows, strict=True))
    return pa.table({
        "campaign_id": list(columns[0]),
        "window_start": pa.array(list(columns[1]), pa.timestamp("us", tz="UTC")),
        "views": list(columns[2]), "users": list(columns[3]), "top": list(columns[4]),
    })


def check_sink_is_exact(
    spark: Any, stack: PrivateStack, table: str, run_id: int, last_epoch: int
) -> None:
    """The window job's sink ``table`` holds exactly the windows its checkpointed plans closed
    (computed on ``spark``, the suite's session)."""
    checkpoint = stack.var_dir / "runs" / str(run_id) / "checkpoint"
    # Rows fall due by the wall clock: the epochs' plans say which ones the run took.
    expected = expected_windows_planned(spark, str(checkpoint), last_epoch,
                                        "event_type = 'view'")
    actual = actual_windows(sink_rows(stack, table))
    assert expected, "the run closed no window"
    assert actual == expected
