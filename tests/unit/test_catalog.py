"""The catalog's rules that other code relies on, checked over every check module."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import bringup.checks
from bringup import profile
from bringup.checks.catalog import CHECK_MODULES, CHECKS, checks_for, checks_of_probes, judge_node
from bringup.facts import decoded_once
from bringup.node.catalog import PROBES
from bringup.sim.demo import demo_nodes


def test_every_check_is_named_after_its_probe() -> None:
    # The console folds a probe that could not run into one line by this prefix.
    assert [c.name for c in CHECKS if not c.name.startswith(f"{c.probe}.")] == []
    assert len({c.name for c in CHECKS}) == len(CHECKS)


def test_a_context_is_a_probe_and_its_judge_takes_it() -> None:
    with_context = [c for c in CHECKS if c.context is not None]
    assert {c.name: c.context for c in with_context} == {
        "gpu.count": "topology",
        "gpu.nvlink": "topology",
        "host.ib_ports": "fabric",
        "topology.gpu_count": "gpu",
        "topology.nvlink": "gpu",
        "xid.events": "gpu",
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
    # Not judgements: the Findings every GPU check gives when there is no GPU to judge or
    # the GPU answered "Unknown Error" or "N/A" for a field it has, and the two that
    # complete a judged finding's action (bringup/checks/actions.py).
    assert sorted(misnamed) == [
        "bringup.checks.actions.name_the_gpu",
        "bringup.checks.actions.with_action",
        "bringup.checks.gpu.per_gpu.no_gpus",
        "bringup.checks.gpu.per_gpu.not_available_finding",
        "bringup.checks.gpu.per_gpu.unreadable_finding",
    ]


def _imports(path: Path) -> set[str]:
    """Every module a source file imports, lazily imported ones included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_judging_and_showing_stay_apart() -> None:
    """report -> facts, findings, profile, measurements; checks never import the report."""
    package = Path(bringup.checks.__file__).parent.parent
    report = {m for f in (package / "report").glob("*.py") for m in _imports(f)}
    checks = {m for f in (package / "checks").rglob("*.py") for m in _imports(f)}
    measurements = _imports(package / "measurements.py") | _imports(package / "facts.py")
    assert sorted(m for m in report if m.startswith(("bringup.checks", "bringup.commands"))) == []
    assert sorted(m for m in checks if m.startswith(("bringup.report", "bringup.commands"))) == []
    assert (
        sorted(m for m in measurements if m.startswith(("bringup.report", "bringup.checks"))) == []
    )


def test_check_modules_names_the_module_of_every_check() -> None:
    # A subject's checks load only when its probe is judged: a check module whose probe is
    # missing from CHECK_MODULES (or listed under another module) would never be judged.
    found: dict[str, set[str]] = {}
    seen: set[int] = set()
    for info in pkgutil.walk_packages(bringup.checks.__path__, "bringup.checks."):
        module = importlib.import_module(info.name)
        if info.name.count(".") != 2 or info.name.endswith(".catalog"):
            continue
        checks = getattr(module, "CHECKS", None)
        # a module that imports another's CHECKS (burnin_run) does not define checks
        if isinstance(checks, list) and id(checks) not in seen:
            seen.add(id(checks))
            for check in checks:
                found.setdefault(check.probe, set()).add(info.name.rsplit(".", 1)[1])
    assert {probe: {name} for probe, name in CHECK_MODULES.items()} == found
    assert [c.name for p in CHECK_MODULES for c in checks_for(p)] == sorted(
        (c.name for c in CHECKS), key=[c.name for c in CHECKS].index
    )
    assert checks_for("no-such-probe") == []


def test_judging_a_probe_loads_its_subject_alone() -> None:
    script = (
        "import sys\n"
        "from bringup.checks.catalog import checks_for\n"
        "names = [c.name for c in checks_for('xid')]\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('bringup.checks.')\n"
        "    and m.count('.') == 2 and m.split('.')[2] not in ('actions', 'catalog'))\n"
        "print(names, loaded)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "['xid.events', 'xid.sxid'] ['bringup.checks.xid']"


def test_the_checks_of_some_probes_keep_the_catalogs_order() -> None:
    """checks_of_probes (a node judged with no profile that fits orders its findings by it)
    gives the checks of all_checks() whose subject judges one of the probes, in its order."""
    everything = [c.name for c in CHECKS]
    for probes in [("gpu", "xid"), ("xid", "gpu"), ("telemetry",), ("nvme", "gpu", "p2p"), ()]:
        wanted = {CHECK_MODULES[p] for p in probes}
        subjects = {p for p, module in CHECK_MODULES.items() if module in wanted}
        expected = [name for name in everything if name.split(".")[0] in subjects]
        assert [c.name for c in checks_of_probes(probes)] == expected, probes
    assert [c.name for c in checks_of_probes([*CHECK_MODULES, "no-such-probe"])] == everything


def test_judge_node_names_findings_no_other_judgement_holds() -> None:
    # judge_node names its findings in place (a copy of each cost 8 % of judging a node):
    # that is right only while every finding a check returns is its own, made by that call.
    # Judged twice under two names, in turn: no finding object in both, none renamed after.
    b300 = profile.load("b300")
    for node in demo_nodes():
        with decoded_once():
            first = judge_node(node, b300)
        with decoded_once():
            second = judge_node(replace(node, node=f"{node.node}-again"), b300)
        assert first and {id(f) for f in first}.isdisjoint(id(f) for f in second)
        assert {f.node for f in first} == {node.node}
        assert {f.node for f in second} == {f"{node.node}-again"}
