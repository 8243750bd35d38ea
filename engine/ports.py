"""Ports the engine's Spark runtime needs from its host (implemented by ``webapp``).

An epoch's metrics are a JSON-ready dict (its shape: ``engine.runtime.driver.metrics``); an
acknowledgement is an ``Ack`` (``engine.runtime.control.messages``).
"""

from __future__ import annotations

from typing import Any, Protocol

from engine.runtime.control.messages import Ack


class MetricsPublisher(Protocol):
    """Receives the metrics of every epoch of a run, as soon as the epoch ends."""

    def publish_epoch(self, run_id: str, epoch_metrics: dict[str, Any]) -> None:
        """Publishes one epoch's metrics (must be quick: it runs on the epoch's path)."""


class ReconfigurationRecorder(Protocol):
    """Receives the outcome of every reconfiguration command of a run."""

    def acknowledge(self, run_id: str, ack: Ack) -> None:
        """Records an acknowledgement: status applied or rejected, the epoch where it took
        effect, control latency and state bytes moved. Called again with the same
        ``request_id`` after a crash; implementations treat that as a no-op."""
