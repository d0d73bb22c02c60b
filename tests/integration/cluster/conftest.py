"""Simulated clusters that always clean up, whatever the test did (tests/support/cluster.py
holds the skip reason and the CLI runs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.cluster import SimCluster
from tests.support.node_build import node_build_env


@pytest.fixture
def make_cluster(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., SimCluster]]:
    """Start SimClusters under tmp_path; every one is stopped, whatever the test did."""
    started: list[SimCluster] = []

    def make(nodes: int, **kwargs: Any) -> SimCluster:
        workdir = tmp_path / f"cluster{len(started)}"
        kwargs.setdefault("env", node_build_env(request, workdir))
        cluster = SimCluster(nodes, workdir, **kwargs)
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.stop()
