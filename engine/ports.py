"""Ports the engine's Spark runtime needs from its host (implemented by ``webapp``).

The runtime calls them with plain JSON-ready dicts; see ``engine.runtime.driver.metrics`` for the
shape of an epoch's metrics and ``engine.runtime.control.reconfigure`` for an acknowledgement.
"""

from __future__ import annotations

from typing import Any, Protocol


class MetricsPublisher(Protocol):
    """Receives the metrics of every epoch of a run, as soon as the epoch ends."""

    def publish_epoch(self, run_id: str, epoch_metrics: dict[str, Any]) -> None:
        """Publishes one epoch's metrics (must be quick: it runs on the epoch's path)."""


class ReconfigurationRecorder(Protocol):
    """Receives the outcome of every reconfiguration command of a run."""

    def acknowledge(self, run_id: str, ack: dict[str, Any]) -> None:
        """Records an acknowledgement: status applied or rejected, the epoch where it took
        effect, control latency and state bytes moved. Called again with the same
        ``request_id`` after a crash; implementations treat that as a no-op."""
