"""The control channel (in memory and on Redis streams) and the listener that picks
commands up while epochs run."""

from __future__ import annotations

import time

import pytest

from engine.runtime.control.channel import MemoryControlChannel, RedisControlChannel
from engine.runtime.control.listener import ControlListener
from engine.runtime.control.messages import CommandRequest


def _request(kind, request_id, at_ms, **target):  # type: ignore[no-untyped-def]
    return CommandRequest(kind=kind, operator="counts", request_id=request_id,
                          requested_at_ms=at_ms, **target).to_message()


def _stop(request_id: str) -> dict[str, str]:
    return CommandRequest(kind="stop", operator=None, request_id=request_id,
                          requested_at_ms=time.time() * 1000.0).to_message()


@pytest.fixture(params=["memory", "redis"])
def channel(request, redis_prefix, redis_url):  # type: ignore[no-untyped-def]
    if request.param == "memory":
        return MemoryControlChannel()
    return RedisControlChannel(redis_url, "run-1", redis_prefix)


def test_commands_are_read_in_order_after_a_cursor(channel) -> None:  # type: ignore[no-untyped-def]
    first = channel.send({"request_id": "a", "kind": "stop"})
    channel.send({"request_id": "b", "kind": "stop"})
    assert [m["request_id"] for _, m in channel.read_after(None, 0)] == ["a", "b"]
    assert [m["request_id"] for _, m in channel.read_after(first, 0)] == ["b"]


def test_listener_picks_commands_up_within_milliseconds(channel) -> None:  # type: ignore[no-untyped-def]
    rejected: list = []
    listener = ControlListener(channel, None, rejected.append, block_ms=50)
    listener.start()
    try:
        channel.send(_request("rescale", "r1", time.time() * 1000.0, parallelism=4))
        channel.send({"request_id": "bad", "kind": "nonsense"})
        deadline = time.monotonic() + 5
        picked: list = []
        while time.monotonic() < deadline and not (picked and rejected):
            picked += listener.drain()
            time.sleep(0.01)
    finally:
        listener.stop()
    assert [c.request_id for c in picked] == ["r1"]
    assert picked[0].parallelism == 4 and picked[0].control_latency_ms < 40
    assert rejected and "kind must be one of" in rejected[0].reason


def _drain_until(listener: ControlListener, request_id: str, timeout_s: float = 5.0) -> list:
    picked: list = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and request_id not in [c.request_id for c in picked]:
        picked += listener.drain()
        time.sleep(0.01)
    return picked


def test_listener_survives_a_malformed_command_whose_ack_fails(channel, caplog) -> None:  # type: ignore[no-untyped-def]
    def failing_ack(rejection: object) -> None:
        raise ConnectionError("postgres refused the connection")

    listener = ControlListener(channel, None, failing_ack, block_ms=50)
    listener.start()
    try:
        bad = channel.send({"request_id": "bad", "kind": "nonsense"})
        channel.send(_stop("stop-1"))
        picked = _drain_until(listener, "stop-1")
    finally:
        listener.stop()
    assert [c.kind for c in picked] == ["stop"]
    assert listener.dropped == [bad]
    assert "dropped control message" in caplog.text and "postgres refused" in caplog.text


def test_listener_survives_a_failing_channel_and_picks_up_later_commands() -> None:
    class FlakyChannel(MemoryControlChannel):
        failures = 3

        def read_after(self, cursor, block_ms):  # type: ignore[no-untyped-def]
            if self.failures:
                self.failures -= 1
                raise ConnectionError("redis went away")
            return super().read_after(cursor, block_ms)

    channel = FlakyChannel()
    listener = ControlListener(channel, None, lambda rejection: None, block_ms=50)
    listener.start()
    try:
        channel.send(_stop("stop-1"))
        picked = _drain_until(listener, "stop-1", timeout_s=10)
    finally:
        listener.stop()
    assert [c.request_id for c in picked] == ["stop-1"] and listener.error is None


def test_the_listener_tells_each_command_as_it_comes_and_drains_them_in_order() -> None:
    channel = MemoryControlChannel()
    told: list[str] = []
    listener = ControlListener(channel, None, lambda rejection: None, block_ms=50,
                               on_command=lambda command: told.append(command.request_id))
    now = time.time() * 1000.0
    channel.send(_request("rescale", "up", now, parallelism=4))
    channel.send(_request("rebalance", "even", now, assignment="weighted"))
    channel.send(_request("logic", "logic", now, params={"watermark": "2 s"}))
    listener.start()
    try:
        deadline = time.monotonic() + 5
        while len(told) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        taken = listener.drain()
        again = listener.drain()
    finally:
        listener.stop()
    assert told == ["up", "even", "logic"]  # each command, as it is picked up
    assert [c.request_id for c in taken] == ["up", "even", "logic"]  # in order, for one epoch
    assert again == []
