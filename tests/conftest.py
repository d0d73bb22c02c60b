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
