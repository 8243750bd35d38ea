"""Control-plane benchmark: API request to driver pick-up, and websocket delivery to 20 clients.

Starts the whole product (web server, Celery worker and beat, embedded Postgres and Redis in a
private folder), creates a job through the API, starts a run on Spark, connects `clients`
websocket clients to the run's live channel, then sends `rescales` rescale requests through the
API. Figures:

- control latency: from the moment the API request is sent to the moment the driver picked the
  command up (the driver stamps the pick-up in its acknowledgement), p50 and p99;
- delivery latency: from the moment the driver host published an epoch's metrics to the moment
  each websocket client received them, p50 and p99 over all clients and epochs;
- bytes per epoch: the size of one epoch's live update on the wire.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any

from webapp.launcher.private_stack import ApiClient, PrivateStack, wait_for

BENCH_DAG = {
    "name": "bench-control-plane",
    "key_groups": 64,
    "operators": [
        {"id": "events", "type": "source.generator",
         "params": {"rows_per_second": 20000, "keys": 5000}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "counts", "type": "window_aggregate", "parallelism": 2,
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "10 seconds",
                    "watermark": "2 seconds", "aggregates": {"views": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "events", "to": "views"}, {"from": "views", "to": "counts"},
              {"from": "counts", "to": "out"}],
}


def measure(*, clients: int = 20, rescales: int = 20) -> dict[str, Any]:
    """Run the benchmark on a private stack and return its figures."""
    with PrivateStack() as stack:
        _progress(f"stack up at {stack.url}")
        api = stack.client(username="bench", role="admin")
        job = api.post("/api/jobs", BENCH_DAG)
        run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        _progress(f"run {run_id} started; waiting for its first epochs")
        wait_for(lambda: (api.get(f"/api/runs/{run_id}").get("epoch") or -1) >= 2,
                 timeout=300, what="the first epochs")
        delivery, sizes, control = asyncio.run(
            _measure_live(api, stack.port, run_id, clients=clients, rescales=rescales))
        api.post(f"/api/runs/{run_id}/stop", {})
    return {
        "control_latency_ms_p50": _pct(control, 50), "control_latency_ms_p99": _pct(control, 99),
        "rescales": len(control), "ws_clients": clients,
        "ws_delivery_ms_p50": _pct(delivery, 50), "ws_delivery_ms_p99": _pct(delivery, 99),
        "ws_bytes_per_epoch": round(statistics.median(sizes)) if sizes else None,
    }


async def _measure_live(api, port, run_id, *, clients, rescales):
    import websockets

    delivery: list[float] = []
    sizes: list[int] = []
    headers = {"Authorization": f"Bearer {api.token}", "Origin": f"http://127.0.0.1:{port}"}
    sockets = [await websockets.connect(f"ws://127.0.0.1:{port}/ws/runs/{run_id}/",
                                        additional_headers=headers, max_size=None)
               for _ in range(clients)]
    readers = [asyncio.create_task(_read(ws, delivery, sizes)) for ws in sockets]
    control = await asyncio.to_thread(_rescale_loop, api, run_id, rescales)
    await asyncio.sleep(2)
    for reader in readers:
        reader.cancel()
    for ws in sockets:
        await ws.close()
    return delivery, sizes, control


async def _read(ws, delivery: list[float], sizes: list[int]) -> None:
    while True:
        raw = await ws.recv()
        received = time.time()
        event = json.loads(raw)
        if event.get("type") == "run.epoch":
            delivery.append((received - event["metrics"]["t"]) * 1000.0)
            sizes.append(len(raw.encode()))


def _rescale_loop(api: ApiClient, run_id: int, rescales: int) -> list[float]:
    latencies = []
    for i in range(rescales):
        sent_ms = time.time() * 1000.0
        answer = api.post(f"/api/runs/{run_id}/reconfigurations", {
            "kind": "rescale", "operator": "counts", "parallelism": 3 if i % 2 == 0 else 2,
            "reason": "control-plane benchmark", "request_id": f"bench-{i}"})
        record = wait_for(lambda rid=answer["id"]: _settled(api, rid), timeout=60,
                          what="an acknowledgement")
        ack = (record.get("acks") or [{}])[0]
        if record["status"] == "applied" and ack.get("picked_up_at_ms"):
            latencies.append(ack["picked_up_at_ms"] - sent_ms)
        _progress(f"rescale {i + 1}/{rescales}: {record['status']} at epoch "
                  f"{record['applied_epoch']}")
    return latencies


def _settled(api: ApiClient, reconfiguration_id: int) -> dict | None:
    record = api.get(f"/api/reconfigurations/{reconfiguration_id}")
    return record if record["status"] in ("applied", "rejected", "failed") else None


def _pct(values: list[float], q: int) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))], 1)


def _progress(message: str) -> None:
    print(f"[bench control] {message}", file=sys.stderr, flush=True)
