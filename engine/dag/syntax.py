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
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*$", re.IGNORECASE)
OPERATOR_ID = re.compile(r"^[a-z][a-z0-9_]*$")
COLUMN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
AGGREGATE = re.compile(r"^\s*(count|sum|min|max|avg)\s*\(\s*(\*|[A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$",
                       re.IGNORECASE)


def interval_seconds(text: str) -> float | None:
    """Seconds in an interval like "10 seconds" or "1 minute"; None if malformed or <= 0."""
    match = _INTERVAL.match(text)
    if match is None:
        return None
    unit = match.group(2).lower()
    if unit not in _UNIT_SECONDS:
        return None
    seconds = float(match.group(1)) * _UNIT_SECONDS[unit]
    return seconds if seconds > 0 else None


def expression_problem(text: str) -> str | None:
    """Why a Spark SQL expression is malformed, or None if it looks well formed.

    Without a SQL parser this checks what breaks most hand-written expressions:
    emptiness, unbalanced parentheses, unterminated quotes and dangling operators.
    """
    if not text.strip():
        return "expression is empty"
    depth = 0
    quote: str | None = None
    for char in text:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return "unbalanced parentheses: ')' without '('"
    if quote is not None:
        return f"unterminated quote {quote}"
    if depth > 0:
        return "unbalanced parentheses: '(' without ')'"
    return _dangling_operator(text)


def _dangling_operator(text: str) -> str | None:
    stripped = _without_literals(text).strip()
    if re.search(r"(=|<|>|\+|-|\*|/|%|,|\bAND|\bOR|\bNOT)$", stripped, re.IGNORECASE):
        return "expression ends with an operator"
    if re.match(r"^(=|<|>|\*|/|%|,|AND\b|OR\b)", stripped, re.IGNORECASE):
        return "expression starts with an operator"
    if re.search(r"\(\s*\)", stripped) and not re.search(r"\w\s*\(\s*\)", stripped):
        return "empty parentheses"
    return None


def _without_literals(text: str) -> str:
    return re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "x", text)


def parse_aggregate(text: str) -> tuple[str, str] | None:
    """(function, column or "*") of an aggregate like "sum(amount)", or None."""
    match = AGGREGATE.match(text)
    if match is None:
        return None
    function, column = match.group(1).lower(), match.group(2)
    if column == "*" and function != "count":
        return None
    return function, column
