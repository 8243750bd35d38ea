"""``python -m engine produce``: the generator's events into a stream of the embedded Redis."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from engine.runtime.io.broker.event_draws import EventDraws
from tests.engine.test_cli import ROOT


@pytest.fixture
def target(service_urls: dict[str, str]) -> Iterator[tuple[str, str, redis.Redis]]:
    url = service_urls["redis_url"]
    stream = f"sstest-{uuid.uuid4().hex[:8]}:produced"
    client = redis.Redis.from_url(url)
    yield url, stream, client
    client.delete(stream, f"{stream}:next-event-id")


def produce(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine", "produce", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_count_writes_n_generator_events_then_exits_0(target) -> None:  # type: ignore[no-untyped-def]
    url, stream, client = target
    done = produce(url, "--stream", stream, "--keys", "50", "--count", "1200", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert _rate_line(done.stderr, 1200, stream) > 0
    entries = client.xrange(stream)
    assert len(entries) == 1200
    draws = EventDraws(keys=50, seed=3)
    for event_id, (_, raw) in enumerate(entries):  # every entry, in id order
        fields = {k.decode(): v.decode() for k, v in raw.items()}
        assert fields == draws.fields(event_id, int(fields["event_time"]))
    assert {int(f[b"campaign_id"]) for _, f in entries} <= set(range(50))
    again = produce(url, "--stream", stream, "--count", "10")  # numbering continues
    assert again.returncode == 0
    assert client.xrevrange(stream, count=1)[0][1][b"event_id"] == b"1209"


def _rate_line(stderr: str, written: int, stream: str) -> float:
    """The rate the producer's last line reports, checked against the count and seconds
    it reports beside it; 0 when there is no line. The seconds are rounded to 0.01 s and the
    rate to a whole event per second, so the product may miss the count by both roundings."""
    found = re.search(rf"^produce: wrote {written} events to {re.escape(repr(stream))} "
                      r"in (\d+\.\d\d) s \((\d+) events/s\)$", stderr, re.MULTILINE)
    if found is None:
        return 0.0
    seconds, rate = float(found[1]), int(found[2])
    assert abs(rate * seconds - written) <= rate * 0.005 + seconds * 0.5 + 1, found[0]
    return float(rate)


def test_many_batches_write_each_id_once_in_order_and_keep_the_counter(target) -> None:  # type: ignore[no-untyped-def]
    url, stream, client = target
    done = produce(url, "--stream", stream, "--count", "45000")  # three batches in flight
    assert done.returncode == 0, done.stderr
    assert _rate_line(done.stderr, 45000, stream) > 0
    assert _event_ids(client, stream) == list(range(45000))
    assert client.get(f"{stream}:next-event-id") == b"45000"


def test_ids_continue_after_entries_a_cut_short_batch_left_beyond_the_counter(target) -> None:  # type: ignore[no-untyped-def]
    url, stream, client = target
    # A batch's entries went in, its counter did not (the broker stopped between them).
    client.set(f"{stream}:next-event-id", 5)
    for event_id in range(5, 12):
        client.xadd(stream, {"event_id": str(event_id)})
    done = produce(url, "--stream", stream, "--count", "3")
    assert done.returncode == 0, done.stderr
    assert _event_ids(client, stream) == list(range(5, 15))


def test_rate_writes_until_stopped_with_progress_on_stderr(target) -> None:  # type: ignore[no-untyped-def]
    url, stream, client = target
    proc = subprocess.Popen([sys.executable, "-m", "engine", "produce", url, "--stream", stream,
                             "--keys", "10", "--rate", "400"], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(4.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "events to" in err and "/s)" in err  # progress lines
    written = client.xlen(stream)
    assert 400 <= written <= 400 * 8  # about 400 per second while it ran
    assert _rate_line(err, written, stream) > 0
    assert _event_ids(client, stream) == list(range(written))


@pytest.mark.parametrize(("args", "message"), [
    (["--stream", "s", "--count", "5", "--rate", "5"], "not allowed with argument"),
    (["--stream", "s"], "one of the arguments --count --rate is required"),
    (["--stream", "s", "--count", "0"], "--count: must be > 0, got 0"),
    (["--stream", "s", "--rate", "fast"], "--rate: 'fast' is not a number"),
    (["--count", "5"], "the following arguments are required: --stream"),
])
def test_bad_arguments_exit_2_with_a_clear_error(args: list[str], message: str) -> None:
    done = produce("redis://127.0.0.1:1/0", *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_an_env_url_names_its_variable_when_unset() -> None:
    done = produce("env:NO_SUCH_BROKER_URL", "--stream", "s", "--count", "5")
    assert done.returncode == 2
    assert "names environment variable NO_SUCH_BROKER_URL, which is not set" in done.stderr


def test_an_unreachable_broker_exits_2_without_the_password() -> None:
    done = produce("redis://:hunter2@127.0.0.1:1/0", "--stream", "s", "--count", "5")
    assert done.returncode == 2
    assert "cannot use Redis at redis://:***@127.0.0.1:1/0" in done.stderr
    assert "hunter2" not in done.stderr


def _event_ids(client: redis.Redis, stream: str) -> list[int]:
    return [int(fields[b"event_id"]) for _, fields in client.xrange(stream)]


def test_a_restarted_producer_continues_the_ids_of_a_trimmed_stream(target) -> None:  # type: ignore[no-untyped-def]
    url, stream, client = target
    first = produce(url, "--stream", stream, "--count", "1500", "--maxlen", "100")
    assert first.returncode == 0, first.stderr
    assert client.xlen(stream) < 1500  # trimmed: its length is no event count
    again = produce(url, "--stream", stream, "--count", "10", "--maxlen", "100")
    assert again.returncode == 0, again.stderr
    assert _event_ids(client, stream)[-10:] == list(range(1500, 1510))


def test_the_producer_waits_out_a_broker_restart_and_writes_each_id_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import threading

    from webapp.embedded import ensure_redis, stop_redis

    var = tmp_path / "var"
    url = ensure_redis(var_dir=var)
    client, stream = redis.Redis.from_url(url), "events"
    proc = subprocess.Popen([sys.executable, "-m", "engine", "produce", url, "--stream", stream,
                             "--rate", "300"], cwd=ROOT, text=True, stderr=subprocess.PIPE)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(iter(proc.stderr.readline, "")),
                              daemon=True)
    reader.start()
    try:
        try:
            _until(lambda: client.xlen(stream) >= 300, "the first events")
            stop_redis(var_dir=var)
            _until(lambda: any("unreachable" in line and "retrying in" in line for line in said),
                   "the producer to say it waits for the broker")
            assert proc.poll() is None, "the producer exited on the broker's restart"
            assert ensure_redis(var_dir=var) == url
            written = client.xlen(stream)
            _until(lambda: client.xlen(stream) >= written + 300, "events after the restart")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            reader.join(timeout=10)
        assert proc.returncode == 0, "".join(said)
        ids = _event_ids(client, stream)
        assert ids == list(range(len(ids)))  # no id written twice, none skipped
    finally:
        stop_redis(var_dir=var)


def _until(predicate, what: str, timeout_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {what}"
        time.sleep(0.1)
