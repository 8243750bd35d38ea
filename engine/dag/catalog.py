"""The catalog of operator types: roles, params, state kind and selectivity.

The planner reads the state kind (may the operator run with several instances?) and the
selectivity (how output order can be restored); validation reads the param schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from engine.dag.model import JobGraph

Role = Literal["source", "operator", "sink"]
StateKind = Literal["stateless", "keyed", "global"]
Selectivity = Literal["exactly_one", "at_most_one", "any"]

ParamKind = Literal[
    "positive_int",  # int > 0
    "int",
    "non_negative_float",
    "string",
    "identifier",  # SQL table name: [A-Za-z_][A-Za-z0-9_]* (optionally schema.table)
    "expression",  # Spark SQL expression
    "interval",  # "10 seconds"
    "columns",  # list of column names
    "column",  # one column name
    "expressions",  # mapping column -> Spark SQL expression
    "aggregates",  # mapping name -> count(*) | count(c) | sum(c) | min(c) | max(c) | avg(c)
    "schema",  # mapping column -> type name
    "string_list",
    "file_format",  # json | csv | parquet
]


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of an operator type."""

    name: str
    kind: ParamKind
    required: bool = False
    default: Any = None
    doc: str = ""


@dataclass(frozen=True)
class OperatorType:
    """A catalog entry: what an operator type is, what it needs and how it may scale.

    ``state_kind`` is the kind for the usual params; ``window_aggregate`` with an empty
    ``key`` list is a global aggregate (see ``engine.dag.state.state_kind_of``).
    ``inputs`` is the exact number of inputs required, or None for "one or more".
    """

    name: str
    role: Role
    state_kind: StateKind
    selectivity: Selectivity
    params: tuple[ParamSpec, ...] = ()
    inputs: int | None = None
    doc: str = ""
    key_param: str | None = field(default=None)

    def param(self, name: str) -> ParamSpec | None:
        """The spec of a param, or None if the type has no such param."""
        return next((p for p in self.params if p.name == name), None)

    def defaults(self) -> dict[str, Any]:
        """Default values of the optional params that have one."""
        return {p.name: p.default for p in self.params if p.default is not None}


GENERATOR_SCHEMA: Mapping[str, str] = {
    "event_id": "long",
    "event_time": "timestamp",
    "campaign_id": "long",
    "user_id": "long",
    "event_type": "string",
    "amount": "double",
}
RATE_SCHEMA: Mapping[str, str] = {"timestamp": "timestamp", "value": "long"}
COLUMN_TYPES = frozenset(
    {"string", "long", "int", "integer", "double", "float", "boolean", "timestamp", "date",
     "binary", "short", "byte", "decimal", "bigint", "smallint", "tinyint"}
)


def _p(name: str, kind: ParamKind, required: bool = False, default: Any = None,
       doc: str = "") -> ParamSpec:
    return ParamSpec(name=name, kind=kind, required=required, default=default, doc=doc)


_SOURCES = (
    OperatorType(
        "source.generator", "source", "stateless", "any",
        params=(
            _p("rows_per_second", "positive_int", required=True, doc="rows emitted per second"),
            _p("keys", "positive_int", default=1000, doc="distinct campaign_id values"),
            _p("skew", "non_negative_float", default=0.0, doc="Zipf-like exponent; 0 = uniform"),
            _p("seed", "int", default=0, doc="random seed; same seed, same rows"),
            _p("event_types", "string_list", doc="subset of view, click, purchase"),
        ),
        inputs=0,
        doc="Deterministic, replayable synthetic events with event time and skewable keys.",
    ),
    OperatorType(
        "source.rate", "source", "stateless", "any",
        params=(_p("rows_per_second", "positive_int", required=True),),
        inputs=0,
        doc="Spark's rate source: (timestamp, value) rows at a fixed rate.",
    ),
    OperatorType(
        "source.files", "source", "stateless", "any",
        params=(
            _p("path", "string", required=True),
            _p("format", "file_format", required=True),
            _p("schema", "schema", doc="column -> type; needed for column checks downstream"),
        ),
        inputs=0,
        doc="New files of a directory (JSON, CSV or Parquet).",
    ),
)

_OPERATORS = (
    OperatorType(
        "filter", "operator", "stateless", "at_most_one",
        params=(_p("condition", "expression", required=True),),
        doc="Keeps the rows for which the Spark SQL condition is true.",
    ),
    OperatorType(
        "map", "operator", "stateless", "exactly_one",
        params=(_p("columns", "expressions", required=True),),
        doc="Adds or replaces columns, each computed by a Spark SQL expression; "
        "the other input columns pass through.",
    ),
    OperatorType(
        "window_aggregate", "operator", "keyed", "any",
        params=(
            _p("key", "columns", doc="group-by columns; omitted or [] = one global group"),
            _p("time", "column", required=True, doc="event-time column (timestamp)"),
            _p("window", "interval", required=True),
            _p("slide", "interval", doc="sliding windows; omitted = tumbling"),
            _p("watermark", "interval"),
            _p("aggregates", "aggregates", required=True),
        ),
        key_param="key",
        doc="Tumbling or sliding event-time windows per key, with a watermark.",
    ),
    OperatorType(
        "join", "operator", "keyed", "any",
        params=(
            _p("key", "columns", required=True),
            _p("time", "column", required=True),
            _p("within", "interval", required=True),
            _p("watermark", "interval"),
        ),
        inputs=2,
        key_param="key",
        doc="Windowed stream-stream inner join of exactly two inputs on equal keys, "
        "with event times at most `within` apart. The first edge into it is the left input; "
        "rows carry the left columns, then the right columns the left does not have.",
    ),
    OperatorType(
        "dedupe", "operator", "keyed", "at_most_one",
        params=(
            _p("key", "columns", required=True),
            _p("time", "column", required=True),
            _p("within", "interval", required=True),
            _p("watermark", "interval"),
        ),
        key_param="key",
        doc="Drops rows whose key was already seen within the time bound.",
    ),
)

_SINKS = (
    OperatorType(
        "sink.postgres", "sink", "stateless", "exactly_one",
        params=(_p("table", "identifier", required=True),),
        doc="Writes rows to a PostgreSQL table, committing with the epoch id.",
    ),
    OperatorType(
        "sink.files", "sink", "stateless", "exactly_one",
        params=(_p("path", "string", required=True), _p("format", "file_format", required=True)),
        doc="Writes rows as files into a directory.",
    ),
    OperatorType(
        "sink.memory", "sink", "stateless", "exactly_one",
        params=(_p("name", "identifier"),),
        doc="Keeps rows in memory for inspection and tests.",
    ),
)

OPERATOR_TYPES: dict[str, OperatorType] = {t.name: t for t in (*_SOURCES, *_OPERATORS, *_SINKS)}
"""Every operator type the engine knows, by name."""



def output_columns(graph: JobGraph) -> dict[str, dict[str, str]]:
    """Column -> type of every operator's output (see ``engine.dag.schema``)."""
    # Imported here because the schema inference itself reads this catalog.
    from engine.dag.schema import output_columns as infer

    return infer(graph)


# Sinks whose output is read in arrival order: parallel regions feeding them merge by
# sequence number so the sink sees the sequential order.
ORDER_SENSITIVE_SINKS = frozenset({"sink.files", "sink.memory"})
