"""Builders shared by the pure engine tests: example files, small DAG and rates documents."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from engine.dag import Edge, JobGraph, Operator
from engine.mapping import Assignment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "source.generator": {"rows_per_second": 100},
    "filter": {"condition": "amount > 0"},
    "map": {"columns": {"amount": "amount * 2"}},
    "dedupe": {"key": ["user_id"], "time": "event_time", "within": "1 minute"},
    "sink.memory": {},
    "sink.postgres": {"table": "t"},
}


def load_example(name: str) -> Any:
    """A JSON file of examples/."""
    return json.loads((EXAMPLES / name).read_text())


CAMPAIGN_VIEWS: dict[str, Any] = load_example("campaign_views.json")
"""The DESIGN's and README's example job (copy it before changing it)."""


def document(edges: Iterable[tuple[str, str]], types: Mapping[str, str],
             parallelism: Mapping[str, int] | None = None, **extra: Any) -> dict[str, Any]:
    """A DAG document from edges and operator types (params from DEFAULT_PARAMS)."""
    parallelism = parallelism or {}
    operators = []
    for op_id, op_type in types.items():
        op: dict[str, Any] = {"id": op_id, "type": op_type,
                              "params": copy.deepcopy(DEFAULT_PARAMS.get(op_type, {}))}
        if op_id in parallelism:
            op["parallelism"] = parallelism[op_id]
        operators.append(op)
    doc = {"name": "test", "operators": operators,
           "edges": [{"from": a, "to": b} for a, b in edges]}
    doc.update(extra)
    return doc


def counted_by_window(source: Mapping[str, Any]) -> dict[str, Any]:
    """A job reading ``source`` (id "events", columns "user" and the timestamp "at") that
    counts rows per user in 10-second windows into memory."""
    return {"name": "stream", "operators": [
        dict(source),
        {"id": "counts", "type": "window_aggregate",
         "params": {"key": ["user"], "time": "at", "window": "10 seconds",
                    "aggregates": {"n": "count(*)"}}},
        {"id": "out", "type": "sink.memory"}],
        "edges": [{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}]}


def with_source_params(doc: Mapping[str, Any], **params: Any) -> dict[str, Any]:
    """A copy of ``doc`` whose first operator has ``params`` set (a None value removes one)."""
    changed = copy.deepcopy(dict(doc))
    source = changed["operators"][0]
    source["params"] = {k: v for k, v in {**source["params"], **params}.items() if v is not None}
    return changed


def rates_of(table: Mapping[str, tuple[float | None, float | None, float]]) -> dict[str, Any]:
    """Rates document from op -> (input, processing, output); None leaves a field out."""
    doc: dict[str, Any] = {}
    for op_id, (inp, proc, out) in table.items():
        entry: dict[str, float] = {"output_rate": out}
        if inp is not None:
            entry["input_rate"] = inp
        if proc is not None:
            entry["processing_rate"] = proc
        doc[op_id] = entry
    return doc


@st.composite
def assignments(draw: st.DrawFn, key_groups: int | None = None) -> Assignment:
    """Random assignments (of ``key_groups`` key groups if given)."""
    k = key_groups or draw(st.integers(1, 64))
    p = draw(st.integers(1, k))
    owners = draw(st.lists(st.integers(0, p - 1), min_size=k, max_size=k))
    return Assignment(key_groups=k, owners=tuple(owners), parallelism=p)


MIDDLE_TYPES = ("filter", "map", "window_aggregate", "dedupe", "join", "global_aggregate",
                "mystery")


def _middle_params(kind: str) -> tuple[str, dict[str, Any]]:
    if kind in ("window_aggregate", "global_aggregate"):
        key = ["campaign_id"] if kind == "window_aggregate" else []
        return "window_aggregate", {"key": key, "time": "event_time", "window": "10 seconds",
                                    "aggregates": {"n": "count(*)"}}
    if kind == "join":
        return "join", {"key": ["user_id"], "time": "event_time", "within": "1 minute"}
    if kind == "mystery":
        return "mystery.op", {}
    return kind, copy.deepcopy(DEFAULT_PARAMS[kind])


@st.composite
def random_graphs(draw: st.DrawFn) -> JobGraph:
    """Random acyclic job graphs: sources, a random middle (any types, some unknown), and
    sinks for every dangling operator. They need not pass validation."""
    operators: list[Operator] = []
    edges: list[Edge] = []
    for i in range(draw(st.integers(1, 3))):
        operators.append(Operator(f"s{i}", "source.generator", {"rows_per_second": 10}))
    for i in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(MIDDLE_TYPES))
        op_type, params = _middle_params(kind)
        earlier = [op.id for op in operators]
        wanted = 2 if kind == "join" else draw(st.integers(1, 2))
        parents = draw(st.lists(st.sampled_from(earlier), min_size=1,
                                max_size=min(wanted, len(earlier)), unique=True))
        op_id = f"m{i}"
        operators.append(Operator(op_id, op_type, params, draw(st.integers(1, 4))))
        edges += [Edge(p, op_id) for p in parents]
    with_children = {e.source for e in edges}
    for i, op in enumerate(list(operators)):
        if op.id not in with_children:
            sink_type = draw(st.sampled_from(["sink.memory", "sink.postgres"]))
            operators.append(Operator(f"k{i}", sink_type, DEFAULT_PARAMS[sink_type]))
            edges.append(Edge(op.id, f"k{i}"))
    return JobGraph(name="random", operators=tuple(operators), edges=tuple(edges),
                    key_groups=draw(st.sampled_from([4, 16, 128])))
