"""NATS_URL: the NATS server ``env:NATS_URL`` in a ``source.nats`` names; a malformed one
stops start-up naming the variable."""

from __future__ import annotations

import pytest

from webapp.config import ConfigError, load_config


@pytest.mark.parametrize("value", ["redis://broker.invalid:4222", "nats://", "nats://h:port"])
def test_a_malformed_nats_url_is_named(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^NATS_URL="):
        load_config({"NATS_URL": value})


def test_a_nats_url_is_taken_and_none_means_the_embedded_server() -> None:
    assert load_config({"NATS_URL": "tls://app:pw@broker.invalid:4222"}).nats_url == (
        "tls://app:pw@broker.invalid:4222")
    assert load_config({}).nats_url is None
