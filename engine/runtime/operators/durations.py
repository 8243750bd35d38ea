"""Parses the duration strings of job graphs ("10 seconds", "500 ms", "1 minute")."""

from __future__ import annotations

import re

from engine.runtime.errors import UnsupportedJobError

_UNITS_US = {
    "microsecond": 1,
    "millisecond": 1_000,
    "ms": 1_000,
    "second": 1_000_000,
    "s": 1_000_000,
    "sec": 1_000_000,
    "minute": 60_000_000,
    "min": 60_000_000,
    "hour": 3_600_000_000,
    "h": 3_600_000_000,
    "day": 86_400_000_000,
}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*$")


def parse_duration_us(text: str, where: str) -> int:
    """Microseconds in ``text``; ``where`` names the param in the error."""
    match = _PATTERN.match(str(text).lower())
    unit = match and (_UNITS_US.get(match.group(2)) or _UNITS_US.get(match.group(2) + "s"))
    if not match or not unit:
        raise UnsupportedJobError(f"{where}: cannot read duration {text!r}")
    return int(float(match.group(1)) * unit)
