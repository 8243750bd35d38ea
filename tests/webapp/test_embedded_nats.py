"""The embedded NATS: started with JetStream and a password on loopback, reused, stopped and
started again on the same port with its streams kept; a source planning an epoch while it
restarts waits for it instead of failing."""

from __future__ import annotations

import threading
from pathlib import Path

import nats
import pytest
from nats.errors import NoServersError

from engine.runtime.io.broker import spec as broker_spec
from engine.runtime.io.broker.nats_client import NatsSpec
from engine.runtime.io.broker.nats_offsets import take_sequences
from tests.engine.runtime.nats_jobs import bodies, fill
from tests.webapp.embedded_var import no_django_fixture, var_dir_fixture  # noqa: F401
from tests.webapp.support import run_alone
from webapp import embedded


def _without_password(url: str) -> str:
    return "nats://" + url.split("@", 1)[1]


async def _refused(url: str) -> bool:
    try:
        client = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=1,
                                    reconnect_time_wait=0.1, connect_timeout=5)
    except (NoServersError, nats.errors.Error):
        return True
    await client.close()
    return False


def test_started_with_jetstream_and_a_password_reused_and_restarted_with_its_streams(
    var_dir: Path
) -> None:
    url = embedded.ensure_nats(var_dir=var_dir)
    assert url.startswith("nats://streamscale:") and "@127.0.0.1:" in url
    assert embedded.ensure_nats(var_dir=var_dir) == url and embedded.nats_running(var_dir=var_dir)
    assert run_alone(_refused(_without_password(url)))
    assert (var_dir / "nats" / "password").stat().st_mode & 0o077 == 0
    assert fill(url, "KEPT", bodies(10)) == 10
    embedded.stop_nats(var_dir=var_dir)
    assert not embedded.nats_running(var_dir=var_dir)
    embedded.stop_nats(var_dir=var_dir)  # nothing to stop: no error
    assert embedded.ensure_nats(var_dir=var_dir) == url
    spec = NatsSpec.from_params("events", {"url": url, "streams": ["KEPT"], "start": "earliest",
                                           "schema": {"event_id": "long"}})
    assert take_sequences(spec, None).end["streams"] == {"KEPT": {"seq": 10}}


def test_planning_waits_for_a_restarting_server(var_dir: Path, monkeypatch) -> None:  # noqa: ANN001
    url = embedded.ensure_nats(var_dir=var_dir)
    fill(url, "LATER", bodies(5))
    spec = NatsSpec.from_params("events", {"url": url, "streams": ["LATER"],
                                           "start": "earliest", "schema": {"event_id": "long"},
                                           "reconnect_seconds": 120})
    embedded.stop_nats(var_dir=var_dir)
    retrying = threading.Event()
    pause = broker_spec.time.sleep

    def sleep(seconds: float) -> None:  # the planner's wait between two tries
        retrying.set()
        pause(seconds)

    monkeypatch.setattr(broker_spec.time, "sleep", sleep)
    planned: list[dict] = []
    planning = threading.Thread(target=lambda: planned.append(take_sequences(spec, None)))
    planning.start()
    assert retrying.wait(60), "the planner never retried"
    embedded.ensure_nats(var_dir=var_dir)  # back while the planner is retrying
    planning.join(timeout=120)
    assert planned and planned[0].end["streams"] == {"LATER": {"seq": 5}}


@pytest.fixture(autouse=True)
def _no_stray_server(var_dir: Path):  # noqa: ANN202
    yield
    embedded.stop_nats(var_dir=var_dir)
