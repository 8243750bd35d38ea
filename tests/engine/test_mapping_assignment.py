"""Assignments of key groups to instances and their diffs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import MappingError
from engine.mapping import (
    Assignment,
    apply_diff,
    assignment_diff,
    balanced_assignment,
    weighted_assignment,
)
from tests.engine.builders import assignments


def test_balanced_ranges_follow_the_formula() -> None:
    assignment = balanced_assignment(128, 3)
    assert all(assignment.owner(kg) == kg * 3 // 128 for kg in range(128))
    assert assignment.ranges() == [(0, 42, 0), (43, 85, 1), (86, 127, 2)]


def test_weighted_assignment_isolates_a_hot_key_group() -> None:
    loads = [1.0] * 8
    loads[3] = 10.0
    assignment = weighted_assignment(loads, 3)
    assert assignment.owners == (0, 0, 0, 1, 2, 2, 2, 2)


def test_weighted_without_load_is_balanced() -> None:
    assert weighted_assignment([0.0] * 16, 4) == balanced_assignment(16, 4)


def test_invalid_assignments_rejected() -> None:
    with pytest.raises(MappingError):
        Assignment(key_groups=4, owners=(0, 1, 2), parallelism=3)
    with pytest.raises(MappingError):
        Assignment(key_groups=2, owners=(0, 5), parallelism=2)
    with pytest.raises(MappingError):
        balanced_assignment(4, 5)
    with pytest.raises(MappingError):
        weighted_assignment([1.0, -1.0], 1)


def test_diff_lists_moves() -> None:
    diff = assignment_diff(balanced_assignment(4, 1), balanced_assignment(4, 2))
    assert [(m.key_group, m.from_instance, m.to_instance) for m in diff.moves] == [
        (2, 0, 1), (3, 0, 1)]
    assert diff.new_parallelism == 2


def test_apply_diff_checks_the_base() -> None:
    diff = assignment_diff(balanced_assignment(4, 1), balanced_assignment(4, 2))
    with pytest.raises(MappingError):
        apply_diff(balanced_assignment(4, 2), diff)


sizes = st.integers(1, 64).flatmap(lambda k: st.tuples(st.just(k), st.integers(1, k)))


@given(sizes)
def test_every_key_group_has_one_owner(size: tuple[int, int]) -> None:
    key_groups, parallelism = size
    assignment = balanced_assignment(key_groups, parallelism)
    owned = [kg for i in range(parallelism) for kg in assignment.key_groups_of(i)]
    assert sorted(owned) == list(range(key_groups))
    assert all(assignment.key_groups_of(i) for i in range(parallelism))


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=128), st.data())
def test_weighted_is_contiguous_and_complete(loads: list[float], data: st.DataObject) -> None:
    parallelism = data.draw(st.integers(1, len(loads)))
    assignment = weighted_assignment(loads, parallelism)
    assert list(assignment.owners) == sorted(assignment.owners)
    assert set(assignment.owners) == set(range(parallelism))


@given(st.integers(1, 64).flatmap(lambda k: st.tuples(assignments(k), assignments(k))))
def test_diff_applied_to_old_gives_new(pair: tuple[Assignment, Assignment]) -> None:
    old, new = pair
    diff = assignment_diff(old, new)
    assert apply_diff(old, diff) == new
    assert len(diff.moves) == sum(a != b for a, b in zip(old.owners, new.owners, strict=True))
