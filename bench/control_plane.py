"""Control-plane benchmark: what a user waits for between an API request and its effect.

Starts the whole product (web server, Celery worker and beat, embedded Postgres and Redis in a
private folder), stops the demo run the product starts with (so one run is on Spark),
creates a job through the API, starts a run on Spark (1 s epochs), waits for it to warm up
(``WARMUP_EPOCHS``), connects
`clients` websocket clients to the run's live channel, then sends `rescales` rescale requests
through the API, one after the other. Figures (p50 and p99 over the requests or deliveries):

- `api_to_pickup_ms`: from the moment the API request is sent to the moment the driver picked
  the command up (the driver stamps the pick-up in its acknowledgement);
- `request_to_applied_ms`: from the API request to the end of the first epoch committed at the
  new parallelism (the record's `applied_at`, which the driver's acknowledgement stamps);
- `ws_delivery_ms`: from the moment the driver host published an epoch to the moment each
  websocket client received it, over all clients and epochs.

A request applies to the epoch after the one running when it comes. The hops of the first
figure are printed as context: API request -> the record inserted (its
`requested_at`: HTTP, authentication, the run's row lock, planning), record -> command appended
to the run's control stream (the command's `requested_at`: audit entry, commit, XADD), append
-> the driver's pick-up; and the API's answer.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from datetime import datetime
from typing import Any

from bench.workload import chain_job, generator_source, views_filter, window_count
from tests.webapp.private_stack import ApiClient, PrivateStack, wait_for

BENCH_DAG = chain_job(
    "bench-control-plane",
    [
        generator_source(20000, keys=5000),
        views_filter(),
        window_count(2, aggregates={"views": "count(*)"}),
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    key_groups=64,
)


WARMUP_EPOCHS = 8


def measure(*, clients: int = 20, rescales: int = 20) -> dict[str, Any]:
    """Run the benchmark on a private stack and return its figures."""
    with PrivateStack() as stack:
        _progress(f"stack up at {stack.url}")
        api = stack.client(username="bench", role="admin")
        _stop_other_runs(api)
        job = api.post("/api/jobs", BENCH_DAG)
        run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        _progress(f"run {run_id} started; waiting for {WARMUP_EPOCHS} epochs (the JVM and the "
                  "Python workers warm up)")
        wait_for(lambda: (api.get(f"/api/runs/{run_id}").get("epoch") or -1) >= WARMUP_EPOCHS,
                 timeout=300, what="the first epochs")
        delivery, sizes, samples = asyncio.run(
            _measure_live(api, stack.port, run_id, clients=clients, rescales=rescales))
        api.post(f"/api/runs/{run_id}/stop", {})
    for sample in samples:
        _progress(f"applied at epoch {sample['applied_epoch']:.0f} after "
                  f"{sample['request_to_applied_ms']:.0f} ms")
    return {**figures(samples, delivery, clients),
            "ws_bytes_per_epoch": round(statistics.median(sizes)) if sizes else None}


def _stop_other_runs(api: ApiClient) -> None:
    """Stops the demo run the product starts on its first start, through the API, so the
    figures are those of one run on Spark, as a user with one job sees them."""
    for job in api.get("/api/jobs")["jobs"]:
        for run in api.get(f"/api/jobs/{job['id']}/runs")["runs"]:
            if run["status"] in ("starting", "running", "recovering"):
                api.post(f"/api/runs/{run['id']}/stop", {"reason": "control-plane benchmark"})
                wait_for(lambda rid=run["id"]: api.get(f"/api/runs/{rid}")["status"]
                         in ("stopped", "failed"), timeout=120, what="the demo run to stop")
                _progress(f"stopped run {run['id']} of job {job['name']}")


def figures(samples: list[dict[str, float]], delivery: list[float],
            clients: int) -> dict[str, Any]:
    """The JSON line: headline figures first, then the hops as context."""
    def pct(name: str, q: int) -> float | None:
        return _pct([s[name] for s in samples if s.get(name) is not None], q)

    result: dict[str, Any] = {}
    for name in ("api_to_pickup_ms", "request_to_applied_ms"):
        result[f"{name}_p50"], result[f"{name}_p99"] = pct(name, 50), pct(name, 99)
    result |= {"ws_delivery_ms_p50": _pct(delivery, 50), "ws_delivery_ms_p99": _pct(delivery, 99),
               "clients": clients, "rescales": len(samples)}
    for name in ("api_answer_ms", "api_to_record_ms", "record_to_send_ms", "send_to_pickup_ms"):
        result[f"{name}_p50"], result[f"{name}_p99"] = pct(name, 50), pct(name, 99)
    return result


async def _measure_live(api, port, run_id, *, clients, rescales):
    import websockets

    delivery: list[float] = []
    sizes: list[int] = []
    headers = {"Authorization": f"Bearer {api.token}", "Origin": f"http://127.0.0.1:{port}"}
    sockets = [await websockets.connect(f"ws://127.0.0.1:{port}/ws/runs/{run_id}/",
                                        additional_headers=headers, max_size=None)
               for _ in range(clients)]
    readers = [asyncio.create_task(_read(ws, delivery, sizes)) for ws in sockets]
    samples = await asyncio.to_thread(_rescale_loop, api, run_id, rescales)
    await asyncio.sleep(2)
    for reader in readers:
        reader.cancel()
    for ws in sockets:
        await ws.close()
    return delivery, sizes, samples


async def _read(ws, delivery: list[float], sizes: list[int]) -> None:
    while True:
        raw = await ws.recv()
        received = time.time()
        event = json.loads(raw)
        if event.get("type") == "run.epoch":
            delivery.append((received - event["metrics"]["t"]) * 1000.0)
            sizes.append(len(raw.encode()))


def _rescale_loop(api: ApiClient, run_id: int, rescales: int) -> list[dict[str, float]]:
    samples = []
    for i in range(rescales):
        time.sleep(0.3 + (0.07 * i) % 0.7)  # requests land at different points of an epoch
        sent_ms = time.time() * 1000.0
        answer = api.post(f"/api/runs/{run_id}/reconfigurations", {
            "kind": "rescale", "operator": "counts", "parallelism": 3 if i % 2 == 0 else 2,
            "reason": "control-plane benchmark", "request_id": f"bench-{i}"})
        answered_ms = time.time() * 1000.0
        record = wait_for(lambda rid=answer["id"]: _settled(api, rid), timeout=60,
                          what="an acknowledgement", interval=0.05)
        if record["status"] == "applied":
            samples.append(_sample(record, sent_ms, answered_ms))
        _progress(f"rescale {i + 1}/{rescales}: {record['status']} at epoch "
                  f"{record['applied_epoch']}: {samples[-1] if samples else ''}")
    return samples


def _sample(record: dict[str, Any], sent_ms: float, answered_ms: float) -> dict[str, float]:
    ack = record["acks"][0]
    applied_ms = _ms(record["applied_at"])
    recorded_ms = _ms(record["requested_at"])
    return {
        "applied_epoch": record["applied_epoch"],
        "api_to_pickup_ms": ack["picked_up_at_ms"] - sent_ms,
        "request_to_applied_ms": applied_ms - sent_ms,
        "api_answer_ms": answered_ms - sent_ms,
        "api_to_record_ms": recorded_ms - sent_ms,
        "record_to_send_ms": ack["requested_at_ms"] - recorded_ms,
        "send_to_pickup_ms": ack["picked_up_at_ms"] - ack["requested_at_ms"],
    }


def _ms(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp() * 1000.0


def _settled(api: ApiClient, reconfiguration_id: int) -> dict | None:
    record = api.get(f"/api/reconfigurations/{reconfiguration_id}")
    return record if record["status"] in ("applied", "rejected", "failed") else None


def _pct(values: list[float], q: int) -> float | None:
    """Nearest-rank percentile (p99 of 20 samples is the largest)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, -(-len(ordered) * q // 100) - 1))], 1)


def _progress(message: str) -> None:
    print(f"[bench control] {message}", file=sys.stderr, flush=True)
