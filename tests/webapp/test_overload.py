"""A burst of requests on the whole product while a run writes to its Postgres sink: the web
server holds a bounded number of connections, answers what it cannot take with 503 and
Retry-After (never 500), and the run's driver and sink keep committing epochs."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections import Counter

import psycopg2
import pytest

from tests.webapp.private_stack import LiveFeed, PrivateStack, wait_for
from tests.webapp.support import run_alone
from webapp.embedded.credentials import stored_password
from webapp.embedded.postgres_server import postgres_url

pytestmark = pytest.mark.spark

WEB_WORKERS, WEB_THREADS = 1, 4  # the defaults


class ConnectionSampler:
    """Counts the stack's open database connections per application name, every 20 ms.

    A connection counts while a live process on this machine still holds its client socket:
    the server lists a backend for a moment after its client closed it, and a connection that
    is closed and opened again must not count twice. The largest sample's rows are kept, so a
    failure shows which connections they were."""

    def __init__(self, dsn: str) -> None:
        # Named, so that it never counts as one of the stack's (a process that imported the
        # web app's ASGI module carries the web server's PGAPPNAME).
        self.conn = psycopg2.connect(dsn, application_name="overload-sampler")
        self.conn.autocommit = True
        self.most: Counter[str] = Counter()
        self.worst: dict[str, list[tuple]] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        with self.conn.cursor() as cur:
            while not self.stopped.is_set():
                cur.execute("SELECT application_name, client_port, pid, backend_start, state, "
                            "left(query, 60) FROM pg_stat_activity WHERE datname = 'streamscale'")
                rows = cur.fetchall()
                held = _client_ports_held()
                live = [row for row in rows if row[1] in held]
                for name, count in Counter(row[0] for row in live).items():
                    if count > self.most[name]:
                        self.most[name] = count
                        self.worst[name] = [row + (held[row[1]],) for row in live
                                            if row[0] == name]
                time.sleep(0.02)

    def stop(self) -> Counter[str]:
        self.stopped.set()
        self.thread.join()
        return self.most


async def _one(port: int, method: str, path: str, headers: dict[str, str], body: bytes = b""):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                 f"Content-Length: {len(body)}\r\n{head}\r\n".encode() + body)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 60)
    writer.close()
    status = int(answer.split(b" ", 2)[1])
    return status, b"\r\nretry-after: " in answer.lower()


async def _burst(port: int, token: str, run_id: int) -> list[tuple[int, bool]]:
    calls = []
    for i in range(200):  # unauthenticated: random session cookies, pages and the API
        cookie = {"Cookie": f"sessionid={secrets.token_hex(16)}"}
        path = f"/runs/{run_id}/" if i % 2 else f"/api/runs/{run_id}"
        calls.append(_one(port, "GET", path, cookie))
    for i in range(30):
        body = (b'{"kind": "rescale", "operator": "counts", "parallelism": %d, "reason": "burst",'
                b' "request_id": "burst-%d"}' % (3 if i % 2 else 2, i))
        calls.append(_one(port, "POST", f"/api/runs/{run_id}/reconfigurations",
                          {"Authorization": f"Bearer {token}",
                           "Content-Type": "application/json"}, body))
    return await asyncio.gather(*calls)


def _client_ports_held() -> dict[int, int]:
    """Local TCP ports of this machine's open connections, with the process holding each."""
    import psutil

    return {c.laddr.port: c.pid for c in psutil.net_connections(kind="tcp")
            if c.pid and c.raddr and c.status == psutil.CONN_ESTABLISHED}


def _sink_epoch(dsn: str) -> int:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT coalesce(max(epoch), -1) FROM streamscale_sink.streamscale_sink_commits"
        )
        return cur.fetchone()[0]


def test_a_burst_holds_connections_and_the_run_keeps_writing():
    with PrivateStack(standby=False) as stack:
        api = stack.client(username="burst", role="admin")
        job = next(j for j in api.get("/api/jobs")["jobs"] if j["name"] == "campaign-views")
        run_id = api.get(f"/api/jobs/{job['id']}/runs")["runs"][0]["id"]
        server = stack.var_dir / "postgres"
        dsn = postgres_url(port=int((server / "port").read_text()),
                           password=stored_password(server / "password"))
        wait_for(lambda: _sink_epoch(dsn) >= 2 if _has_commits(dsn) else False, timeout=300,
                 what="the demo run's sink to commit epochs", interval=1.0)
        before = _sink_epoch(dsn)
        feed = LiveFeed(stack, api.token, run_id)
        sampler = ConnectionSampler(dsn)
        answers = run_alone(_burst(stack.port, api.token, run_id))
        most = sampler.stop()
        statuses = Counter(status for status, _ in answers)
        assert 500 not in statuses, statuses
        # 400/409: a rescale to the parallelism already asked for, or one that conflicts.
        assert set(statuses) <= {200, 202, 302, 400, 401, 409, 503}, statuses
        assert all(retry for status, retry in answers if status == 503)
        # Each worker's request threads' connections, plus the one its websocket side may use.
        assert most["streamscale-web"] <= WEB_WORKERS * (WEB_THREADS + 1), (
            most, sampler.worst.get("streamscale-web"))
        wait_for(lambda: _sink_epoch(dsn) >= before + 3, timeout=120,
                 what="the sink to keep committing after the burst", interval=1.0)
        run = api.get(f"/api/runs/{run_id}")
        assert run["status"] == "running" and run["restarts"] == 0, run
        # The live feed kept delivering epochs through the burst.
        wait_for(lambda: sum(m.get("type") == "run.epoch" for m in feed.messages) >= 3,
                 timeout=60, what="three epochs on the live feed", interval=0.5)
        feed.socket.close()


def _has_commits(dsn: str) -> bool:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT to_regclass('streamscale_sink.streamscale_sink_commits') IS NOT NULL")
        return cur.fetchone()[0]
