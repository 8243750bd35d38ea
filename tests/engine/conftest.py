"""Fixtures shared by the pure engine tests (no Spark, no database)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.dag import JobGraph, parse_job_graph
from engine.policies import Rates, parse_rates
from tests.engine.builders import CAMPAIGN_VIEWS, load_example


@pytest.fixture
def campaign_doc() -> dict[str, Any]:
    """The DAG document of DESIGN.md section 4 (a fresh copy per test)."""
    return copy.deepcopy(CAMPAIGN_VIEWS)


@pytest.fixture
def campaign_graph(campaign_doc: dict[str, Any]) -> JobGraph:
    """The campaign-views job graph."""
    return parse_job_graph(campaign_doc)


@pytest.fixture
def stela_graph() -> JobGraph:
    """The 10-operator congested topology of the Stela slides (ETP(3) = ETP(4) = 0.44,
    ETP(6) = 0.11); a reconstruction with the slide rates, since the figure itself is lost."""
    return parse_job_graph(load_example("stela_topology.json"))


@pytest.fixture
def stela_rates(stela_graph: JobGraph) -> Rates:
    """Rates of the Stela example: ETP(o3) = ETP(o4) = 4/9, ETP(o6) = 1/9."""
    return parse_rates(load_example("stela_rates.json"), stela_graph)
