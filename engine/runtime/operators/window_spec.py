"""The parsed form of a ``window_aggregate`` operator and its partial aggregates.

Spark pre-aggregates each epoch into partials per (key group, key, window); the VSN stage
merges partials into the stored ones with the same merge operations, and finalises a
window (e.g. avg = sum / count) only when the watermark closes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.runtime.errors import UnsupportedJobError
from engine.runtime.operators.durations import parse_duration_us
from engine.runtime.operators.key_params import KeyedSpec, keyed_params

_AGG = re.compile(r"^\s*(count|sum|min|max|avg)\s*\(\s*(\*|[A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$", re.I)
_MERGE = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}

ROWS = "__rows"
MAX_EVENT = "__max_et"
WINDOW_START = "window_start"
WINDOW_END = "window_end"


@dataclass(frozen=True)
class Partial:
    """One partial column: Spark computes ``func(column)``, the stage merges with ``merge``."""

    name: str
    func: str
    column: str | None
    merge: str


@dataclass(frozen=True)
class Aggregate:
    """One output aggregate and the partial columns it is finalised from."""

    name: str
    func: str
    partials: tuple[str, ...]


@dataclass(frozen=True)
class WindowSpec(KeyedSpec):
    """A keyed event-time window aggregation (tumbling when slide equals window)."""

    window_us: int
    slide_us: int
    aggregates: tuple[Aggregate, ...]
    partials: tuple[Partial, ...]

    @property
    def group_columns(self) -> list[str]:
        """Columns a partial row is identified by inside one key group."""
        return [*self.keys, WINDOW_START, WINDOW_END]


def parse_window_spec(operator: str, params: Mapping[str, Any]) -> WindowSpec:
    """Reads ``window_aggregate`` params; errors name the operator and param."""
    where = f"operator {operator!r}"
    keyed = keyed_params(operator, params)
    window_us = parse_duration_us(params.get("window", ""), f"{where} window")
    slide_us = parse_duration_us(params.get("slide", params["window"]), f"{where} slide")
    aggregates, partials = _parse_aggregates(
        where, params.get("aggregates") or {"count": "count(*)"}
    )
    return WindowSpec(
        **keyed,
        window_us=window_us,
        slide_us=slide_us,
        aggregates=tuple(aggregates),
        partials=tuple(partials),
    )


def _parse_aggregates(
    where: str, specs: Mapping[str, str]
) -> tuple[list[Aggregate], list[Partial]]:
    aggregates: list[Aggregate] = []
    partials: list[Partial] = []
    for i, (name, text) in enumerate(specs.items()):
        match = _AGG.match(str(text))
        if not match:
            raise UnsupportedJobError(
                f"{where}: aggregate {name!r} must be f(column), got {text!r}"
            )
        func, column = match.group(1).lower(), match.group(2)
        column = None if column == "*" else column
        if column is None and func != "count":
            raise UnsupportedJobError(f"{where}: aggregate {name!r}: only count accepts *")
        if func == "avg":
            own = [
                Partial(f"__p{i}s", "sum", column, "sum"),
                Partial(f"__p{i}n", "count", column, "sum"),
            ]
        else:
            own = [Partial(f"__p{i}", func, column, _MERGE[func])]
        partials.extend(own)
        aggregates.append(Aggregate(name, func, tuple(p.name for p in own)))
    return aggregates, partials


def state_compatible(old: WindowSpec, new: WindowSpec) -> str | None:
    """None if ``new`` can continue from ``old``'s state, else the reason it cannot."""
    if old.keys != new.keys:
        return "changing the key would misplace stored state across key groups"
    if (old.window_us, old.slide_us, old.time) != (new.window_us, new.slide_us, new.time):
        return "changing the window or time column would mix windows of different shapes"
    if old.partials != new.partials:
        return "changing the aggregates would merge partials of different functions"
    return None
