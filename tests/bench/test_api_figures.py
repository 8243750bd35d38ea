"""``run_keeps_up`` of ``python -m bench api``: a run keeps up when an epoch ended during the
load, its epochs took at least KEPT_UP_SHARE of what they were offered, and its backlog grew
by no more than one epoch's arrivals."""

from __future__ import annotations

import pytest

from bench.api import KEPT_UP_SHARE, run_keeps_up


@pytest.mark.parametrize(("figures", "kept_up"), [
    # steady: each epoch takes what arrived during the one before
    ({"epochs": 10, "offered": 30_000, "consumed": 29_600, "busiest_epoch": 3_100,
      "backlog_growth": 400}, True),
    # the quiet machine's earlier figures: a fifth of the rows left behind
    ({"epochs": 3, "offered": 27_699, "consumed": 21_907, "busiest_epoch": 10_000,
      "backlog_growth": 5_792}, False),
    # took nearly all, but its backlog grew past one epoch's arrivals
    ({"epochs": 30, "offered": 100_000, "consumed": 95_000, "busiest_epoch": 3_400,
      "backlog_growth": 5_000}, False),
    # no epoch ended while the load ran
    ({"epochs": 0, "offered": 0, "consumed": 0, "busiest_epoch": 0,
      "backlog_growth": 0}, False),
])
def test_a_run_keeps_up_when_it_takes_what_it_is_offered(figures, kept_up) -> None:
    assert run_keeps_up(**figures) is kept_up


def test_the_share_taken_is_a_bound_not_a_target() -> None:
    offered = 10_000
    at_bound = {"epochs": 5, "offered": offered, "busiest_epoch": 2_000, "backlog_growth": 0}
    assert run_keeps_up(consumed=int(KEPT_UP_SHARE * offered), **at_bound)
    assert not run_keeps_up(consumed=int(KEPT_UP_SHARE * offered) - 1, **at_bound)
