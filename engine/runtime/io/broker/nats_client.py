"""A synchronous door to NATS JetStream for ``source.nats``: each call runs the asyncio
client on a loop of its own, so the driver and Spark's Python workers call it like Redis.

Errors are told apart as the run's supervisor needs them: a server that cannot be reached
(refused, timed out, restarting) is retried for the source's ``reconnect_seconds``, then
fails naming source, URL and step (transient: the run is restarted with back-off); refused
credentials, a missing stream or a server without JetStream recur on every try and fail at
once as the job's own error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import nats
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js.errors import NotFoundError, ServiceUnavailableError

from engine.runtime.errors import UnsupportedJobError
from engine.runtime.io.broker.spec import (
    SourceSpec,
    StreamSpec,
    masked_url,
    retried_while_unreachable,
)

T = TypeVar("T")
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True)
class NatsSpec(SourceSpec):
    """The params of one ``source.nats`` operator, defaults applied."""

    start: str | dict[str, int]

    @classmethod
    def from_params(cls, op_id: str, params: Mapping[str, Any]) -> NatsSpec:
        """Reads validated operator params (see the catalog)."""
        start = params.get("start", "latest")
        return cls(
            **cls.read_params(op_id, params),
            start={str(k): int(v) for k, v in start.items()} if isinstance(start, Mapping)
            else str(start),
        )

    def decoding(self) -> StreamSpec:
        """The same columns as a Redis source reading one JSON field, so a message is
        decoded, and turned into a dead letter, by exactly the Redis source's rules."""
        return StreamSpec(op_id=self.op_id, url=self.url, streams=self.streams, start="latest",
                          max_entries=self.max_entries, columns=self.columns, payload="json",
                          time_field=self.time_field)


def with_nats(spec: NatsSpec, step: str, action: Callable[[Client], Awaitable[T]]) -> T:
    """Runs ``action`` on a fresh connection, retrying while the server is unreachable for
    up to ``spec.reconnect_s``; errors that recur fail at once (see the module's doc)."""

    def attempt() -> T:
        try:
            return _run(_connected(spec, action))
        except (MissingStream, ServiceUnavailableError, NoRespondersError, _Refused) as error:
            raise UnsupportedJobError(_recurring(spec, step, error)) from None

    return retried_while_unreachable(spec, step, attempt, broker="NATS",
                                     unreachable=(TimeoutError, OSError, NatsError), cause=_cause)


class MissingStream(Exception):
    """The server has no JetStream stream of this name (recurs on every try)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.stream = stream


class _Refused(Exception):
    """The server refused the connection's credentials (recurs on every try)."""


def _recurring(spec: NatsSpec, step: str, error: Exception) -> str:
    where = f"source {spec.op_id!r}: NATS at {masked_url(spec.url)}"
    if isinstance(error, MissingStream):
        return f"{where} has no JetStream stream {error.stream!r} (while {step})"
    if isinstance(error, _Refused):
        return f"{where} refused the connection while {step}: {error}"
    return f"{where} has no JetStream enabled (no answer to the JetStream API) while {step}"


def _cause(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) < 300 else text[:299] + "…"


async def _connected(spec: NatsSpec, action: Callable[[Client], Awaitable[T]]) -> T:
    failures: list[BaseException] = []

    async def remember(error: Exception) -> None:  # the client's own log would be noise
        failures.append(error)

    try:
        client = await nats.connect(
            spec.url, connect_timeout=CONNECT_TIMEOUT_S, allow_reconnect=False,
            # 0 would mean "forever"; 1 tries the server twice, then gives up.
            max_reconnect_attempts=1, reconnect_time_wait=0.1, error_cb=remember,
            name=f"streamscale {spec.op_id}")
    except nats.errors.NoServersError:
        raise _connection_error(failures) from None
    except NatsError as error:
        raise _connection_error([error]) from None
    try:
        return await action(client)
    finally:
        await client.close()


def _connection_error(failures: list[BaseException]) -> Exception:
    last = failures[-1] if failures else ConnectionError("no server answered")
    if "authorization" in str(last).lower() or "authentication" in str(last).lower():
        return _Refused(_cause(last))
    return last if isinstance(last, (OSError, NatsError)) else ConnectionError(_cause(last))


async def stream_bounds(client: Client, stream: str) -> tuple[int, int]:
    """(first, last) sequence of a stream: the oldest message it still holds and the
    newest it was given (first is last + 1 when it holds none)."""
    try:
        info = await client.jetstream(timeout=REQUEST_TIMEOUT_S).stream_info(stream)
    except NotFoundError:
        raise MissingStream(stream) from None
    state = info.state
    return int(state.first_seq), int(state.last_seq)


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run``, on a thread of its own when this thread already runs an event loop
    (a caller inside async code, such as a browser driver's loop): the client's loop must
    not be nested in another."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
