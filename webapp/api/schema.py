"""The API's request and response models. The OpenAPI document at /api/schema is generated from
them, and request bodies are validated against them before a view runs.

A DAG document is read by the engine, which reports every problem of a document naming the
operator or edge (and the editor's live validation must answer them, not refuse them): its
model documents the contract, and the API only checks that it is a JSON object.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Path, Schema
from pydantic import ConfigDict, Field, PlainValidator, create_model

from webapp import engine_gateway
from webapp.accounts.roles import Role
from webapp.jobs.models import AutoscaleMode, ReconfigurationStatus, RestartStrategy, RunStatus
from webapp.reconfigurations.requests import MAX_INSTANCES
from webapp.runs import restarts

MAX_ID = 2**63 - 1
MAX_STRING = 1000
MAX_KEY_GROUPS = engine_gateway.document_limits()["key_groups"]
WholeId = Annotated[int, Field(ge=0, le=MAX_ID)]
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
PathId = Annotated[int, Path(ge=0, le=10**18 - 1, description="a job's, run's or "
                                                               "reconfiguration's id")]
OperatorType = Literal[tuple(t["type"] for t in engine_gateway.operator_catalog())]  # type: ignore[misc]


class _Body(Schema):
    """Request bodies: JSON types as sent (no "1" for 1), a field the body does not define
    refused by name (a misspelt one is not ignored)."""

    model_config = ConfigDict(strict=True, extra="forbid")


# --- the DAG document (DESIGN: "The job graph (DAG) document: a contract") ---


class OperatorSpec(Schema):
    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    type: OperatorType
    parallelism: int = Field(1, ge=1, le=MAX_KEY_GROUPS)
    params: dict[str, Any] = Field(default_factory=dict)


class EdgeSpec(Schema):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    from_: str = Field(alias="from")
    to: str


# The document's example in /api/schema: the smallest job that runs anywhere (no servers).
EXAMPLE_DAG: dict[str, Any] = {
    "name": "campaign-views", "key_groups": 16,
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 100}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "events", "to": "views"}, {"from": "views", "to": "out"}],
}


class DagDocument(Schema):
    """A job graph: operators (catalog types with their params) and the edges between them."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"example": EXAMPLE_DAG})

    # The engine names a document without one "unnamed" (engine.dag.document).
    name: str = Field("unnamed", min_length=1,
                      max_length=engine_gateway.document_limits()["name"])
    key_groups: int = Field(128, ge=1, le=MAX_KEY_GROUPS)
    operators: list[OperatorSpec] = Field(min_length=1, max_length=500)
    edges: list[EdgeSpec] = Field(default_factory=list, max_length=2000)


def _json_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object (a DAG document)")
    return value


Dag = Annotated[dict[str, Any], PlainValidator(_json_object, json_schema_input_type=DagDocument)]
"""A DAG document as sent: checked to be an object here, every other check is the engine's."""

AnyDag = Annotated[dict[str, Any],
                   PlainValidator(_json_object, json_schema_input_type=dict[str, Any])]
"""A document to check: any JSON object; the answer names every way it is not a valid DAG."""


# --- request bodies ---


class VersionIn(_Body):
    dag: Dag
    base_version: WholeId = Field(description="the version this one was edited from")
    comment: str = Field("", max_length=MAX_STRING)


class UserIn(_Body):
    username: str = Field(min_length=1, max_length=150)
    role: Literal[tuple(Role.values)]  # type: ignore[valid-type]
    password: str | None = Field(None, max_length=128)
    token: bool = Field(False, description="also create an API token and answer it")


class SinkTargetHandOverIn(_Body):
    kind: Literal["table", "folder"]
    name: str = Field(min_length=1, max_length=1000,
                      description="the table's plain name, or the folder as the sink names it")
    job: WholeId = Field(description="the job that owns the target from now on")
    # A reason of white space alone is refused (the service's check), as the pattern says.
    reason: str = Field(min_length=1, max_length=500, pattern=r"\S",
                        description="why: kept in the history")


class RestartIn(_Body):
    """How the run's driver is restarted after a transient failure (a job's own error is
    never retried)."""

    strategy: Literal[tuple(RestartStrategy.values)] = Field(  # type: ignore[valid-type]
        RestartStrategy.EXPONENTIAL,
        description="exponential: the first restart at once, then 1 s doubling to 60 s "
                    "between one restart and the next, no attempt limit; fixed: `attempts` "
                    "restarts, each `delay_s` after its crash; none: the first crash fails the "
                    "run")
    attempts: int | None = Field(None, ge=0, le=restarts.MAX_ATTEMPTS,
                                 description=f"fixed only (default {restarts.FIXED_ATTEMPTS})")
    delay_s: float | None = Field(None, ge=0, le=restarts.MAX_DELAY_S,
                                  description=f"fixed only (default {restarts.FIXED_DELAY_S:g})")


class RunStartIn(_Body):
    version: WholeId | None = Field(None, description="the version to run; the latest by default")
    restart: RestartIn | None = Field(None, description="the restart strategy; exponential "
                                                        "by default")


class RunResumeIn(_Body):
    version: WholeId | None = Field(None, description="the version to continue on (an "
                                                      "upgrade); the run's own by default")


class RunStopIn(_Body):
    reason: str = Field("", max_length=MAX_STRING)


class SampleIn(_Body):
    operator: str = Field(min_length=1, max_length=100, description="the operator whose rows "
                          "to show")


class AutoscaleIn(_Body):
    mode: Literal[tuple(AutoscaleMode.values)]  # type: ignore[valid-type]
    min: int | None = Field(None, ge=1, le=MAX_INSTANCES)
    max: int | None = Field(None, ge=1, le=MAX_INSTANCES)
    cooldown_s: int | None = Field(None, ge=1, le=86400)


# --- answers ---


class Problem(Schema):
    where: str
    message: str


class ErrorOut(Schema):
    error: str
    problems: list[Problem] = Field(default_factory=list)


class PageOut(Schema):
    number: int
    size: int
    next: int | None


def _list_page(name: str, *, owner: str, items: str, item: type[Schema]) -> type[Schema]:
    """The model of a list answer (webapp.api.paging): the id of the ``owner`` whose ``items``
    it lists, one page of them, and the page (how to get the next)."""
    fields: dict[str, Any] = {owner: (int, ...), items: (list[item], ...),  # type: ignore[valid-type]
                              "page": (PageOut, ...)}
    return create_model(name, __base__=Schema, **fields)


class JobCreatedOut(Schema):
    id: int
    version: int


class JobSummaryOut(Schema):
    id: int
    name: str
    latest_version: int
    archived_at: Timestamp | None


class JobListOut(Schema):
    jobs: list[JobSummaryOut]


class VersionOut(Schema):
    number: int
    author: str | None
    created_at: Timestamp
    comment: str
    dag: DagDocument


class RunRefOut(Schema):
    id: int
    status: str


class JobOut(Schema):
    id: int
    name: str
    latest_version: int
    created_at: Timestamp
    archived_at: Timestamp | None
    versions: list[VersionOut]
    current_run: RunRefOut | None


class AuditEntryOut(Schema):
    id: int
    at: Timestamp
    actor: str | None
    trigger: str
    action: str
    job: int | None
    run: int | None
    reconfiguration: int | None
    reason: str
    outcome: str
    plan_diff: dict[str, Any] | None
    details: dict[str, Any] | None


HistoryOut = _list_page("HistoryOut", owner="job", items="entries", item=AuditEntryOut)


class SinkTargetOut(Schema):
    kind: str
    name: str
    job: int
    job_name: str
    claimed_at: Timestamp


class SinkTargetListOut(Schema):
    targets: list[SinkTargetOut]


class UserOut(Schema):
    model_config = ConfigDict(json_schema_extra={"description": "token only when asked for"})

    id: int
    username: str
    role: str
    token: str | None = None


class CatalogOut(Schema):
    operators: list[dict[str, Any]]


class ValidationOut(Schema):
    valid: bool
    problems: list[Problem]
    plan: dict[str, Any] | None = None
    columns: dict[str, dict[str, str]] | None = None


class RunAcceptedOut(Schema):
    run_id: int
    status: str


class RunSummaryOut(Schema):
    id: int
    job: int
    version: int
    status: str
    epoch: int | None
    restarts: int
    started_at: Timestamp | None
    stopped_at: Timestamp | None


RunListOut = _list_page("RunListOut", owner="job", items="runs", item=RunSummaryOut)


class LatencyOut(Schema):
    p50: float | None
    p99: float | None
    max: float | None


class OperatorEpochOut(Schema):
    instances: int
    rows_in: int
    rows_out: int
    busy_ms: list[float] | None
    input_rate: float | None
    processing_rate: float | None
    output_rate: float | None
    congested: bool | None
    etp: float | None
    region: Any = None
    demand_rate: float | None = None
    # A keyed operator's event time (epoch milliseconds) and how far its watermark trails
    # the wall clock and its newest event; its rows per instance.
    watermark_ms: float | None = None
    max_event_ms: float | None = None
    watermark_delay_ms: float | None = None
    watermark_lag_ms: float | None = None
    rows_in_per_instance: list[int] | None = None
    # A keyed operator's state traffic in the epoch: bytes its instances read from the
    # state store and wrote to it.
    state_bytes_read: int | None = None
    state_bytes_written: int | None = None


class EpochOut(Schema):
    epoch: int
    at: Timestamp
    batch_duration_ms: float | None
    backlog_rows: int | None
    broker_sources: Any
    latency_ms: LatencyOut
    sources: dict[str, Any]
    regions: dict[str, Any]
    bottleneck: Any
    operators: dict[str, OperatorEpochOut]


class AutoscaleStateOut(Schema):
    mode: str
    proposal: dict[str, Any] | None


class RestartOut(Schema):
    strategy: Literal[tuple(RestartStrategy.values)]  # type: ignore[valid-type]
    attempts: int | None
    delay_s: float | None


class RunStateOut(Schema):
    kept: bool = Field(description="whether the run keeps state to resume from")
    bytes: int | None = Field(None, description="the kept state's bytes, as its store "
                                                "measures them")
    entries: int | None = Field(None, description="the kept state's entries")
    key_groups: int | None = Field(None, description="key groups holding entries")
    discarded_at: Timestamp | None = None


class RunOut(Schema):
    id: int
    job: int
    version: int
    status: Literal[tuple(RunStatus.values)]  # type: ignore[valid-type]
    epoch: int | None
    parallelism: dict[str, int]
    assignment: dict[str, Any] | None
    spark_master: str
    restarts: int
    failure_reason: str | None
    started_at: Timestamp | None
    stopped_at: Timestamp | None
    autoscale: AutoscaleStateOut
    restart: RestartOut
    heartbeat_at: Timestamp | None = Field(description="the driver's last sign of life")
    activity: str | None = Field(description="of a running run: processing, idle: waiting "
                                             "for data, or driver silent for N s")
    state: RunStateOut | None = Field(description="of a stopped or failed run: the state it "
                                                  "keeps to resume from")
    metrics: EpochOut | dict[str, Any]


class MetricsOut(Schema):
    run: int
    epochs: list[EpochOut]
    next_since_epoch: int | None


class ReconfigurationAcceptedOut(Schema):
    id: int
    status: str
    created: bool = Field(description="false when the request_id was already used: the "
                                      "first request is answered")


class ReconfigurationOut(Schema):
    id: int
    run: int
    request_id: str
    kind: str
    operators: list[str] | None
    status: Literal[tuple(ReconfigurationStatus.values)]  # type: ignore[valid-type]
    status_reason: str | None
    reason: str
    trigger: str
    actor: str | None
    applied_epoch: int | None
    requested_at: Timestamp | None
    applied_at: Timestamp | None
    finished_at: Timestamp | None
    control_latency_ms: float | None
    state_bytes_moved: int | None
    plan_diff: dict[str, Any] | None
    acks: list[dict[str, Any]] | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None = Field(description="throughput and latency over the epochs "
                                         "after it took effect; outlook: what the load model "
                                         "measured over them (ETP, capacity, backlog drain)")
    predicted: dict[str, Any] | None = Field(description="the preview's prediction kept when "
                                             "it was requested, {now, after}; null: none (it "
                                             "changed no instances, or nothing was measured)")


ReconfigurationListOut = _list_page("ReconfigurationListOut", owner="run",
                                    items="reconfigurations", item=ReconfigurationOut)


class PreviewOut(Schema):
    kind: str
    commands: int
    plan_diff: dict[str, Any]
    parallelism_before: dict[str, int]
    parallelism_after: dict[str, int]
    predicted: dict[str, Any]


class SampleOut(Schema):
    id: int
    run: int
    operator: str
    status: Literal["waiting", "served", "failed"] = Field(
        description="waiting: for the next epoch in which the operator emits rows")
    message: str = Field(description="what the answer is, in words")
    epoch: int | None = Field(description="the epoch whose rows these are")
    columns: list[str]
    rows: list[list[Any]] = Field(description="at most 20, each in the order of columns")
    requested_at: Timestamp
    served_at: Timestamp | None


class AutoscaleOut(Schema):
    run: int
    mode: str
    min: int
    max: int | None
    cooldown_s: int


def answers(ok: int, model: Any, *errors: int) -> dict[Any, Any]:
    """An operation's answers: `ok` with `model`, and each error status (with those every
    operation may answer: 401, 403) as {error, problems}."""
    return {ok: model, frozenset({401, 403, *errors}): ErrorOut}
