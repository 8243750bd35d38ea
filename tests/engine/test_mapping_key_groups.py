"""key_group_of reproduces Spark SQL's pmod(xxhash64(...), K)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.mapping import key_group_of, spark_xxhash64
from engine.mapping.xxhash64 import hash_bytes, hash_int, hash_long, to_signed


def test_standard_xxh64_vectors() -> None:
    # Reference values of the XXH64 specification (seed 0).
    assert hash_bytes(b"", 0) == 0xEF46DB3751D8E999
    assert hash_bytes(b"abc", 0) == 0x44BC2CF5AD770999
    assert hash_bytes(b"Nobody inspects the spammish repetition", 0) == 0xFBCEA83C8A378BF1


def test_spark_documentation_example() -> None:
    # Spark docs: SELECT xxhash64('Spark', array(123), 2) = 5602566077635097486
    # (123 and 2 are IntegerType literals, hence hashInt; the array hashes its element).
    running = hash_bytes(b"Spark", 42)
    running = hash_int(123, running)
    running = hash_int(2, running)
    assert to_signed(running) == 5602566077635097486


# Values returned by Spark 4 (``SELECT xxhash64(...)``, BIGINT / STRING / DOUBLE / BOOLEAN
# columns) for the same inputs; kept here so that the check needs no JVM.
SPARK_VALUES = [
    ((7,), -2864211556195259663),
    (("campaign",), -6707130096031586310),
    ((1.5,), 7738255526519901366),
    ((-0.0,), -5252525462095825812),
    ((True,), -6698625589789238999),
    ((None, 3), 3188756510806108107),
    ((123456789012, "héllo wörld, a longer string over thirty-two bytes!"), 5026850182009414351),
    ((-5,), -5259934538394028452),
    (("",), -7444071767201028348),
]


@pytest.mark.parametrize(("values", "expected"), SPARK_VALUES)
def test_matches_spark(values: tuple, expected: int) -> None:
    assert spark_xxhash64(values) == expected


def test_key_group_is_spark_pmod() -> None:
    assert key_group_of((42,), 128) == 94  # SELECT pmod(xxhash64(CAST(42 AS BIGINT)), 128)
    assert key_group_of((-5,), 7) == -5259934538394028452 % 7


def test_long_hash_is_xxh64_of_eight_little_endian_bytes() -> None:
    for value in (0, 1, -1, 2**63 - 1, -(2**63), 123456789):
        assert hash_long(value, 42) == hash_bytes(value.to_bytes(8, "little", signed=True), 42)


def test_null_leaves_the_hash_unchanged_and_negative_zero_is_zero() -> None:
    assert spark_xxhash64([None]) == 42
    assert spark_xxhash64([5, None]) == spark_xxhash64([5])
    assert spark_xxhash64([-0.0]) == spark_xxhash64([0.0])
    assert spark_xxhash64([True]) != spark_xxhash64([1])


@given(st.tuples(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(), st.floats(),
                           st.booleans(), st.none())),
       st.integers(1, 4096))
def test_key_group_in_range(values: tuple, key_groups: int) -> None:
    assert 0 <= key_group_of(values, key_groups) < key_groups


def test_stable_across_processes() -> None:
    code = ("from engine.mapping import key_group_of;"
            "print(key_group_of((7, 'x', 1.5), 128), key_group_of(('campaign',), 128))")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env={"PYTHONHASHSEED": seed, "PYTHONPATH": "."}).stdout
               for seed in ("1", "2")}
    assert len(outputs) == 1
    assert outputs.pop().split() == [str(key_group_of((7, "x", 1.5), 128)),
                                     str(key_group_of(("campaign",), 128))]
