"""The policies on measured rates: ETP, DS2's recommendation, the autoscaler's decision."""

from __future__ import annotations

from typing import Any

from engine.api import (
    AutoscaleSettings,
    EngineError,
    JobGraph,
    LastChange,
    autoscale_decide,
    compute_etp,
    load_rates,
    parallelism_limits,
    parse_job_graph,
    parse_rates,
    predict_change,
    recommend_parallelism,
    stored_job_graph,
)
from webapp.errors import ServiceError


def rates_etp(document: dict[str, Any], rates: dict[str, Any]) -> dict[str, Any]:
    """ETP and congestion of each operator under measured rates."""
    graph = parse_job_graph(document)
    result = compute_etp(graph, measured_rates(rates, graph))
    return {"etp": dict(result.etp), "congested": list(result.congested)}


def load_rates_json(document: dict[str, Any], epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """The rates the policies plan with, from the load model of the stored ``epochs`` (oldest
    first): demanded rates against each unit's capacity, as the run page judges congestion."""
    graph = stored_job_graph(document)
    return {op: rates.to_dict() for op, rates in load_rates(graph, epochs).items()}


def load_outlook(before: dict[str, Any], after: dict[str, Any],
                 epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"now", "after"}``: congestion, ETP, the run's capacity and its backlog's drain time
    as measured over ``epochs`` and as predicted with ``after``'s instances."""
    graph = stored_job_graph(before)
    parallelism = {op.id: op.parallelism for op in stored_job_graph(after).operators}
    return {side: outlook.to_dict()
            for side, outlook in predict_change(graph, epochs, parallelism).items()}


def rates_recommend(document: dict[str, Any], rates: dict[str, Any]) -> dict[str, int]:
    """DS2's parallelism for each non-source operator at the measured source rates."""
    graph = parse_job_graph(document)
    return recommend_parallelism(graph, measured_rates(rates, graph))


def load_decide(
    document: dict[str, Any], *, epochs: list[dict[str, Any]], min_parallelism: int,
    max_parallelism: int | None, down_window_s: float, last: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The autoscaler's decision (up, down, hold or wait, with its changes, reasons and the
    figures that drove it) from the stored load of the epochs since the last change;
    ``last``: the autoscaler's last change (``action`` up or down, ``age_s`` ago)."""

    graph = parse_job_graph(document)
    settings = AutoscaleSettings(min_parallelism=min_parallelism,
                                 max_parallelism=max_parallelism, down_window_s=down_window_s)
    limits, fixed = parallelism_limits(graph)
    usable = [e for e in epochs if e.get("operators") and set(e["operators"]) == set(limits)]
    change = None if last is None else LastChange(last["action"], last["age_s"])
    return autoscale_decide(graph, usable, settings, limits, fixed, change).to_dict()


def measured_rates(rates: dict[str, Any], graph: JobGraph):
    """The rates JSON parsed against ``graph``; a ServiceError says why it is not usable."""
    try:
        return parse_rates(rates, graph)
    except EngineError as error:
        raise ServiceError(f"no usable measured rates yet: {error}") from None
