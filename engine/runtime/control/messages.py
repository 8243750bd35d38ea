"""The messages between the web application and a run's driver, one definition for both sides.

A ``CommandRequest`` states the configuration an operator should run at (its parallelism, its
key groups' owners, or its params); it travels as a Redis stream entry, a flat mapping of
strings (``to_message`` / ``from_message``)::

    request_id, kind (rescale | rebalance | logic | sample | stop), operator, requested_at
    (epoch ms) and, by kind: parallelism (int), assignment (JSON list of owners per key
    group, or "weighted" for a load-weighted assignment), params (JSON object)

A ``sample`` changes nothing: it asks for up to ``SAMPLE_ROWS`` rows the operator emits, from
the next epoch on, which its ack carries (``RowSample``).

The driver picks it up as a ``Command`` (the request, where it sat on the channel and when it
was taken) and answers with an ``Ack``, whose JSON (``to_dict`` / ``from_dict``) the epoch
log keeps and the host records. No Spark here: the web application imports this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, cast, get_args

from engine.runtime.errors import CommandRejected

CommandKind = Literal["rescale", "rebalance", "logic", "sample", "stop"]
KINDS: tuple[CommandKind, ...] = get_args(CommandKind)
WORKLOAD_KINDS = frozenset({"rescale", "rebalance"})
"""Commands that change only who owns which key groups."""

Assignment = tuple[int, ...] | Literal["weighted"]
"""An owner per key group, or "weighted": owners the driver chooses by observed load."""

AckStatus = Literal["applied", "rejected"]

SAMPLE_ROWS = 20
"""The most rows a sample keeps of an operator's output."""

WireFields = Mapping[str, str] | Mapping[bytes, bytes]
"""A stream entry as a client reads it (decoded or not)."""


@dataclass(frozen=True, kw_only=True)
class CommandRequest:
    """A reconfiguration as the web application sends it: the target configuration of one
    operator (``stop`` names none). Construction checks that the kind's target is stated;
    ``CommandRejected`` names what is missing."""

    kind: CommandKind
    operator: str | None
    request_id: str
    requested_at_ms: float
    parallelism: int | None = None
    assignment: Assignment | None = None
    params: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise CommandRejected(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind != "stop" and not self.operator:
            raise CommandRejected("operator is required")
        if not self.request_id:
            raise CommandRejected("request_id is required")
        if self.kind == "rescale" and not _is_int(self.parallelism):
            raise CommandRejected(f"parallelism must be an integer, got {self.parallelism!r}")
        if self.kind == "rebalance" and not _is_assignment(self.assignment):
            raise CommandRejected("assignment must be a list of integers (owner per key group) "
                                  "or 'weighted'")
        if self.kind == "logic" and not isinstance(self.params, Mapping):
            raise CommandRejected("params must be a JSON object")

    def to_message(self) -> dict[str, str]:
        """The wire form: a flat mapping of strings (a Redis stream entry)."""
        message = {"request_id": self.request_id, "kind": self.kind,
                   "requested_at": f"{self.requested_at_ms:.3f}"}
        if self.operator is not None:
            message["operator"] = self.operator
        if self.parallelism is not None:
            message["parallelism"] = str(self.parallelism)
        if self.assignment is not None:
            message["assignment"] = (self.assignment if self.assignment == "weighted"
                                     else json.dumps(list(self.assignment)))
        if self.params is not None:
            message["params"] = json.dumps(dict(self.params))
        return message

    @classmethod
    def from_message(
        cls, fields: WireFields, *, cursor: str | None = None, received_at_ms: float | None = None
    ) -> CommandRequest:
        """The request a wire message states; ``CommandRejected`` names what is malformed.
        A message without a request id is named after its ``cursor``, one without a request
        time is taken as requested when received (``received_at_ms``)."""
        text = _decoded(fields)
        request_id = text.get("request_id") or (f"anonymous-{cursor}" if cursor else "")
        kind = text.get("kind")
        if kind not in KINDS:
            raise CommandRejected(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        return CommandRequest(
            kind=cast(CommandKind, kind),
            operator=text.get("operator"),
            request_id=request_id,
            requested_at_ms=_requested_at(text.get("requested_at"), received_at_ms),
            parallelism=_parallelism(text.get("parallelism")) if kind == "rescale" else None,
            assignment=_assignment(text.get("assignment")) if kind == "rebalance" else None,
            params=_params(text.get("params")) if kind == "logic" else None,
        )


@dataclass(frozen=True, kw_only=True)
class Command(CommandRequest):
    """A request as the driver picked it up: after ``cursor`` on the channel, at
    ``picked_up_at_ms``."""

    cursor: str
    picked_up_at_ms: float

    @classmethod
    def picked_up(cls, fields: WireFields, cursor: str, picked_up_at_ms: float) -> Command:
        """The command of a wire message taken now; ``CommandRejected`` names what is
        malformed."""
        request = CommandRequest.from_message(fields, cursor=cursor,
                                              received_at_ms=picked_up_at_ms)
        return cls(**vars(request), cursor=cursor, picked_up_at_ms=picked_up_at_ms)

    @property
    def control_latency_ms(self) -> float:
        """Request to pick-up, in milliseconds."""
        return max(0.0, self.picked_up_at_ms - self.requested_at_ms)


@dataclass(frozen=True)
class RowSample:
    """Rows an operator emitted in one epoch, at most ``SAMPLE_ROWS``: its column names and
    each row's values as JSON takes them (times as ISO text, other types as their text)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"columns": list(self.columns), "rows": [list(row) for row in self.rows]}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RowSample:
        """Inverse of ``to_dict``."""
        return cls(tuple(doc.get("columns") or ()), tuple(tuple(r) for r in doc.get("rows") or ()))


@dataclass(frozen=True, kw_only=True)
class Ack:
    """What became of a command: ``applied`` in ``applied_epoch`` or ``rejected`` for
    ``reason``, the operator's configuration ``before`` and ``after`` it and, for an applied
    one, when the first epoch run with it ended (stamped once it ended)."""

    request_id: str
    kind: str | None
    operator: str | None
    status: AckStatus
    reason: str | None = None
    applied_epoch: int | None = None
    requested_at_ms: float | None = None
    picked_up_at_ms: float | None = None
    control_latency_ms: float | None = None
    state_bytes_copied: int | None = None
    before: Mapping[str, Any] = field(default_factory=dict, hash=False)
    after: Mapping[str, Any] = field(default_factory=dict, hash=False)
    epoch_ended_at_ms: float | None = None
    sample: RowSample | None = None

    @classmethod
    def of(
        cls,
        command: Command,
        *,
        epoch: int | None,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        reason: str | None = None,
        state_bytes_copied: int | None = None,
    ) -> Ack:
        """The ack of a picked-up command: applied in ``epoch``, or rejected for ``reason``."""
        return cls(
            request_id=command.request_id, kind=command.kind, operator=command.operator,
            status="rejected" if reason is not None else "applied", reason=reason,
            applied_epoch=epoch if reason is None else None,
            requested_at_ms=command.requested_at_ms, picked_up_at_ms=command.picked_up_at_ms,
            control_latency_ms=round(command.control_latency_ms, 3),
            state_bytes_copied=state_bytes_copied, before=before, after=after,
        )

    @classmethod
    def malformed(
        cls, fields: Mapping[str, str], *, cursor: str, reason: str, picked_up_at_ms: float
    ) -> Ack:
        """The rejection of a message that does not state a command."""
        return cls(
            request_id=fields.get("request_id") or f"anonymous-{cursor}",
            kind=fields.get("kind"), operator=fields.get("operator"), status="rejected",
            reason=reason, picked_up_at_ms=picked_up_at_ms,
        )

    def ended(self, at_ms: float | None) -> Ack:
        """An applied ack stamped with when its epoch ended; others unchanged."""
        if self.status != "applied" or at_ms is None:
            return self
        return replace(self, epoch_ended_at_ms=round(at_ms, 3))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the epoch log, the host's record)."""
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        doc["before"], doc["after"] = dict(self.before), dict(self.after)
        doc["sample"] = None if self.sample is None else self.sample.to_dict()
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Ack:
        """Inverse of ``to_dict``; a field an older writer left out takes its default."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in doc.items() if k in names}
        known["before"], known["after"] = dict(doc.get("before") or {}), dict(
            doc.get("after") or {})
        if known.get("sample") is not None:
            known["sample"] = RowSample.from_dict(known["sample"])
        return cls(**known)


def _decoded(fields: WireFields) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in fields.items()}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_assignment(value: object) -> bool:
    return value == "weighted" or (isinstance(value, tuple) and all(map(_is_int, value)))


def _requested_at(text: str | None, received_at_ms: float | None) -> float:
    if not text:
        if received_at_ms is None:
            raise CommandRejected("requested_at is required")
        return received_at_ms
    try:
        return float(text)
    except ValueError as exc:
        raise CommandRejected("requested_at must be a number of epoch milliseconds") from exc


def _parallelism(text: str | None) -> int:
    try:
        return int(str(text))
    except ValueError as exc:
        raise CommandRejected(f"parallelism must be an integer, got {text!r}") from exc


def _assignment(text: str | None) -> Assignment:
    if text in (None, "", "weighted"):
        return "weighted"
    try:
        owners = json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise CommandRejected("assignment must be a JSON list of owners or 'weighted'") from exc
    if not isinstance(owners, list) or not all(map(_is_int, owners)):
        raise CommandRejected("assignment must be a JSON list of integers (owner per key group)")
    return tuple(owners)


def _params(text: str | None) -> dict[str, Any]:
    try:
        params = json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise CommandRejected("params must be a JSON object") from exc
    if not isinstance(params, dict):
        raise CommandRejected("params must be a JSON object")
    return params
