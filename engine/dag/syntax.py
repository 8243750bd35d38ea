"""Light syntax checks for the strings of a DAG document: intervals, expressions, names."""

from __future__ import annotations

import re

_UNIT_SECONDS = {
    "millisecond": 0.001,
    "second": 1.0,
    "minute": 60.0,
    "hour": 3600.0,
    "day": 86400.0,
    "week": 604800.0,
}
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*\Z", re.IGNORECASE)
# \Z, not $: "$" also matches before a trailing newline.
OPERATOR_ID = re.compile(r"^[a-z][a-z0-9_]*\Z")
COLUMN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}\Z")  # no schema: sinks write theirs
AGGREGATE = re.compile(r"^\s*(count|sum|min|max|avg)\s*\(\s*(\*|[A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$",
                       re.IGNORECASE)


MIN_INTERVAL_SECONDS = 0.001
MAX_INTERVAL_SECONDS = 366 * 86400.0


def interval_seconds(text: str) -> float | None:
    """Seconds in an interval like "10 seconds" or "1 minute"; None if malformed or outside
    1 millisecond .. 366 days."""
    if len(text) > 40:
        return None
    match = _INTERVAL.match(text)
    if match is None:
        return None
    unit = match.group(2).lower()
    if unit not in _UNIT_SECONDS:
        return None
    seconds = float(match.group(1)) * _UNIT_SECONDS[unit]
    return seconds if MIN_INTERVAL_SECONDS <= seconds <= MAX_INTERVAL_SECONDS else None


def parse_aggregate(text: str) -> tuple[str, str] | None:
    """(function, column or "*") of an aggregate like "sum(amount)", or None."""
    match = AGGREGATE.match(text)
    if match is None:
        return None
    function, column = match.group(1).lower(), match.group(2)
    if column == "*" and function != "count":
        return None
    return function, column
