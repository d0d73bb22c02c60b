"""The one writer and the one reader of bringup/files.py against planted symlinks, FIFOs and
devices (issue 23): a write never follows a link at the directory, the temporary or the
final name; a read inside a run directory never follows one out of it nor waits on a FIFO.
tests/unit/test_hostile_files.py runs the commands over the same."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bringup import files as files_module
from bringup.files import (
    InputError,
    copy_tree,
    make_dir,
    read_in,
    read_lines_in,
    walk_files,
    write_atomic,
    write_files_at,
)
from bringup.provenance import evidence_hashes

PRECIOUS = "precious: the victim of a planted symlink\n"


def victim(folder: Path, name: str = "victim") -> Path:
    path = folder / name
    path.write_text(PRECIOUS)
    return path


# --- the one writer -----------------------------------------------------------------------


def _synced(monkeypatch: pytest.MonkeyPatch, below: Path) -> list[str]:
    """The names of what os.fsync syncs from now on below `below` (the test's folder: a
    journal writer an earlier test left running syncs its own), in order (the real sync
    runs too)."""
    names: list[str] = []
    real = os.fsync

    def sync(fd: int) -> None:
        real(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        if f"{path}/".startswith(f"{below}/"):
            names.append(os.path.basename(path))

    monkeypatch.setattr(os, "fsync", sync)
    return names


def test_files_written_with_a_barrier_are_synced_by_it_and_renamed_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _synced(monkeypatch, tmp_path)
    seen: list[list[str]] = []

    def barrier() -> None:  # what the folder holds then: the temporaries, no final name
        seen.append(sorted(p.name.split(".")[1] for p in tmp_path.iterdir()))

    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_files_at(folder, {"a.txt": "A\n", "b.txt": b"B\n"}, barrier=barrier)
    finally:
        os.close(folder)
    assert seen == [["a", "b"]]
    assert synced == []  # neither file nor folder: the barrier's, and the caller's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
    assert (tmp_path / "b.txt").read_bytes() == b"B\n"


def test_a_failed_barrier_leaves_each_file_to_its_own_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _synced(monkeypatch, tmp_path)

    def failed() -> None:
        raise OSError(5, "Input/output error")

    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_files_at(folder, {"a.txt": "A\n", "b.txt": "B\n"}, barrier=failed)
    finally:
        os.close(folder)
    assert [name.split(".")[1] for name in synced[:2]] == ["a", "b"]  # their temporaries
    assert synced[2:] == [tmp_path.name]  # then the folder, once
    assert (tmp_path / "a.txt").read_text() == "A\n"


def test_a_write_that_fails_midway_leaves_no_temporary_and_no_new_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = files_module.write_all
    calls = iter([True, False])

    def full(fd: int, data: bytes) -> None:
        if not next(calls):
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(files_module, "write_all", full)
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError, match="No space left"):
            write_files_at(folder, {"a.txt": "A\n", "b.txt": "B\n"})
    finally:
        os.close(folder)
    assert list(tmp_path.iterdir()) == []


def test_a_symlink_at_the_final_name_is_replaced_not_followed(tmp_path: Path) -> None:
    target = victim(tmp_path)
    (tmp_path / "out.md").symlink_to(target)
    write_atomic(tmp_path / "out.md", "new\n")
    assert target.read_text() == PRECIOUS
    assert not (tmp_path / "out.md").is_symlink()
    assert (tmp_path / "out.md").read_text() == "new\n"


def test_a_symlink_at_the_drawn_temporary_name_is_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even an attacker who guesses the name (this process's random prefix and its next
    number): O_EXCL|O_NOFOLLOW, and a random one is drawn instead."""
    import itertools

    from bringup import files

    target = victim(tmp_path)
    monkeypatch.setattr(files, "_TEMPORARIES", itertools.count(7))
    names = iter(["fresh"])
    monkeypatch.setattr("bringup.files.secrets.token_hex", lambda _: next(names))
    (tmp_path / f".out.md.{files._TEMPORARY}7.tmp").symlink_to(target)
    write_atomic(tmp_path / "out.md", "new\n")
    assert target.read_text() == PRECIOUS
    assert (tmp_path / "out.md").read_text() == "new\n"
    assert not (tmp_path / ".out.md.fresh.tmp").exists()
    # The next file takes the next number, no random draw (`names` is spent).
    write_atomic(tmp_path / "out.md", "newer\n")
    assert (tmp_path / "out.md").read_text() == "newer\n"


def test_a_symlinked_directory_is_refused_as_output(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="out is a symbolic link"):
        write_atomic(tmp_path / "out" / "report.md", "x")
    with pytest.raises(OSError, match="out is a symbolic link"):
        make_dir(tmp_path / "out")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_run_write_never_follows_a_symlinked_folder_inside_the_run(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "run" / "raw").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="raw is a symbolic link"):
        write_atomic(tmp_path / "run" / "raw" / "n1" / "x.txt", "x", root=tmp_path / "run")
    assert list((tmp_path / "elsewhere").iterdir()) == []


# --- the one reader for run directories -------------------------------------------------------


def test_read_in_refuses_a_symlink_anywhere_below_the_run(tmp_path: Path) -> None:
    (tmp_path / "run" / "facts").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "n.json").write_text("{}")
    (tmp_path / "run" / "raw").symlink_to(tmp_path / "outside")
    (tmp_path / "run" / "facts" / "n.json").symlink_to(tmp_path / "outside" / "n.json")
    with pytest.raises(InputError, match=r"raw is a symbolic link \(not followed"):
        read_in(tmp_path / "run", "raw/n.json", "raw")
    with pytest.raises(InputError, match=r"n.json is a symbolic link \(not followed"):
        read_in(tmp_path / "run", "facts/n.json", "facts")
    with pytest.raises(InputError, match="not a path inside"):
        read_in(tmp_path / "run", "../outside/n.json", "facts")


def test_read_in_refuses_a_fifo_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "findings.jsonl")
    with pytest.raises(InputError, match=r"findings\.jsonl: a FIFO, not a findings file"):
        read_in(tmp_path, "findings.jsonl", "findings")


def test_read_lines_in_gives_read_ins_lines_a_chunk_at_a_time(tmp_path: Path) -> None:
    """findings.jsonl read line by line (the streamed report): the lines read_in's text
    split at "\n" gives, a multibyte character and a bad byte across the 1 MiB chunk
    boundary, U+2028 kept inside its line, no newline at the end."""
    chunk = 1 << 20
    data = (
        b'{"a": 1}\n'
        + b"x" * (chunk - 12)
        + "\u00e9\u2028".encode()  # é across the first chunk's end
        + b"\n\xff\xfe half\n\n"
        + b"y" * chunk
        + b"\xe2\x82"  # a character cut short across the second chunk's end
        + b"\nlast, no newline"
    )
    (tmp_path / "findings.jsonl").write_bytes(data)
    whole = read_in(tmp_path, "findings.jsonl", "findings", lenient=True).split("\n")
    lines = list(read_lines_in(tmp_path, "findings.jsonl", "findings"))
    assert lines == whole
    assert len(lines) == 6 and lines[1].endswith("\u00e9\u2028") and lines[-1] == "last, no newline"


def test_read_lines_in_refuses_what_read_in_refuses_in_its_words(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "big.jsonl").write_text("1\n" * 50)
    (tmp_path / "run" / "findings.jsonl").symlink_to(tmp_path / "run" / "big.jsonl")
    os.mkfifo(tmp_path / "run" / "fifo.jsonl")
    refused = {
        ("big.jsonl", 99): r"big\.jsonl: 100 bytes, over the 99 bytes cap",
        ("findings.jsonl", 1 << 20): r"findings\.jsonl is a symbolic link \(not followed",
        ("fifo.jsonl", 1 << 20): r"fifo\.jsonl: a FIFO, not a findings file",
    }
    for (name, limit), why in refused.items():
        with pytest.raises(InputError, match=why) as streamed:
            list(read_lines_in(tmp_path / "run", name, "findings", limit=limit))
        with pytest.raises(InputError) as whole:
            read_in(tmp_path / "run", name, "findings", limit=limit)
        assert str(streamed.value) == str(whole.value)


def test_read_lines_in_refuses_a_line_past_its_cap_whole_or_unterminated(tmp_path: Path) -> None:
    """`line_limit` bounds what is held of one line: a line of exactly the cap is read, one
    byte more is refused (in the middle of the file, or as its last, unterminated text,
    however the chunks cut it), after the lines before it."""
    cap = 3 << 20  # past one read's 1 MiB chunk: the line is held across reads
    for name, text in {
        "middle.jsonl": "a\n" + "x" * (cap + 1) + "\nb\n",
        "last.jsonl": "a\n" + "x" * (cap + 1),
    }.items():
        (tmp_path / name).write_text(text)
        lines = read_lines_in(tmp_path, name, "findings", line_limit=cap)
        assert next(lines) == "a"
        with pytest.raises(InputError, match=rf"{name}: a line over the 3 MiB cap on one line"):
            list(lines)
    (tmp_path / "fits.jsonl").write_text("x" * cap + "\n" + "y" * cap)
    read = list(read_lines_in(tmp_path, "fits.jsonl", "findings", line_limit=cap))
    assert [len(line) for line in read] == [cap, cap]


def test_listing_a_run_never_descends_a_symlink(tmp_path: Path) -> None:
    """`raw -> /usr/share/doc` listed 4630 files of this machine as the run's evidence."""
    (tmp_path / "raw").symlink_to("/usr/share/doc")
    assert [name for name, _ in walk_files(tmp_path, "raw")] == ["raw"]
    assert evidence_hashes(tmp_path) == {"raw": "!symlink"}


def test_copy_tree_strict_refuses_links_and_fifos_naming_them(tmp_path: Path) -> None:
    source = tmp_path / "run"
    (source / "raw").mkdir(parents=True)
    (source / "manifest.json").write_text("{}")
    (source / "raw" / "link").symlink_to("/etc/passwd")
    os.mkfifo(source / "raw" / "pipe")
    with pytest.raises(InputError, match="raw/link, raw/pipe: not a regular file"):
        copy_tree(source, tmp_path / "copy", strict=True)
    assert not (tmp_path / "copy").exists()
    assert copy_tree(source, tmp_path / "copy") == ["raw/link", "raw/pipe"]
    assert sorted(p.name for p in (tmp_path / "copy").rglob("*")) == ["manifest.json"]


def test_walk_files_lists_every_entry_once_by_name_never_through_a_link(tmp_path: Path) -> None:
    """Each folder's links to folders first, then its other entries, by name, then its
    folders, by name; a link is listed as itself (its own lstat), never descended."""
    raw = tmp_path / "raw"
    for folder in ("n2/topology", "n1/gpu", "n1/fio"):
        (raw / folder).mkdir(parents=True)
    (raw / "n1" / "gpu" / "smi.txt").write_text("x")
    (raw / "n1" / "gpu" / "a.txt").write_text("y")
    (raw / "n2" / "topology" / "topo.txt").write_text("z")
    (raw / "n1" / "zz-to-etc").symlink_to("/etc")
    (raw / "n1" / "b-to-file").symlink_to(raw / "n1" / "gpu" / "a.txt")
    (raw / "n1" / "dangling").symlink_to(tmp_path / "gone")
    os.mkfifo(raw / "n1" / "fifo")
    listed = list(walk_files(tmp_path, "raw"))
    assert [name for name, _ in listed] == [
        "raw/n1/zz-to-etc",
        "raw/n1/b-to-file",
        "raw/n1/dangling",
        "raw/n1/fifo",
        "raw/n1/gpu/a.txt",
        "raw/n1/gpu/smi.txt",
        "raw/n2/topology/topo.txt",
    ]
    kinds = {name.rsplit("/", 1)[-1]: info.st_mode for name, info in listed}
    assert stat.S_ISLNK(kinds["zz-to-etc"]) and stat.S_ISLNK(kinds["dangling"])
    assert stat.S_ISFIFO(kinds["fifo"]) and stat.S_ISREG(kinds["a.txt"])
