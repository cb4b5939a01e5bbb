"""The network `devices --check` measures on a live cluster: kept in the rates file by the
scheduler's address next to the GPUs' rates, read back, and used by `plan` on that cluster
when the cluster names no network (no Dask here)."""

from __future__ import annotations

import json
from pathlib import Path

from gpuplace.across_hosts import measured_network
from gpuplace.devices import discover, view
from gpuplace.devices.cluster import Cluster, Network, Task, TaskName, Transfer
from gpuplace.devices.rates import (
    MeasuredNetwork,
    MeasuredRate,
    read_rates,
    save_network,
    save_rates,
)
from gpuplace.report.cluster import transfer_lines

T0, T1 = TaskName("worker", 0), TaskName("worker", 1)
GPU = MeasuredRate("Tesla T4", 8.1, 300.0, "2026-12-01")
NET = MeasuredNetwork(1.25, 40.0, "2026-12-01")


def _cluster(scheduler: str | None, simulated: bool, network: Network | None = None) -> Cluster:
    seen = view(discover("1xT4"), {})
    tasks = tuple(Task(t, f"node{t.task}", seen) for t in (T0, T1))
    return Cluster(tasks, T0, scheduler, simulated, network)


def test_a_network_is_saved_beside_the_gpus_rates_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "rates.json"
    save_rates(path, {"GPU-1": GPU})
    save_network(path, "tcp://head:8786", NET)
    save_rates(path, {"GPU-2": GPU})  # a later GPU check keeps the network
    found = read_rates(path)
    assert found.warnings == ()
    assert dict(found.by_uuid) == {"GPU-1": GPU, "GPU-2": GPU}
    assert dict(found.networks) == {"tcp://head:8786": NET}
    assert json.loads(path.read_text())["network"] == {
        "tcp://head:8786": {"bandwidth_gbs": 1.25, "latency_us": 40.0, "measured": "2026-12-01"}
    }


def test_a_bad_network_entry_is_one_warning_and_nothing_is_used(tmp_path: Path) -> None:
    path = tmp_path / "rates.json"
    path.write_text(json.dumps({"network": {"tcp://h:1": {"bandwidth_gbs": -1, "latency_us": 1,
                                                          "measured": "x"}}}))  # fmt: skip
    found = read_rates(path)
    assert (found.by_uuid, found.networks) == ({}, {})
    assert "a network's rates must be positive numbers" in found.warnings[0]


def test_plan_on_that_cluster_uses_the_measured_network_unless_one_is_named() -> None:
    from gpuplace.devices.rates import Rates

    rates = Rates(networks={"tcp://head:8786": NET})
    live = _cluster("tcp://head:8786", simulated=False)
    assert measured_network(live, rates).network == Network(1.25e9, 40e-6, "measured")
    named = Network(3e9, 1e-5, "cluster file")
    assert measured_network(_cluster("tcp://head:8786", False, named), rates).network == named
    assert measured_network(_cluster("tcp://other:8786", False), rates).network is None
    assert measured_network(_cluster(None, simulated=True), rates).network is None


def test_transfer_lines_say_what_was_measured_and_that_loopback_is_not_saved() -> None:
    moved = Transfer(T1, T0, 16 * 2**20, 0.0125, 0.0005)
    assert moved.bandwidth == 16 * 2**20 / 0.012
    assert transfer_lines([moved], simulated=True) == [
        "Network task:1 -> task:0: 16.0 MiB in 12.5 ms, 1.4 GB/s (11.2 Gbit/s), latency 0.5 ms "
        "(best of 3 Dask transfers of a host array)",
        "Simulated tasks are processes on this host: that is loopback's rate, not a network's, "
        "and it is not saved for plan (give the cluster a network: instead)",
    ]
    assert transfer_lines([], simulated=True) == []
