"""Side-by-side comparison of two job versions: what changed in the plan, and the documents
line by line."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from webapp import engine_gateway


@dataclass(frozen=True)
class DiffRow:
    """One line pair; `tag` is equal, replace, delete (left only) or insert (right only)."""

    tag: str
    left_number: int | None
    left: str
    right_number: int | None
    right: str


def document_lines(document: dict[str, Any]) -> list[str]:
    return json.dumps(document, indent=2, sort_keys=False).splitlines()


def side_by_side(left: dict[str, Any], right: dict[str, Any]) -> list[DiffRow]:
    a, b = document_lines(left), document_lines(right)
    rows: list[DiffRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            li, ri = i1 + k, j1 + k
            rows.append(DiffRow(
                tag=tag,
                left_number=li + 1 if li < i2 else None, left=a[li] if li < i2 else "",
                right_number=ri + 1 if ri < j2 else None, right=b[ri] if ri < j2 else "",
            ))
    return rows


def plan_changes(left: dict[str, Any], right: dict[str, Any]) -> list[dict[str, Any]]:
    """The planner's view of the change (logic, resources, workload), or empty if either
    document does not plan."""
    try:
        return engine_gateway.plan_diff(left, right).get("changes", [])
    except Exception:  # noqa: BLE001 - the line diff still shows the change
        return []
