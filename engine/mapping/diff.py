"""Differences between two assignments: which key groups change owner."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import MappingError
from engine.mapping.assignment import Assignment


@dataclass(frozen=True)
class Move:
    """Key group ``key_group`` passes from ``from_instance`` to ``to_instance``."""

    key_group: int
    from_instance: int
    to_instance: int

    def to_dict(self) -> dict[str, int]:
        """JSON form with keys key_group, from, to."""
        return {"key_group": self.key_group, "from": self.from_instance, "to": self.to_instance}


@dataclass(frozen=True)
class AssignmentDiff:
    """The moves that turn one assignment into another, and the new parallelism."""

    key_groups: int
    old_parallelism: int
    new_parallelism: int
    moves: tuple[Move, ...]

    @property
    def moved_key_groups(self) -> tuple[int, ...]:
        """Key groups that change owner, ascending."""
        return tuple(m.key_group for m in self.moves)

    def is_empty(self) -> bool:
        """True when nothing moves and the parallelism stays."""
        return not self.moves and self.old_parallelism == self.new_parallelism

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"key_groups": self.key_groups, "old_parallelism": self.old_parallelism,
                "new_parallelism": self.new_parallelism,
                "moves": [m.to_dict() for m in self.moves]}


def assignment_diff(old: Assignment, new: Assignment) -> AssignmentDiff:
    """The key groups whose owner differs between ``old`` and ``new``."""
    if old.key_groups != new.key_groups:
        raise MappingError(f"cannot diff assignments of {old.key_groups} and "
                           f"{new.key_groups} key groups")
    moves = tuple(Move(kg, a, b) for kg, (a, b) in enumerate(zip(old.owners, new.owners,
                                                                    strict=True)) if a != b)
    return AssignmentDiff(key_groups=old.key_groups, old_parallelism=old.parallelism,
                          new_parallelism=new.parallelism, moves=moves)


def apply_diff(old: Assignment, diff: AssignmentDiff) -> Assignment:
    """The assignment ``diff`` leads to from ``old``; MappingError if it does not fit."""
    if old.key_groups != diff.key_groups or old.parallelism != diff.old_parallelism:
        raise MappingError("diff was not computed from this assignment")
    owners = list(old.owners)
    for move in diff.moves:
        if owners[move.key_group] != move.from_instance:
            raise MappingError(f"key group {move.key_group} is owned by "
                               f"{owners[move.key_group]}, not {move.from_instance}")
        owners[move.key_group] = move.to_instance
    return Assignment(key_groups=old.key_groups, owners=tuple(owners),
                      parallelism=diff.new_parallelism)
