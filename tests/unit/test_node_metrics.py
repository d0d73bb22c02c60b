"""measurements.node_metrics: a node's metrics read from the records they come from alone,
equal to what the whole measurement gives (the stragglers at the end of a check read them;
the report reads the whole). Facts: the demo fleet with the recorded nccl-tests run, the
GEMM probe run on this CPU and the rest of tests/support/report_runs.py; the burn-in record
of tests/fixtures/burnin/cpu-tiny-2ranks.json."""

from __future__ import annotations

import json

from bringup.facts import read_record
from bringup.measurements import measure, metric_probes, node_metrics
from bringup.sim.demo import demo_nodes
from tests.support import FIXTURES
from tests.support.report_runs import with_measurements

BURNIN = json.loads((FIXTURES / "burnin" / "cpu-tiny-2ranks.json").read_text())


def test_a_nodes_metrics_alone_are_the_whole_measurements_metrics() -> None:
    nodes = {n.node: n for n in demo_nodes()}
    with_measurements(nodes)
    # node02 trained on the CPU as recorded; node03 the same record as a GPU's would read
    # (device_kind cuda): its MFU is computed from the profile's peak.
    nodes["b300-node02"].probes["burnin"] = read_record(BURNIN)
    on_gpu = {**BURNIN, "facts": {**BURNIN["facts"], "device_kind": "cuda"}}
    nodes["b300-node03"].probes["burnin"] = read_record(on_gpu)
    seen: set[str] = set()
    for node in nodes.values():
        for peak in (None, 2250e12):
            whole = measure(node, peak).metrics
            assert node_metrics(node, peak) == whole, node.node
            seen.update(whole)
    assert seen == {
        "nvme.seq_read",
        "nvme.seq_write",
        "nccl.busbw",
        "gemm.tflops",
        "burnin.tokens_per_s",
        "burnin.mfu",
    }
    assert metric_probes() == {"nvme", "nccl", "burnin", "gemm"}
