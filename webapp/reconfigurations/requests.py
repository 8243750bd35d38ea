"""The body of a reconfiguration request: one typed model per kind, so the API validates it
(and documents it) before any service runs; errors name the field.

The pages send the same bodies as plain dicts: ``parse_request`` validates those with the same
models, so both paths refuse the same requests with the same words.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter

from webapp.jobs.models import ReconfigurationKind as Kind
from webapp.validation import refusal, refusal_of

REASON_REQUIRED = {Kind.RESCALE, Kind.SCALE_OUT, Kind.SCALE_IN, Kind.ROLLBACK}
MAX_REASON = 2000
MAX_ID = 2**63 - 1
MAX_INSTANCES = 32768  # the most key groups a job may have
MAX_REQUEST_ID = 100
# The id an undelivered request's record takes when a retry reuses its own (the services).
RELEASED_REQUEST_ID = "undelivered:"
SUPPORTED = [Kind.RESCALE, Kind.SCALE_OUT, Kind.SCALE_IN, Kind.REBALANCE, Kind.LOGIC, Kind.ROLLBACK]


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value.strip()


def _said(value: str) -> str:
    if not value:
        raise ValueError("is required for this kind of change: say why")
    return value


def _request_id(value: str | None) -> str | None:
    if value is not None and (not value.strip() or not value.isprintable()):
        raise ValueError(f"must be 1 to {MAX_REQUEST_ID} printable characters")
    if value is not None and value.startswith(RELEASED_REQUEST_ID):
        raise ValueError(f"must not start with {RELEASED_REQUEST_ID!r}, kept for requests "
                         "that could not be delivered")
    return value


def _assignment(value: Any) -> Any:
    owners = isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)
    if value != "weighted" and not owners:
        raise ValueError("must be 'weighted' or a list of owners (whole numbers) per key group")
    return value


OptionalReason = Annotated[str, Field(max_length=MAX_REASON), AfterValidator(_no_nul)]
# The schema states what _said checks (a character other than white space), so that a client
# generating bodies from /api/schema sends only reasons the API takes.
Reason = Annotated[OptionalReason, AfterValidator(_said),
                   Field(description="why: shown in the history",
                         json_schema_extra={"minLength": 1, "pattern": r"\S"})]
Instances = Annotated[int, Field(ge=1, le=MAX_INSTANCES)]
OperatorId = Annotated[str, Field(min_length=1, max_length=64)]
RecordId = Annotated[int, Field(ge=1, le=MAX_ID)]


class _Request(BaseModel):
    # A field the body does not define is refused by name: a misspelt one is not ignored.
    model_config = ConfigDict(strict=True, extra="forbid")

    request_id: Annotated[
        str | None, Field(min_length=1, max_length=MAX_REQUEST_ID,
                          description="idempotency key: a repeated request_id is applied once"),
        AfterValidator(_request_id)] = None


class RescaleBody(_Request):
    """Set one operator's number of instances."""

    kind: Literal["rescale"]
    operator: OperatorId
    parallelism: Instances
    reason: Reason


class ScaleBody(_Request):
    """Add or remove instances; the ETP policy picks the operators."""

    kind: Literal["scale_out", "scale_in"]
    instances: Instances
    reason: Reason


class RebalanceBody(_Request):
    """Move key groups between an operator's instances: weighted by load, or as given."""

    kind: Literal["rebalance"]
    operator: OperatorId
    assignment: Annotated[
        Literal["weighted"] | list[Annotated[int, Field(ge=0)]],
        Field(max_length=MAX_INSTANCES, description="'weighted' or the owner of each key group"),
        pydantic.BeforeValidator(_assignment)] = "weighted"
    reason: OptionalReason = ""


class LogicBody(_Request):
    """New params for an operator (state-safe changes only)."""

    kind: Literal["logic"]
    operator: OperatorId
    params: dict[str, Any]
    reason: OptionalReason = ""


class RollbackBody(_Request):
    """Return to the plan before a reconfiguration, or to a version of the job."""

    # The schema says what _one_target checks: exactly one of the two is a number.
    model_config = ConfigDict(strict=True, extra="forbid", json_schema_extra={"oneOf": [
        {"required": [target], "properties": {target: {"type": "integer"}}}
        for target in ("to_reconfiguration", "to_version")]})

    kind: Literal["rollback"]
    to_reconfiguration: RecordId | None = None
    to_version: RecordId | None = None
    reason: Reason

    @pydantic.model_validator(mode="after")
    def _one_target(self) -> RollbackBody:
        if (self.to_reconfiguration is None) == (self.to_version is None):
            raise ValueError("give exactly one of to_reconfiguration or to_version")
        return self


ReconfigurationBody = Annotated[
    RescaleBody | ScaleBody | RebalanceBody | LogicBody | RollbackBody,
    Field(discriminator="kind"),
]
_BODY: TypeAdapter[Any] = TypeAdapter(ReconfigurationBody)


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
    """A request from a validated body model, or from a plain dict (validated here)."""
    if not isinstance(body, BaseModel):
        if not isinstance(body, dict):
            raise refusal([{"where": "body", "message": "must be a JSON object"}])
        try:
            body = _BODY.validate_python(body)
        except pydantic.ValidationError as error:
            raise refusal_of(error, tags=SUPPORTED) from None
    fields = body.model_dump(exclude={"request_id"})
    return ReconfigurationRequest(request_id=body.request_id or uuid.uuid4().hex, **fields)

