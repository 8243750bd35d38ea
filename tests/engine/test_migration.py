"""Megaphone-style migration plans."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.mapping import Assignment, assignment_diff, balanced_assignment
from engine.migration import plan_migration
from tests.engine.builders import assignments


def test_scale_out_from_two_to_four() -> None:
    old, new = balanced_assignment(8, 2), balanced_assignment(8, 4)
    steps = plan_migration(old, new)
    moved = sorted(m.key_group for step in steps for m in step.moves)
    assert moved == [m.key_group for m in assignment_diff(old, new).moves]
    # Instance 1 hands four key groups to instances 2 and 3: four steps at least.
    assert len(steps) == 4
    assert all(len(step.moves) <= 2 for step in steps)


def test_nothing_to_move() -> None:
    assert plan_migration(balanced_assignment(8, 2), balanced_assignment(8, 2)) == []


@settings(max_examples=150)
@given(st.integers(1, 64).flatmap(lambda k: st.tuples(assignments(k), assignments(k))))
def test_steps_respect_one_per_sender_and_receiver(pair: tuple[Assignment, Assignment]) -> None:
    old, new = pair
    diff = assignment_diff(old, new)
    steps = plan_migration(old, new)
    moves = [m for step in steps for m in step.moves]
    assert sorted(moves, key=lambda m: m.key_group) == list(diff.moves)  # each exactly once
    for step in steps:
        assert step.moves
        assert len({m.from_instance for m in step.moves}) == len(step.moves)
        assert len({m.to_instance for m in step.moves}) == len(step.moves)
    degrees = Counter(m.from_instance for m in diff.moves) + Counter(
        ("in", m.to_instance) for m in diff.moves)
    assert len(steps) == max(degrees.values(), default=0)  # the fewest steps possible


def test_steps_iterate_over_their_moves() -> None:
    [step] = plan_migration(balanced_assignment(4, 1), balanced_assignment(4, 2))[:1]
    assert list(step) == list(step.moves)
    assert len(step) == 1
