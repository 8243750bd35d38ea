"""The epoch loop of one run: its plans, its epochs, its epoch log and its metrics."""
