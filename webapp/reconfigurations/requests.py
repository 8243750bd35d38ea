"""The body of a reconfiguration request, checked field by field; errors name the field."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any

from webapp.errors import ServiceError
from webapp.jobs.models import ReconfigurationKind as Kind

REASON_REQUIRED = {Kind.RESCALE, Kind.SCALE_OUT, Kind.SCALE_IN, Kind.ROLLBACK}
MAX_REASON = 2000
MAX_ID = 2**63 - 1
MAX_INSTANCES = 32768  # the most key groups a job may have
SUPPORTED = [Kind.RESCALE, Kind.SCALE_OUT, Kind.SCALE_IN, Kind.REBALANCE, Kind.LOGIC, Kind.ROLLBACK]


@dataclass(frozen=True)
class ReconfigurationRequest:
    kind: str
    request_id: str
    reason: str
    operator: str | None = None
    parallelism: int | None = None
    instances: int | None = None
    assignment: Any = None
    params: dict[str, Any] | None = None
    to_reconfiguration: int | None = None
    to_version: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def parse_request(body: Any) -> ReconfigurationRequest:
    if not isinstance(body, dict):
        raise _bad("body", "must be a JSON object")
    kind = _field(body, "kind", str)
    if kind not in SUPPORTED:
        raise _bad("kind", f"must be one of {', '.join(SUPPORTED)}")
    reason = _field(body, "reason", str, required=kind in REASON_REQUIRED, default="").strip()
    if kind in REASON_REQUIRED and not reason:
        raise _bad("reason", f"is required for {kind}: say why")
    if len(reason) > MAX_REASON or "\x00" in reason:
        raise _bad("reason", f"must be at most {MAX_REASON} characters, without NUL")
    request_id = _field(body, "request_id", str, required=False) or uuid.uuid4().hex
    if len(request_id) > 100 or not request_id.strip() or not request_id.isprintable():
        raise _bad("request_id", "must be 1 to 100 printable characters")
    return ReconfigurationRequest(kind=kind, request_id=request_id, reason=reason,
                                  **_kind_fields(kind, body))


def _kind_fields(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    if kind == Kind.RESCALE:
        parallelism = _field(body, "parallelism", int)
        if abs(parallelism) > MAX_INSTANCES:
            raise _bad("parallelism", f"must be a whole number from 1 to {MAX_INSTANCES}")
        return {"operator": _field(body, "operator", str), "parallelism": parallelism}
    if kind in (Kind.SCALE_OUT, Kind.SCALE_IN):
        instances = _field(body, "instances", int)
        if not 1 <= instances <= MAX_INSTANCES:
            raise _bad("instances", f"must be a whole number from 1 to {MAX_INSTANCES}")
        return {"instances": instances}
    if kind == Kind.REBALANCE:
        assignment = body.get("assignment", "weighted")
        if assignment != "weighted" and not isinstance(assignment, list):
            raise _bad("assignment", "must be 'weighted' or a list of owners per key group")
        return {"operator": _field(body, "operator", str), "assignment": assignment}
    if kind == Kind.LOGIC:
        return {"operator": _field(body, "operator", str), "params": _field(body, "params", dict)}
    to_reconfiguration = _field(body, "to_reconfiguration", int, required=False)
    to_version = _field(body, "to_version", int, required=False)
    for name, value in (("to_reconfiguration", to_reconfiguration), ("to_version", to_version)):
        if value is not None and not 1 <= value <= MAX_ID:
            raise _bad(name, "must be an id of at least 1")
    if (to_reconfiguration is None) == (to_version is None):
        raise _bad("to_reconfiguration", "give exactly one of to_reconfiguration or to_version")
    return {"to_reconfiguration": to_reconfiguration, "to_version": to_version}


def _field(body: dict[str, Any], name: str, kind: type, *, required: bool = True, default=None):
    if name not in body or body[name] is None:
        if required:
            raise _bad(name, "is required")
        return default
    value = body[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _bad(name, f"must be {'a whole number' if kind is int else kind.__name__}")
    return value


def _bad(name: str, message: str) -> ServiceError:
    return ServiceError(f"field {name!r} {message}",
                        problems=[{"where": f"field {name}", "message": message}])
