"""The driver host's ports while PostgreSQL refuses connections: the engine's delivery queue
retries acks and metrics until the database answers again, and nothing is lost or doubled."""

from __future__ import annotations

import functools
import json
import socket
import time

import pytest
from django.db import connections

from engine.api import Ack
from engine.runtime.control.channel import open_control_channel
from engine.runtime.control.messages import Command
from engine.runtime.control.outbox import Outbox, RunDeliveries
from tests.webapp.conftest import epoch_metrics
from webapp.jobs.models import Reconfiguration, RunEpoch
from webapp.runs.driver import RunHost

pytestmark = pytest.mark.django_db(transaction=True)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_acks_and_metrics_wait_for_postgres_and_are_delivered_once(token_client, live_run):
    from django.conf import settings

    client = token_client("operator")
    response = client.post(f"/api/runs/{live_run.pk}/reconfigurations", data=json.dumps(
        {"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "x"}),
        content_type="application/json")
    channel = open_control_channel(settings.REDIS_URL, str(live_run.pk), "streamscale:")
    message = channel.read_after(None, 0)[-1][1]
    ack = Ack(request_id=message["request_id"], kind="rescale", operator="counts",
              status="applied", applied_epoch=11, control_latency_ms=3.0,
              state_bytes_copied=0, epoch_ended_at_ms=time.time() * 1000.0,
              after={"parallelism": 3, "params": {}, "ranges": [[0, 15, 0]]})
    host, outbox = RunHost(live_run.pk), Outbox(first_retry_s=0.05, max_retry_s=0.2)
    database = connections["default"].settings_dict  # shared by every thread's connection
    port = database["PORT"]
    database["PORT"] = str(_closed_port())
    try:
        outbox.put("ack", functools.partial(host.acknowledge, str(live_run.pk), ack))
        outbox.put("metrics", functools.partial(
            host.publish_epoch, str(live_run.pk),
            epoch_metrics(11, counts_in=100, counts_capacity=1000, instances=3)))
        deadline = time.monotonic() + 10
        while outbox.failures < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        database["PORT"] = port
    assert outbox.failures >= 3
    assert outbox.flush(20) and outbox.dropped == []
    record = Reconfiguration.objects.get(pk=response.json()["id"])
    assert record.status == "applied" and len(record.acks) == 1
    assert RunEpoch.objects.filter(run=live_run, epoch=11).count() == 1
    live_run.refresh_from_db()
    assert live_run.parallelism["counts"] == 3
    outbox.put("closing its connection", lambda: connections["default"].close())
    outbox.close()


def test_the_host_receives_the_drivers_ack_and_keeps_it_as_sent(token_client, live_run):
    """The driver's deliveries hand the host the engine's `Ack`, stamped with when its epoch
    ended; the record keeps its JSON (all but the configuration before)."""
    from django.conf import settings

    client = token_client("operator")
    response = client.post(f"/api/runs/{live_run.pk}/reconfigurations", data=json.dumps(
        {"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "x"}),
        content_type="application/json")
    channel = open_control_channel(settings.REDIS_URL, str(live_run.pk), "streamscale:")
    cursor, message = channel.read_after(None, 0)[-1]
    command = Command.picked_up(message, cursor, time.time() * 1000.0)
    ack = Ack.of(command, epoch=11, before={"parallelism": 2, "params": {}, "ranges": None},
                 after={"parallelism": 3, "params": {}, "ranges": [[0, 15, 0]]},
                 state_bytes_copied=0)
    host = RunHost(live_run.pk)
    deliveries = RunDeliveries(str(live_run.pk), host, host)
    ended_ms = time.time() * 1000.0
    try:
        deliveries.acks([ack], ended_at_ms=ended_ms)
        assert deliveries.flush(20)
    finally:
        deliveries.to_host.put("closing its connection", lambda: connections["default"].close())
        deliveries.close()
    record = Reconfiguration.objects.get(pk=response.json()["id"])
    sent = ack.ended(ended_ms).to_dict()
    del sent["before"]
    assert record.status == "applied" and record.acks == [sent]
    assert record.applied_epoch == 11 and record.control_latency_ms == ack.control_latency_ms
