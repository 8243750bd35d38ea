"""The editor offers source.nats from the catalog: its params as fields with their hints,
a start given as {stream: sequence} kept as a number in the exported document."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.browser


def test_a_nats_source_is_built_from_the_palette_with_its_params(signed_in):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    page.wait_for_selector("#validity")
    page.click('.palette-item[data-type="source.nats"]')
    node = page.locator(".editor-node").first
    op_id = node.get_attribute("data-operator")
    node.locator(".op-select").click()
    prefix = f"#param-{op_id}"
    assert page.get_attribute(f"{prefix}-url", "placeholder") == "nats://host:4222 or env:NATS_URL"
    assert "41" in (page.get_attribute(f"{prefix}-start", "placeholder") or "")
    for field in ("streams", "max_entries_per_epoch", "schema", "time_field",
                  "reconnect_seconds"):
        assert page.locator(f"{prefix}-{field}").count() == 1, field
    page.fill(f"{prefix}-url", "env:NATS_URL")
    page.fill(f"{prefix}-streams", "ORDERS")
    page.fill(f"{prefix}-start", '{"ORDERS": 41}')
    page.fill(f"{prefix}-schema", "order_id: long\namount: double")
    with page.expect_download() as download:
        page.click("#export")
    exported = json.loads(open(download.value.path()).read())
    source = next(op for op in exported["operators"] if op["id"] == op_id)
    assert source["type"] == "source.nats"
    assert source["params"] == {"url": "env:NATS_URL", "streams": ["ORDERS"],
                                "start": {"ORDERS": 41},
                                "schema": {"order_id": "long", "amount": "double"}}
