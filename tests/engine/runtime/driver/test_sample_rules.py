"""Which epoch answers a sample, and the rows it keeps: on local frames, without a JVM."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from decimal import Decimal

import pyarrow as pa

from engine.runtime.control.messages import SAMPLE_ROWS, Ack
from engine.runtime.driver.samples import SAMPLE_EPOCHS, EpochSamples, take_sample

TABLE = pa.table({
    "campaign_id": list(range(30)),
    "at": [datetime(2026, 11, 29, 3, 0, i, tzinfo=UTC) for i in range(30)],
    "price": [Decimal("1.50")] * 29 + [None],
    "ratio": [float("nan")] + [0.5] * 29,
    "__kg": [0] * 30,
})


def _ack(epoch: int) -> Ack:
    return Ack(request_id="s1", kind="sample", operator="counts", status="applied",
               applied_epoch=epoch)


def test_a_sample_keeps_twenty_rows_without_the_hidden_columns_as_json_takes_them():
    sample = take_sample(TABLE)
    assert sample.columns == ("campaign_id", "at", "price", "ratio")
    assert len(sample.rows) == SAMPLE_ROWS
    assert sample.rows[0] == (0, "2026-11-29T03:00:00+00:00", "1.50", "nan")
    assert take_sample(TABLE.slice(0, 0)).rows == ()


def test_a_sample_waits_for_an_epoch_in_which_its_operator_emitted_rows():
    delivered: list[list[Ack]] = []
    done = threading.Event()
    samples = EpochSamples(lambda acks, ended_ms: (delivered.append(acks), done.set()))
    released: list[int] = []
    due = samples.due([_ack(7), Ack(request_id="r", kind="rescale", operator="counts",
                                    status="applied", applied_epoch=7)])
    assert due == [_ack(7)]
    samples.serve(due, 7, {"counts": 0}, {"counts": TABLE}, lambda: released.append(7), 1.0)
    assert released == [7] and delivered == []  # nothing emitted: released, still waiting
    due = samples.due([])
    assert due == [_ack(7)]
    samples.serve(due, 8, {"counts": 3}, {"counts": TABLE.slice(0, 3)},
                  lambda: released.append(8), 2.0)
    assert done.wait(5)
    (answer,) = delivered[0]
    assert answer.applied_epoch == 8 and len(answer.sample.rows) == 3
    assert released == [7, 8] and samples.due([]) == []


def test_a_sample_is_answered_without_rows_after_its_last_epoch():
    delivered: list[list[Ack]] = []
    done = threading.Event()
    samples = EpochSamples(lambda acks, ended_ms: (delivered.append(acks), done.set()))
    last = 7 + SAMPLE_EPOCHS - 1
    for epoch in range(7, last + 1):
        samples.serve(samples.due([_ack(7)] if epoch == 7 else []), epoch, {"counts": 0},
                      {"counts": TABLE.slice(0, 0)}, lambda: None, 1.0)
    assert done.wait(5)
    (answer,) = delivered[0]
    assert answer.applied_epoch == last and answer.sample.rows == ()
