"""Each test module of this folder gets its own real sshd on 127.0.0.1 (root only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.sshd import LocalSshd, sshd_unavailable


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSshd]:
    reason = sshd_unavailable()
    if reason:
        pytest.skip(reason)
    server = LocalSshd.create(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()
