"""`bringup check` writing its run directory onto a file system that fills up: a real
tmpfs of a few pages, mounted in a mount namespace of the test's own (`unshare --mount`),
so the disk that fills is never this machine's.

Wherever the space runs out (a node's facts file, findings.jsonl, the manifest at the
end), the command ends with one line saying so and exit 2, or, with room enough, its
verdict: never a traceback (it was one at every stage), never ACCEPTED.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.files import InputError, read_bytes_in
from tests.support.timing import scaled

PAGE = 4096

pytestmark = pytest.mark.skipif(
    shutil.which("unshare") is None, reason="needs unshare(1) for a private tmpfs"
)


# In the namespace: the tmpfs mounted, the check run on it, what it left copied out.
_SCRIPT = """
mount -t tmpfs -o "size=$1" tmpfs "$2" || exit 99
"$3" -m bringup.cli check --demo --out "$2/run"
code=$?
[ -d "$2/run" ] && cp -a "$2/run" "$4"
exit $code
"""
NO_MOUNT = 99


def check_on_tmpfs(folder: Path, size: int, left: Path) -> subprocess.CompletedProcess[str]:
    """`bringup check --demo --out FOLDER/run` with FOLDER a tmpfs of `size` bytes, mounted
    in a new mount namespace (gone with the command); what it left copied to `left`."""
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _SCRIPT, "sh"]
    argv += [str(size), str(folder), sys.executable, str(left)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=scaled(120), check=False)


def pages_written(run: Path) -> int:
    """The tmpfs pages the run's files take (each file a whole number of pages)."""
    return sum(-(-p.stat().st_size // PAGE) for p in run.rglob("*") if p.is_file())


def never_accepted(run: Path) -> bool:
    """The manifest a run left is not a complete run with exit code 0 (none, one cut
    short that no reader takes, or one still "running" are not)."""
    try:
        manifest = json.loads(read_bytes_in(run, "manifest.json", "manifest"))
    except (InputError, ValueError):
        return True
    return not (manifest.get("status") == "complete" and manifest.get("exit_code") == 0)


def test_a_full_run_directory_is_one_line_and_exit_2_at_every_stage(tmp_path: Path, cli) -> None:
    whole = cli("check", "--demo", "--out", tmp_path / "whole")
    assert whole.code == 1, whole.stderr  # demo data: never ACCEPTED
    needed = pages_written(tmp_path / "whole")
    mount = tmp_path / "mnt"
    mount.mkdir()
    roomy = check_on_tmpfs(mount, 2 * needed * PAGE, tmp_path / "roomy")
    if roomy.returncode == NO_MOUNT or roomy.stderr.startswith("unshare:"):
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {roomy.stderr.strip()}")
    assert roomy.returncode == 1, roomy.stderr  # with room: the verdict, as on any disk
    codes = []
    # From two pages (the first facts file) to about what the run takes (the manifest,
    # rewritten at its end): each stage runs out of space at one of these sizes.
    for pages in sorted({max(2, needed * k // 10) for k in range(1, 12)}):
        left = tmp_path / f"left-{pages}"
        ended = check_on_tmpfs(mount, pages * PAGE, left)
        said = f"{pages} of {needed} pages: {ended.stderr}"
        assert "Traceback" not in ended.stderr, said
        assert never_accepted(left), said
        codes.append(ended.returncode)
        if ended.returncode == 1:
            assert "NOT ACCEPTED (demo data)" in ended.stdout, said
            continue
        assert ended.returncode == 2, said
        (line,) = ended.stderr.strip().splitlines()
        assert line.startswith("error: no space left to write the run directory "), said
        assert "(No space left on device)" in line and "df -h" in line, said
    assert 2 in codes and 1 in codes, codes  # the sizes spanned the stages
