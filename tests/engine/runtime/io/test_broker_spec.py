"""Decoding stream entries by a declared schema, dead letters, and masked broker URLs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from engine.runtime.errors import StreamRuntimeError
from engine.runtime.io.broker.spec import (
    DEAD_LETTER,
    StreamSpec,
    decode_entry,
    masked_url,
    resolve_url,
)

SCHEMA = {"user": "long", "at": "timestamp", "price": "double", "ok": "boolean", "name": "string"}


def spec(**params: object) -> StreamSpec:
    return StreamSpec.from_params("src", {"url": "redis://h", "streams": ["s"],
                                          "schema": SCHEMA, **params})


def fields(**values: object) -> dict[bytes, bytes]:
    return {k.encode(): str(v).encode() for k, v in values.items()}


GOOD = {"user": 7, "at": 1_700_000_000_123, "price": 2.5, "ok": "true", "name": "ann"}
AT = datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)


def test_flat_fields_are_typed_and_the_entry_time_is_added() -> None:
    row = decode_entry(spec(), "1700000000999-3", fields(**GOOD))
    assert row == (7, AT, 2.5, True, "ann", datetime(2023, 11, 14, 22, 13, 20, 999000,
                                                       tzinfo=UTC), None)
    assert [c for c, _ in spec().output_columns()][-2:] == ["event_time", DEAD_LETTER]


def test_json_payload_with_a_time_field_adds_no_entry_time() -> None:
    s = spec(payload="json", payload_field="body", time_field="at")
    payload = {**GOOD, "at": "2023-11-14T22:13:20.123", "ok": False, "price": 3}
    row = decode_entry(s, "1-0", {b"body": json.dumps(payload).encode()})
    assert row == (7, AT, 3.0, False, "ann", None)
    assert s.ddl() == ("`user` long, `at` timestamp, `price` double, `ok` boolean, "
                       "`name` string, `__dead_letter` string")


@pytest.mark.parametrize(("entry", "error"), [
    ({**GOOD, "user": "seven"}, "field 'user': 'seven' is not a long"),
    ({**GOOD, "user": str(2**63)}, f"field 'user': '{2**63}' is not a long"),
    ({**GOOD, "at": "yesterday"}, "field 'at': 'yesterday' is not a timestamp"),
    ({**GOOD, "ok": "maybe"}, "field 'ok': 'maybe' is not a boolean"),
    ({k: v for k, v in GOOD.items() if k != "price"}, "missing field 'price'"),
])
def test_a_malformed_entry_is_a_dead_letter_naming_entry_and_field(entry: dict,
                                                                   error: str) -> None:
    row = decode_entry(spec(), "5-1", fields(**entry))
    assert row[:-1] == (None,) * 6
    assert row[-1] == f"5-1: {error}"


@pytest.mark.parametrize(("raw", "error"), [
    (b"{not json", "payload is not JSON"),
    (b"[1, 2]", "payload is not a JSON object"),
    (json.dumps({**GOOD, "user": 1.5}).encode(), "field 'user': '1.5' is not a long"),
])
def test_bad_json_payloads_are_dead_letters(raw: bytes, error: str) -> None:
    row = decode_entry(spec(payload="json"), "9-0", {b"data": raw})
    assert row[-1].startswith(f"9-0: {error}")


def test_json_null_is_a_null_value_not_an_error() -> None:
    row = decode_entry(spec(payload="json"), "9-0",
                       {b"data": json.dumps({**GOOD, "name": None}).encode()})
    assert row[4] is None and row[-1] is None


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
    ("rediss://user:p%40ss@host/1", "rediss://user:***@host/1"),
    ("redis://host:6379/0", "redis://host:6379/0"),
])
def test_masked_url_hides_only_the_password(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_an_env_url_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORDERS_BROKER", "redis://:pw@broker:6379/2")
    assert spec(url="env:ORDERS_BROKER").url == "redis://:pw@broker:6379/2"
    monkeypatch.delenv("ORDERS_BROKER")
    with pytest.raises(StreamRuntimeError, match="names environment variable ORDERS_BROKER, "
                                                 "which is not set"):
        resolve_url("src", "env:ORDERS_BROKER")
