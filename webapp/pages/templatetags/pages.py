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
def first_line(text: Any) -> str:
    """The first non-empty line of a text (a failure cause's headline)."""
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""
