"""Broker sources: Redis Streams and NATS JetStream readers for Spark, their lag (the run's
backlog) and producers.

``spec`` (what to read and how to decode it), ``event_draws`` and ``producer`` are pure
Python; only the readers (``redis_stream``, ``nats_stream``) and the rows they keep between
plan and epoch (``read_ahead``, which counts and drops the dead letters) import pyspark.
"""
