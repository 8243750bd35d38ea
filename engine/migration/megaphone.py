"""Megaphone-style stepwise migration of key groups between instances.

Where state must really travel (instances that do not share a store), key groups move in
steps; within a step every instance sends at most one key group and receives at most
one, and each step finishes before the next starts, so no instance stalls for long.
The moves form a bipartite multigraph (senders x receivers); a proper edge colouring of
it with as many colours as its largest degree (König's theorem) gives the fewest steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from engine.mapping.assignment import Assignment
from engine.mapping.diff import Move, assignment_diff

_Node = tuple[str, int]  # ("send", instance) or ("recv", instance)


@dataclass(frozen=True)
class MigrationStep:
    """Moves executed together; no instance sends or receives more than one of them."""

    moves: tuple[Move, ...]

    def __iter__(self) -> Iterator[Move]:
        return iter(self.moves)

    def __len__(self) -> int:
        return len(self.moves)

    def to_dict(self) -> list[dict[str, int]]:
        """JSON form: the list of moves."""
        return [m.to_dict() for m in self.moves]


def plan_migration(old: Assignment, new: Assignment) -> list[MigrationStep]:
    """Steps that move every key group whose owner changes exactly once.

    The number of steps equals the largest number of key groups any one instance has to
    send or receive, which is the least possible.
    """
    moves = assignment_diff(old, new).moves
    colour_of = _edge_colouring(moves)
    steps: dict[int, list[Move]] = {}
    for move, colour in zip(moves, colour_of, strict=True):
        steps.setdefault(colour, []).append(move)
    return [MigrationStep(tuple(sorted(steps[c], key=lambda m: m.key_group)))
            for c in sorted(steps)]


def _edge_colouring(moves: tuple[Move, ...]) -> list[int]:
    """A proper edge colouring of the sender/receiver multigraph with max-degree colours."""
    at: dict[_Node, dict[int, int]] = {}  # node -> colour -> index of the move using it
    colours: list[int] = [-1] * len(moves)
    for index, move in enumerate(moves):
        sender, receiver = ("send", move.from_instance), ("recv", move.to_instance)
        at.setdefault(sender, {})
        at.setdefault(receiver, {})
        a = _free_colour(at[sender])
        b = _free_colour(at[receiver])
        if a not in at[receiver]:
            b = a
        else:
            # Swap colours a/b along the alternating path from the receiver, freeing a there.
            _flip_path(moves, colours, at, receiver, a, b)
        colours[index] = a
        at[sender][a] = index
        at[receiver][a] = index
    return colours


def _free_colour(used: dict[int, int]) -> int:
    colour = 0
    while colour in used:
        colour += 1
    return colour


def _ends(move: Move) -> tuple[_Node, _Node]:
    return ("send", move.from_instance), ("recv", move.to_instance)


def _flip_path(moves: tuple[Move, ...], colours: list[int], at: dict[_Node, dict[int, int]],
               start: _Node, a: int, b: int) -> None:
    """Swap colours a and b on the path that starts at ``start`` with an a-coloured edge.

    The graph is bipartite and a is free at the sender of the edge being coloured, so the
    path never reaches that sender; after the swap a is free at both of its ends.
    """
    path: list[int] = []
    node, colour = start, a
    while colour in at[node]:
        edge = at[node][colour]
        path.append(edge)
        first, second = _ends(moves[edge])
        node = second if node == first else first
        colour = b if colour == a else a
    for edge in path:
        for end in _ends(moves[edge]):
            if at[end].get(colours[edge]) == edge:
                del at[end][colours[edge]]
    for edge in path:
        colours[edge] = b if colours[edge] == a else a
        for end in _ends(moves[edge]):
            at[end][colours[edge]] = edge
