"""The catalog's rules that other code relies on, checked over every check module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import bringup.checks
from bringup.checks.catalog import CHECKS
from bringup.node.catalog import PROBES


def test_every_check_is_named_after_its_probe() -> None:
    # The console folds a probe that could not run into one line by this prefix.
    assert [c.name for c in CHECKS if not c.name.startswith(f"{c.probe}.")] == []
    assert len({c.name for c in CHECKS}) == len(CHECKS)


def test_a_context_is_a_probe_and_its_judge_takes_it() -> None:
    with_context = [c for c in CHECKS if c.context is not None]
    assert {c.name: c.context for c in with_context} == {
        "gpu.count": "topology",
        "gpu.nvlink": "topology",
        "topology.gpu_count": "gpu",
        "topology.nvlink": "gpu",
    }
    for check in with_context:
        assert check.context in PROBES
        assert len(inspect.signature(check.judge).parameters) == 3, check.name


def test_every_function_that_returns_findings_is_a_judge() -> None:
    misnamed = []
    for info in pkgutil.walk_packages(bringup.checks.__path__, "bringup.checks."):
        module = importlib.import_module(info.name)
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or name.startswith("_"):
                continue
            returns = str(inspect.signature(function).return_annotation)
            if "Finding" in returns and not name.startswith("judge_"):
                misnamed.append(f"{module.__name__}.{name}")
    # Not a judgement: the one Finding every GPU check gives when there is no GPU to judge.
    assert misnamed == ["bringup.checks.gpu.per_gpu.no_gpus"]
