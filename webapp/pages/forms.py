"""Form posts turned into the request bodies the services take, so pages and the API share one
set of rules (the services check every field and name the one that is wrong)."""

from __future__ import annotations

import json
from typing import Any

from django.http import QueryDict

WHOLE_NUMBER_FIELDS = ("parallelism", "instances", "to_reconfiguration", "to_version")
TEXT_FIELDS = ("kind", "operator", "reason", "request_id")


def reconfiguration_body(data: QueryDict) -> dict[str, Any]:
    """A reconfiguration request from a form: numbers as numbers, blanks left out."""
    body: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        value = data.get(name, "").strip()
        if value:
            body[name] = value
    for name in WHOLE_NUMBER_FIELDS:
        value = data.get(name, "").strip()
        if value:
            body[name] = _whole_number(value)
    if body.get("kind") == "rebalance":
        body.setdefault("assignment", "weighted")
    return body


def autoscale_body(data: QueryDict) -> dict[str, Any]:
    """The autoscaler's settings from its form; a bound the form leaves out stays as it is,
    an emptied ``max`` means no bound but the job's key groups."""
    body: dict[str, Any] = {"mode": data.get("mode", "")}
    for name in ("min", "max", "cooldown_s"):
        value = data.get(name, "").strip()
        if value:
            body[name] = _whole_number(value)
        elif name == "max" and name in data:
            body[name] = None
        elif name in data:
            body[name] = ""  # an emptied required bound: the service names it
    return body


def _whole_number(value: str) -> int | str:
    # A non-number stays text so the service's message names the field.
    try:
        return int(value)
    except ValueError:
        return value


# A param's text in the logic-change form, as the editor writes it (static/js/params.js):
# mappings one "name: value" a line, lists comma-separated, other values as typed.
MAPPING_KINDS = ("expressions", "aggregates", "schema")
LIST_KINDS = ("columns", "string_list", "stream_names")
PARAM_FIELD = "param."


def param_text(kind: str, value: Any) -> str:
    """The text a form field shows for a param's value (empty when left out)."""
    if value is None:
        return ""
    if kind in MAPPING_KINDS and isinstance(value, dict):
        return "\n".join(f"{k}: {v}" for k, v in value.items())
    if kind in LIST_KINDS and isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def param_value(kind: str, text: str) -> Any:
    """The document value of a field's text; None means "leave the param out". Text that is
    not of the kind stays text, so the validator's message names the param."""
    raw = text.strip()
    if not raw:
        return None
    if kind in ("positive_int", "int"):
        return _whole_number(raw)
    if kind == "non_negative_float":
        try:
            return float(raw)
        except ValueError:
            return raw
    if kind in ("stream_start", "sequence_start") and raw.startswith("{"):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    if kind in LIST_KINDS:
        return [part.strip() for part in raw.split(",") if part.strip()]
    if kind in MAPPING_KINDS:
        pairs = (line.split(":", 1) for line in raw.splitlines() if ":" in line)
        return {name.strip(): value.strip() for name, value in pairs if name.strip()}
    return raw


def logic_body(data: QueryDict, fields: list[dict[str, Any]]) -> dict[str, Any]:
    """A logic change from its form: the operator, the reason, and every param of the
    operator's catalog entry read from its field (``param.<name>``), blanks left out."""
    body = reconfiguration_body(data)
    body["kind"] = "logic"
    params = {}
    for field in fields:
        value = param_value(field["kind"], data.get(PARAM_FIELD + field["name"], ""))
        if value is not None:
            params[field["name"]] = value
    body["params"] = params
    return body


def param_widget(kind: str) -> dict[str, Any]:
    """How a param of ``kind`` is typed: a textarea for mappings, a number field (with its
    lower bound and step) for numbers, a text field otherwise."""
    if kind in MAPPING_KINDS:
        return {"tag": "textarea"}
    if kind in ("positive_int", "int"):
        return {"tag": "input", "type": "number", "step": "1",
                "min": "1" if kind == "positive_int" else None}
    if kind == "non_negative_float":
        return {"tag": "input", "type": "number", "step": "any", "min": "0"}
    return {"tag": "input", "type": "text"}
