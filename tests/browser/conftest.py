"""Browser tests: the HTML report opened in a real headless Chromium (Debian's `chromium`).

Skipped, with the reason, where no Chromium is installed (`apt-get install -y chromium`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The recorded run directories are built by the unit tests' helper module.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: opens reports in a headless Chromium")
