"""The epoch loop of one run: the streaming query, its epoch log and its metrics."""
