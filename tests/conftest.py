"""The two tiers. tests/unit: pure, in-process tests (`make test-fast`). tests/integration:
tests that start real processes (the CLI in a child process, sshd, fio, torch ranks,
Ansible, Chromium, the simulated cluster); each gets the `integration` marker here, so
`-m "not integration"` leaves them out wherever they are run from.

Helpers the tests import live in tests/support/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.node_build import build_deepspeed_cpu_op, copy_for_cluster

INTEGRATION = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(INTEGRATION):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def deepspeed_cpu_op(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """DeepSpeed's CPU shared-memory op, built once for the session: a TORCH_EXTENSIONS_DIR
    holding it, or None (and why, printed) where it cannot be built in time. A CPU rank
    builds it on first use into its node's own cache (about 80 s of CPU, once per node and
    test otherwise); clusters get a copy each (`node_build_env`), so a rank killed while it
    holds the build lock can stall only its own test."""
    return build_deepspeed_cpu_op(tmp_path_factory.mktemp("torch-extensions"))


@pytest.fixture(scope="module")
def local_deepspeed_cpu_op(
    deepspeed_cpu_op: Path | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """For the burn-ins a module starts on this machine (`bringup burnin --local`): a copy
    of the session's build in TORCH_EXTENSIONS_DIR, so their first rank does not compile
    the op a second time into ~/.cache (about 40 s on a fresh CI machine, where the
    simulated clusters' burn-ins build it for the session anyway)."""
    env = copy_for_cluster(deepspeed_cpu_op, tmp_path_factory.mktemp("local-torch-extensions"))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        yield
