"""Spark SQL's xxhash64, in pure Python, so that key groups match the Spark runtime.

Spark's ``XxHash64`` expression (seed 42) hashes each column with the running hash as
seed: LongType via ``hashLong``, IntegerType/BooleanType via ``hashInt``, strings via
``hashUnsafeBytes`` of their UTF-8 bytes, DoubleType via ``hashLong`` of the IEEE bits
(with -0.0 as 0.0), and a null column leaves the running hash unchanged.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable

SPARK_SEED = 42
_MASK = (1 << 64) - 1
P1 = 0x9E3779B185EBCA87
P2 = 0xC2B2AE3D27D4EB4F
P3 = 0x165667B19E3779F9
P4 = 0x85EBCA77C2B2AE63
P5 = 0x27D4EB2F165667C5


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * P2) & _MASK
    h ^= h >> 29
    h = (h * P3) & _MASK
    h ^= h >> 32
    return h


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * P2) & _MASK
    return (_rotl(acc, 31) * P1) & _MASK


def _merge(acc: int, value: int) -> int:
    acc ^= _round(0, value)
    return (acc * P1 + P4) & _MASK


def hash_int(value: int, seed: int) -> int:
    """Spark's XXH64.hashInt: the 4-byte little-endian int ``value``; unsigned 64-bit result."""
    h = (seed + P5 + 4) & _MASK
    h ^= ((value & 0xFFFFFFFF) * P1) & _MASK
    h = (_rotl(h, 23) * P2 + P3) & _MASK
    return _fmix(h)


def hash_long(value: int, seed: int) -> int:
    """Spark's XXH64.hashLong: the 8-byte little-endian long ``value``."""
    h = (seed + P5 + 8) & _MASK
    h ^= _round(0, value & _MASK)
    h = (_rotl(h, 27) * P1 + P4) & _MASK
    return _fmix(h)


def hash_bytes(data: bytes, seed: int) -> int:
    """Spark's XXH64.hashUnsafeBytes (standard XXH64 of ``data``)."""
    seed &= _MASK
    length, offset = len(data), 0
    if length >= 32:
        v1, v2 = (seed + P1 + P2) & _MASK, (seed + P2) & _MASK
        v3, v4 = seed, (seed - P1) & _MASK
        while offset <= length - 32:
            a, b, c, d = struct.unpack_from("<4Q", data, offset)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            offset += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + P5) & _MASK
    h = (h + length) & _MASK
    while offset <= length - 8:
        (k,) = struct.unpack_from("<Q", data, offset)
        h ^= _round(0, k)
        h = (_rotl(h, 27) * P1 + P4) & _MASK
        offset += 8
    if offset <= length - 4:
        (k,) = struct.unpack_from("<I", data, offset)
        h ^= (k * P1) & _MASK
        h = (_rotl(h, 23) * P2 + P3) & _MASK
        offset += 4
    while offset < length:
        h ^= (data[offset] * P5) & _MASK
        h = (_rotl(h, 11) * P1) & _MASK
        offset += 1
    return _fmix(h)


def _double_bits(value: float) -> int:
    if value == 0.0:
        value = 0.0  # Spark normalises -0.0 before hashing
    if math.isnan(value):
        return 0x7FF8000000000000  # Java's doubleToLongBits canonical NaN
    (bits,) = struct.unpack("<q", struct.pack("<d", value))
    return bits


def hash_value(value: object, seed: int) -> int:
    """The running hash after one column value, typed as the Spark runtime types it."""
    if value is None:
        return seed & _MASK
    if isinstance(value, bool):
        return hash_int(1 if value else 0, seed)
    if isinstance(value, int):
        return hash_long(value, seed)
    if isinstance(value, float):
        return hash_long(_double_bits(value), seed)
    if isinstance(value, str):
        return hash_bytes(value.encode("utf-8"), seed)
    if isinstance(value, (bytes, bytearray)):
        return hash_bytes(bytes(value), seed)
    raise TypeError(f"cannot hash a key column of type {type(value).__name__}")


def to_signed(value: int) -> int:
    """An unsigned 64-bit value read as Java's signed long."""
    value &= _MASK
    return value - (1 << 64) if value >= 1 << 63 else value


def spark_xxhash64(values: Iterable[object], seed: int = SPARK_SEED) -> int:
    """What ``SELECT xxhash64(c1, c2, ...)`` returns (a signed 64-bit int)."""
    h = seed & _MASK
    for value in values:
        h = hash_value(value, h)
    return to_signed(h)
