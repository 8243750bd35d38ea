"""The producer's batch draws equal the reference draws (``EventDraws.fields``, plain
Python over the xxhash64 that reproduces Spark's): the same text for every field of every
event, over the whole id range and for uniform and skewed keys."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.runtime.io.broker.event_draws import EventDraws


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 2**63 - 64), count=st.integers(1, 64),
       keys=st.integers(1, 100_000), skew=st.sampled_from([0.0, 0.8, 1.0, 1.5]),
       seed=st.integers(-(2**31), 2**31 - 1))
def test_a_batch_has_the_reference_fields_of_each_event(first: int, count: int, keys: int,
                                                        skew: float, seed: int) -> None:
    draws = EventDraws(keys=keys, skew=skew, seed=seed)
    columns = draws.columns(first, count)
    for offset in range(count):
        expected = draws.fields(first + offset, 0)
        assert {"event_id": columns.event_id[offset], "event_time": "0",
                "campaign_id": columns.campaign_id[offset], "user_id": columns.user_id[offset],
                "event_type": columns.event_type[offset],
                "amount": columns.amount[offset]} == expected
