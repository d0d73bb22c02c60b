"""Planning the storage and uplink probes: --dataset-dir, --checkpoint-dir, --training-user,
--uplink and the host variables bringup_dataset_dir, bringup_checkpoint_dir,
bringup_training_user, bringup_uplink."""

from __future__ import annotations

import pytest

from bringup.fleet.inventory import Host
from bringup.fleet.plan import FleetError, plan_node
from bringup.suite import load as load_suite

ACCEPTANCE = load_suite("acceptance")


def step(host: Host, options: dict[str, dict[str, str]] | None, probe: str = "storage") -> object:
    plan = plan_node(host, lambda *a: iter(()), ACCEPTANCE, None, options=options)
    return next(s for s in plan.request["probes"] if s["name"] == probe)["params"]


def storage_step(host: Host, storage: dict[str, str] | None) -> object:
    return step(host, {"storage": storage} if storage else None)


def test_the_options_reach_the_storage_probe_and_a_hosts_variables_win() -> None:
    given = {"dataset_dir": "/data", "checkpoint_dir": "/ckpt", "user": "train"}
    assert storage_step(Host("n1", "10.0.0.1"), given) == given
    own = Host("n2", "10.0.0.2", vars={"bringup_checkpoint_dir": "/scratch/ckpt"})
    assert storage_step(own, given) == {**given, "checkpoint_dir": "/scratch/ckpt"}
    assert storage_step(Host("n3", "10.0.0.3"), None) == {}


def test_a_bad_host_variable_names_the_host() -> None:
    with pytest.raises(FleetError, match="host n4: bringup_dataset_dir must be one string"):
        storage_step(Host("n4", "10.0.0.4", vars={"bringup_dataset_dir": ["/a", "/b"]}), None)


def test_the_uplink_endpoint_from_the_option_or_the_host() -> None:
    given = {"uplink": {"endpoint": "iperf3://10.0.0.9"}}
    assert step(Host("n1", "10.0.0.1"), given, "uplink") == {
        "duration_s": 10,
        "endpoint": "iperf3://10.0.0.9",
    }
    own = Host("n2", "10.0.0.2", vars={"bringup_uplink": "https://data.example/big.bin"})
    assert step(own, given, "uplink")["endpoint"] == "https://data.example/big.bin"
