"""Broker sources: a Redis Streams reader for Spark, its lag (the run's backlog) and a producer.

``spec`` (what to read and how to decode it), ``event_draws`` and ``producer`` are pure
Python; only ``redis_stream`` imports pyspark.
"""
