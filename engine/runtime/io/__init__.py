"""Where rows enter and leave a run: sources (clock, files, Redis streams) and their offered
load, and sinks (memory, files, PostgreSQL)."""
