"""The keyed stage's routing code, compiled for a new parallelism as soon as a rescale to it
is taken, not by the first epoch that routes to it.

``repartitionById(P, owners[kg])`` routes a row by the partition id ``pmod(owners[kg], P)``,
which Spark generates as a class whose code holds ``P``: a parallelism the process has not
routed to before has that class compiled by the first routing task of its first epoch, and
every routing task of that epoch waits for it. The code depends on ``P``
and on where the key group column sits in the stage's rows (its position and whether it may
be null, ``Routing``), not on the rows or the assignment.

The compiled classes are cached by code and by the class loader of the thread that compiles
them, so compiling on the driver does not serve the executors: ``compile_routing`` runs the
routing of one row as a Spark job (its shuffle's map stage alone), in a job group of its own,
so that the epoch's task times, read by job group, never count it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.runtime.operators.columns import KG

log = logging.getLogger("streamscale.run")


@dataclass(frozen=True)
class Routing:
    """All the routing code depends on besides the parallelism: the key group column's
    position in the stage's rows and whether it may be null."""

    position: int
    nullable: bool


@dataclass
class _Compiled:
    """What one Spark application has compiled: each keyed operator's ``Routing`` and the
    (routing, parallelism) pairs routed or being compiled."""

    routings: dict[str, Routing] = field(default_factory=dict)
    done: set[tuple[Routing, int]] = field(default_factory=set)


# Each application's record, and all that is in them, under the one lock.
_APPLICATIONS: weakref.WeakKeyDictionary[SparkContext, _Compiled] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _compiled(sc: SparkContext) -> _Compiled:
    """``sc``'s record; the caller holds ``_LOCK``."""
    return _APPLICATIONS.setdefault(sc, _Compiled())


def routed(operator: str, rows: DataFrame, parallelism: int) -> None:
    """Notes that ``operator``'s stage routes ``rows`` to ``parallelism`` instances (its
    epoch compiles that code if nothing did before). The routing is read from the rows'
    schema once per operator."""
    sc = rows.sparkSession.sparkContext
    with _LOCK:
        routing = _compiled(sc).routings.get(operator)
    if routing is None:  # the schema read outside the lock: it may call into the JVM
        fields = rows.schema.fields
        position = next(i for i, f in enumerate(fields) if f.name == KG)
        routing = Routing(position, fields[position].nullable)
    with _LOCK:
        compiled = _compiled(sc)
        compiled.routings.setdefault(operator, routing)
        compiled.done.add((routing, parallelism))


def compile_ahead(
    spark: SparkSession, operator: str, parallelism: int, group: str
) -> threading.Thread | None:
    """Starts compiling ``operator``'s routing to ``parallelism`` instances in a thread of
    its own (returned), unless it is compiled (or compiling) already, or the operator's
    stage has not routed in this process yet (its routing unknown). A failure is logged and
    leaves the epoch at that parallelism to compile the code itself."""
    with _LOCK:
        compiled = _compiled(spark.sparkContext)
        routing = compiled.routings.get(operator)
        if routing is None or (routing, parallelism) in compiled.done:
            return None
        compiled.done.add((routing, parallelism))

    def run() -> None:
        try:
            compile_routing(spark, routing, parallelism, group)
        except Exception as error:  # noqa: BLE001 - the epoch compiles it then
            with _LOCK:
                compiled.done.discard((routing, parallelism))
            log.warning("compiling the routing of %s to %d instances ahead failed: %s",
                        operator, parallelism, error)

    thread = threading.Thread(target=run, name=f"routing-{operator}-{parallelism}", daemon=True)
    thread.start()
    return thread


def compile_routing(spark: SparkSession, routing: Routing, parallelism: int, group: str) -> None:
    """Routes one row, whose key group column sits where ``routing`` says, to
    ``parallelism`` partitions as a keyed stage does: only the shuffle's map stage runs,
    one task, which compiles the routing code in the executors' cache."""
    from engine.runtime.stage.vsn_stage import instance_column

    kg = F.col("id").cast("int")
    if routing.nullable:
        kg = F.when(F.col("id") >= 0, kg)
    before = [F.lit(0).alias(f"_{i}") for i in range(routing.position)]
    owners = tuple(i % parallelism for i in range(parallelism))
    rows = spark.range(0, 1, 1, 1).select(*before, kg.alias(KG))
    exchange = _shuffle_of(rows.repartitionById(parallelism, instance_column(owners)))
    sc = spark.sparkContext
    sc.setJobGroup(group, f"routing code for {parallelism} instances", interruptOnCancel=False)
    sc._jsc.sc().submitMapStage(exchange.shuffleDependency()).get()


def _shuffle_of(rows: DataFrame) -> Any:
    """The shuffle exchange of ``rows``'s physical plan (its root, AQE being off)."""
    plan = rows._jdf.queryExecution().executedPlan()
    while plan.getClass().getSimpleName() != "ShuffleExchangeExec":
        children = plan.children()
        if children.isEmpty():
            raise ValueError("the routing's plan has no shuffle to compile")
        plan = children.head()
    return plan
