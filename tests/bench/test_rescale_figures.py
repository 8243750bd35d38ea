"""``bench rescale`` compares each rescale epoch with steady epochs of its parallelism that do
the same work: an epoch that closes the windows emits 100k rows and costs more at any
parallelism, as does one whose store merges runs, so a rescale landing on one is not charged
for it, nor one landing beside it flattered."""

from __future__ import annotations

from typing import Any

import pytest

from bench.rescale import EPOCHS_PER_STEP, FIRST_STEP, STEPS, WARMUP, step_epoch, vsn_figures

CLOSING_EXTRA_MS = 400.0
MERGE_EXTRA_MS = 250.0


def _epoch(epoch: int, p: int, ms: float, closing: bool, reads: bool) -> dict[str, Any]:
    return {"epoch": epoch, "batch_duration_ms": ms, "interval_ms": ms, "operators": {"counts": {
                "instances": p, "rows_out": 100_000 if closing else 0,
                "state_bytes_read": 1000 if reads else 0}}}


def _run(first_closing: int, rescale_extra_ms: float, merges: int = 0) -> dict[str, Any]:
    """A run on the bench's schedule: windows close every 10th epoch from
    ``first_closing``, and with ``merges`` the store merges runs every ``merges``-th epoch;
    a steady epoch at p costs 100 * p ms and more when it closes or merges, a rescale epoch
    that much plus ``rescale_extra_ms``."""
    epochs, acks, during = [], [], {}
    applied = {step_epoch(i) + 1: p for i, p in enumerate(STEPS)}
    p = 2
    for e in range(step_epoch(len(STEPS)) + 3):
        p = applied.get(e, p)
        closing = e % 10 == first_closing % 10
        merging = bool(merges) and e % merges == 0
        ms = 100.0 * p + (CLOSING_EXTRA_MS if closing else 0.0)
        ms += MERGE_EXTRA_MS if merging and not closing else 0.0
        if e in applied:
            ms += rescale_extra_ms
            request = f"r{e}"
            during[request] = e
            acks.append({"request_id": request, "applied_epoch": e, "requested_at_ms": 0,
                         "epoch_ended_at_ms": 1000, "state_bytes_copied": 0,
                         "control_latency_ms": 5.0})
        epochs.append(_epoch(e, p, ms, closing, closing or merging))
    return {"acks": acks, "epochs": epochs, "during": during}


@pytest.mark.parametrize("first_closing", range(10))
def test_a_rescale_costing_nothing_measures_one_at_any_window_phase(first_closing: int) -> None:
    figures = vsn_figures(_run(first_closing, rescale_extra_ms=0.0))
    assert figures["rescale_epoch_vs_same_parallelism"] == 1.0
    assert figures["rescale_epoch_vs_same_parallelism_max"] == 1.0
    # Each parallelism's rescales land on the closing epoch in some phases, not in others.
    assert 0 < figures["context"]["rescale_epochs_closing_windows"] < len(STEPS)


@pytest.mark.parametrize("merges", [2, 3])
def test_a_rescale_costing_nothing_measures_one_whether_its_store_merges_or_not(
    merges: int,
) -> None:
    figures = vsn_figures(_run(first_closing=3, rescale_extra_ms=0.0, merges=merges))
    assert figures["rescale_epoch_vs_same_parallelism"] == 1.0
    assert figures["rescale_epoch_vs_same_parallelism_max"] == 1.0
    kinds = figures["context"]["vsn_median_epoch_ms_by_kind"]
    assert kinds["p=3 merging"] == kinds["p=3"] + MERGE_EXTRA_MS


def test_a_kind_of_work_no_steady_epoch_did_is_compared_with_its_parallelism_and_phase() -> None:
    run = _run(first_closing=3, rescale_extra_ms=0.0, merges=3)
    applied = {a["applied_epoch"] for a in run["acks"]}
    for m in run["epochs"]:  # no steady epoch at 4 merges
        counts = m["operators"]["counts"]
        if counts["instances"] == 4 and not counts["rows_out"] and m["epoch"] not in applied:
            counts["state_bytes_read"] = 0
            m["batch_duration_ms"] = 400.0
    figures = vsn_figures(run)
    assert "p=4 merging" not in figures["context"]["vsn_median_epoch_ms_by_kind"]
    # Rescales to 4 landing on a merge compare with all of 4's steady non-closing epochs.
    assert figures["rescale_epoch_vs_same_parallelism_max"] == (400.0 + MERGE_EXTRA_MS) / 400.0


def test_a_rescale_that_costs_more_is_measured_as_such() -> None:
    figures = vsn_figures(_run(first_closing=6, rescale_extra_ms=150.0))
    # 150 ms over 300 to 800 ms steady epochs: 1.19 to 1.5.
    assert 1.18 < figures["rescale_epoch_vs_same_parallelism"] <= 1.5
    assert figures["context"]["rescale_epoch_excess_ms"] == [150] * len(STEPS)


def test_the_steady_p99_is_that_of_the_parallelisms_rescaled_to() -> None:
    run = _run(first_closing=6, rescale_extra_ms=150.0)
    figures = vsn_figures(run)
    # The slowest steady epoch at 8, 3 or 4 is one at 8 that closes the windows; the 2
    # instances the run starts with are no parallelism a rescale went to.
    assert figures["steady_epoch_s_p99"] == (800.0 + CLOSING_EXTRA_MS) / 1000.0
    for m in run["epochs"]:
        if m["operators"]["counts"]["instances"] == 2:
            m["batch_duration_ms"] = 5000.0
    assert vsn_figures(run)["steady_epoch_s_p99"] == (800.0 + CLOSING_EXTRA_MS) / 1000.0


def test_without_a_steady_epoch_of_the_same_kind_the_figures_say_so() -> None:
    run = _run(first_closing=1, rescale_extra_ms=0.0)  # the rise to 8 closes windows
    run["epochs"] = [m for m in run["epochs"] if not (
        m["operators"]["counts"]["instances"] == 8 and m["operators"]["counts"]["rows_out"]
        and m["epoch"] not in {a["applied_epoch"] for a in run["acks"]})]
    with pytest.raises(ValueError, match="no steady epoch to compare"):
        vsn_figures(run)


def test_the_schedule_spreads_the_steps_over_the_window_cycle() -> None:
    starts = [step_epoch(i) for i in range(len(STEPS))]
    assert starts[0] == WARMUP and starts[1] - starts[0] == FIRST_STEP
    assert {b - a for a, b in zip(starts[1:], starts[2:], strict=False)} == {EPOCHS_PER_STEP}
    for parallelism in (3, 4):
        phases = {s % 10 for s, p in zip(starts, STEPS, strict=True) if p == parallelism}
        assert len(phases) >= 5
