"""Dead letters of a broker source: entries that did not fit the schema, counted and
sampled per epoch from the rows' ``DEAD_LETTER`` column, then dropped from the stream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from engine.runtime.io.broker.spec import DEAD_LETTER

DEAD_LETTER_COUNT = "dead_letters"
_SAMPLE = "dead_letter_sample"

__all__ = ["DEAD_LETTER", "DEAD_LETTER_COUNT", "dead_letter_aggregates", "dead_letters_of"]


def dead_letter_aggregates() -> list[Column]:
    """Aggregates for the source's observation: how many, and the first by entry id."""
    return [F.count(F.col(DEAD_LETTER)).alias(DEAD_LETTER_COUNT),
            F.min(F.col(DEAD_LETTER)).alias(_SAMPLE)]


def dead_letters_of(observed: Mapping[str, Any]) -> dict[str, Any]:
    """``{"count", "sample"}`` from a completed observation."""
    return {"count": int(observed[DEAD_LETTER_COUNT] or 0), "sample": observed.get(_SAMPLE)}
