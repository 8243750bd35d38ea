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
    "identifier",  # SQL table name: [A-Za-z_][A-Za-z0-9_]*, at most 63 characters
    "expression",  # Spark SQL expression
    "interval",  # "10 seconds"
    "columns",  # list of column names
    "column",  # one column name
    "expressions",  # mapping column -> Spark SQL expression
    "aggregates",  # mapping name -> count(*) | count(c) | sum(c) | min(c) | max(c) | avg(c)
    "schema",  # mapping column -> type name
    "string_list",
    "file_format",  # json | csv | parquet
    "data_path",  # a folder relative to the data folder, without ".."
    "redis_url",  # redis://[user:password@]host[:port][/db], rediss:// or unix://
    "stream_names",  # non-empty list of distinct stream keys
    "stream_start",  # earliest | latest | mapping stream -> entry id
    "stream_payload",  # fields | json
    "nats_url",  # nats://[user:password@]host[:port] or tls://..., or env:NAME
    "sequence_start",  # earliest | latest | mapping stream -> stream sequence to read after
]


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of an operator type."""

    name: str
    kind: ParamKind
    required: bool = False
    default: Any = None
    doc: str = ""
    maximum: float | None = None


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
       doc: str = "", maximum: float | None = None) -> ParamSpec:
    return ParamSpec(name=name, kind=kind, required=required, default=default, doc=doc,
                     maximum=maximum)


def _epoch_cap(items: str) -> ParamSpec:
    """A broker source's cap of ``items`` read per epoch."""
    return _p("max_entries_per_epoch", "positive_int", default=10000,
              doc=f"cap of {items} read per epoch, all streams together", maximum=10_000_000)


def _reconnect_wait(server: str) -> ParamSpec:
    """How long a broker source waits for its unreachable ``server``."""
    return _p("reconnect_seconds", "non_negative_float", default=30.0,
              doc=f"how long to wait for an unreachable {server} before the run fails",
              maximum=3600)


def _source(name: str, *, params: tuple[ParamSpec, ...], doc: str) -> OperatorType:
    # Every source is stateless, has no input, and may emit any number of rows per row read.
    return OperatorType(name, "source", "stateless", "any", params=params, inputs=0, doc=doc)


def _sink(name: str, *, params: tuple[ParamSpec, ...], doc: str) -> OperatorType:
    # Every sink is stateless and writes each row it receives exactly once.
    return OperatorType(name, "sink", "stateless", "exactly_one", params=params, doc=doc)


MAX_ROWS_PER_SECOND = 10_000_000
# The clock-driven sources' cap: what falls due beyond it waits as backlog.
_MAX_ROWS_PER_EPOCH = _p(
    "max_rows_per_epoch", "positive_int",
    doc="cap on rows taken per epoch (default: 2 s of the rate); more due rows wait as backlog")


_SOURCES = (
    _source(
        "source.generator",
        params=(
            _p("rows_per_second", "positive_int", required=True, doc="rows emitted per second",
               maximum=MAX_ROWS_PER_SECOND),
            _p("keys", "positive_int", default=1000, doc="distinct campaign_id values",
               maximum=1_000_000_000),
            _p("skew", "non_negative_float", default=0.0, doc="Zipf-like exponent; 0 = uniform",
               maximum=10.0),
            _p("seed", "int", default=0, doc="random seed; same seed, same rows",
               maximum=2**31 - 1),
            _p("event_types", "string_list", doc="subset of view, click, purchase"),
            _MAX_ROWS_PER_EPOCH,
        ),
        doc="Deterministic, replayable synthetic events with event time and skewable keys.",
    ),
    _source(
        "source.rate",
        params=(
            _p("rows_per_second", "positive_int", required=True, maximum=MAX_ROWS_PER_SECOND),
            _MAX_ROWS_PER_EPOCH,
        ),
        doc="(timestamp, value) rows at a fixed rate, value i due at start + i / rate.",
    ),
    _source(
        "source.files",
        params=(
            _p("path", "data_path", required=True, doc="folder inside the data folder"),
            _p("format", "file_format", required=True),
            # Required: Spark's file stream reads with a given schema (it infers none).
            _p("schema", "schema", required=True, doc="column -> type of the files' rows"),
            _p("max_files_per_trigger", "positive_int", doc="files per epoch; omitted = all new"),
        ),
        doc="New files of a directory (JSON, CSV or Parquet).",
    ),
    _source(
        "source.redis_stream",
        params=(
            _p("url", "redis_url", required=True, doc="the broker; its password is never shown"),
            _p("streams", "stream_names", required=True, doc="stream keys, one partition each"),
            _p("start", "stream_start", default="latest",
               doc="earliest, latest, or {stream: entry id} to read after"),
            _epoch_cap("entries"),
            _p("schema", "schema", required=True, doc="column -> type decoded from each entry"),
            _p("payload", "stream_payload", default="fields",
               doc="fields: one entry field per column; json: one field holds a JSON object"),
            _p("payload_field", "string", default="data", doc="the JSON field (payload json)"),
            _p("time_field", "column",
               doc="a timestamp column of the schema holding event time; omitted: the "
               "entry id's time as event_time"),
            _reconnect_wait("broker"),
        ),
        doc="Entries of Redis Streams, exactly once, with offsets in the run's checkpoint; "
        "entries that do not fit the schema are counted as dead letters.",
    ),
    _source(
        "source.nats",
        params=(
            _p("url", "nats_url", required=True,
               doc="the NATS server; its password is never shown"),
            _p("streams", "stream_names", required=True,
               doc="JetStream stream names; each epoch's range of a stream is read in parallel "
               "parts"),
            _p("start", "sequence_start", default="latest",
               doc="earliest, latest, or {stream: sequence} to read after"),
            _epoch_cap("messages"),
            _p("schema", "schema", required=True,
               doc="column -> type decoded from each message's JSON object"),
            _p("time_field", "column",
               doc="a timestamp column of the schema holding event time; omitted: the "
               "message's stream time as event_time"),
            _reconnect_wait("server"),
        ),
        doc="Messages of NATS JetStream streams (JSON objects), exactly once, with stream "
        "sequences in the run's checkpoint; messages that do not fit the schema are counted as "
        "dead letters.",
    ),
)

# The params of the keyed operators that match rows at most `within` apart: join and dedupe.
_KEYED_WITHIN = (
    _p("key", "columns", required=True),
    _p("time", "column", required=True),
    _p("within", "interval", required=True),
    _p("watermark", "interval"),
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
            # Required: the runtime partitions a window's state by key group, and a global
            # aggregate (no key) has no runtime to run it.
            _p("key", "columns", required=True, doc="group-by columns, one or more"),
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
        params=_KEYED_WITHIN,
        inputs=2,
        key_param="key",
        doc="Windowed stream-stream inner join of exactly two inputs on equal keys, "
        "with event times at most `within` apart. The first edge into it is the left input; "
        "rows carry the left columns, then the right columns the left does not have.",
    ),
    OperatorType(
        "dedupe", "operator", "keyed", "at_most_one",
        params=_KEYED_WITHIN,
        key_param="key",
        doc="Drops rows whose key was already seen within the time bound.",
    ),
)

_SINKS = (
    _sink(
        "sink.postgres",
        params=(_p("table", "identifier", required=True),),
        doc="Writes rows to a table of the sink schema, with the run id, committing with the "
        "epoch id.",
    ),
    _sink(
        "sink.files",
        params=(_p("path", "data_path", required=True, doc="folder inside the data folder"),
                _p("format", "file_format", required=True)),
        doc="Writes rows as files into a directory.",
    ),
    _sink(
        "sink.memory",
        params=(_p("name", "identifier"),),
        doc="Keeps rows in memory for inspection and tests.",
    ),
    _sink(
        "sink.noop",
        params=(),
        doc="Computes rows and discards them, as Spark's noop sink: for benchmarks and dry "
        "runs.",
    ),
)

BROKER_SOURCE_TYPES = frozenset({"source.redis_stream", "source.nats"})
"""Sources that read a broker: offsets in the epoch's plan, lag as backlog, dead letters."""

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
