"""Assignments of key groups to operator instances (the VSN mapping M)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.errors import MappingError


@dataclass(frozen=True)
class Assignment:
    """Owner instance of every key group: ``owners[kg]`` is in ``range(parallelism)``."""

    key_groups: int
    owners: tuple[int, ...]
    parallelism: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "owners", tuple(self.owners))
        if self.key_groups < 1 or self.parallelism < 1:
            raise MappingError("key_groups and parallelism must be >= 1")
        if len(self.owners) != self.key_groups:
            raise MappingError(f"{len(self.owners)} owners for {self.key_groups} key groups")
        bad = [o for o in self.owners if not 0 <= o < self.parallelism]
        if bad:
            raise MappingError(f"owner {bad[0]} outside instances 0..{self.parallelism - 1}")

    def owner(self, key_group: int) -> int:
        """The instance that owns ``key_group``."""
        return self.owners[key_group]

    def key_groups_of(self, instance: int) -> tuple[int, ...]:
        """The key groups owned by ``instance``, ascending."""
        return tuple(kg for kg, owner in enumerate(self.owners) if owner == instance)

    def ranges(self) -> list[tuple[int, int, int]]:
        """Maximal runs ``(first_kg, last_kg, instance)`` of equal owners, ascending."""
        runs: list[tuple[int, int, int]] = []
        for kg, owner in enumerate(self.owners):
            if runs and runs[-1][2] == owner and runs[-1][1] == kg - 1:
                runs[-1] = (runs[-1][0], kg, owner)
            else:
                runs.append((kg, kg, owner))
        return runs

    def to_dict(self) -> dict[str, object]:
        """JSON form: key_groups, parallelism and owners."""
        return {"key_groups": self.key_groups, "parallelism": self.parallelism,
                "owners": list(self.owners)}


def balanced_assignment(key_groups: int, parallelism: int) -> Assignment:
    """Contiguous ranges of (almost) equal size: ``instance = kg * parallelism // key_groups``."""
    _check_sizes(key_groups, parallelism)
    owners = tuple(kg * parallelism // key_groups for kg in range(key_groups))
    return Assignment(key_groups=key_groups, owners=owners, parallelism=parallelism)


def weighted_assignment(loads: Sequence[float], parallelism: int) -> Assignment:
    """Contiguous ranges whose summed loads are as even as possible.

    ``loads[kg]`` is the observed load of key group kg (rows/s, busy time...). Each
    instance gets at least one key group; cut points sit where the running load is
    closest to the instance's fair share. Without any load it is the balanced assignment.
    """
    key_groups = len(loads)
    _check_sizes(key_groups, parallelism)
    if any(load < 0 for load in loads):
        raise MappingError("key-group loads must be >= 0")
    total = float(sum(loads))
    if total <= 0:
        return balanced_assignment(key_groups, parallelism)
    prefix = [0.0]
    for load in loads:
        prefix.append(prefix[-1] + load)
    cuts = [0]
    for instance in range(1, parallelism):
        lowest = cuts[-1] + 1
        highest = key_groups - (parallelism - instance)
        goal = total * instance / parallelism
        cuts.append(min(range(lowest, highest + 1), key=lambda c: (abs(prefix[c] - goal), c)))
    cuts.append(key_groups)
    owners = tuple(i for i in range(parallelism) for _ in range(cuts[i], cuts[i + 1]))
    return Assignment(key_groups=key_groups, owners=owners, parallelism=parallelism)


def _check_sizes(key_groups: int, parallelism: int) -> None:
    if key_groups < 1:
        raise MappingError(f"key_groups must be >= 1, got {key_groups}")
    if not 1 <= parallelism <= key_groups:
        raise MappingError(f"parallelism must be in 1..{key_groups}, got {parallelism}")
