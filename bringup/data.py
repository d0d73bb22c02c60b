"""Where the packaged data folders (checks/, burnin/, playbooks/) are."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The data folder `name`: inside an installed wheel, else at the top of the repo."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / name
