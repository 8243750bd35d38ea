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


class _FlakyPublisher:
    """Refuses its first ``refusals`` epochs, then keeps what it is sent."""

    def __init__(self, refusals: int) -> None:
        self.refusals, self.epochs = refusals, []  # type: ignore[var-annotated]

    def publish_epoch(self, run_id: str, metrics: dict) -> None:  # type: ignore[type-arg]
        if self.refusals:
            self.refusals -= 1
            raise ConnectionError("refused")
        self.epochs.append(metrics)


def test_metrics_built_off_the_epoch_are_built_once_and_a_failed_build_is_dropped(caplog) -> None:  # type: ignore[no-untyped-def]
    from engine.runtime.control.outbox import RunDeliveries

    publisher = _FlakyPublisher(refusals=2)
    deliveries = RunDeliveries("r", publisher, None)
    deliveries.to_host.close()
    deliveries.to_host = Outbox(first_retry_s=0.01)
    builds: list[int] = []

    def build(epoch: int):  # type: ignore[no-untyped-def]
        def figures() -> dict:  # type: ignore[type-arg]
            builds.append(epoch)
            if epoch == 1:
                raise KeyError("busy_ms")
            return {"epoch": epoch}
        return figures

    for epoch in range(3):
        deliveries.metrics(epoch, build(epoch))
    assert deliveries.flush(5)
    # Epoch 0 was refused twice and built once; epoch 1's build failed, was logged and not
    # retried; epoch 2 still went out, in order.
    assert builds == [0, 1, 2]
    assert publisher.epochs == [{"epoch": 0}, {"epoch": 2}]
    assert "could not build the metrics of epoch 1" in caplog.text
    deliveries.close()


def test_a_flush_after_close_returns_at_once_with_everything_delivered() -> None:
    delivered: list[str] = []
    outbox = Outbox()
    outbox.put("ack", lambda: delivered.append("ack"))
    outbox.close()
    started = time.monotonic()
    assert outbox.flush(5)
    assert time.monotonic() - started < 1.0  # not the flush's whole timeout
    assert delivered == ["ack"]
