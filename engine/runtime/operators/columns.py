"""The hidden columns the VSN stage adds to every row it routes to an instance; the
kernels of every keyed operator read them under these names."""

KG = "__kg"
"""The row's key group, ``pmod(xxhash64(keys...), K)``."""

TIME_US = "__time_us"
"""The row's event time in microseconds since the epoch (null when it has none)."""
