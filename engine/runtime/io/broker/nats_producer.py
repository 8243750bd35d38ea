"""Writing JSON messages into a JetStream stream, for tests, benchmarks and demos.

Messages are published pipelined: each asks the stream for an acknowledgement on one shared
inbox, at most ``WINDOW`` wait at once, so the stream stores each message once and the
writer waits for a round trip per window, not per message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from engine.runtime.io.broker.nats_client import REQUEST_TIMEOUT_S

WINDOW = 20_000


async def ensure_stream(client: Client, stream: str, subjects: list[str]) -> None:
    """Creates ``stream`` over ``subjects`` unless it exists."""
    js = client.jetstream(timeout=REQUEST_TIMEOUT_S)
    try:
        await js.stream_info(stream)
    except NotFoundError:
        await js.add_stream(name=stream, subjects=subjects)


async def publish_all(client: Client, subject: str, bodies: Iterable[bytes]) -> int:
    """Publishes ``bodies`` to ``subject`` and waits until the stream acknowledged every
    one; returns how many. Raises RuntimeError when the stream refused one."""
    loop = asyncio.get_running_loop()
    acked = [0]
    refused: list[bytes] = []
    room = asyncio.Semaphore(WINDOW)

    async def ack(msg: Msg) -> None:
        if b'"error"' in msg.data:
            refused.append(msg.data)
        acked[0] += 1
        room.release()

    inbox = client.new_inbox()
    subscription = await client.subscribe(inbox, cb=ack, pending_msgs_limit=-1,
                                          pending_bytes_limit=-1)
    sent = 0
    for body in bodies:
        await room.acquire()
        await client.publish(subject, body, reply=inbox)
        sent += 1
    await client.flush()
    deadline = loop.time() + REQUEST_TIMEOUT_S
    while acked[0] < sent and loop.time() < deadline:
        await asyncio.sleep(0.01)
    await subscription.unsubscribe()
    if refused or acked[0] < sent:
        reason = refused[0][:200].decode(errors="replace") if refused else "no answer"
        raise RuntimeError(f"the stream of {subject!r} acknowledged {acked[0] - len(refused)} "
                           f"of {sent} messages: {reason}")
    return sent
