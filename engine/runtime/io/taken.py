"""What an epoch's plan takes of one source, fixed before the epoch runs: a clock source's
row-id range, a directory's new files, a broker's offset range. Pure data, no Spark: the
planner takes (``streams.take``), the epoch reads (``streams.source_rows``); their JSON
forms (``to_json``) are the epoch log's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.runtime.errors import MalformedPlan

Offset = dict[str, Any]
"""A broker offset: ``{"op": <source>, "streams": {<stream>: {"id": <last entry id read>,
"n": <entries up to it>}}}``."""


@dataclass(frozen=True, slots=True)
class ClockRange:
    """Row ids ``[first, end)`` of a clock source (generator, rate)."""

    first: int
    end: int

    @property
    def count(self) -> int:
        """Rows in the range."""
        return self.end - self.first

    def to_json(self) -> list[int]:
        """``[first, end]``."""
        return [self.first, self.end]


@dataclass(frozen=True, slots=True)
class FilesTaken:
    """The new files of a directory source, by path."""

    files: tuple[str, ...]

    @property
    def count(self) -> int:
        """Files taken."""
        return len(self.files)

    def to_json(self) -> dict[str, list[str]]:
        """``{"files": [...]}``."""
        return {"files": list(self.files)}


@dataclass(frozen=True, slots=True)
class EntriesTaken:
    """A broker source's entries after ``start`` up to ``end`` in each stream."""

    start: Offset
    end: Offset

    @property
    def count(self) -> int:
        """Entries in the range, over every stream."""
        start, end = self.start["streams"], self.end["streams"]
        return sum(int(end[s]["n"]) - int(start.get(s, {"n": 0})["n"]) for s in end)

    def to_json(self) -> dict[str, Offset]:
        """``{"start": offset, "end": offset}``."""
        return {"start": _copy(self.start), "end": _copy(self.end)}


@dataclass(frozen=True, slots=True)
class SequencesTaken:
    """A NATS JetStream source's messages after ``start`` up to ``end`` in each stream, by
    stream sequence (``{"streams": {<stream>: {"seq": <last sequence read>}}}``)."""

    start: Offset
    end: Offset

    @property
    def count(self) -> int:
        """Sequences the range spans, over every stream (its messages, unless some were
        deleted)."""
        start, end = self.start["streams"], self.end["streams"]
        return sum(int(end[s]["seq"]) - int(start.get(s, {"seq": 0})["seq"]) for s in end)

    def to_json(self) -> dict[str, Any]:
        """``{"by": "sequence", "start": offset, "end": offset}``."""
        return {"by": "sequence", "start": _copy(self.start), "end": _copy(self.end)}


SourceTake = ClockRange | FilesTaken | EntriesTaken | SequencesTaken


def take_from_json(doc: object, field: str) -> SourceTake:
    """The take ``doc`` states; ``MalformedPlan`` naming ``field`` when it states none."""
    if isinstance(doc, list):
        if len(doc) == 2 and all(map(_is_int, doc)):
            return ClockRange(doc[0], doc[1])
        raise MalformedPlan(f"{field} must be a clock source's [first, end] row ids, "
                            f"got {doc!r:.200}")
    if isinstance(doc, Mapping) and "files" in doc:
        files = doc["files"]
        if isinstance(files, list) and all(isinstance(name, str) for name in files):
            return FilesTaken(tuple(files))
        raise MalformedPlan(f"{field}.files must be a list of paths, got {files!r:.200}")
    if isinstance(doc, Mapping) and doc.get("by") == "sequence":
        return SequencesTaken(_offset(doc.get("start"), f"{field}.start", _SEQUENCE),
                              _offset(doc.get("end"), f"{field}.end", _SEQUENCE))
    if isinstance(doc, Mapping) and "start" in doc and "end" in doc:
        return EntriesTaken(_offset(doc["start"], f"{field}.start"),
                            _offset(doc["end"], f"{field}.end"))
    raise MalformedPlan(f'{field} must be [first, end] row ids, {{"files": [...]}} or '
                        f'{{"start": offset, "end": offset}}, got {doc!r:.200}')


def _entry(position: object) -> bool:
    return (isinstance(position, Mapping) and isinstance(position.get("id"), str)
            and _is_int(position.get("n")))


def _sequence(position: object) -> bool:
    return isinstance(position, Mapping) and _is_int(position.get("seq"))


_ENTRY = (_entry, '{"id": <entry id>, "n": <entries>}')
_SEQUENCE = (_sequence, '{"seq": <stream sequence>}')


def _offset(doc: object, field: str,
            form: tuple[Callable[[object], bool], str] = _ENTRY) -> Offset:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("streams"), Mapping):
        raise MalformedPlan(f"{field}.streams must be an object of stream positions")
    valid, shape = form
    for stream, position in doc["streams"].items():
        if not valid(position):
            raise MalformedPlan(f"{field}.streams.{stream} must be {shape}, "
                                f"got {position!r:.200}")
    return _copy(doc)


def _copy(offset: Mapping[str, Any]) -> Offset:
    """An offset of its own: a plan shares none with the document it is read from."""
    return {**offset, "streams": {s: dict(p) for s, p in offset["streams"].items()}}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
