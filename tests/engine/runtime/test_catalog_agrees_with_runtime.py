"""One truth from catalog to runtime: every operator type, given only the params its catalog
entry requires, passes the job checks and is built by the Spark runtime without a refusal.
A param the runtime needs but the catalog leaves optional (``source.files``' schema was one)
saves a job that can never run: the run then failed in its driver, and was retried."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.dag import OPERATOR_TYPES, ParamSpec, parse_job_graph, validate_graph
from engine.dag.catalog import GENERATOR_SCHEMA

pytestmark = pytest.mark.spark

# A value each kind of param accepts, for a generator's rows as input.
SAMPLES: dict[str, Any] = {
    "positive_int": 1, "int": 0, "non_negative_float": 0.0, "string": "data",
    "identifier": "catalog_walk", "expression": "amount > 1", "interval": "10 seconds",
    "columns": ["campaign_id"], "column": "event_time", "expressions": {"twice": "amount * 2"},
    "aggregates": {"n": "count(*)"}, "schema": {"event_time": "timestamp", "amount": "double"},
    "string_list": ["view"], "file_format": "json", "data_path": "catalog-walk",
    # A broker source's params are only parsed here: nothing connects to the URL.
    "redis_url": "redis://broker.invalid/0", "stream_names": ["catalog-walk"],
    "stream_start": "latest", "stream_payload": "fields",
    "nats_url": "nats://broker.invalid:4222", "sequence_start": "latest",
}


def required_params(op_type: str) -> dict[str, Any]:
    """The params the catalog says a user must give, and nothing else."""
    specs: tuple[ParamSpec, ...] = OPERATOR_TYPES[op_type].params
    return {p.name: SAMPLES[p.kind] for p in specs if p.required}


def minimal_document(op_type: str) -> dict[str, Any]:
    """The smallest job around one operator of ``op_type``, with its required params only."""
    role = OPERATOR_TYPES[op_type].role
    ops = [{"id": "under_test", "type": op_type, "params": required_params(op_type)}]
    edges: list[dict[str, str]] = []
    if role != "source":
        inputs = OPERATOR_TYPES[op_type].inputs or 1
        for n in range(inputs):
            ops.append({"id": f"events{n}", "type": "source.generator",
                        "params": {"rows_per_second": 10}})
            edges.append({"from": f"events{n}", "to": "under_test"})
    if role != "sink":
        ops.append({"id": "out", "type": "sink.memory", "params": {}})
        edges.append({"from": "under_test", "to": "out"})
    return {"name": f"walk-{op_type}", "key_groups": 4, "operators": ops, "edges": edges}


def _builders(spark) -> dict[str, Callable[[dict[str, Any]], Any]]:  # noqa: ANN001
    """How the runtime takes each operator type's params: what a run builds from them."""
    from engine.runtime.io.broker.nats_client import NatsSpec
    from engine.runtime.io.broker.nats_stream import nats_rows
    from engine.runtime.io.broker.redis_stream import stream_rows
    from engine.runtime.io.broker.spec import StreamSpec
    from engine.runtime.io.sinks import build_sink
    from engine.runtime.io.sources import (
        GeneratorSpec,
        file_rows,
        generator_rows,
        new_files,
        rate_rows,
    )
    from engine.runtime.io.taken import EntriesTaken, SequencesTaken
    from engine.runtime.operators.changes import KEYED_SPECS
    from engine.runtime.stage.stateless import check_stateless_params

    events = spark.createDataFrame([], ", ".join(f"{c} {t}" for c, t in GENERATOR_SCHEMA.items()))

    def keyed(op_type: str) -> Callable[[dict[str, Any]], Any]:
        return lambda params: KEYED_SPECS[op_type].parse("under_test", params)

    def stateless(op_type: str) -> Callable[[dict[str, Any]], Any]:
        return lambda params: check_stateless_params(op_type, params, events)

    def sink(op_type: str) -> Callable[[dict[str, Any]], Any]:
        return lambda params: build_sink(op_type, "under_test", params, "walk")

    return {
        "source.generator": lambda p: generator_rows(spark, GeneratorSpec.from_params(p), 0, 5, 1),
        "source.rate": lambda p: rate_rows(spark, p, 0, 0, 5, 1),
        "source.files": lambda p: file_rows(spark, p, new_files(p, ())),
        "source.redis_stream": lambda p: stream_rows(
            spark, StreamSpec.from_params("under_test", p),
            EntriesTaken({"streams": {}}, {"streams": {}})),
        "source.nats": lambda p: nats_rows(
            spark, NatsSpec.from_params("under_test", p),
            SequencesTaken({"streams": {}}, {"streams": {}})),
        "filter": stateless("filter"), "map": stateless("map"),
        **{name: keyed(name) for name in KEYED_SPECS},
        **{name: sink(name) for name in OPERATOR_TYPES if name.startswith("sink.")},
    }


def test_every_operator_type_runs_with_the_params_its_catalog_entry_requires(
    spark, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("STREAMSCALE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STREAMSCALE_SINK_DSN", "postgresql://nobody@localhost/none")
    (tmp_path / SAMPLES["data_path"]).mkdir()
    builders = _builders(spark)
    assert set(builders) == set(OPERATOR_TYPES), "a catalog type the walk does not know"
    refused: dict[str, str] = {}
    for op_type in sorted(OPERATOR_TYPES):
        document = minimal_document(op_type)
        problems = validate_graph(parse_job_graph(document))
        assert problems == [], f"{op_type}: the sample params fail the job checks: {problems}"
        try:
            builders[op_type](dict(document["operators"][0]["params"]))
        except Exception as error:  # noqa: BLE001 - every refusal is the finding
            refused[op_type] = f"{type(error).__name__}: {error}"
    assert refused == {}, "the catalog accepts what the runtime refuses"
