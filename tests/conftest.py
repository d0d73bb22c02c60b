"""The two tiers. tests/unit: pure, in-process tests (`make test-fast`). tests/integration:
tests that start real processes (the CLI in a child process, sshd, fio, torch ranks,
Ansible, Chromium, the simulated cluster); each gets the `integration` marker here, so
`-m "not integration"` leaves them out wherever they are run from.

Helpers the tests import live in tests/support/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

INTEGRATION = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(INTEGRATION):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def shared_node_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment every simulated node of the session shares (SimCluster's `env`): one
    TORCH_EXTENSIONS_DIR, so DeepSpeed's CPU shared-memory op, which a rank builds on first
    use (about 80 s of CPU), is built once per session rather than once per node and test
    (each node has its own XDG_CACHE_HOME, where torch would put it)."""
    return {"TORCH_EXTENSIONS_DIR": str(tmp_path_factory.mktemp("torch-extensions"))}
