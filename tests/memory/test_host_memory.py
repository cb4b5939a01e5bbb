"""Host memory: a run whose tensors on CPU:0 and simulated GPUs (numpy arrays, in this host's
memory) would need more than the host has available is refused before it starts, exit 1, with
`--force` too; what the host has is read from /proc and the cgroup files by pure functions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuplace.devices.host_memory import (
    address_room,
    available_memory,
    cgroup_room,
    cgroup_rooms,
    mem_available,
)
from gpuplace.execute.backends import Backend, NumpyBackend
from gpuplace.execute.executor import plan, run
from gpuplace.execute.predict import HostPeak, host_peak
from gpuplace.memory.ledger import Ledger
from tests.conftest import Run, write_spec
from tests.execute.helpers import CPU, gpu, graph, kernel_table, op

MEMINFO = "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"


def test_mem_available_is_read_from_meminfo() -> None:
    assert mem_available(MEMINFO) == 20_000_000 * 1024
    assert mem_available("MemTotal: 1 kB\n") is None


@pytest.mark.parametrize(
    ("limit", "usage", "room"),
    [
        ("1000\n", "400\n", 600),
        ("max\n", "400\n", None),  # cgroup v2: no limit
        ("9223372036854771712\n", "5\n", None),  # cgroup v1: no limit
        ("100", "400", 0),
        (None, "1", None),
        ("9" * 5000, "1", None),
    ],
)
def test_room_under_one_cgroup_limit(
    limit: str | None, usage: str | None, room: int | None
) -> None:
    assert cgroup_room(limit, usage) == room


def test_every_cgroup_level_up_to_the_root_is_a_limit() -> None:
    files = {
        "/sys/fs/cgroup/a/b/memory.max": "1000", "/sys/fs/cgroup/a/b/memory.current": "100",
        "/sys/fs/cgroup/a/memory.max": "max", "/sys/fs/cgroup/a/memory.current": "5",
        "/sys/fs/cgroup/memory.max": "500", "/sys/fs/cgroup/memory.current": "450",
        "/sys/fs/cgroup/memory/c/memory.limit_in_bytes": "300",
        "/sys/fs/cgroup/memory/c/memory.usage_in_bytes": "100",
    }  # fmt: skip
    assert cgroup_rooms("0::/a/b\n", files.get) == [900, 50]
    assert cgroup_rooms("4:memory:/c\n3:cpu:/x\n", files.get) == [200]


def test_available_memory_is_the_least_of_its_sources() -> None:
    files = {
        "/proc/meminfo": MEMINFO,
        "/proc/self/cgroup": "0::/job\n",
        "/sys/fs/cgroup/job/memory.max": str(8 * 2**30),
        "/sys/fs/cgroup/job/memory.current": str(2**30),
        "/proc/self/status": "VmSize:\t 1048576 kB\n",
    }
    assert available_memory(files.get, lambda: None) == 7 * 2**30  # the cgroup's room
    assert available_memory(files.get, lambda: 3 * 2**30) == 2 * 2**30  # ulimit -v: 3 GiB - 1 GiB
    assert available_memory({}.get, lambda: None) is None  # not Linux: unknown
    assert address_room(None, "VmSize: 1 kB") is None


class NullBackend(NumpyBackend):
    """A simulated device that stores nothing (every array is None)."""

    def __init__(self, label: str) -> None:
        super().__init__(label, simulated=True)

    def put(self, host: Any) -> Any:
        return None

    def get(self, array: Any) -> Any:
        return None


def test_host_peak_is_what_all_host_devices_hold_at_once() -> None:
    g = graph(
        op("w", "variable", value=[[1.0] * 8] * 8, shape=(8, 8)),  # 256 B, resident
        op("a", "constant", value=[[1.0] * 8] * 8, shape=(8, 8)),
        op("b", "matmul", "a", "w", shape=(8, 8)),  # on GPU:0: copies a and w there
        op("c", "negative", "b", shape=(8, 8)),  # on GPU:1 (not host memory): copies b
        op("d", "negative", "c", shape=(8, 8)),  # back on the CPU
        fetch=("d",),
    )
    devices = {"w": CPU, "a": CPU, "b": gpu(0), "c": gpu(1), "d": CPU}
    backends: dict[str, Backend] = {
        CPU: NumpyBackend(CPU), gpu(0): NumpyBackend(gpu(0), simulated=True),
        gpu(1): NullBackend(gpu(1)),
    }  # fmt: skip
    schedule = plan(g, devices, backends, kernel_table().__getitem__)
    # w, a, then b's step: copies of a and w plus b on GPU:0 (a freed after it): 5 x 256 B
    assert host_peak(schedule) == HostPeak(5 * 256, "b")
    everything = {CPU: NumpyBackend(CPU), gpu(0): backends[gpu(0)], gpu(1): NumpyBackend(gpu(1))}
    schedule = plan(g, devices, everything, kernel_table().__getitem__)
    shared = Ledger("host")  # one ledger charged by every device: the host's total over time
    run(schedule, [shared] * len(schedule.devices))
    assert host_peak(schedule).nbytes == shared.peak


BIG = (
    "graph:\n"
    "  - {name: a, op: zeros, shape: [1024, 1024], device: /cpu:0}\n"  # 4 MiB each
    "  - {name: b, op: ones, shape: [1024, 1024], device: /gpu:0}\n"
    "  - {name: c, op: add, inputs: [a, b], device: /gpu:0}\n"
    "  - {name: s, op: reduce_sum, inputs: [c], device: /cpu:0}\n"
)
REFUSED = (
    "error: at op 'c' this run would hold 16.0 MiB (16,777,216 B) in host memory (the tensors of "
    "CPU:0 and of the simulated GPUs live there), more than the 10.0 MiB this host has "
    "available; nothing was run, and nothing overrides this check: past it the kernel kills the "
    "process Fix: see each device's peak with gpuplace plan, then run it on a host with more "
    "memory or make its tensors smaller\n"
)


@pytest.mark.parametrize(
    "args", [("run",), ("run", "--force"), ("run", "--json"), ("mem",), ("mem", "--compare")]
)
def test_a_run_larger_than_the_host_is_refused_before_it_starts(
    run: Run, tmp_path: Path, args: tuple[str, ...]
) -> None:
    spec = write_spec(tmp_path, BIG)
    result = run("--machine", "1xK520", args[0], spec, *args[1:], host_memory=lambda: 10 * 2**20)
    assert (result.code, result.err) == (1, REFUSED)
    if "--json" in args:  # the same error as a document (tests/test_cli_json_errors.py)
        error = json.loads(result.out)["error"]
        assert (error["kind"], error["exit_code"]) == ("runtime_failure", 1)
        assert f"error: {error['message']} Fix: {error['fix']}\n" == REFUSED
    else:
        assert result.out == ""


def test_a_run_that_fits_the_host_runs(run: Run, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, BIG)
    result = run("--machine", "1xK520", "run", spec, host_memory=lambda: 16 * 2**20)
    assert (result.code, result.err) == (0, "") and result.out.endswith("s:\n1048576.0\n")
    unknown = run("--machine", "1xK520", "run", spec, host_memory=lambda: None)
    assert unknown.code == 0
