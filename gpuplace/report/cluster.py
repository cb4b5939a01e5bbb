"""What every command prints about a cluster (across hosts): the `Cluster:` line, the network
line, per task what crosses the network (NET IN / NET OUT), and the device table of a list of
tasks with a HOST column (`devices` on a simulated cluster, and on a live one: the runtime's
inventory gives the same Task objects). Plain text and dicts; nothing prints here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..devices.cluster import (
    NETWORK_REPEATS,
    Cluster,
    Network,
    Task,
    TaskName,
    Transfer,
    full_device,
    split_device,
    task_label,
)
from ..placement.candidates import describe_tasks
from ..placement.loads import PlannedCopy
from ..units import device_memory, human
from .text import columns

if TYPE_CHECKING:
    from ..execute.device_check import CheckResult

TASK_HEADER = ("TASK", "HOST", "DEVICES", "NET IN", "NET BYTES IN", "NET OUT", "NET BYTES OUT")


def cluster_line(cluster: Cluster) -> str:
    """`Cluster: 2 tasks of job worker, simulated (2x(1xK20m)); session on /job:...task:0`."""
    n = len(cluster.tasks)
    what = describe_tasks([t.name for t in cluster.tasks])
    tasks = f"{n} tasks of job {cluster.tasks[0].name.job}" if _one_job(cluster) else what
    if n == 1:
        tasks = f"1 task ({what})"
    if cluster.simulated:
        where = f"simulated ({cluster.description})" if cluster.description else "simulated"
    else:
        where = f"Dask scheduler {cluster.scheduler}"
    return f"Cluster: {tasks}, {where}; session on {cluster.master}"


def _one_job(cluster: Cluster) -> bool:
    return len({(t.name.job, t.name.replica) for t in cluster.tasks}) == 1


def rate_text(bandwidth: float) -> str:
    """`10 Gbit/s`, `25 Gbit/s`, `1.2 Gbit/s`, `800 Mbit/s`."""
    bits = bandwidth * 8
    if bits >= 1e9:
        return f"{bits / 1e9:.3g} Gbit/s"
    return f"{bits / 1e6:.3g} Mbit/s"


def network_line(network: Network, hop: float) -> str:
    """`Network between tasks: 10 Gbit/s, 50 us (default); each cross-task copy also waits
    about 10 ms for the runtime (a Dask task per chunk)`."""
    return (
        f"Network between tasks: {rate_text(network.bandwidth)}, "
        f"{network.latency * 1e6:.3g} us ({network.source}); each cross-task copy also waits "
        f"about {hop * 1000:.3g} ms for the runtime (a Dask task per chunk)"
    )


def network_totals(cluster: Cluster, copies: Sequence[PlannedCopy]) -> dict[TaskName, list[int]]:
    """Per task: [copies in, bytes in, copies out, bytes out] over the network."""
    totals = {t.name: [0, 0, 0, 0] for t in cluster.tasks}
    for c in copies:
        src, dst = split_device(c.src)[0], split_device(c.dst)[0]
        if src != dst:
            totals[dst][0] += 1
            totals[dst][1] += c.nbytes
            totals[src][2] += 1
            totals[src][3] += c.nbytes
    return totals


def task_rows(cluster: Cluster, copies: Sequence[PlannedCopy],
              devices: Sequence[str]) -> list[tuple[str, ...]]:  # fmt: skip
    """One row per task: its name, host, devices, and what crosses the network."""
    totals = network_totals(cluster, copies)
    count: dict[TaskName, int] = {}
    for name in devices:
        task = split_device(name)[0]
        count[task] = count.get(task, 0) + 1
    return [
        (str(t.name), t.host, str(count.get(t.name, 0)), str(totals[t.name][0]),
         human(totals[t.name][1]), str(totals[t.name][2]), human(totals[t.name][3]))
        for t in cluster.tasks
    ]  # fmt: skip


def cluster_record(cluster: Cluster) -> dict[str, Any]:
    """`{"scheduler", "simulated", "master", "description"}`: the cluster in JSON documents."""
    return {
        "scheduler": cluster.scheduler,
        "simulated": cluster.simulated,
        "master": str(cluster.master),
        "description": cluster.description,
    }


def network_record(network: Network, hop: float) -> dict[str, Any]:
    return {
        "bandwidth_bytes_per_second": network.bandwidth,
        "latency_seconds": network.latency,
        "source": network.source,
        "hop_seconds": hop,
    }


def task_records(cluster: Cluster, copies: Sequence[PlannedCopy]) -> list[dict[str, Any]]:
    """Per task: name, host, and its network copies in and out (count and bytes)."""
    totals = network_totals(cluster, copies)
    return [
        {"task": str(t.name), "host": t.host,
         "net_copies_in": totals[t.name][0], "net_bytes_in": totals[t.name][1],
         "net_copies_out": totals[t.name][2], "net_bytes_out": totals[t.name][3]}
        for t in cluster.tasks
    ]  # fmt: skip


DEVICE_HEADER = ("DEVICE", "HOST", "CUDA", "NVML", "PRODUCT", "MEMORY TOTAL")


def device_rows(tasks: Sequence[Task]) -> list[tuple[str, ...]]:
    """`devices` across hosts: each task's CPU:0 and GPUs (CUDA order), by full name, with the
    host it runs on; simulated devices say so."""
    rows: list[tuple[str, ...]] = []
    for task in tasks:
        machine = task.view.machine
        host = machine.host
        mark = " [simulated]" if host.simulated else ""
        cpu = f"{host.cpu_model}, {host.cores} cores{mark}" if host.cores else host.cpu_model + mark
        total = "-" if host.memory_total is None else human(host.memory_total)
        rows.append((full_device(task.name, "CPU:0"), task.host, "-", "-", cpu, total))
        for g in task.view.gpus:
            mark = " [simulated]" if g.gpu.simulated else ""
            memory = "-" if g.gpu.memory_total is None else device_memory(g.gpu.memory_total)
            rows.append((full_device(task.name, f"GPU:{g.cuda_index}"), task.host,
                         str(g.cuda_index), str(g.gpu.nvml_index), g.product + mark,
                         memory))  # fmt: skip
    return rows


def task_notes(tasks: Sequence[Task]) -> list[str]:
    """Per-task notes (warnings, hidden GPUs), each prefixed with its task: `task 1: ...`."""
    notes = []
    for task in tasks:
        label = f"task {task.name.task}" if task.name.job == "worker" else str(task.name)
        for line in (*task.view.warnings, *task.view.hidden):
            notes.append(f"{label}: {line}")
    return notes


def devices_table(tasks: Sequence[Task]) -> str:
    """`devices` across hosts: one table of every task's devices (`device_rows`)."""
    return columns(DEVICE_HEADER, device_rows(tasks))


def devices_cluster_json(cluster: Cluster) -> dict[str, Any]:
    """`devices --json` across hosts: `{"cluster": {...}, "tasks": [{"task", "host", "worker",
    "pid", "machine", "devices"}]}`, each device record named in full (`pid`: the task's
    worker process on a live cluster; null on a simulated one)."""
    from .devices import device_records, machine_json
    from .schema import SCHEMA_VERSION

    tasks = []
    for task in cluster.tasks:
        records = device_records(task.view)
        for record in records:
            record["name"] = full_device(task.name, str(record["name"]).removeprefix("/device:"))
        tasks.append({
            "task": str(task.name), "host": task.host, "worker": task.address,
            "pid": task.pid, "machine": machine_json(task.view),
            "devices": records,
        })  # fmt: skip
    return {"schema_version": SCHEMA_VERSION, "cluster": cluster_record(cluster), "tasks": tasks}


def short_tasks(tasks: Sequence[Task], gpus: int | None, memory: int | None) -> list[str]:
    """`--require-gpus` / `--min-memory` over a cluster: the cluster's shortfall, then each GPU
    below `memory` named with its task."""
    failures = []
    total = sum(len(t.view.gpus) for t in tasks)
    if gpus is not None and total < gpus:
        counts = ", ".join(f"{task_label(t.name)} {len(t.view.gpus)}" for t in tasks)
        fewest = min(tasks, key=lambda t: len(t.view.gpus))
        failures.append(
            f"{gpus} GPU{'' if gpus == 1 else 's'} required, {total} visible over the cluster "
            f"({counts}); {fewest.name} on {fewest.host} has the fewest"
        )
    if memory is not None:
        for t in tasks:
            for g in t.view.gpus:
                if g.memory_total is None or g.memory_total < memory:
                    size = "unknown" if g.memory_total is None else human(g.memory_total)
                    failures.append(
                        f"{full_device(t.name, f'GPU:{g.cuda_index}')} ({g.product}, host "
                        f"{t.host}) has {size} total"
                    )
    return failures


def qualified_results(results: Mapping[TaskName, Sequence[CheckResult]]) -> list[CheckResult]:
    """Every task's `--check` results in task order, each device named in full."""
    return [
        replace(r, device=full_device(task, r.device.removeprefix("/device:")))
        for task, found in sorted(results.items())
        for r in found
    ]


def transfer_lines(transfers: Sequence[Transfer], simulated: bool) -> list[str]:
    """`Network task:1 -> task:0: 16.0 MiB in 12.1 ms, 1.39 GB/s (11.1 Gbit/s), latency 0.61 ms
    (best of 3 Dask transfers of a host array)`, one per measured pair, and what it is for."""
    lines = [
        f"Network {task_label(t.source)} -> {task_label(t.target)}: {human(t.nbytes)} in "
        f"{t.seconds * 1e3:.3g} ms, {t.bandwidth / 1e9:.3g} GB/s ({rate_text(t.bandwidth)}), "
        f"latency {t.latency * 1e3:.3g} ms (best of {NETWORK_REPEATS} Dask transfers of a host "
        "array)"
        for t in transfers
    ]
    if transfers and simulated:
        lines.append(
            "Simulated tasks are processes on this host: that is loopback's rate, not a "
            "network's, and it is not saved for plan (give the cluster a network: instead)"
        )
    return lines


def transfer_records(transfers: Sequence[Transfer]) -> list[dict[str, Any]]:
    return [
        {
            "source": str(t.source),
            "target": str(t.target),
            "bytes": t.nbytes,
            "seconds": t.seconds,
            "latency_seconds": t.latency,
            "bandwidth_bytes_per_second": t.bandwidth,
        }
        for t in transfers
    ]
