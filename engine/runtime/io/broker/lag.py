"""The lag of the broker sources after an epoch: the run's backlog.

Spark writes each epoch's end offsets to the checkpoint's offset log before the epoch
runs; the lag of a stream is how many entries its tail is past that end.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from engine.dag import JobGraph
from engine.runtime.io.broker.redis_offsets import stream_lags, with_reconnect
from engine.runtime.io.broker.spec import StreamSpec

BROKER_TYPES = frozenset({"source.redis_stream"})


def broker_lags(graph: JobGraph, checkpoint: str, epoch: int) -> dict[str, dict[str, int]]:
    """Per broker source of ``graph``, entries behind each stream's tail after ``epoch``
    ({} when the job reads no broker)."""
    ops = [graph.operator(s) for s in graph.sources()]
    brokers = [op for op in ops if op.type in BROKER_TYPES]
    if not brokers:
        return {}
    ends = _end_offsets(checkpoint, epoch)
    lags = {}
    for op in brokers:
        spec = StreamSpec.from_params(op.id, op.params)
        end = ends.get(op.id)
        if end is not None:
            lags[op.id] = _lags_of(spec, end)
    return lags


def backlog_of(lags: Mapping[str, Mapping[str, int]]) -> int:
    """The run's backlog: entries behind the tails of all its broker streams."""
    return sum(sum(streams.values()) for streams in lags.values())


def _lags_of(spec: StreamSpec, end: dict[str, Any]) -> dict[str, int]:
    return with_reconnect(spec, "measuring the lag", lambda client: stream_lags(client, end))


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


def _end_offsets(checkpoint: str, epoch: int) -> dict[str, dict[str, Any]]:
    """The broker sources' end offsets of ``epoch`` from Spark's offset log, by source id."""
    path = os.path.join(checkpoint, "spark", "offsets", str(epoch))
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines[2:]:  # a version line, the batch metadata, then one line per source
        try:
            offset = json.loads(line)
        except ValueError:
            continue
        if isinstance(offset, dict) and "op" in offset and "streams" in offset:
            found[str(offset["op"])] = offset
    return found
