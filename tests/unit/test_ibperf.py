"""The per-rail job (issue 28): the ibperf probe's perftest commands against the real
binary's --help, its deadlines and errors with stand-in perftest, and fabric.rail_bw's
judgement of rails (figures scaled from the recorded real ib_write_bw in
tests/fixtures/fabric/, as the simulated cluster's stand-in prints them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from bringup.checks.ibperf import CountersSeen, bad_nodes, judge_rail_counters, judge_rails
from bringup.commands.ibperf_job import node_rails
from bringup.facts import NodeFacts, ProbeRecord
from bringup.findings import Status
from bringup.fleet.job import pair_up, retest_pairs, rounds
from bringup.node import ibperf_facts
from bringup.node.probes import ibperf
from bringup.node.result import ProbeError
from bringup.profile import load
from tests.support.perftest_sim import (
    counter_file,
    rail_results,
    recorded_gbit_s,
    standin,
    write_rails,
)
from tests.support.timing import scaled

B300 = load("b300")
RAILS = [{"rail": i, "device": f"mlx5_{i}", "ib_port": 1, "gpu": i} for i in range(8)]
# The recorded QDR run's 8 MiB average (3665.25 MiB/s = 30.75 Gb/s) at the share of its
# 32 Gb/s data rate, on an 800 Gb/s rail: what the stand-in prints; and at half speed.
GOOD = recorded_gbit_s()
HALF = recorded_gbit_s(0.5)


def _all_flags(params: ibperf.Params) -> list[str]:
    tests = [t for group in ibperf.plan_tests(params, ibperf.validate(params), True) for t in group]
    argvs = [ibperf.argv_of("ib_write_bw", t, params) for t in tests]
    return sorted({a.split("=")[0] for argv in argvs for a in argv[1:] if a.startswith("-")})


@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_write_lat"])
def test_every_flag_the_probe_passes_is_in_the_real_perftest_help(tool: str) -> None:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not installed (apt-get install perftest)")
    shown = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
    help_text = shown.stdout + shown.stderr
    params = ibperf.Params(role="client", peer="node02", peer_address="10.0.0.2", rails=RAILS)
    flags = _all_flags(params)
    modes = {
        "ib_write_bw": ("--size", "--duration", "--report_gbits"),
        "ib_write_lat": ("--iters",),
    }
    wanted = [f for f in flags if f not in _other(tool, modes)]
    assert "--use_cuda" in wanted
    # Debian's perftest is built without CUDA: --use_cuda is in a CUDA build's --help only
    # (perftest_parameters.c, under HAVE_CUDA), and the probe asks --help before passing it.
    listed = [f for f in wanted if re.search(rf"{re.escape(f)}\b", help_text)]
    missing = sorted(set(wanted) - set(listed))
    assert missing in ([], ["--use_cuda"]), missing
    assert listed, help_text[:300]


def _other(tool: str, modes: dict[str, tuple[str, ...]]) -> set[str]:
    return {f for t, fs in modes.items() if t != tool for f in fs}


def test_the_two_sides_number_their_tests_alike_each_on_its_own_port() -> None:
    server = ibperf.Params(role="server", peer="node02", rails=RAILS, base_port=20000)
    client = ibperf.Params(
        role="client", peer="node01", peer_address="10.0.0.1", rails=RAILS, base_port=20000
    )
    ports = [
        [
            (t.mode, t.rail, t.tcp_port)
            for g in ibperf.plan_tests(p, ibperf.validate(p), False)
            for t in g
        ]
        for p in (server, client)
    ]
    assert ports[0] == ports[1]
    assert [p for _, _, p in ports[0]] == list(range(20000, 20000 + 24))
    assert [m for m, _, _ in ports[0]] == ["single"] * 8 + ["all"] * 8 + ["lat"] * 8
    server.host_pass = True
    cuda = [t for g in ibperf.plan_tests(server, ibperf.validate(server), True) for t in g]
    # The other side without GPU memory: the same tests on the same ports.
    plain = [t for g in ibperf.plan_tests(server, ibperf.validate(server), False) for t in g]
    assert [(t.mode, t.tcp_port) for t in plain] == [(t.mode, t.tcp_port) for t in cuda]
    assert all(t.use_cuda is None for t in plain)
    assert [t.mode for t in cuda] == ["single"] * 8 + ["host"] * 8 + ["all"] * 8 + ["lat"] * 8
    assert [t.use_cuda for t in cuda if t.mode in ("single", "all")] == list(range(8)) * 2
    assert all(t.use_cuda is None for t in cuda if t.mode in ("host", "lat"))


def test_the_client_names_the_server_and_the_server_has_no_address() -> None:
    params = ibperf.Params(role="client", peer="node01", peer_address="10.0.0.1", rails=RAILS[:1])
    (test,) = ibperf.plan_tests(params, ibperf.validate(params), True)[0]
    assert ibperf.argv_of("/usr/bin/ib_write_bw", test, params) == [
        "/usr/bin/ib_write_bw",
        "--ib-dev=mlx5_0",
        "--ib-port=1",
        "--port=18515",
        "--CPU-freq",
        "--size=8388608",
        "--duration=5",
        "--report_gbits",
        "--use_cuda=0",
        "10.0.0.1",
    ]
    server = ibperf.Params(role="server", peer="node02", rails=RAILS[:1])
    (test,) = ibperf.plan_tests(server, ibperf.validate(server), False)[0]
    assert ibperf.argv_of("ib_write_bw", test, server)[-1] == "--report_gbits"


@pytest.mark.parametrize(
    "changes, said",
    [
        ({"role": "both"}, "role must be server or client"),
        ({"role": "client"}, "needs the server's address"),
        ({"rails": []}, "no rails"),
        ({"rails": [{"rail": 0}]}, "bad rail"),
        ({"base_port": 65530}, "no room"),
    ],
)
def test_bad_parameters_are_one_line(changes: dict[str, object], said: str) -> None:
    values = {"role": "server", "peer": "node02", "rails": RAILS, **changes}
    with pytest.raises(ProbeError, match=said):
        ibperf.validate(ibperf.Params(**values))  # type: ignore[arg-type]


def _tools(tmp_path: Path, bw: str | None, lat: str | None) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, script in (("ib_write_bw", bw), ("ib_write_lat", lat)):
        if script is not None:
            (bin_dir / name).write_text(script)
            (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_missing_perftest_is_an_error_naming_the_provisioning_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ibperf, "which", lambda name: None)
    params = ibperf.Params(role="server", peer="node02", rails=RAILS)
    with pytest.raises(ProbeError) as caught:
        ibperf.collect(params)
    assert str(caught.value) == (
        "perftest is not installed: ib_write_bw not on PATH; install it with "
        "`bringup provision --nodes hosts.ini --tags node_tools` (or `apt-get install perftest`)"
    )


def _pair(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    port: int,
    cuda: bool = False,
    keep: bool = False,
    **extra: object,
) -> dict[str, ibperf.ProbeOutput]:
    """Both sides of a pair over localhost; `keep`: the tools already in tmp_path/bin."""
    bw = None if keep else standin("bw", {"mlx5_1": 0.5}, cuda=cuda)
    lat = None if keep else standin("lat")
    monkeypatch.setenv("PATH", _tools(tmp_path, bw, lat)["PATH"])
    rails = RAILS[:2]
    out: dict[str, ibperf.ProbeOutput] = {}

    def side(role: str) -> None:
        params = ibperf.Params(
            role=role,
            peer="node02" if role == "server" else "node01",
            peer_address="127.0.0.1" if role == "client" else "",
            rails=rails,
            base_port=port,
            duration_s=1,
            connect_timeout_s=scaled(30),  # a loaded machine starts the stand-in slowly
            **extra,  # type: ignore[arg-type]
        )
        out[role] = ibperf.collect(params)

    threads = [threading.Thread(target=side, args=(r,)) for r in ("server", "client")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_a_pair_over_localhost_measures_each_rail_alone_at_once_and_its_latency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _pair(tmp_path, monkeypatch, 24100 + os.getpid() % 500 * 50)
    client = out["client"].facts
    figures = [(t.mode, t.device, round(t.gbit_s, 2) if t.gbit_s else None) for t in client.tests]
    errors = [t.error for t in client.tests + out["server"].facts.tests]
    assert figures == [
        ("single", "mlx5_0", round(GOOD, 2)),
        ("single", "mlx5_1", round(HALF, 2)),
        ("all", "mlx5_0", round(GOOD, 2)),
        ("all", "mlx5_1", round(HALF, 2)),
        ("lat", "mlx5_0", None),
        ("lat", "mlx5_1", None),
    ], errors
    assert all(t.error is None for t in client.tests), [t.error for t in client.tests]
    assert client.tests[-1].result is not None and client.tests[-1].result.lat[0].t_avg_us == 1.03
    assert out["client"].simulated == ["ib_write_bw"]  # a stand-in: never ACCEPTED
    assert "single-mlx5_1-1.txt" in out["client"].raw


def test_without_cuda_in_perftest_the_rail_runs_from_host_memory_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _pair(tmp_path, monkeypatch, 26100 + os.getpid() % 500 * 50, use_cuda=True)
    client = out["client"].facts
    assert client.cuda_in_help is False
    assert all(t.use_cuda is None and "--use_cuda" not in " ".join(t.argv) for t in client.tests)
    assert "built without CUDA" in client.notes[0]


def test_with_gpudirect_and_a_cuda_perftest_the_rails_run_from_gpu_memory_and_host_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = 30100 + os.getpid() % 500 * 50
    out = _pair(tmp_path, monkeypatch, port, cuda=True, use_cuda=True, host_pass=True)
    client = out["client"].facts
    assert client.cuda_in_help is True and client.notes == []
    shown = [
        (t.mode, t.device, t.use_cuda, t.result.use_cuda if t.result else None)
        for t in client.tests
    ]
    assert shown[:6] == [
        ("single", "mlx5_0", 0, True),
        ("single", "mlx5_1", 1, True),
        ("host", "mlx5_0", None, False),
        ("host", "mlx5_1", None, False),
        ("all", "mlx5_0", 0, True),
        ("all", "mlx5_1", 1, True),
    ]
    assert "--use_cuda=1" in client.tests[1].argv


def test_nobody_listening_is_an_error_naming_the_peer_and_stops_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", _tools(tmp_path, standin("bw"), standin("lat"))["PATH"])
    params = ibperf.Params(
        role="client",
        peer="node01",
        peer_address="127.0.0.1",
        rails=RAILS[:2],
        base_port=28100 + os.getpid() % 500 * 50,
        connect_timeout_s=1,
    )
    facts = ibperf.collect(params).facts
    assert "node01 (127.0.0.1) did not listen within 1 s" in (facts.tests[0].error or "")
    assert all(
        (t.error or "").startswith("not run: node01 did not answer") for t in facts.tests[1:]
    )


def test_garbage_from_perftest_is_an_error_of_that_rail_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    garbage = "#!/bin/sh\nprintf '\\001\\377 not a table\\n'\n"
    monkeypatch.setenv("PATH", _tools(tmp_path, garbage, garbage)["PATH"])
    params = ibperf.Params(role="server", peer="node02", rails=RAILS[:1], latency=False)
    (test,) = ibperf.collect(params).facts.tests
    assert test.error == "mlx5_0: no perftest result header ('#bytes #iterations ...')"


# --- judging the rails -------------------------------------------------------------------


NODES = ["node01", "node02", "node03", "node04"]


def test_the_slow_rail_is_named_after_a_retest_with_a_known_good_node() -> None:
    slow = {"node02": 3}
    first = rail_results(pair_up(NODES), slow)
    profiles = dict.fromkeys(NODES, B300)
    suspects = sorted(bad_nodes(first, profiles))
    assert suspects == ["node01", "node02"]
    good = [n for n in NODES if n not in suspects]
    retest = retest_pairs(suspects, good)
    assert rounds(retest) == [[("node01", "node03"), ("node02", "node04")]]
    findings = judge_rails(NODES, first, rail_results(retest, slow, "retest"), profiles)
    bad = [(f.node, f.status) for f in findings if f.status is not Status.PASS]
    assert bad == [("node02", Status.FAIL)]
    (fail,) = [f for f in findings if f.status is Status.FAIL]
    assert fail.message == (
        f"rail 3: mlx5_3 port 1, GPU 3: ib_write_bw {HALF:.1f} Gb/s alone, {HALF:.1f} Gb/s "
        "with every rail at once (measured with node01, again with node04): below 750 Gb/s "
        "(0.9375 of the 800 Gb/s rail); 50% under the node's rail median "
        f"{GOOD:.1f} Gb/s (tolerance 5%); 50% under the fleet's rail median {GOOD:.1f} Gb/s "
        "(tolerance 5%)"
    )
    passed = {f.node: f.message for f in findings if f.status is Status.PASS}
    assert passed["node04"].startswith(f"8 rails with node03: {GOOD:.1f}-{GOOD:.1f} Gb/s alone")


def test_without_a_known_good_node_both_are_named_and_the_doubt_said() -> None:
    slow = {"node02": 3}
    first = rail_results(pair_up(NODES[:2]), slow)
    findings = judge_rails(NODES[:2], first, [], dict.fromkeys(NODES[:2], B300))
    fails = {f.node: f.message for f in findings if f.status is Status.FAIL}
    assert set(fails) == {"node01", "node02"}
    assert fails["node01"].endswith("the fault may be node02's")


def test_a_rail_slightly_under_the_median_passes_the_floor_but_not_the_tolerance() -> None:
    """No profile: no floor; 6% under the fleet's median FAILs (tolerance 5%), 4% passes."""
    first = rail_results(pair_up(NODES), {})
    for r in first:
        if r.rail == 5 and {r.node, r.partner} == {"node03", "node04"}:
            r.gbit_s = GOOD * 0.94
        if r.rail == 2 and {r.node, r.partner} == {"node01", "node02"}:
            r.gbit_s = GOOD * 0.96
    findings = judge_rails(NODES, first, [], dict.fromkeys(NODES))
    fails = sorted((f.node, f.message.split(":")[0]) for f in findings if f.status is Status.FAIL)
    assert fails == [("node03", "rail 5"), ("node04", "rail 5")]


def test_node_rails_follow_the_fabric_and_topology_records() -> None:
    from bringup.sim.demo import demo_nodes

    demo = demo_nodes()[0]
    ports = [
        {
            "device": f"mlx5_{i}",
            "port": 1,
            "state": "ACTIVE",
            "phys_state": "LinkUp",
            "rate_gbit_s": 800.0,
        }
        for i in (10, 2, 0, 1, 3, 4, 5, 6, 7)
    ]
    ports[0]["state"] = "DOWN"  # mlx5_10: not a rail that can be measured
    fabric = ProbeRecord(
        probe="fabric",
        ok=True,
        facts={
            "source": "sysfs",
            "ports": ports,
            "gpudirect": {"peermem_loaded": True, "nvidia_loaded": True},
        },
    )
    node = NodeFacts(
        node="n1",
        bringup_version="x",
        collected_at="now",
        probes={"fabric": fabric, "topology": demo.probes["topology"]},
    )
    rails, ready, why = node_rails(node)
    assert [(r.rail, r.device, r.gpu) for r in rails] == [(i, f"mlx5_{i}", i) for i in range(8)]
    assert ready is True and why is None


def test_the_fabric_and_acceptance_suites_run_the_job() -> None:
    from bringup.suite import load as load_suite

    assert load_suite("fabric").jobs == ["ibperf"]
    assert load_suite("acceptance").jobs == ["ibperf"]
    assert load_suite("quick").jobs == []


@pytest.mark.parametrize(
    "content",
    [b"\x00\xff garbage", b'{"rails": [{"node": 1}]}', b"[]", b'{"rails": "x"}'],
)
def test_a_bad_ibperf_json_is_one_line_in_the_report_not_a_traceback(
    tmp_path: Path, content: bytes
) -> None:
    from bringup.report.rails import load as load_rails

    (tmp_path / "ibperf.json").write_bytes(content)
    table = load_rails(tmp_path)
    assert table is not None and table.rows == [] and table.problem
    assert "\n" not in table.problem


def test_the_report_table_holds_the_figures_that_judged_each_node() -> None:
    from bringup.report.rails import RailCell, table

    first = rail_results(pair_up(NODES), {"node02": 3})
    retests = rail_results([("node01", "node03"), ("node02", "node04")], {"node02": 3}, "retest")
    cells = [RailCell.model_validate(r.as_json()) for r in [*first, *retests]]
    shown = table(cells, {"node01", "node02"})
    assert shown.columns == [f"{i} mlx5_{i}" for i in range(8)]
    assert shown.line_rate_gbit_s == 800.0
    by_node = {r.node: r for r in shown.rows}
    assert [by_node[n].partner for n in NODES] == ["node03", "node04", "node04", "node03"]
    assert by_node["node01"].cells[3] == pytest.approx(GOOD)  # its retest: a good rail
    assert by_node["node02"].cells[3] == pytest.approx(HALF)
    assert by_node["node02"].shares[3] == pytest.approx(HALF / 800)


def test_a_resumed_run_keeps_its_earlier_sub_runs(tmp_path: Path) -> None:
    from bringup.commands.ibperf_job import _fresh

    first = tmp_path / "ibperf-pairs-1"
    assert _fresh(first) == first
    first.mkdir()
    assert _fresh(first) == tmp_path / "ibperf-pairs-1.2"


# --- error counters under the rails' own traffic ------------------------------------------------


def test_a_counter_growing_only_under_the_rail_tests_fails_that_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fabric probe reads its counters over an idle window; an error that counts only
    under load is seen by the ibperf probe's readings around its own tests."""
    sys_root = write_rails(tmp_path / "sys", 1, rails=2)
    # The plain stand-ins first: no counter moves, both sides PASS.
    out = _pair(tmp_path, monkeypatch, 32100 + os.getpid() % 500 * 50, sys_root=str(sys_root))
    still = [
        CountersSeen("node01", "node02", out["server"].facts),
        CountersSeen("node02", "node01", out["client"].facts),
    ]
    statuses = [f.status for f in judge_rail_counters(["node01", "node02"], still)]
    assert statuses == [Status.PASS, Status.PASS]
    # Then a perftest that, like a bad cable under traffic, adds symbol errors on mlx5_1.
    grows = counter_file(sys_root, "mlx5_1", "symbol_error")
    real = tmp_path / "real" / "ib_write_bw"
    real.parent.mkdir()
    real.write_text(standin("bw", {}))
    real.chmod(0o755)
    (tmp_path / "bin" / "ib_write_bw").write_text(
        "#!/bin/sh\n# bringup.sim stand-in: counts errors on mlx5_1 while it runs\n"
        f'case "$*" in *mlx5_1*) v=$(cat {grows}); echo $((v + 3)) > {grows};; esac\n'
        f'exec {real} "$@"\n'
    )
    out = _pair(
        tmp_path, monkeypatch, 34100 + os.getpid() % 500 * 50, sys_root=str(sys_root), keep=True
    )
    client = out["client"].facts
    assert [(c.device, c.before["symbol_error"]) for c in client.counters] == [
        ("mlx5_0", 0),
        ("mlx5_1", 0),
    ]
    assert client.counters[0].after is not None and client.counters[0].after["symbol_error"] == 0
    seen = [
        CountersSeen("node01", "node02", out["server"].facts),
        CountersSeen("node02", "node01", client),
    ]
    found = judge_rail_counters(["node01", "node02"], seen)
    bad = [(f.node, f.status, f.message.split(" grew")[0]) for f in found]
    assert bad == [
        ("node01", Status.FAIL, "rail 1: mlx5_1 port 1: symbol_error"),
        ("node02", Status.FAIL, "rail 1: mlx5_1 port 1: symbol_error"),
    ]
    assert "during the rail tests with node01 (0 -> " in found[1].message
    assert (found[1].value or 0) >= 3 and "mlxlink -d mlx5_1" in (found[1].action or "")
    assert "mlx5_1 port 1 symbol_error 0 -> " in out["client"].raw["counters.txt"]


def test_rail_counters_judged_from_their_two_readings() -> None:
    """Exact findings from readings as the probe records them: a growth FAILs with the
    figures, a still counter PASSes, a port whose counters could not be read is said."""
    grown = ibperf_facts.RailCounters(3, "mlx5_3", 1, {"symbol_error": 7}, {"symbol_error": 19})
    still = ibperf_facts.RailCounters(0, "mlx5_0", 1, {"link_downed": 1}, {"link_downed": 1})
    unread = ibperf_facts.RailCounters(1, "mlx5_1", 1, {}, None, "no counters/ folder")

    def side(*counters: ibperf_facts.RailCounters) -> ibperf_facts.IbperfFacts:
        return ibperf_facts.IbperfFacts(
            "client", "node01", "10.0.0.1", "ib_write_bw", None, counters=list(counters)
        )

    found = judge_rail_counters(
        ["node02", "node03", "node04", "node05"],
        [
            CountersSeen("node02", "node01", side(still, grown)),
            CountersSeen("node03", "node01", side(still, unread)),
            CountersSeen("node04", "node01", side(unread)),
        ],
    )
    shown = [(f.node, f.status, f.message) for f in found]
    assert shown == [
        (
            "node02",
            Status.FAIL,
            "rail 3: mlx5_3 port 1: symbol_error grew by 12 during the rail tests with node01 "
            "(7 -> 19)",
        ),
        (
            "node03",
            Status.PASS,
            "1 rail reading(s): no error counter grew during the rail tests (symbol_error, "
            "link_error_recovery, link_downed, ...); not read: mlx5_1 port 1: no counters/ folder",
        ),
        ("node04", Status.SKIP, "counters not read: mlx5_1 port 1: no counters/ folder"),
    ]  # node05 ran no pair: nothing said here (fabric.rail_bw says why)
