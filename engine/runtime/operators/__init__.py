"""Keyed operator kernels in pure pyarrow: windows, dedupe and join, as one VSN instance runs
them on its key groups against the state store. No Spark here."""
