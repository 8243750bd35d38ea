"""The two brokers the source tests run against, behind one face: fresh streams filled with
the same events (``broker_jobs``, ``nats_jobs``), the job that reads them, and the windows
that job must give; for the tests whose body is the same for a Redis and a NATS source."""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from tests.engine.runtime import broker_jobs, nats_jobs


@dataclass(frozen=True)
class Broker(ABC):
    """A broker of the suite and two fresh streams on it."""

    name: str
    url: str
    streams: list[str]

    @abstractmethod
    def fill_for_run(self, streams: list[str], count: int, cap: int,
                     malformed_every: int = 0) -> tuple[int, int]:
        """Writes events ``0..count-1`` and a closing tail to each of ``streams``; returns
        (entries written, the epoch that reads the last of them) for ``cap`` an epoch."""

    @abstractmethod
    def job(self, streams: list[str], cap: int, sink: dict[str, Any]) -> dict[str, Any]:
        """The job reading ``streams`` into a keyed window aggregate and ``sink``."""

    @abstractmethod
    def expected_windows(self, streams: list[str], count: int) -> dict[tuple[int, int], tuple]:
        """The windows the job must give for ``streams`` each holding ``count`` events."""

    @abstractmethod
    def delete(self) -> None:
        """Removes the streams."""


class RedisBroker(Broker):
    def fill_for_run(self, streams: list[str], count: int, cap: int,
                     malformed_every: int = 0) -> tuple[int, int]:
        return broker_jobs.fill_for_run(self._client(), streams, count, cap, malformed_every)

    def job(self, streams: list[str], cap: int, sink: dict[str, Any]) -> dict[str, Any]:
        return broker_jobs.stream_job(self.url, streams, cap, sink)

    def expected_windows(self, streams: list[str], count: int) -> dict[tuple[int, int], tuple]:
        return broker_jobs.batch_windows(self._client(), streams)  # read back: a batch read

    def delete(self) -> None:
        self._client().delete(*self.streams)

    def _client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


class NatsBroker(Broker):
    def fill_for_run(self, streams: list[str], count: int, cap: int,
                     malformed_every: int = 0) -> tuple[int, int]:
        return nats_jobs.fill_for_run(self.url, streams, count, cap, malformed_every)

    def job(self, streams: list[str], cap: int, sink: dict[str, Any]) -> dict[str, Any]:
        return nats_jobs.nats_job(self.url, streams, cap, sink)

    def expected_windows(self, streams: list[str], count: int) -> dict[tuple[int, int], tuple]:
        return nats_jobs.expected_windows(len(streams), count)

    def delete(self) -> None:
        nats_jobs.delete_streams(self.url, self.streams)


@pytest.fixture(params=["redis", "nats"], name="any_broker")
def any_broker_fixture(request: pytest.FixtureRequest,
               service_urls: dict[str, str]) -> Iterator[Broker]:
    """The suite's Redis, then its NATS, each with two fresh streams deleted afterwards."""
    if request.param == "redis":
        name = f"sstest-{uuid.uuid4().hex[:8]}"
        broker: Broker = RedisBroker("redis", service_urls["redis_url"],
                                     [f"{name}:a", f"{name}:b"])
    else:
        broker = NatsBroker("nats", service_urls["nats_url"],
                            [nats_jobs.new_stream(), nats_jobs.new_stream()])
    yield broker
    broker.delete()


def read_in_capped_epochs(epochs: list[dict[str, Any]], *, last: int, total: int, cap: int,
                          dead_letters: int) -> str:
    """Checks a run's published ``epochs``: 0 to ``last``, each reading at most ``cap`` of the
    ``total`` entries, a backlog that starts at the rest and drains, and ``dead_letters`` in
    all; the first dead letter's sample."""
    epochs = sorted(epochs, key=lambda e: e["epoch"])
    consumed = [e["operators"]["events"]["rows_out"] for e in epochs]
    assert [e["epoch"] for e in epochs] == list(range(last + 1))
    assert sum(consumed) == total and max(consumed) == cap
    assert epochs[0]["backlog_rows"] == total - cap
    assert epochs[-1]["backlog_rows"] == 0
    letters = [e["broker_sources"]["events"] for e in epochs]
    assert sum(r["dead_letters"] for r in letters) == dead_letters
    return str(next(r["dead_letter_sample"] for r in letters if r["dead_letters"]))
