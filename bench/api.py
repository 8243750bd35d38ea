"""API read benchmark: concurrent GETs of a run and its job while the run keeps going.

Starts the whole product on a private stack (web server, Celery worker and beat, embedded
Postgres and Redis in a temporary folder); its demo job starts a real run on Spark with a
Postgres sink. Once the run has epochs and the product is in its steady state (its warm
standby driver, which starts after a run's start, is up), `clients` keep-alive HTTP clients
on loopback each send
GET /api/runs/{id} and GET /api/jobs/{id} in turn, one request at a time, for `seconds`.
Figures (what a user waits for):

- `p50_ms` / `p99_ms`: from sending a request to having its whole answer;
- `req_per_s`: answered requests per second of load;
- `errors`: answers other than 200, and requests that failed or timed out;
- `run_backlog_growth`: the run's backlog (rows its source has produced that no epoch has taken
  yet) at the end of the load minus at its start. Each epoch takes what its source holds, so
  the backlog is about what arrives during one epoch, and it grows while epochs lengthen;
- `run_offered` / `run_consumed`: the rows the run's sources offered and the rows its epochs
  took, summed over the epochs after the one at the start of the load up to the one at its
  end; about equal when the run kept up;
- `run_keeps_up`: whether the run kept up with its sources during the load: at least one
  epoch ended, its epochs took at least `KEPT_UP_SHARE` of the rows offered in them
  (`run_consumed >= KEPT_UP_SHARE * run_offered`), and its backlog grew by no more than one
  epoch's arrivals (`run_backlog_growth` at most the rows offered in the busiest of those
  epochs). An epoch takes what arrived while the one before ran, so a run that keeps up
  takes about what it is offered, and its backlog stays within one epoch's arrivals.

The context (not figures) says how busy the machine was (its load average before and after
the load), the cores the web server and the rest of the stack (the run, the databases, the
workers) used during the load, and the web server's CPU per answered request.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from typing import Any

import psutil

from tests.webapp.private_stack import ApiClient, PrivateStack, wait_for

REQUEST_TIMEOUT_S = 30.0
KEPT_UP_SHARE = 0.9


def measure(*, clients: int = 50, seconds: float = 30.0) -> dict[str, Any]:
    """Run the benchmark on a private stack and return its figures."""
    with PrivateStack() as stack:
        _progress(f"stack up at {stack.url}")
        api = stack.client(username="bench", role="admin")
        job_id, run_id = _demo_run(api)
        _progress(f"run {run_id} of job {job_id}: waiting for its first epochs")
        wait_for(lambda: (api.get(f"/api/runs/{run_id}").get("epoch") or -1) >= 3,
                 timeout=300, what="the first epochs", interval=1.0)
        standby_s = _standby_up(stack)
        before = api.get(f"/api/runs/{run_id}")
        paths = [f"/api/runs/{run_id}", f"/api/jobs/{job_id}"]
        _progress(f"{clients} clients for {seconds:.0f} s at epoch {before['epoch']}")
        load_before = os.getloadavg()[0]
        web_before, stack_before = _cpu_s(_web_server(stack)), _cpu_s(_stack(stack))
        latencies, errors, elapsed = asyncio.run(
            _load(stack.port, api.token, paths, clients=clients, seconds=seconds))
        web_s = _cpu_since(_web_server(stack), web_before)
        stack_s = _cpu_since(_stack(stack), stack_before)
        after = api.get(f"/api/runs/{run_id}")
        taken = _offered_and_consumed(api, run_id, before["epoch"], after["epoch"])
        _progress(f"load done at epoch {after['epoch']}; run status {after['status']}")
    ordered = sorted(latencies)
    growth = _backlog(after) - _backlog(before)
    return {
        "clients": clients,
        "requests": len(latencies) + errors,
        "req_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": _pct(ordered, 50),
        "p99_ms": _pct(ordered, 99),
        "errors": errors,
        "run_backlog_growth": growth,
        "run_offered": taken["offered"],
        "run_consumed": taken["consumed"],
        "run_keeps_up": run_keeps_up(backlog_growth=growth, **taken),
        "context": {
            "load_average_before": round(load_before, 1),
            "standby_ready_s": standby_s,
            "load_average_after": round(os.getloadavg()[0], 1),
            "run_epochs": taken["epochs"],
            "web_cores": round(web_s / elapsed, 2),
            "rest_of_stack_cores": round((stack_s - web_s) / elapsed, 2),
            "web_cpu_ms_per_request": round(web_s * 1000.0 / max(1, len(latencies)), 2),
        },
    }


def run_keeps_up(*, epochs: int, offered: int, consumed: int, busiest_epoch: int,
                 backlog_growth: int) -> bool:
    """Whether the run kept up during the load (``run_keeps_up`` in the docstring)."""
    return (epochs >= 1 and consumed >= KEPT_UP_SHARE * offered
            and backlog_growth <= busiest_epoch)


def _standby_up(stack: PrivateStack) -> float | None:
    """Seconds waited for the stack's warm standby driver (None when the product keeps none):
    its start, a JVM and a Spark session, takes both cores for a while after a run starts."""
    from tests.webapp.driver_kills import standbys_ready
    from webapp.config import load_config

    config = load_config(stack.env)
    if not config.warm_standby or config.spark_master.startswith("spark://"):
        return None
    since = time.monotonic()
    wait_for(lambda: standbys_ready(stack), timeout=300, what="the warm standby", interval=0.5)
    _progress(f"warm standby up after {time.monotonic() - since:.0f} s")
    return round(time.monotonic() - since, 1)


def _demo_run(api: ApiClient) -> tuple[int, int]:
    """The demo job and its run (the launcher's first start creates and starts both)."""
    job = next(j for j in api.get("/api/jobs")["jobs"] if j["name"] == "campaign-views")
    runs = wait_for(lambda: api.get(f"/api/jobs/{job['id']}/runs")["runs"], timeout=60,
                    what="the demo run")
    return job["id"], runs[0]["id"]


def _web_server(stack: PrivateStack) -> list[psutil.Process]:
    """The web server's processes (a server may run several workers)."""
    assert stack.process is not None
    children = psutil.Process(stack.process.pid).children(recursive=True)
    servers = [p for p in children if "webapp.asgi:application" in _cmdline(p)]
    return servers + [w for p in servers for w in p.children(recursive=True)]


def _cmdline(process: psutil.Process) -> str:
    """The command line, empty for a child that has exited meanwhile (a finished step)."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _stack(stack: PrivateStack) -> list[psutil.Process]:
    """Every process of the stack: the web server, the run's driver and Spark, the workers,
    the embedded databases."""
    assert stack.process is not None
    return psutil.Process(stack.process.pid).children(recursive=True)


def _cpu_s(processes: list[psutil.Process]) -> dict[int, float]:
    """CPU seconds each of ``processes`` has used so far, by pid."""
    used = {}
    for process in processes:
        try:
            used[process.pid] = sum(process.cpu_times()[:2])
        except psutil.Error:  # ended meanwhile (a step, a restarted child)
            pass
    return used


def _cpu_since(processes: list[psutil.Process], before: dict[int, float]) -> float:
    """CPU seconds ``processes`` used since ``before`` (all of it, for one started since)."""
    return sum(s - before.get(pid, 0.0) for pid, s in _cpu_s(processes).items())


def _backlog(run: dict[str, Any]) -> int:
    return int((run.get("metrics") or {}).get("backlog_rows") or 0)


def _offered_and_consumed(api: ApiClient, run_id: int, first: int, last: int) -> dict[str, int]:
    """The epochs first+1 .. last: how many, the rows their sources offered and consumed,
    and the most rows offered in any one of them."""
    epochs = api.get(f"/api/runs/{run_id}/metrics?since_epoch={first + 1}")["epochs"]
    offered = [[int(s.get("offered") or 0) for s in e["sources"].values()]
               for e in epochs if e["epoch"] <= last]
    consumed = [int(s.get("consumed") or 0)
                for e in epochs if e["epoch"] <= last for s in e["sources"].values()]
    return {"epochs": len(offered), "offered": sum(map(sum, offered)),
            "consumed": sum(consumed), "busiest_epoch": max(map(sum, offered), default=0)}


async def _load(port: int, token: str, paths: list[str], *, clients: int, seconds: float):
    latencies: list[float] = []
    failures: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    reporter = asyncio.create_task(_report(latencies, failures))
    await asyncio.gather(*(
        _client(port, token, paths, i, deadline, latencies, failures) for i in range(clients)))
    reporter.cancel()
    if failures:
        _progress(f"errors by kind: {dict(failures)}")
    return latencies, sum(failures.values()), time.monotonic() - started


async def _client(port, token, paths, offset, deadline, latencies, failures) -> None:
    """One user: a keep-alive connection, one request at a time; reconnects after an error."""
    conn = None
    i = offset
    while time.monotonic() < deadline:
        path = paths[i % len(paths)]
        i += 1
        sent = time.perf_counter()
        try:
            if conn is None:
                conn = await asyncio.open_connection("127.0.0.1", port)
            status = await asyncio.wait_for(_get(*conn, path, token), REQUEST_TIMEOUT_S)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as error:
            status = type(error).__name__
        if status == 200:
            latencies.append((time.perf_counter() - sent) * 1000.0)
        else:
            failures[str(status)] += 1
            if conn is not None:
                conn[1].close()
                conn = None
            await asyncio.sleep(0.1)
    if conn is not None:
        conn[1].close()


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str,
               token: str) -> int | str:
    """One HTTP/1.1 GET on a kept-alive connection; returns the status once the body is read."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                 "Connection: keep-alive\r\n\r\n".encode())
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length = None
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    if length is None:
        raise ValueError("answer without Content-Length")
    await reader.readexactly(length)
    return status


async def _report(latencies: list[float], failures: Counter[str]) -> None:
    while True:
        await asyncio.sleep(5)
        _progress(f"{len(latencies)} answered, {sum(failures.values())} errors")


def _pct(ordered: list[float], q: int) -> float | None:
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))], 1)


def _progress(message: str) -> None:
    print(f"[bench api] {message}", file=sys.stderr, flush=True)
