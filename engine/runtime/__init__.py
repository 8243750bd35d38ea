"""Spark runtime of the engine: runs job graphs on Spark, one epoch at a time.

The only part of ``engine`` that imports PySpark. Keyed operators run through the
virtual shared-nothing (VSN) stage: state lives in a shared store addressed by
(operator, key group), so parallelism changes at any epoch without moving state.

Entered through ``api`` (start, stop and reconfigure a run) and ``cli`` (``python -m engine
run``). Its rooms, each importing only the ones below it: ``driver`` (the epoch loop),
``stage`` (an epoch on Spark: routing and the VSN stage), ``control`` (commands and the
control channel), ``io`` (sources and sinks), ``operators`` (the keyed kernels), ``state``
(the stores) and ``spark`` (the session). See docs/ARCHITECTURE.md.
"""
