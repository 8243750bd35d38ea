"""Deliveries to the host off the epoch's path: in order, retried, and dropped (with a log
line naming them) only after failing for longer than the give-up time."""

from __future__ import annotations

import time

from engine.runtime.control.outbox import Outbox


def test_failed_deliveries_are_retried_in_order() -> None:
    delivered: list[str] = []
    failures = {"ack": 3}

    def send(name: str):  # type: ignore[no-untyped-def]
        def deliver() -> None:
            if failures.get(name):
                failures[name] -= 1
                raise ConnectionError("refused")
            delivered.append(name)
        return deliver

    outbox = Outbox(first_retry_s=0.01)
    started = time.monotonic()
    for name in ("ack", "metrics 1", "metrics 2"):
        outbox.put(name, send(name))
    assert time.monotonic() - started < 0.01  # queuing never waits for the host
    assert outbox.flush(5)
    assert delivered == ["ack", "metrics 1", "metrics 2"] and outbox.failures == 3
    outbox.close()


def test_a_delivery_that_never_succeeds_is_dropped_and_logged(caplog) -> None:  # type: ignore[no-untyped-def]
    def refuse() -> None:
        raise ConnectionError("refused")

    delivered: list[str] = []
    outbox = Outbox(first_retry_s=0.01, max_retry_s=0.02, give_up_s=0.2)
    outbox.put("the ack of 'r1'", refuse)
    outbox.put("the metrics of epoch 3", lambda: delivered.append("m"))
    assert outbox.flush(5)
    assert outbox.dropped == ["the ack of 'r1'"] and delivered == ["m"]
    assert "dropped the ack of 'r1'" in caplog.text
    outbox.close()
