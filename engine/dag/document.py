"""Reading the raw JSON shape of a DAG document into operators and edges.

Every shape problem is collected; well-formed parts are kept so that later checks can
still report what else is wrong with the document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.dag.model import DEFAULT_KEY_GROUPS, Edge, Operator
from engine.dag.syntax import OPERATOR_ID
from engine.errors import Problem

MAX_KEY_GROUPS = 32768
MAX_OPERATORS = 500
MAX_EDGES = 2000
MAX_NAME_LENGTH = 200
MAX_ID_LENGTH = 64


@dataclass
class RawDocument:
    """The well-formed parts of a DAG document and the problems found reading it."""

    name: str = "unnamed"
    key_groups: int = DEFAULT_KEY_GROUPS
    operators: list[Operator] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    declared_ids: set[str] = field(default_factory=set)


def read_document(doc: Any) -> RawDocument:
    """Read name, key_groups, operators and edges; collect every shape problem."""
    raw = RawDocument()
    if not isinstance(doc, Mapping):
        raw.problems.append(Problem("document", f"must be a JSON object, got {_kind(doc)}"))
        return raw
    _read_header(doc, raw)
    operators = doc.get("operators")
    if isinstance(operators, list) and len(operators) > MAX_OPERATORS:
        raw.problems.append(Problem("document", f"has {len(operators)} operators, at most "
                                                f"{MAX_OPERATORS} are allowed"))
        return raw
    _read_operators(operators, raw)
    _read_edges(doc.get("edges", []), raw)
    return raw


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _read_header(doc: Mapping[str, Any], raw: RawDocument) -> None:
    name = doc.get("name", raw.name)
    if not isinstance(name, str) or not name.strip():
        raw.problems.append(Problem("document", f"'name' must be a non-empty string, got {name!r}"))
    elif len(name) > MAX_NAME_LENGTH or not name.isprintable():
        raw.problems.append(Problem("document", f"'name' must be at most {MAX_NAME_LENGTH} "
                                                "printable characters"))
    else:
        raw.name = name
    key_groups = doc.get("key_groups", DEFAULT_KEY_GROUPS)
    if not _is_int(key_groups) or not 1 <= key_groups <= MAX_KEY_GROUPS:
        raw.problems.append(Problem("document", f"'key_groups' must be an integer in "
                                                f"1..{MAX_KEY_GROUPS}, got {key_groups!r}"))
    else:
        raw.key_groups = key_groups


def _read_operators(items: Any, raw: RawDocument) -> None:
    if not isinstance(items, list):
        raw.problems.append(Problem("document", "'operators' must be a non-empty list"))
        return
    if not items:
        raw.problems.append(Problem("document", "the job has no operators: add a source, the "
                                                "operators and a sink"))
        return
    seen: set[str] = set()
    for index, item in enumerate(items):
        op = _read_operator(index, item, raw)
        if op is None:
            continue
        if op.id in seen:
            raw.problems.append(Problem(f"operator {op.id!r}", "duplicate operator id"))
            continue
        seen.add(op.id)
        raw.operators.append(op)


def _read_operator(index: int, item: Any, raw: RawDocument) -> Operator | None:
    if not isinstance(item, Mapping):
        raw.problems.append(Problem(f"operator #{index + 1}",
                                    f"must be an object, got {_kind(item)}"))
        return None
    op_id = item.get("id")
    if not isinstance(op_id, str) or not OPERATOR_ID.match(op_id) or len(op_id) > MAX_ID_LENGTH:
        shown = op_id if not isinstance(op_id, str) else op_id[:MAX_ID_LENGTH + 1]
        raw.problems.append(Problem(
            f"operator #{index + 1}",
            f"'id' must match [a-z][a-z0-9_]*, got {shown!r}"
            + (f" (at most {MAX_ID_LENGTH} characters)"
               if isinstance(op_id, str) and len(op_id) > MAX_ID_LENGTH else "")))
        return None
    raw.declared_ids.add(op_id)
    where = f"operator {op_id!r}"
    op_type, params = item.get("type"), item.get("params", {})
    parallelism = item.get("parallelism", 1)
    ok = True
    if not isinstance(op_type, str) or not op_type:
        raw.problems.append(Problem(where, f"'type' must be a string, got {op_type!r}"))
        ok = False
    if not isinstance(params, Mapping):
        raw.problems.append(Problem(where, f"'params' must be an object, got {_kind(params)}"))
        ok = False
    if not _is_int(parallelism) or parallelism < 1:
        raw.problems.append(Problem(where, f"parallelism must be an integer >= 1, "
                                           f"got {parallelism!r}"))
        parallelism = 1
    elif parallelism > raw.key_groups:
        raw.problems.append(Problem(
            where, f"parallelism {parallelism} is above key_groups ({raw.key_groups})"))
    if not ok or not isinstance(op_type, str):
        return None
    return Operator(id=op_id, type=op_type, params=params, parallelism=parallelism)


def _read_edges(items: Any, raw: RawDocument) -> None:
    if not isinstance(items, list):
        raw.problems.append(Problem("document", f"'edges' must be a list, got {_kind(items)}"))
        return
    if len(items) > MAX_EDGES:
        raw.problems.append(Problem("document", f"has {len(items)} edges, at most {MAX_EDGES} "
                                                "are allowed"))
        return
    known = {op.id for op in raw.operators}
    seen: set[Edge] = set()
    for index, item in enumerate(items):
        edge = _read_edge(index, item, raw, known)
        if edge is None:
            continue
        if edge in seen:
            raw.problems.append(Problem(f"edge {edge}", "duplicate edge"))
            continue
        seen.add(edge)
        raw.edges.append(edge)


def _read_edge(index: int, item: Any, raw: RawDocument, known: set[str]) -> Edge | None:
    if not isinstance(item, Mapping):
        raw.problems.append(Problem(f"edge #{index + 1}", f"must be an object, got {_kind(item)}"))
        return None
    source, target = item.get("from"), item.get("to")
    if not isinstance(source, str) or not isinstance(target, str):
        raw.problems.append(Problem(
            f"edge #{index + 1}", f"needs string 'from' and 'to', got {source!r} -> {target!r}"))
        return None
    edge = Edge(source, target)
    ok = True
    for end in (source, target) if source != target else (source,):
        if end not in raw.declared_ids:
            raw.problems.append(Problem(f"edge {edge}", f"unknown operator {end!r}"))
            ok = False
        elif end not in known:
            ok = False  # the operator itself is malformed and already reported
    if source == target and ok:
        raw.problems.append(Problem(f"edge {edge}", "self loop: an operator cannot feed itself"))
        ok = False
    return edge if ok else None


DOCUMENT_ORDER = ("name", "key_groups", "operators", "edges")
OPERATOR_ORDER = ("id", "type", "parallelism", "params")
EDGE_ORDER = ("from", "to")


def document_in_order(doc: Any) -> Any:
    """A copy of a DAG document with its keys in reading order (name, operators, edges; an
    operator's id and type first; an edge's ``from`` before ``to``), whatever order a store
    gave them back in (PostgreSQL's jsonb keeps keys shortest first). Anything else keeps its
    place after the known keys; values are left as they are."""
    if not isinstance(doc, Mapping):
        return doc
    shown = _in_order(doc, DOCUMENT_ORDER)
    if isinstance(shown.get("operators"), list):
        shown["operators"] = [_in_order(o, OPERATOR_ORDER) if isinstance(o, Mapping) else o
                              for o in shown["operators"]]
    if isinstance(shown.get("edges"), list):
        shown["edges"] = [_in_order(e, EDGE_ORDER) if isinstance(e, Mapping) else e
                          for e in shown["edges"]]
    return shown


def _in_order(item: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    known = {k: item[k] for k in order if k in item}
    return {**known, **{k: v for k, v in item.items() if k not in known}}
