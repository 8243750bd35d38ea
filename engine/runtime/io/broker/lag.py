"""The lag of the broker sources after an epoch: the run's backlog.

An epoch's plan logs the end offsets it reads up to before the epoch runs; the lag of a
stream is how many entries its tail is past that end.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from engine.dag import BROKER_SOURCE_TYPES, JobGraph
from engine.runtime.io.broker.nats_client import NatsSpec
from engine.runtime.io.broker.nats_offsets import nats_lags
from engine.runtime.io.broker.redis_offsets import stream_lags, with_reconnect
from engine.runtime.io.broker.spec import StreamSpec
from engine.runtime.io.taken import EntriesTaken, SequencesTaken, SourceTake


def broker_lags(graph: JobGraph, planned: Mapping[str, SourceTake]) -> dict[str, dict[str, int]]:
    """Per broker source of ``graph``, entries behind each stream's tail after the epoch
    whose plan took ``planned`` of each source ({} when the job reads no broker)."""
    lags = {}
    for op_id in graph.sources():
        op = graph.operator(op_id)
        part = planned.get(op_id)
        if op.type == "source.nats" and isinstance(part, SequencesTaken):
            lags[op_id] = nats_lags(NatsSpec.from_params(op_id, op.params), part.end)
        elif op.type in BROKER_SOURCE_TYPES and isinstance(part, EntriesTaken):
            lags[op_id] = with_reconnect(StreamSpec.from_params(op_id, op.params),
                                         "measuring the lag", partial(stream_lags, offset=part.end))
    return lags


def broker_report(
    lags: Mapping[str, Mapping[str, int]], dead_letters: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The metrics entry of the broker sources: lag per stream, backlog, dead letters."""
    report = {}
    for op_id in sorted(set(lags) | set(dead_letters)):
        streams = dict(lags.get(op_id, {}))
        letters = dead_letters.get(op_id, {})
        report[op_id] = {"lag": streams, "backlog": sum(streams.values()),
                         "dead_letters": letters.get("count", 0),
                         "dead_letter_sample": letters.get("sample")}
    return {"broker_sources": report} if report else {}
