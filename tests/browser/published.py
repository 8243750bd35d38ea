"""Runs whose epochs a test writes itself, through the path a driver's take
(`run_epoch_publish`), with figures chosen so that what a page shows can be checked exactly."""

from __future__ import annotations

import json
from typing import Any

CHAIN = {
    "name": "flow-chain", "key_groups": 16,
    "operators": [
        {"id": "src", "type": "source.generator", "params": {"rows_per_second": 1000}},
        {"id": "keep", "type": "filter", "params": {"condition": "amount > 0"}},
        {"id": "counts", "type": "window_aggregate",
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "10 seconds",
                    "aggregates": {"views": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {"name": "flow_out"}},
    ],
    "edges": [{"from": "src", "to": "keep"}, {"from": "keep", "to": "counts"},
              {"from": "counts", "to": "out"}],
}

CREATE = """
import json
from tests.browser.fake_run import fake_run_create
print("run", fake_run_create(dag=json.loads({document!r}), name={name!r}).pk)
"""

PUBLISH = """
import json
from webapp.runs.live import run_epoch_publish
for metrics in json.loads({epochs!r}):
    run_epoch_publish(run_id={run_id}, metrics=metrics)
"""


def chain_run(stack, name: str) -> int:
    created = stack.shell(CREATE.format(document=json.dumps(CHAIN), name=name))
    return int(created.split()[-1])


def publish(stack, run_id: int, *epochs: dict) -> None:
    stack.shell(PUBLISH.format(epochs=json.dumps(list(epochs)), run_id=run_id))


def chain_epoch(epoch: int, *, out: dict[str, float], busy: dict[str, Any], backlog: int = 0,
                growth: float | None = None, keyed: dict[str, dict] | None = None) -> dict:
    """An epoch of one second whose operators emit `out` rows/s and whose instances were busy
    `busy` ms (one figure per instance, or one for a single instance); the source reports a
    `backlog` growing by `growth` rows/s; `keyed` adds figures to an operator's (e.g. its
    watermark lag and state bytes)."""
    inputs = {"src": None, "keep": out["src"], "counts": out["keep"], "out": out["counts"]}
    operators = {}
    for op, rate_in in inputs.items():
        busy_ms = busy[op] if isinstance(busy[op], list) else [busy[op]]
        operators[op] = {"instances": len(busy_ms),
                         "rows_in": None if rate_in is None else int(rate_in),
                         "rows_out": int(out.get(op, 0)), "busy_ms": busy_ms,
                         "input_rate": rate_in, "processing_rate": 50000.0,
                         "output_rate": out.get(op, 0.0), "congested": False, "etp": 1.0,
                         **(keyed or {}).get(op, {})}
    metrics = {"epoch": epoch, "batch_duration_ms": 1000.0, "backlog_rows": backlog,
               "latency_ms": {"p50": 500.0, "p99": 900.0, "max": 1000.0},
               "operators": operators}
    if growth is not None:
        metrics["sources"] = {"src": {"offered_rate": out["src"] + growth,
                                      "backlog_growth_per_s": growth}}
    return metrics
