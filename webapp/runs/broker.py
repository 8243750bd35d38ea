"""Reads on a run's broker sources: their streams and the dead letters of the whole run."""

from __future__ import annotations

from typing import Any

from django.db import connection

from webapp import engine_gateway
from webapp.engine_gateway import BROKER_SOURCE_TYPES

DEAD_LETTERS_SQL = """
SELECT source.key,
       sum((source.value->>'dead_letters')::bigint),
       (array_agg(source.value->>'dead_letter_sample' ORDER BY e.epoch DESC)
          FILTER (WHERE source.value->>'dead_letter_sample' IS NOT NULL))[1]
FROM jobs_runepoch e, jsonb_each(e.broker) AS source
WHERE e.run_id = %s
GROUP BY source.key
"""


def run_broker_sources(*, run_id: int, document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per broker source of the run: its URL (password masked), streams, the run's dead
    letters so far and the latest sample of one."""
    shown = engine_gateway.dag_shown(document)
    sources = {
        op["id"]: {"url": op["params"].get("url"), "streams": op["params"].get("streams", []),
                   "dead_letters": 0, "sample": None}
        for op in shown.get("operators", []) if op.get("type") in BROKER_SOURCE_TYPES
    }
    if not sources:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(DEAD_LETTERS_SQL, [run_id])
        for op_id, count, sample in cursor.fetchall():
            if op_id in sources:
                sources[op_id].update(dead_letters=int(count or 0), sample=sample)
    return sources
