"""The two tiers. tests/unit: pure, in-process tests (`make test-fast`). tests/integration:
tests that start real processes (the CLI in a child process, sshd, fio, torch ranks,
Ansible, Chromium, the simulated cluster); each gets the `integration` marker here, so
`-m "not integration"` leaves them out wherever they are run from.

Helpers the tests import live in tests/support/.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.disk import shortfall
from tests.support.node_build import build_deepspeed_cpu_op, copy_for_cluster

INTEGRATION = Path(__file__).parent / "integration"
UNIT = Path(__file__).parent / "unit"

# Tests that import DeepSpeed in this process import torch's inductor, which makes its
# cache at the fixed /tmp/torchinductor_<user> unless told where (the burn-in probe tells
# it: bringup/node/probes/burnin.py). Set before any test imports torch, removed at exit.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _inductor = tempfile.mkdtemp(prefix="bringup-tests-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _inductor
    atexit.register(shutil.rmtree, _inductor, ignore_errors=True)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once, in one line, where the disk is too full for the integration tier."""
    config = session.config
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its controller has looked
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    if paths and all(path.is_relative_to(UNIT) for path in paths):
        return  # the unit tier writes next to nothing
    line = shortfall(tempfile.gettempdir())
    if line:
        pytest.exit(line, returncode=2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(INTEGRATION):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _builtin_sys_intern(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builtin `sys.intern` for every test, whatever an earlier test imported.

    ansible-core (2.19) replaces `sys.intern` with a callable object when it is imported
    (so that str subclasses are accepted), and torch's dynamo, which transformers imports,
    refuses to import beside anything but the builtin. The controller never imports
    torch, so only tests meet both: a burn-in test run in a process where an earlier test
    read an Ansible inventory in-process failed (`pytest tests/unit/test_inventory.py
    tests/integration/burnin/test_flops_counted.py`)."""
    if not isinstance(sys.intern, types.BuiltinFunctionType):
        builtin = getattr(sys.intern, "unpatched_implementation", None)
        if isinstance(builtin, types.BuiltinFunctionType):
            monkeypatch.setattr(sys, "intern", builtin)


@pytest.fixture(scope="session")
def deepspeed_cpu_op(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """DeepSpeed's CPU shared-memory op, built once for the run: a TORCH_EXTENSIONS_DIR
    holding it, or None (and why, printed) where it cannot be built in time. A CPU rank
    builds it on first use into its node's own cache (about 80 s of CPU, once per node and
    test otherwise); clusters get a copy each (`node_build_env`), so a rank killed while it
    holds the build lock can stall only its own test.

    Under pytest-xdist (`make test` runs two workers) each worker is a session of its own:
    the first to need the op builds it, under a lock, in the folder the run's workers share
    (the parent of each worker's temporary folder); the others wait for it and use it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return build_deepspeed_cpu_op(tmp_path_factory.mktemp("torch-extensions"))
    shared = tmp_path_factory.getbasetemp().parent
    where, failed = shared / "torch-extensions", shared / "torch-extensions.failed"
    with (shared / "torch-extensions.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (where / "extensions").is_dir():
            return where / "extensions"
        if failed.exists():
            return None
        where.mkdir(exist_ok=True)
        built = build_deepspeed_cpu_op(where)
        if built is None:
            failed.touch()
        return built


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
