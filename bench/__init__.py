"""Benchmarks of the VSN runtime against what Spark offers, measured side by side."""
