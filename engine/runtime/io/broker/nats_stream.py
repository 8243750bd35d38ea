"""``source.nats``: the messages an epoch reads, fixed in its plan, read as a batch.

The driver plans each epoch's messages as a sequence range per stream
(``nats_offsets.take_sequences``), logged with the epoch's plan before it runs. The range
is read in the driver and handed to Spark as one Arrow table: each part of it is one pull
request of an ephemeral, unacknowledged consumer that starts at the part's first sequence
and asks for exactly as many messages as the part spans. A source that is behind (its
epoch took its whole cap) has its next range planned and read on a thread while the epoch
runs (``read_ahead``), used if the next plan takes that very range. Bodies are decoded in
bulk by Arrow's JSON reader; a batch holding a message that does not fit the schema is
decoded message by message with the Redis source's rules, so that message becomes a dead
letter.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from nats.aio.client import Client
from nats.js import api
from nats.js.errors import NotFoundError
from pyspark.sql import SparkSession

from engine.runtime.io.broker import read_ahead
from engine.runtime.io.broker.columnar import arrow_schema, rows_batch
from engine.runtime.io.broker.nats_client import (
    REQUEST_TIMEOUT_S,
    MissingStream,
    NatsSpec,
    with_nats,
)
from engine.runtime.io.broker.nats_offsets import take_sequences
from engine.runtime.io.broker.read_ahead import RangeRows, ReadAhead, range_rows, spark_schema
from engine.runtime.io.broker.spec import ENTRY_TIME, decode_entry
from engine.runtime.io.taken import SequencesTaken

# Sequences one pull request asks for: its bodies stay a few MB.
MAX_PART = 50_000
_STATUS_LINE = b"NATS/1.0 "  # headers opening with a status code: a status, not a message
_reads = ReadAhead("nats-read-ahead")


def take_messages(spec: NatsSpec, previous: SequencesTaken | None,
                  spark: SparkSession | None = None) -> SequencesTaken:
    """The messages the next epoch reads (``take_sequences``), their rows ready if they
    were read ahead (and handed to ``spark``, if given)."""
    taken = take_sequences(spec, previous)
    ahead = _reads.ahead(spec.key)
    if ahead is not None and ahead.taken == taken:
        _reads.keep(spec.key, ahead)
    if taken.count >= spec.max_entries:
        _reads.read_ahead(spec.key, partial(_read_next, spec, taken, spark))
    return taken


def nats_rows(spark: SparkSession, spec: NatsSpec, taken: SequencesTaken) -> read_ahead.BrokerRows:
    """The rows of an epoch's messages: those read ahead, else read now."""
    return _reads.frame(spark, spec.key, taken, spark_schema(spec.decoding()),
                        partial(_read, spec, taken))


def part_ranges(taken: SequencesTaken, size: int) -> Iterator[tuple[str, int, int]]:
    """``(stream, after, until)`` parts of at most ``size`` sequences covering each
    stream's planned range ``(start, end]``."""
    for stream, end in taken.end["streams"].items():
        after = int(taken.start["streams"].get(stream, {"seq": 0})["seq"])
        for first in range(after, int(end["seq"]), size):
            yield stream, first, min(first + size, int(end["seq"]))


def _read_next(spec: NatsSpec, taken: SequencesTaken,
               spark: SparkSession | None = None) -> RangeRows:
    """The range the epoch after ``taken`` would take now, and its rows (handed to
    ``spark`` if given)."""
    following = take_sequences(spec, taken)
    return range_rows(following, _read(spec, following), spark,
                      partial(spark_schema, spec.decoding()))


def _read(spec: NatsSpec, taken: SequencesTaken) -> pa.Table:
    """The rows of the messages of ``taken``, over one connection."""
    schema = arrow_schema(spec.decoding())
    parts = list(part_ranges(taken, MAX_PART))
    if not parts:  # no connection for nothing
        return schema.empty_table()

    async def read(client: Client) -> list[pa.RecordBatch]:
        batches = []
        for stream, after, until in parts:
            bodies, seqs, times = await read_messages(client, stream=stream, after=after,
                                                      until=until)
            if bodies:
                batches.append(decode_messages(spec, schema, bodies, seqs, times))
        return batches

    return pa.Table.from_batches(with_nats(spec, "reading an epoch's messages", read), schema)


async def read_messages(client: Client, *, stream: str, after: int,
                        until: int) -> tuple[list[bytes], list[int], list[int]]:
    """Bodies, stream sequences and stream times (ns) of the messages of ``stream`` with
    sequences in ``(after, until]``, oldest first."""
    js = client.jetstream(timeout=REQUEST_TIMEOUT_S)
    try:
        consumer = await js.add_consumer(stream, config=api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1,
            ack_policy=api.AckPolicy.NONE, mem_storage=True,
            inactive_threshold=REQUEST_TIMEOUT_S))
    except NotFoundError:  # deleted since the epoch was planned
        raise MissingStream(stream) from None
    loop = asyncio.get_running_loop()
    bodies: list[bytes] = []
    replies: list[bytes] = []
    done = loop.create_future()
    heard = [loop.time()]
    inbox = client.new_inbox()
    subscription = await client.subscribe(inbox)
    delivered = client._process_msg

    # The client's parser hands each message here; the part's are kept as they come,
    # without the message object, queue and callback the client makes for each (which cost
    # more than the rest of the read together).
    async def take(sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes) -> None:
        if sid != subscription._id:
            await delivered(sid, subject, reply, data, headers)
            return
        heard[0] = loop.time()
        if headers and headers.startswith(_STATUS_LINE):  # no more messages: the stream ended
            _settle(done)
            return
        bodies.append(data)
        replies.append(reply)
        if len(bodies) == until - after:  # as many as asked for: the request is complete
            _settle(done)

    client._process_msg = take  # type: ignore[method-assign]
    try:
        request = f'{{"batch": {until - after}, "no_wait": true}}'.encode()
        await client.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer.name}", request,
                             reply=inbox)
        while not done.done():  # each message resets the wait: a long part is no timeout
            await asyncio.wait({done}, timeout=1.0)
            if loop.time() - heard[0] > REQUEST_TIMEOUT_S:
                raise TimeoutError(f"no message from stream {stream!r} in "
                                   f"{REQUEST_TIMEOUT_S:g} s")
    finally:
        client._process_msg = delivered  # type: ignore[method-assign]
    await subscription.unsubscribe()
    await js.delete_consumer(stream, consumer.name)
    return _in_range(bodies, replies, until)


def _in_range(bodies: list[bytes], replies: list[bytes],
              until: int) -> tuple[list[bytes], list[int], list[int]]:
    """The messages up to sequence ``until`` (a part whose range lost messages is sent
    more from after it), with their sequences and times."""
    positions = [_position(reply.decode()) for reply in replies]
    kept = [i for i, (seq, _) in enumerate(positions) if seq <= until]
    return ([bodies[i] for i in kept], [positions[i][0] for i in kept],
            [positions[i][1] for i in kept])


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _position(reply: str) -> tuple[int, int]:
    """The stream sequence and time (ns) of a delivered message, from its ack subject:
    ``$JS.ACK.<stream>.<consumer>.<delivered>.<seq>.<cseq>.<ns>.<pending>``, or with a
    domain and account hash after ``$JS.ACK`` (servers from 2.10 on may send either)."""
    tokens = reply.split(".")
    at = 5 if len(tokens) == 9 else 7
    return int(tokens[at]), int(tokens[at + 2])


def decode_messages(spec: NatsSpec, schema: pa.Schema, bodies: list[bytes], seqs: list[int],
                    times: list[int]) -> pa.RecordBatch:
    """The rows of messages as one Arrow batch of the source's ``schema`` (``arrow_schema``
    of its decoding): in bulk when every body fits, else message by message, the misfits as
    dead letters."""
    if not bodies:
        return pa.RecordBatch.from_pylist([], schema=schema)
    bulk = _bulk_decoded(spec, schema, bodies, times)
    return bulk if bulk is not None else _one_by_one(spec, schema, bodies, seqs, times)


def _bulk_decoded(spec: NatsSpec, arrow: pa.Schema, bodies: list[bytes],
                  times: list[int]) -> pa.RecordBatch | None:
    """Arrow's JSON reader over all bodies; None when one does not fit (unparseable, a
    wrong type, a field missing or null), which the message-by-message rules then name."""
    declared = [arrow.field(name) for name, _ in spec.columns]
    read_as = pa.schema([pa.field(f.name, pa.int64()) if pa.types.is_timestamp(f.type) else f
                         for f in declared])
    options = pa_json.ParseOptions(explicit_schema=read_as, unexpected_field_behavior="ignore")
    try:
        table = pa_json.read_json(io.BytesIO(b"\n".join(bodies)), parse_options=options,
                                  read_options=pa_json.ReadOptions(block_size=1 << 26))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(bodies) or any(column.null_count for column in table.columns):
        return None
    columns = []
    for field in declared:
        column = table.column(field.name)
        if pa.types.is_timestamp(field.type):  # epoch milliseconds, as the Redis rules read
            column = pc.multiply(column, 1000).cast(field.type)
        columns.append(column.combine_chunks())
    if spec.decoding().adds_entry_time:
        at_us = pc.divide(pa.array(times, pa.int64()), 1000)  # stream time: ns to micros
        columns.append(at_us.cast(arrow.field(ENTRY_TIME).type))
    columns.append(pa.nulls(len(bodies), pa.string()))
    return pa.RecordBatch.from_arrays(columns, schema=arrow)


def _one_by_one(spec: NatsSpec, schema: pa.Schema, bodies: list[bytes], seqs: list[int],
                times: list[int]) -> pa.RecordBatch:
    decoding = spec.decoding()
    # Without the entry-id time (a Redis id's): the message's stream time is added here.
    rules = replace(decoding, time_field=f"{ENTRY_TIME}_of_stream") \
        if decoding.adds_entry_time else decoding
    rows = []
    for body, seq, at_ns in zip(bodies, seqs, times, strict=True):
        row: tuple[Any, ...] = decode_entry(rules, str(seq), {b"data": body})
        if decoding.adds_entry_time:
            at = datetime.fromtimestamp(at_ns / 1e9, tz=UTC) if row[-1] is None else None
            row = (*row[:-1], at, row[-1])
        rows.append(row)
    return rows_batch(rows, schema)

