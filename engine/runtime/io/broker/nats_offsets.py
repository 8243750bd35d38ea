"""Offsets of a ``source.nats``: where an epoch starts and ends in each JetStream stream.

An offset is ``{"op": <source id>, "streams": {<stream>: {"seq": <last stream sequence
read>}}}``. It is logged with the epoch's plan, so a replayed epoch reads exactly the
messages with sequences in ``(start seq, end seq]`` again (messages the stream's limits
removed meanwhile are gone for the replay too). A stream's lag is its last sequence less the
end sequence: exact while no message inside that span was deleted one by one.
"""

from __future__ import annotations

from nats.aio.client import Client

from engine.runtime.io.broker.nats_client import NatsSpec, stream_bounds, with_nats
from engine.runtime.io.taken import Offset, SequencesTaken


def take_sequences(spec: NatsSpec, previous: SequencesTaken | None) -> SequencesTaken:
    """The messages the next epoch reads: ``{"start", "end"}`` offsets, from where the
    previous epoch ended (a new run: the source's ``start``) up to the streams' newest
    messages, at most ``max_entries_per_epoch`` in all."""

    async def plan(client: Client) -> SequencesTaken:
        bounds = {s: await stream_bounds(client, s) for s in spec.streams}
        start = initial_offset(spec, bounds) if previous is None else previous.end
        return SequencesTaken(start, advance(spec, start, bounds))

    return with_nats(spec, "planning an epoch", plan)


def initial_offset(spec: NatsSpec, bounds: dict[str, tuple[int, int]]) -> Offset:
    """Where a new run starts: before the oldest message held, after the newest, or after
    the given sequences."""
    streams = {}
    for stream, (first, last) in bounds.items():
        if spec.start == "earliest":
            seq = first - 1
        elif spec.start == "latest":
            seq = last
        else:
            seq = spec.start[stream] if isinstance(spec.start, dict) else 0
        streams[stream] = {"seq": seq}
    return {"op": spec.op_id, "streams": streams}


def advance(spec: NatsSpec, start: Offset, bounds: dict[str, tuple[int, int]]) -> Offset:
    """The end offset of the next epoch: every newer message, or at most the cap in all,
    shared between the streams (a stream's unused share goes to the next ones)."""
    streams = {}
    budget = spec.max_entries
    for index, stream in enumerate(spec.streams):
        first, last = bounds[stream]
        # Messages the stream's limits removed since are skipped, not waited for.
        after = max(int(start["streams"].get(stream, {"seq": 0})["seq"]), first - 1)
        share = -(-budget // (len(spec.streams) - index))
        end = min(last, after + share) if last > after else after
        streams[stream] = {"seq": end}
        budget -= end - after
    return {"op": spec.op_id, "streams": streams}


def nats_lags(spec: NatsSpec, end: Offset) -> dict[str, int]:
    """Messages behind each stream's newest after ``end`` (0 once caught up)."""

    async def lags(client: Client) -> dict[str, int]:
        found = {}
        for stream, position in end["streams"].items():
            _, last = await stream_bounds(client, stream)
            found[stream] = max(0, last - int(position["seq"]))
        return found

    return with_nats(spec, "measuring the lag", lags)
