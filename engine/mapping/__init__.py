"""VSN mapping: key groups of keys, key-group -> instance assignments and their diffs."""

from engine.mapping.assignment import Assignment, balanced_assignment, weighted_assignment
from engine.mapping.diff import AssignmentDiff, Move, apply_diff, assignment_diff
from engine.mapping.key_groups import key_group_of
from engine.mapping.xxhash64 import spark_xxhash64

__all__ = [
    "Assignment",
    "AssignmentDiff",
    "Move",
    "apply_diff",
    "assignment_diff",
    "balanced_assignment",
    "key_group_of",
    "spark_xxhash64",
    "weighted_assignment",
]
