"""Measured per-operator rates (DESIGN.md section 4) and their checks against a graph."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from engine.dag.catalog import OPERATOR_TYPES
from engine.dag.model import JobGraph
from engine.errors import Problem, RatesError

FIELDS = ("input_rate", "processing_rate", "output_rate")


@dataclass(frozen=True)
class OperatorRates:
    """Rows per second of one operator, all instances together.

    ``processing_rate`` is the true processing rate (rows per busy second); sources
    have no ``input_rate`` and may omit ``processing_rate``.
    """

    input_rate: float | None
    processing_rate: float | None
    output_rate: float

    def selectivity(self) -> float:
        """Output rows per processed row: ``output / min(input, processing)`` (1 if unknown)."""
        bases = [r for r in (self.input_rate, self.processing_rate) if r is not None]
        base = min(bases) if bases else 0.0
        return self.output_rate / base if base > 0 else 1.0

    def scaled(self, factor: float) -> OperatorRates:
        """Processing and output rates projected by ``factor`` (more or fewer instances)."""
        processing = None if self.processing_rate is None else self.processing_rate * factor
        return replace(self, processing_rate=processing, output_rate=self.output_rate * factor)

    def to_dict(self) -> dict[str, float]:
        """JSON form (fields that are unknown are left out)."""
        values = zip(FIELDS, (self.input_rate, self.processing_rate, self.output_rate),
                     strict=True)
        return {name: value for name, value in values if value is not None}


RatesView = Mapping[str, OperatorRates]
"""Read-only view of rates by operator id, as the policies take them."""


class Rates(dict[str, OperatorRates]):
    """Rates by operator id (a plain dict with a parser for the rates document)."""

    @classmethod
    def from_json(cls, doc: Any, graph: JobGraph) -> Rates:
        """Parse a rates document for ``graph`` (see ``parse_rates``)."""
        return parse_rates(doc, graph)


def parse_rates(doc: Any, graph: JobGraph) -> Rates:
    """Rates for every operator of ``graph``; RatesError with every problem otherwise.

    Problems name unknown operator ids, operators without rates, missing fields and
    negative or non-numeric values. Unknown fields inside an entry are ignored.
    """
    if not isinstance(doc, Mapping):
        raise RatesError([Problem("rates", "must be a JSON object of operator id -> rates")])
    problems: list[Problem] = []
    known = set(graph.operator_ids())
    for op_id in doc:
        if op_id not in known:
            problems.append(Problem(f"rates of operator {op_id!r}",
                                    "unknown operator id (not in the job graph)"))
    rates = Rates()
    for op in graph.operators:
        where = f"rates of operator {op.id!r}"
        if op.id not in doc:
            problems.append(Problem(where, "missing (every operator needs rates)"))
            continue
        is_source = op.type in OPERATOR_TYPES and OPERATOR_TYPES[op.type].role == "source"
        parsed = _parse_entry(doc[op.id], is_source, where, problems)
        if parsed is not None:
            rates[op.id] = parsed
    if problems:
        raise RatesError(problems)
    return rates


def _parse_entry(entry: Any, is_source: bool, where: str,
                 problems: list[Problem]) -> OperatorRates | None:
    if not isinstance(entry, Mapping):
        problems.append(Problem(where, "must be an object with input_rate, processing_rate "
                                       "and output_rate"))
        return None
    values: dict[str, float | None] = {}
    ok = True
    for name in FIELDS:
        value = entry.get(name)
        optional = is_source and name != "output_rate"
        if value is None:
            if not optional:
                problems.append(Problem(where, f"missing field {name!r}"))
                ok = False
            values[name] = None
        elif isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            problems.append(Problem(where, f"{name!r} must be a number, got {value!r}"))
            ok = False
        elif value < 0:
            problems.append(Problem(where, f"{name!r} must be >= 0, got {value!r}"))
            ok = False
        else:
            values[name] = float(value)
    if not ok:
        return None
    output = values["output_rate"]
    assert output is not None
    return OperatorRates(values["input_rate"], values["processing_rate"], output)
