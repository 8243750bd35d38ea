"""Spark runtime of the engine: runs job graphs as Spark Structured Streaming queries.

The only part of ``engine`` that imports PySpark. Keyed operators run through the
virtual shared-nothing (VSN) stage: state lives in a shared store addressed by
(operator, key group), so parallelism changes at any epoch without moving state.
"""
