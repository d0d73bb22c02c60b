"""The burn-in tests train the tiny recipe for real: torch, deepspeed, transformers, peft."""

from __future__ import annotations

import importlib.util

import pytest

NEEDED = ("torch", "deepspeed", "transformers", "peft")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"burn-in needs {', '.join(missing)} (pip install '.[burnin]')")
    for item in items:
        if "burnin" in item.keywords:
            item.add_marker(skip)
