"""Whether new params of a keyed operator can continue from its stored state: the one rule
the web application (before it records a logic change) and the driver (before it applies
one) both ask."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from engine.runtime.errors import StreamRuntimeError
from engine.runtime.operators.dedupe import change_refused as dedupe_change_refused
from engine.runtime.operators.dedupe import parse_dedupe_spec
from engine.runtime.operators.join import change_refused as join_change_refused
from engine.runtime.operators.join import parse_join_spec
from engine.runtime.operators.window_spec import parse_window_spec, state_compatible


class KeyedSpec(NamedTuple):
    """How to read a keyed operator's params, and why new params cannot continue from its
    stored state (None when they can)."""

    parse: Callable[[str, Mapping[str, Any]], Any]
    refused: Callable[[Any, Any], str | None]


KEYED_SPECS: dict[str, KeyedSpec] = {
    "window_aggregate": KeyedSpec(parse_window_spec, state_compatible),
    "dedupe": KeyedSpec(parse_dedupe_spec, dedupe_change_refused),
    "join": KeyedSpec(parse_join_spec, join_change_refused),
}


def logic_change_refused(
    op_type: str, op_id: str, old_params: Mapping[str, Any], new_params: Mapping[str, Any]
) -> str | None:
    """None if a keyed operator of ``op_type`` may switch from ``old_params`` to
    ``new_params`` while it runs (e.g. a new watermark, a join's bound narrowed), else the
    reason it may not: new params that do not parse, or that would leave its stored state
    meaningless (another key, window shape, time column or aggregate)."""
    if op_type not in KEYED_SPECS:
        return f"{op_id!r} ({op_type}): logic changes need a restart"
    parse, refused = KEYED_SPECS[op_type]
    try:
        old, new = parse(op_id, old_params), parse(op_id, new_params)
    except StreamRuntimeError as exc:
        return str(exc)
    return refused(old, new)
