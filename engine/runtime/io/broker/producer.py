"""A producer for demos, tests and benchmarks: the generator's events into a Redis stream.

Event ``i`` has the same campaign, user, type and amount as the generator's event ``i``
(``event_draws``); its event time is the wall clock when its batch is written, as a real
producer's would be. Entries are flat fields (``payload: fields``). A batch is one large
pipeline of XADD commands, encoded in bulk and sent in one write, ending with the stream's
id counter; no transaction is needed for exactly one entry per id (see ``next_event_id``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from engine.runtime.io.broker.event_draws import EventColumns, EventDraws

# Entries per pipeline: large enough that a round trip and the numpy work per batch are
# small beside the entries' own cost, small enough that a batch's replies stay a few MB.
_BATCH = 20_000


def next_id_key(stream: str) -> str:
    """The key of the counter that holds the stream's next event id: kept beside the stream
    so a restarted producer continues the ids, whatever the stream was trimmed to."""
    return f"{stream}:next-event-id"


def next_event_id(client: redis.Redis, stream: str) -> int:
    """The id the stream's next event takes: its counter, or one past its newest entry's
    event id where that is higher. A batch is written before its counter, so a batch cut
    short (a dropped connection, a broker stopped mid-batch) left entries the counter does
    not count yet; a trimmed stream keeps its newest entry, and the counter covers a
    stream emptied or deleted since. A stream with neither starts at 0."""
    with client.pipeline(transaction=False) as pipe:
        pipe.get(next_id_key(stream))
        pipe.xrevrange(stream, count=1)
        kept, newest = pipe.execute()
    following = 0
    if newest:
        fields = newest[0][1]
        last = fields.get(b"event_id", fields.get("event_id"))
        following = int(last) + 1 if last is not None else 0
    return max(int(kept), following) if kept is not None else following


# Waiting out a broker that went away (a restart): 0.5 s doubling to 10 s between tries.
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 10.0


def produce(
    client: redis.Redis,
    stream: str,
    draws: EventDraws,
    first_id: int,
    count: int | None,
    rate: float | None,
    progress: Callable[[int], None] = lambda written: None,
    maxlen: int | None = None,
    stopping: Callable[[], bool] = lambda: False,
    waiting: Callable[[Exception, float], None] = lambda error, delay_s: None,
) -> int:
    """Writes events ``first_id, first_id + 1, ...``: ``count`` of them as fast as the
    broker takes them, or ``rate`` per second until interrupted; with ``maxlen`` the
    stream is trimmed to about that many entries; ``stopping`` ends it between batches.
    Each batch sets the stream's id counter after its entries, so a later producer
    continues where this one ended (``next_event_id``). A broker that cannot be reached is
    waited for (``waiting`` is told each failure and the wait before the next try), then
    writing resumes from the id the broker's stream and counter say is next, so no id is
    written twice and none is skipped. ``progress`` is told the events acknowledged so far.
    Returns how many were written."""
    client.set(next_id_key(stream), first_id)
    started = time.monotonic()
    pipe = _Pipeline(client)
    following = acked = first_id  # the next batch's first id; the first not yet acknowledged
    try:
        while not stopping():
            size = _next_size(count, rate, started, following - first_id)
            if size is None:
                break
            try:
                if size:
                    pipe.send(_batch(stream, draws, following, size, maxlen), size + 1)
                    acked, following = following, following + size
                else:
                    pipe.flush()
                    acked = following
                    time.sleep(min(0.05, 1.0 / (rate or 1.0)))
            except (redis.ConnectionError, redis.TimeoutError) as error:
                pipe.close()
                resumed = _resumed(client, stream, error, stopping, waiting)
                if resumed is None:
                    break
                following = acked = resumed
            progress(acked - first_id)
        acked = _settled(pipe, client, stream, following, acked)
    finally:
        pipe.close()
    return acked - first_id


def _next_size(count: int | None, rate: float | None, started: float,
               written: int) -> int | None:
    """The next batch's size: the rest of ``count`` (None once all are written), or what
    ``rate`` has made due since ``started`` (0: nothing yet)."""
    if count is not None:
        return min(_BATCH, count - written) if written < count else None
    assert rate is not None
    return max(0, min(_BATCH, int((time.monotonic() - started) * rate) - written))


def _batch(stream: str, draws: EventDraws, first: int, size: int,
           maxlen: int | None) -> bytes:
    """Events ``first .. first + size - 1`` and then the counter that follows them."""
    now_ms = int(time.time() * 1000)
    return (encode_batch(stream, draws.columns(first, size), now_ms, maxlen)
            + _command("SET", next_id_key(stream), str(first + size)))


def _resumed(client: redis.Redis, stream: str, error: Exception,
             stopping: Callable[[], bool],
             waiting: Callable[[Exception, float], None]) -> int | None:
    """After ``error``, the id writing resumes at, once the broker answers again; None if
    ``stopping`` ended the wait first."""
    delay_s = RETRY_FIRST_S
    while True:
        waiting(error, delay_s)
        if _stopped_within(delay_s, stopping):
            return None
        try:
            return next_event_id(client, stream)
        except (redis.ConnectionError, redis.TimeoutError) as again:
            error, delay_s = again, min(RETRY_MAX_S, delay_s * 2)


def _settled(pipe: _Pipeline, client: redis.Redis, stream: str, following: int,
             acked: int) -> int:
    """The first id not written once the batch in flight is acknowledged (or, the broker
    gone, what it kept of it, if it can tell)."""
    try:
        pipe.flush()
        return following
    except (redis.ConnectionError, redis.TimeoutError):
        pipe.close()
        try:
            return next_event_id(client, stream)
        except (redis.ConnectionError, redis.TimeoutError):
            return acked


def encode_batch(stream: str, columns: EventColumns, now_ms: int,
                 maxlen: int | None = None) -> bytes:
    """One XADD per event of ``columns`` (fields in ``EventDraws.fields``' order), in the
    Redis protocol, as one buffer: the commands redis-py would send, without building
    each one through it."""
    trim = () if maxlen is None else ("MAXLEN", "~", str(maxlen))
    arguments = ("XADD", stream, *trim, "*")
    head = f"*{len(arguments) + 12}\r\n" + "".join(_bulk(a) for a in arguments)
    at = _bulk("event_time") + _bulk(str(now_ms))
    entries = [
        f"{head}$8\r\nevent_id\r\n${len(e)}\r\n{e}\r\n{at}$11\r\ncampaign_id\r\n"
        f"${len(c)}\r\n{c}\r\n$7\r\nuser_id\r\n${len(u)}\r\n{u}\r\n$10\r\nevent_type\r\n"
        f"${len(k)}\r\n{k}\r\n$6\r\namount\r\n${len(a)}\r\n{a}\r\n"
        for e, c, u, k, a in zip(columns.event_id, columns.campaign_id, columns.user_id,
                                 columns.event_type, columns.amount, strict=True)
    ]
    return "".join(entries).encode()


def _bulk(text: str) -> str:
    return f"${len(text.encode())}\r\n{text}\r\n"


def _command(*args: str) -> bytes:
    return (f"*{len(args)}\r\n" + "".join(_bulk(a) for a in args)).encode()


class _Pipeline:
    """One connection with at most one batch in flight: a batch is sent before the replies
    to the one before it are read, so the producer encodes while the broker writes. An
    error reply raises once the batch's replies are all read."""

    def __init__(self, client: redis.Redis) -> None:
        self._pool: Any = client.connection_pool
        self._connection: Any = None
        self._pending = 0

    def send(self, payload: bytes, replies: int) -> None:
        """Sends a batch of ``replies`` commands, then reads the previous batch's replies."""
        if self._connection is None:
            self._connection = self._pool.get_connection()
        try:
            self._connection.send_packed_command([payload])
            self._read()
        except BaseException:
            self.close()  # replies left unread: no later command may read them
            raise
        self._pending = replies

    def flush(self) -> None:
        """Reads the replies of the batch in flight."""
        try:
            self._read()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Drops the connection (and any batch in flight) back to the pool."""
        if self._connection is not None:
            self._connection.disconnect()
            self._pool.release(self._connection)
            self._connection = None
        self._pending = 0

    def _read(self) -> None:
        pending, self._pending = self._pending, 0
        failure: redis.ResponseError | None = None
        for _ in range(pending):
            try:
                self._connection.read_response()
            except redis.ResponseError as error:
                failure = failure or error
        if failure is not None:
            raise failure


def _stopped_within(seconds: float, stopping: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stopping():
            return True
        time.sleep(min(0.1, seconds))
    return stopping()
