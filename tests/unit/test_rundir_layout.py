"""The run directory's two layouts: flat (`facts/<node>.json`, every run up to SHARD_ABOVE
nodes and every run from before) and sharded (`facts/<shard>/<node>.json`), written by
RunDir and read by every reader the same way."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from bringup import rundir
from bringup.checks.integrity import judge_replay_source
from bringup.provenance import evidence_hashes
from bringup.report import rundata
from bringup.rundir import (
    RunDir,
    RunDirError,
    facts_files,
    file_name,
    load_facts,
    load_resumable,
    node_file,
    raw_folder,
    shard_of,
)

FLAT = Path(__file__).parents[1] / "fixtures" / "rundir" / "flat-2node"
TOPO = "GPU0\tX\n"  # a raw file's text: what it says does not matter here


def record(probe: str) -> dict[str, object]:
    return {
        "probe": probe,
        "ok": True,
        "facts": {},
        "started_at": "2026-01-01T00:00:00+00:00",
        "duration_s": 1.0,
        "raw": {"out.txt": TOPO},
    }


def written(path: Path, nodes: list[str]) -> RunDir:
    """A run of `nodes`, each with a gpu record and a raw file, finished (hashed)."""
    run = RunDir.create(path, "check", "b300", "quick")
    run.add_nodes(nodes)
    for node in nodes:
        run.add_record(node, record("gpu"))
    run.add_findings([])
    run.finish("complete", 1)
    return run


def files_below(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())


def test_the_shard_is_two_hex_digits_of_the_names_sha256() -> None:
    # `printf node0001 | sha256sum` starts 26: pinned, so that a change of the rule is seen.
    assert shard_of("node0001") == "26"
    assert shard_of("node0001") == shard_of("node0001")
    for name in ["../../etc", "/", ".", "", "a/b", "x" * 500, "\udcff"]:
        assert len(shard_of(name)) == 2 and all(c in "0123456789abcdef" for c in shard_of(name))


def test_a_small_run_stays_flat(tmp_path: Path) -> None:
    run = written(tmp_path / "run", ["node01", "node02"])
    assert run.manifest.layout == "flat"
    assert files_below(run.path) == [
        "facts/node01.json",
        "facts/node02.json",
        "findings.jsonl",
        "manifest.json",
        "raw/node01/gpu/out.txt",
        "raw/node02/gpu/out.txt",
    ]


def test_a_run_past_the_threshold_is_sharded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir, "SHARD_ABOVE", 2)
    nodes = ["node01", "node02", "node03"]
    run = written(tmp_path / "run", nodes)
    assert run.manifest.layout == "sharded"
    assert json.loads((run.path / "manifest.json").read_text())["layout"] == "sharded"
    expected = [
        *(f"facts/{shard_of(n)}/{n}.json" for n in nodes),
        *(f"raw/{shard_of(n)}/{n}/gpu/out.txt" for n in nodes),
    ]
    assert files_below(run.path) == sorted([*expected, "findings.jsonl", "manifest.json"])
    # Every file is hashed where it is: verify and handover cover the shards.
    assert set(run.manifest.files_sha256 or {}) == {*expected, "findings.jsonl"}
    assert [f.node for f in load_facts(run.path)] == nodes
    assert facts_files(run.path) == [f"facts/{shard_of(n)}/{n}.json" for n in nodes]


def test_hostile_node_names_stay_inside_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir, "SHARD_ABOVE", 0)
    nodes = ["../../escape", "/etc/passwd", "..", ".hidden", "a" * 300]
    run = written(tmp_path / "run", nodes)
    root = run.path.resolve()
    found = [p.resolve() for p in tmp_path.rglob("*") if p.is_file()]
    assert found and all(root in p.parents for p in found)
    for node in nodes:
        assert (run.path / "facts" / shard_of(node) / f"{file_name(node)}.json").is_file()
    assert sorted(f.node for f in load_facts(run.path)) == sorted(nodes)


def test_the_layout_is_chosen_once_a_resumed_run_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = written(tmp_path / "run", ["node01", "node02", "node03"])  # flat
    monkeypatch.setattr(rundir, "SHARD_ABOVE", 2)
    again = RunDir.reopen(run.path)
    again.add_nodes(["node01", "node02", "node03", "node04"])
    again.add_record("node04", record("gpu"))
    assert again.manifest.layout == "flat"
    assert (run.path / "facts" / "node04.json").is_file()
    manifest, recorded = load_resumable(run.path)
    assert manifest.layout == "flat" and len(recorded) == 4


def test_an_old_flat_run_reads_as_it_did() -> None:
    """tests/fixtures/rundir/flat-2node: written by main before sharding (SOURCES.md)."""
    facts = load_facts(FLAT)
    assert [f.node for f in facts] == ["node0001", "node0002"]
    assert sorted(facts[0].probes) == ["gpu", "host", "nvme", "topology", "xid"]
    manifest, _ = load_resumable(FLAT)
    assert manifest.layout == "flat"  # no `layout` in its manifest: flat
    assert "layout" not in json.loads((FLAT / "manifest.json").read_text())
    assert raw_folder(FLAT, "node0001") == FLAT / "raw" / "node0001"
    assert raw_folder(FLAT, "node0003") is None
    assert evidence_hashes(FLAT) == manifest.files_sha256


def test_a_replay_of_a_flat_run_into_a_sharded_one_copies_the_raw_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir, "SHARD_ABOVE", 1)
    run = RunDir.create(tmp_path / "run", "check", "b300", "demo-probes")
    run.expect(2)
    for facts in load_facts(FLAT):
        run.add_recorded(facts, FLAT)
    for node in ("node0001", "node0002"):
        shard = shard_of(node)
        copied = run.path / "raw" / shard / node / "topology" / "nvidia-smi-topo-m.txt"
        original = FLAT / "raw" / node / "topology" / "nvidia-smi-topo-m.txt"
        assert copied.read_bytes() == original.read_bytes()
        assert raw_folder(run.path, node) == run.path / "raw" / shard / node


def test_two_facts_files_of_one_node_are_refused_not_guessed(tmp_path: Path) -> None:
    run = Path(shutil.copytree(FLAT, tmp_path / "run"))
    shard = run / "facts" / shard_of("node0001")
    shard.mkdir()
    shutil.copy(run / "facts" / "node0001.json", shard / "node0001.json")
    with pytest.raises(RunDirError, match=r"node0001\.json: node 'node0001' already has .*/run/"):
        load_facts(run)
    # The report shows neither, and says why (an ERROR, judged by completeness).
    read = rundata.load(run)
    assert sorted(read.facts) == ["node0002"]
    assert read.facts_problems["node0001"] == (
        "facts/node0001.json is a second facts file of node0001 (besides "
        f"facts/{shard_of('node0001')}/node0001.json): neither is shown"
    )


def test_a_shard_that_is_a_symlink_is_refused_by_name(tmp_path: Path) -> None:
    run = Path(shutil.copytree(FLAT, tmp_path / "run"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(run / "facts" / "node0002.json", elsewhere / "node0002.json")
    (run / "facts" / "node0002.json").unlink()
    os.symlink(elsewhere, run / "facts" / "ab")
    assert facts_files(run) == ["facts/ab", "facts/node0001.json"]
    with pytest.raises(RunDirError, match="facts/ab"):
        load_facts(run)
    # verify names it as a link (never followed), as any planted link.
    assert evidence_hashes(run)["facts/ab"] == "!symlink"


def test_other_folders_in_facts_are_not_read_as_shards(tmp_path: Path) -> None:
    run = Path(shutil.copytree(FLAT, tmp_path / "run"))
    (run / "facts" / "notashard").mkdir()
    shutil.copy(run / "facts" / "node0001.json", run / "facts" / "notashard" / "x.json")
    (run / "facts" / "AB").mkdir()  # shards are lowercase
    assert facts_files(run) == ["facts/node0001.json", "facts/node0002.json"]
    # A folder named like a facts file is listed, and refused when read: never skipped.
    (run / "facts" / "node0003.json").mkdir()
    assert facts_files(run)[-1] == "facts/node0003.json"
    with pytest.raises(RunDirError, match=r"node0003\.json"):
        load_facts(run)


@pytest.mark.parametrize(
    ("path", "node"),
    [
        ("facts/node01.json", "node01"),
        ("facts/26/node0001.json", "node0001"),
        ("raw/node01/gpu/out.txt", "node01"),
        ("raw/26/node0001/gpu/out.txt", "node0001"),
        # A flat node whose name is two hex digits: four parts, not five.
        ("raw/ab/gpu/out.txt", "ab"),
        ("facts/ab.json", "ab"),
        ("findings.jsonl", None),
        ("facts/notashard/x.json", None),
    ],
)
def test_the_node_of_an_evidence_file(path: str, node: str | None) -> None:
    assert node_file(path) == node


def test_a_changed_file_in_a_shard_is_a_replay_error_on_its_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir, "SHARD_ABOVE", 1)
    run = written(tmp_path / "run", ["node01", "node02"])
    facts = run.path / "facts" / shard_of("node02") / "node02.json"
    facts.write_text(facts.read_text().replace('"ok": true', '"ok": false'))
    planted = run.path / "raw" / shard_of("node01") / "node01" / "gpu" / "planted.txt"
    planted.write_text("x")
    names = {file_name(n): n for n in ["node01", "node02"]}
    found = judge_replay_source("r", run.manifest.files_sha256, evidence_hashes(run.path), names)
    assert [(f.node, f.message) for f in found] == [
        (
            "node02",
            "replayed data differs from what run r recorded: "
            f"facts/{shard_of('node02')}/node02.json",
        ),
        (
            "node01",
            "replayed data differs from what run r recorded: "
            f"raw/{shard_of('node01')}/node01/gpu/planted.txt (added)",
        ),
    ]


@pytest.mark.parametrize("layout", ["flat", "sharded"])
def test_a_planted_link_where_a_nodes_raw_folder_goes_is_refused_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """The raw folders (raw/, raw/<shard>/) are held open for the run, and each node's
    folder is made below them: a link planted where a node's folder goes is refused by
    name, and nothing is written through it."""
    monkeypatch.setattr(rundir, "SHARD_ABOVE", 2 if layout == "sharded" else 1000)
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(["node01", "node02", "node03"])
    run.add_record("node01", record("gpu"))  # raw/ (and its shard) made and held open
    where = run.path / "raw" / rundir.node_folder("node02", run.manifest.layout)
    where.parent.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    where.symlink_to(outside)
    with pytest.raises(OSError, match="is a symbolic link"):
        run.add_record("node02", record("gpu"))
    assert list(outside.iterdir()) == []
    run.add_record("node03", record("gpu"))
    assert (run.path / "raw" / rundir.node_folder("node03", run.manifest.layout)).is_dir()


def test_many_nodes_raw_outputs_open_their_shard_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir, "SHARD_ABOVE", 2)
    opened: list[Path] = []
    real = rundir.open_folder

    def counted(root: Path, path: Path) -> int:
        opened.append(path.relative_to(root))
        return real(root, path)

    monkeypatch.setattr(rundir, "open_folder", counted)
    nodes = [f"node{i:03d}" for i in range(60)]
    run = written(tmp_path / "run", nodes)
    raw_opened = [p for p in opened if p.parts[0] == "raw"]
    assert sorted(raw_opened) == sorted({Path("raw", shard_of(n)) for n in nodes})
    assert files_below(run.path).count("findings.jsonl") == 1
    assert len([f for f in files_below(run.path) if f.startswith("raw/")]) == 60


def test_nodes_opening_a_folder_at_once_share_one_descriptor_and_leak_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard's folder is opened outside the run's lock, by the first nodes to need it:
    those that open it together keep one descriptor, and the others close theirs."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    started = threading.Barrier(8)
    real = rundir.open_folder

    def slow(root: Path, path: Path) -> int:
        fd = real(root, path)
        time.sleep(0.05)  # every thread has opened its own before any is kept
        return fd

    monkeypatch.setattr(rundir, "open_folder", slow)
    before = len(os.listdir("/proc/self/fd"))
    got: list[int] = []

    def open_it() -> None:
        started.wait(timeout=30)
        got.append(run._folder("raw/ab"))

    threads = [threading.Thread(target=open_it) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(got) == 8 and len(set(got)) == 1
    assert len(os.listdir("/proc/self/fd")) == before + 1  # the one kept, no other left
    run._close_folders()
    assert len(os.listdir("/proc/self/fd")) == before
