"""Simulated clusters under a real Slurm that always clean up, whatever the test did."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.cluster import SimCluster
from tests.support.node_build import node_build_env


@pytest.fixture
def make_slurm_cluster(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., SimCluster]]:
    """Start SimClusters with Slurm under tmp_path; every one is stopped, whatever happened."""
    started: list[SimCluster] = []

    def make(nodes: int, **kwargs: Any) -> SimCluster:
        workdir = tmp_path / f"cluster{len(started)}"
        kwargs.setdefault("env", node_build_env(request, workdir))
        cluster = SimCluster(nodes, workdir, slurm=True, **kwargs)
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.stop()
