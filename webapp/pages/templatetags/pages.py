"""Small template helpers for the pages."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """`mapping|get_item:key`: a dict value by a variable key (None when absent)."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def rate(value: Any) -> str:
    """Rows per second in a compact form: 950, 12.3k, 1.20M."""
    if value is None or value == "":
        return "—"
    value = float(value)
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


@register.filter
def duration_ms(value: Any) -> str:
    """Milliseconds as every page shows them (charts.js formatMs): "640 ms" below 10 s,
    "92.9 s" from there."""
    if value is None or value == "":
        return "—"
    value = float(value)
    return f"{value / 1000:.1f} s" if value >= 10_000 else f"{value:.0f} ms"


@register.filter
def figure_text(value: Any, unit: str) -> str:
    """A figure of a prediction or a measurement by its unit: rate (rows/s), drain (seconds;
    None: the backlog grows), etp (0 to 1) or text."""
    if unit == "drain":
        # As the scale preview says it.
        return "never (it grows)" if value is None else f"{float(value):g} s"
    if value is None:
        return "—"
    if unit == "rate":
        return f"{rate(value)}/s"
    return f"{float(value):.2f}" if unit == "etp" else str(value)


@register.filter
def first_line(text: Any) -> str:
    """The first non-empty line of a text (a failure cause's headline)."""
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


@register.filter
def problem_text(problem: Any) -> str:
    """A service's problem as a sentence: "Reason is required", "Instances: at most 3 ..."
    for a field, else the message alone (capitalised)."""
    if not isinstance(problem, dict):
        return str(problem or "")
    where, message = str(problem.get("where", "")), str(problem.get("message", ""))
    if where.startswith("field "):
        field = where.removeprefix("field ").replace("_", " ").capitalize()
        # "is required", "must be ..." read on from the field's name; anything else is a
        # sentence of its own about the field.
        joint = " " if message.startswith(("is ", "must ", "already ")) else ": "
        return f"{field}{joint}{message}"
    if where in ("", "request"):
        return message[:1].upper() + message[1:]
    return f"{where[:1].upper()}{where[1:]}: {message}"
