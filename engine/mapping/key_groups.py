"""Key groups: the fixed buckets of a job's key space that state is addressed by."""

from __future__ import annotations

from collections.abc import Sequence

from engine.mapping.xxhash64 import spark_xxhash64


def key_group_of(values: Sequence[object], key_groups: int) -> int:
    """The key group of a key, equal to Spark's ``pmod(xxhash64(c1, c2, ...), key_groups)``.

    ``values`` are the key columns in order (Python int = LongType, float = DoubleType,
    str = StringType, bool = BooleanType, None = null). Stable across processes and
    machines, unlike Python's ``hash``.
    """
    if key_groups < 1:
        raise ValueError(f"key_groups must be >= 1, got {key_groups}")
    # Python's % with a positive divisor is already pmod.
    return spark_xxhash64(tuple(values)) % key_groups
