"""What `gpuplace mem` prints: nvidia-smi's view, and what a memory policy did per GPU."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..devices.model import Gpu, GpuProcess, LogicalGpu, View
from ..devices.names import full_name
from ..memory.pools import DeviceMemory
from ..memory.training import TrainingMemory
from ..results import PolicyRun, Reservation
from ..units import device_memory
from .explain import short_device
from .text import NA, columns
from .training import step_record, train_column_title, training_record

PROCESS_NAME = "gpuplace"


def visible_cards(view: View) -> list[Gpu]:
    """The physical GPUs the process sees, once each, in NVML order (as nvidia-smi lists them)."""
    cards = {g.gpu.nvml_index: g.gpu for g in view.gpus}
    return [cards[i] for i in sorted(cards)]


def with_process(cards: Sequence[Gpu], logical: Sequence[LogicalGpu], memory: Sequence[DeviceMemory],
                 pid: int) -> list[Gpu]:  # fmt: skip
    """Simulated cards as nvidia-smi would show them while this process holds its reservation."""
    held: dict[int, int] = {}
    by_name = {m.device: m for m in memory}
    for lg in logical:
        m = by_name.get(full_name("GPU", lg.index))
        if m is not None:
            held[lg.gpu.gpu.nvml_index] = held.get(lg.gpu.gpu.nvml_index, 0) + m.reserved
    out = []
    for card in cards:
        extra = held.get(card.nvml_index, 0)
        if not extra:
            out.append(card)
            continue
        used = (card.memory_used or 0) + extra
        free = None if card.memory_total is None else card.memory_total - used
        process = GpuProcess(pid, PROCESS_NAME, extra)
        out.append(card._replace(memory_used=used, memory_free=free,
                                  processes=(*card.processes, process)))  # fmt: skip
    return out


def mig_mode(gpu: Gpu) -> str | None:
    """nvidia-smi's MIG M.: Enabled, Disabled (a MIG-capable card with MIG off), or N/A (None)."""
    return "Enabled" if gpu.mig_enabled else "Disabled" if gpu.mig_capable else None


def smi_records(cards: Sequence[Gpu]) -> list[dict[str, Any]]:
    """`gpuplace mem --json`: nvidia-smi's fields per GPU (MIG devices and processes included),
    sizes in bytes; the card's model is `product`, as in every document (`name` is always a
    TensorFlow device name)."""
    return [
        {
            "index": g.nvml_index, "product": g.product, "uuid": g.uuid,
            "pci_bus_id": g.pci_bus_id,
            "persistence_mode": g.persistence_mode, "display_active": g.display_active,
            "ecc_uncorrected": g.ecc_uncorrected, "fan_percent": g.fan_percent,
            "temperature_celsius": g.temperature_celsius, "performance_state": g.performance_state,
            "power_draw_watts": g.power_draw_watts, "power_limit_watts": g.power_limit_watts,
            "memory_total": g.memory_total, "memory_used": g.memory_used,
            "memory_free": g.memory_free, "memory_reserved": g.memory_reserved,
            "utilization_percent": g.utilization_percent, "compute_mode": g.compute_mode,
            "mig_enabled": g.mig_enabled, "mig_mode": mig_mode(g),
            "simulated": g.simulated, "available": g.available,
            "mig_devices": [{"index": m.index, "uuid": m.uuid, "product": m.product,
                             "gpu_instance_id": m.gpu_instance_id,
                             "compute_instance_id": m.compute_instance_id,
                             "memory_total": m.memory_total, "memory_used": m.memory_used}
                            for m in g.mig_instances],
            "processes": [{"pid": p.pid, "type": p.type, "name": p.name, "memory": p.memory}
                          for p in g.processes],
        }
        for g in cards
    ]  # fmt: skip


MEMORY_HEADER = ("DEVICE", "CARD", "POLICY", "RESERVED", "PEAK IN USE", "LIMIT")
# with --training: the run's peak (the forward graph) beside the predicted training step's
TRAIN_MEMORY_HEADER = (*MEMORY_HEADER[:5], "PEAK (TRAIN)", MEMORY_HEADER[5])


def _mem(n: int | None) -> str:
    return NA if n is None else device_memory(n)


Trained = dict[str, TrainingMemory] | None  # a run's training step by device, or None


def memory_rows(
    policy: str, logical: Sequence[LogicalGpu], memory: Sequence[DeviceMemory], task: str = "",
    trained: Trained = None,
) -> list[tuple[str, ...]]:  # fmt: skip
    """Per logical GPU: what the policy reserved, the peak in use (and, with --training, the
    training step's predicted peak), the limit it set; `task` names a cluster's task
    (`/job:worker/replica:0/task:1`; "": one process)."""
    by_name = {m.device: m for m in memory}
    rows: list[tuple[str, ...]] = []
    for lg in logical:
        name = _device(task, lg.index)
        m = by_name[name]
        card = f"{lg.gpu.product} (CUDA {lg.gpu.cuda_index})"
        train = () if trained is None else (_mem(trained[name].peak),)
        rows.append((short_device(name), card, policy, _mem(m.reserved), _mem(m.peak), *train,
                     _mem(m.limit)))  # fmt: skip
    return rows


def _device(task: str, index: int) -> str:
    return f"{task}/device:GPU:{index}" if task else full_name("GPU", index)


def _by_task(run: PolicyRun) -> list[tuple[str, Sequence[LogicalGpu]]]:
    """(task, its logical GPUs) of a run: ("", the GPUs) in one process, each task's on a cluster."""
    prepared = run.prepared
    if prepared.cluster is None:
        return [("", prepared.logical)]
    return [(str(t.name), prepared.task_logical.get(t.name, ())) for t in prepared.cluster.tasks]


def memory_plain(runs: Sequence[PolicyRun], steps: Sequence[Trained] = ()) -> str:
    """One table for one or several policies (`--compare`): the runs that ran; `steps`, with
    --training, each run's training step (`run_steps`)."""
    trained = list(steps) or [None] * len(runs)
    rows = [
        row
        for run, step in zip(runs, trained, strict=True)
        if run.outcome is not None
        for task, logical in _by_task(run)
        for row in memory_rows(run.name, logical, run.outcome.memory, task, step)
    ]
    training = runs[-1].prepared.training if runs else None
    if training is None or not steps:
        return columns(MEMORY_HEADER, rows)
    return f"{train_column_title(training)}\n{columns(TRAIN_MEMORY_HEADER, rows)}"


def policy_records(
    runs: Sequence[PolicyRun], steps: Sequence[Trained] = ()
) -> list[dict[str, Any]]:
    """`mem --json`'s policies: each run's devices (with --training, each one's training step:
    `peak` stays what the run held, the training step's predicted peak is `training.peak`)."""
    trained = list(steps) or [None] * len(runs)
    return [
        {"policy": run.name, "training": training_record(run.prepared.training), "devices": [
            r for task, logical in _by_task(run)
            for r in memory_records(logical, run.outcome.memory, task, step)]}
        for run, step in zip(runs, trained, strict=True)
        if run.outcome is not None
    ]  # fmt: skip


def memory_records(
    logical: Sequence[LogicalGpu], memory: Sequence[DeviceMemory], task: str = "",
    trained: Trained = None,
) -> list[dict[str, Any]]:  # fmt: skip
    by_name = {m.device: m for m in memory}
    out = []
    for lg in logical:
        name = _device(task, lg.index)
        record = {"device": name if task else lg.name, "cuda_index": lg.gpu.cuda_index,
                  "product": lg.gpu.product, "reserved": by_name[name].reserved,
                  "peak": by_name[name].peak, "limit": lg.limit}  # fmt: skip
        if trained is not None:
            record["training"] = step_record(trained[name])
        out.append(record)
    return out


RESERVE_HEADER = ("DEVICE", "CARD", "POLICY", "RESERVED AT START", "LIMIT", "LEFT ON CARD")


def _left(logical: Sequence[LogicalGpu]) -> dict[int, int | None]:
    """Per card (NVML index): its free memory less what the logical GPUs on it reserve."""
    left: dict[int, int | None] = {}
    for lg in logical:
        card = lg.gpu.gpu.nvml_index
        free = lg.gpu.memory_free if lg.gpu.memory_free is not None else lg.gpu.memory_total
        before = left.get(card, free)
        left[card] = None if before is None else before - lg.reserve
    return left


def reservation_plain(reservations: Sequence[Reservation]) -> str:
    """`mem` without a graph: per policy and logical GPU, what TensorFlow sets aside at start,
    the limit the device may grow to, and what the card keeps free for other processes."""
    rows: list[tuple[str, ...]] = []
    for r in reservations:
        if r.repeat_of:
            continue
        left = _left(r.logical)
        for lg in r.logical:
            card = f"{lg.gpu.product} (CUDA {lg.gpu.cuda_index})"
            rows.append((f"GPU:{lg.index}", card, r.name, _mem(lg.reserve), _mem(lg.limit),
                         _mem(left[lg.gpu.gpu.nvml_index])))  # fmt: skip
    return columns(RESERVE_HEADER, rows)


def reservation_records(reservations: Sequence[Reservation]) -> list[dict[str, Any]]:
    """`mem --json` without a graph: each policy's logical GPUs, sizes in bytes."""
    out = []
    for r in reservations:
        if r.repeat_of:
            continue
        left = _left(r.logical)
        devices = [
            {"device": lg.name, "cuda_index": lg.gpu.cuda_index, "product": lg.gpu.product,
             "reserved": lg.reserve, "limit": lg.limit,
             "left_on_card": left[lg.gpu.gpu.nvml_index]}
            for lg in r.logical
        ]  # fmt: skip
        out.append({"policy": r.name, "devices": devices})
    return out
