"""An epoch's plan and outcome, as the driver logs them in the run's epoch log.

The plan is fixed before the epoch runs, so a replayed epoch (after a crash) runs it again;
the outcome is what the epoch observed that the next plan needs. Reading a malformed one
raises ``MalformedPlan`` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.runtime.control.messages import Ack
from engine.runtime.control.run_config import OperatorConfig, RunConfig
from engine.runtime.errors import MalformedPlan
from engine.runtime.io.taken import SourceTake, take_from_json


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochPlan:
    """What epoch ``epoch`` runs, fixed before it runs."""

    epoch: int
    config: RunConfig = field(hash=False)
    """Every operator's configuration in force: parallelism, key-group owners, params."""
    sources: Mapping[str, SourceTake] = field(hash=False)
    """What the epoch takes of each source."""
    watermarks: Mapping[str, int | None] = field(hash=False)
    """Each keyed operator's watermark (event time, microseconds; None: none yet)."""
    closes: Mapping[str, bool] = field(hash=False)
    """Whether each window aggregate's watermark may pass a window's end in this epoch."""
    cursor: str | None
    """The control channel's position after the commands this plan applies."""
    acks: tuple[Ack, ...] = ()
    """The commands picked up for this epoch: applied in it, or rejected."""
    stop: bool = False
    """Whether the run stops after this epoch (a stop command)."""
    graph: str | None = None
    """The digest of the job graph the plan was made for: a run started again on a new
    version of its job sees that a logged plan is another graph's (None: not recorded)."""

    def to_json(self) -> dict[str, Any]:
        """The epoch log's form."""
        return {
            "epoch": self.epoch,
            "config": {op: c.to_dict() for op, c in self.config.items()},
            "sources": {op: part.to_json() for op, part in self.sources.items()},
            "watermarks": dict(self.watermarks),
            "closes": dict(self.closes),
            "cursor": self.cursor,
            "acks": [ack.to_dict() for ack in self.acks],
            "stop": self.stop,
            "graph": self.graph,
        }

    @classmethod
    def from_json(cls, doc: object) -> EpochPlan:
        """Inverse of ``to_json``; ``MalformedPlan`` names the field that is wrong."""
        plan = _object(doc, "plan")
        return cls(
            epoch=_int(_required(plan, "epoch"), "epoch"),
            config={op: _operator_config(c, f"config.{op}")
                    for op, c in _section(plan, "config").items()},
            sources={op: take_from_json(part, f"sources.{op}")
                     for op, part in _section(plan, "sources").items()},
            watermarks={op: None if w is None else _int(w, f"watermarks.{op}") for op, w in
                        _section(plan, "watermarks").items()},
            closes={op: _bool(c, f"closes.{op}")
                    for op, c in _section(plan, "closes").items()},
            cursor=_optional_str(plan.get("cursor"), "cursor"),
            acks=tuple(_ack(a, f"acks[{i}]") for i, a in enumerate(_list(plan.get("acks", []),
                                                                          "acks"))),
            stop=_bool(plan.get("stop", False), "stop"),
            graph=_optional_str(plan.get("graph"), "graph"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochOutcome:
    """What an epoch observed that the next plan needs: each keyed operator's newest event
    time (microseconds; None: no row) and its rows per key group (the loads a weighted
    rebalance weighs)."""

    max_event_us: Mapping[str, int | None] = field(default_factory=dict, hash=False)
    kg_rows: Mapping[str, list[int]] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        """The epoch log's form."""
        return {"max_event_us": dict(self.max_event_us), "kg_rows": dict(self.kg_rows)}

    @classmethod
    def from_json(cls, doc: object) -> EpochOutcome:
        """Inverse of ``to_json``; ``MalformedPlan`` names the field that is wrong."""
        outcome = _object(doc, "outcome")
        seen = _object(outcome.get("max_event_us", {}), "max_event_us")
        loads = _object(outcome.get("kg_rows", {}), "kg_rows")
        return cls(
            max_event_us={op: None if v is None else _int(v, f"max_event_us.{op}")
                          for op, v in seen.items()},
            kg_rows={op: [_int(n, f"kg_rows.{op}") for n in _list(rows, f"kg_rows.{op}")]
                     for op, rows in loads.items()},
        )


def _required(doc: Mapping[str, Any], key: str, within: str = "") -> object:
    if key not in doc:
        raise MalformedPlan(f"{within}{'.' if within else ''}{key} is missing")
    return doc[key]


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return _object(_required(doc, key), key)


def _object(value: object, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedPlan(f"{name} must be an object, got {value!r:.200}")
    return value


def _list(value: object, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise MalformedPlan(f"{name} must be a list, got {value!r:.200}")
    return value


def _int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedPlan(f"{name} must be an integer, got {value!r:.200}")
    return value


def _bool(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise MalformedPlan(f"{name} must be true or false, got {value!r:.200}")
    return value


def _optional_str(value: object, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise MalformedPlan(f"{name} must be a string or null, got {value!r:.200}")
    return value


def _operator_config(value: object, name: str) -> OperatorConfig:
    doc = _object(value, name)
    parallelism = _int(_required(doc, "parallelism", name), f"{name}.parallelism")
    owners = doc.get("owners")
    if owners is not None:
        owners = tuple(_int(o, f"{name}.owners") for o in _list(owners, f"{name}.owners"))
    params = _object(_required(doc, "params", name), f"{name}.params")
    return OperatorConfig(parallelism, owners, dict(params))


def _ack(value: object, name: str) -> Ack:
    doc = _object(value, name)
    for key in ("request_id", "kind", "operator", "status"):
        _required(doc, key, name)
    if doc["status"] not in ("applied", "rejected"):
        raise MalformedPlan(f"{name}.status must be applied or rejected, got {doc['status']!r}")
    return Ack.from_dict(doc)
