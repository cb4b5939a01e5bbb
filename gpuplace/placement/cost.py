"""The cost model behind the placement strategies: compute time per op, copy time per tensor.

An op's time on a device is a roofline: `max(FLOPs / FLOP/s, bytes moved / memory bandwidth)`
plus a fixed launch overhead (`GPU_OVERHEAD`, 5 us: TensorFlow's op dispatch plus a CUDA kernel
launch; `CPU_OVERHEAD`, 2 us: dispatch only). Bytes moved are the op's inputs read plus its
outputs written. A copy between two devices costs `latency + bytes / bandwidth` over one
`LinkModel`; the default is PCIe 3.0 x16 as measured, about 12 GB/s and 10 us per transfer
(Baechi fits the same linear form, `a * bytes + b`, to a copy benchmark; see the reference
notes, placement-and-distributed.md A.1).

A GPU's rates are the ones `gpuplace devices --check` measured on that card (by UUID, from the
rates file, `devices/rates.py`), else its preset's (`devices/presets.py`: dense float32 TFLOP/s
and memory GB/s, looked up by product name); a product without either gets the conservative
`DEFAULT_GPU` (Kepler class), and the host CPU gets `CPU_FLOPS` and `CPU_BANDWIDTH`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from math import prod
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from ..devices.cluster import full_device, short_name
from ..devices.names import full_name
from ..devices.presets import find_preset
from ..echo import sample
from ..errors import BadInput
from ..graph.model import Op, OpMeta, TensorSpec

if TYPE_CHECKING:
    from ..devices.cluster import Cluster, TaskName
    from ..devices.model import Host, LogicalGpu, VisibleGpu
    from ..devices.rates import MeasuredRate

GPU_OVERHEAD = 5e-6
CPU_OVERHEAD = 2e-6
DEFAULT_GPU = (4.0e12, 200e9)  # FLOP/s, bytes/s for a product without a preset
DASK_HOP = 0.010  # seconds per cross-task hand-over on a cluster (a Dask task; reference 1.3)
CPU_FLOPS = 0.5e12
CPU_BANDWIDTH = 50e9

# FLOPs per output element, for ops whose cost is proportional to their output.
_PER_ELEMENT = {
    "add": 1.0, "sub": 1.0, "mul": 1.0, "div": 1.0, "neg": 1.0, "relu": 1.0, "cast": 1.0,
    "exp": 1.0, "log": 1.0, "tanh": 1.0, "sigmoid": 1.0, "softmax": 5.0,
    "random_uniform": 1.0, "random_normal": 1.0,
}  # fmt: skip
# Ops that only move bytes (or alias them): no arithmetic.
_NO_FLOPS = frozenset({
    "identity", "reshape", "transpose", "concat", "split", "print", "save", "load",
    "constant", "zeros", "ones", "fill", "placeholder", "variable",
})  # fmt: skip
_REDUCTIONS = frozenset({"reduce_sum", "reduce_mean", "reduce_max"})
_INPUTS, _ATTRS = attrgetter("inputs"), attrgetter("attrs")


class DeviceModel(NamedTuple):
    """One device as the cost model sees it: rates, memory limit and a launch overhead."""

    name: str  # full TF name, /job:localhost/replica:0/task:0/device:GPU:0
    kind: str  # "CPU" or "GPU"
    flops: float  # FLOP per second
    bandwidth: float  # memory bytes per second
    memory_limit: int | None  # bytes; None: unlimited
    overhead: float = GPU_OVERHEAD  # seconds per op

    @property
    def short(self) -> str:
        """`GPU:2` (`task:1/GPU:2` across hosts), as reasons and tables print it."""
        return short_name(self.name)


class LinkModel(NamedTuple):
    """Every pair of devices is joined by a link of this bandwidth (bytes/s) and latency (s)."""

    bandwidth: float = 12e9
    latency: float = 10e-6


def _elements(specs: Sequence[TensorSpec]) -> int:
    return sum(prod(s.shape) for s in specs)


def op_flops(op: Op, input_specs: Sequence[TensorSpec], meta: OpMeta | None = None) -> float:
    """Floating-point operations of one run of `op`, from its type and shapes.

    The op type's own count when its `meta` has a `flops` (the ONNX ops: Gemm 2*M*N*K, ...);
    else matmul 2*m*n*k; elementwise ops one per output element (softmax five); reductions one
    per input element; add_n one per element per extra input; generators none, except random
    ones (one per element); variables none. An unknown type counts one per output element.
    """
    rate = output_rate(op.type, meta)
    if rate is not None:
        return 0.0 if rate == 0.0 else rate * _elements(op.outputs)
    return counted_flops(op, input_specs, meta, _elements(op.outputs))


def counted_flops(op: Op, input_specs: Sequence[TensorSpec], meta: OpMeta | None,
                  elements: int) -> float:  # fmt: skip
    """`op_flops` of an op whose type has no `output_rate` (its inputs count), with its
    outputs' `elements` counted already."""
    count = getattr(meta, "flops", None)
    if count is not None:
        return float(count(op.attrs, tuple(input_specs), op.outputs))
    kind = op.type
    if kind == "matmul":
        return _matmul_flops(elements, input_specs[0], op.attrs)
    if kind in _REDUCTIONS:
        return float(_elements(input_specs))
    return _add_n_flops(len(input_specs), elements)


def _matmul_flops(elements: int, a: TensorSpec, attrs: Mapping[str, Any]) -> float:
    """matmul: 2 m n k, k from its first input `a`."""
    k = a.shape[0] if attrs.get("transpose_a") else a.shape[-1]
    return 2.0 * elements * k


def _add_n_flops(inputs: int, elements: int) -> float:
    """add_n: one per element per input past the first."""
    return float(max(inputs - 1, 0) * elements)


def counted_flops_of(kind: str, meta: OpMeta | None, ops: Sequence[Op],
                     elements: Sequence[int], inputs: Callable[[int], Sequence[TensorSpec]],
                     firsts: Callable[[], Sequence[TensorSpec]]) -> list[float]:  # fmt: skip
    """`counted_flops` of each of `ops`, all of type `kind` (`elements`: their outputs'
    elements; `inputs(i)`: the input specs of `ops[i]`, `firsts()` the first of each): matmul
    and add_n over lists, each count as `counted_flops` works it out, the others op by op."""
    if getattr(meta, "flops", None) is None and kind in ("matmul", "add_n"):
        if kind == "add_n":
            return list(map(_add_n_flops, map(len, map(_INPUTS, ops)), elements))
        return list(map(_matmul_flops, elements, firsts(), map(_ATTRS, ops)))
    pairs = enumerate(zip(ops, elements, strict=True))
    return [counted_flops(op, inputs(i), meta, e) for i, (op, e) in pairs]


def output_rate(kind: str, meta: OpMeta | None = None) -> float | None:
    """FLOPs per output element when `op_flops` of every op of type `kind` is that many times
    its outputs' elements (0.0: no arithmetic at all), else None (matmul, reductions, add_n
    and the types with their own `flops`: their inputs count)."""
    if getattr(meta, "flops", None) is not None or kind in ("matmul", "add_n"):
        return None
    if kind in _REDUCTIONS:
        return None
    return 0.0 if kind in _NO_FLOPS else _PER_ELEMENT.get(kind, 1.0)


def op_bytes(op: Op, input_specs: Sequence[TensorSpec]) -> int:
    """Bytes an op moves through device memory: inputs read plus outputs written.

    A variable moves nothing: its value already sits on its device for the whole run.
    """
    if op.type == "variable":
        return 0
    return sum(s.nbytes for s in input_specs) + sum(s.nbytes for s in op.outputs)


def op_time(op: Op, input_specs: Sequence[TensorSpec], device: DeviceModel) -> float:
    """Seconds `op` takes on `device`: roofline of FLOPs and bytes, plus the launch overhead."""
    return work_time(op_flops(op, input_specs), op_bytes(op, input_specs), device)


def work_time(flops: float, nbytes: float, device: DeviceModel) -> float:
    """`op_time` from precomputed FLOPs and bytes (the placers compute those once per op)."""
    return max(flops / device.flops, nbytes / device.bandwidth) + device.overhead


def work_times(flops: Sequence[float], nbytes: Sequence[int],
               devices: Sequence[DeviceModel]) -> list[tuple[float, ...]]:  # fmt: skip
    """`work_time` of each op on each device; ops of equal cost share one tuple, worked out once."""
    known: dict[tuple[float, int], tuple[float, ...]] = {}
    out = []
    for cost in zip(flops, nbytes, strict=True):
        found = known.get(cost)
        if found is None:
            found = known[cost] = tuple(work_time(*cost, device) for device in devices)
        out.append(found)
    return out


def copy_time(nbytes: int, link: LinkModel) -> float:
    """Seconds to copy `nbytes` between two devices: latency plus bytes over bandwidth."""
    return link.latency + nbytes / link.bandwidth


def split_devices(devices: Sequence[DeviceModel]) -> tuple[list[DeviceModel], DeviceModel]:
    """(GPU:0..n-1 in index order, CPU:0) from a list of models; a missing CPU gets defaults.

    Raises BadInput unless the GPUs are exactly GPU:0..n-1 (the placers index them so).
    """
    gpus = sorted((m for m in devices if m.kind == "GPU"), key=lambda m: _index(m.name))
    if [_index(m.name) for m in gpus] != list(range(len(gpus))):
        names = sample([m.short for m in gpus])
        raise BadInput(f"the GPU models must be GPU:0..GPU:{len(gpus) - 1}, got {names}")
    cpu = next((m for m in devices if m.kind == "CPU"), None)
    return gpus, cpu if cpu is not None else cpu_model()


def _index(name: str) -> int:
    tail = name.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def card_rates(
    gpu: VisibleGpu, rates: Mapping[str, MeasuredRate] | None = None
) -> tuple[float, float, str]:
    """(FLOP/s, bytes/s, where they came from) of one whole card: measured, preset or default."""
    measured = (rates or {}).get(gpu.uuid)
    if measured is not None:
        source = f"measured by devices --check on {measured.measured}"
        return measured.tflops * 1e12, measured.bandwidth_gbs * 1e9, source
    preset = find_preset(gpu.product)
    if preset is not None:
        return preset.tflops * 1e12, preset.bandwidth * 1e9, f"from the preset {preset.product}"
    return (*DEFAULT_GPU, f"the default for {gpu.product!r} (no preset, not measured)")


def rate_sources(
    logical: Sequence[LogicalGpu], rates: Mapping[str, MeasuredRate] | None = None
) -> list[tuple[str, str]]:
    """(`GPU:0,1`, source) per source of the logical GPUs' rates, in GPU order."""
    by_source: dict[str, list[str]] = {}
    for g in logical:
        by_source.setdefault(card_rates(g.gpu, rates)[2], []).append(str(g.index))
    return [(f"GPU:{sample(indices, ',')}", source) for source, indices in by_source.items()]


def device_models(
    logical: Sequence[LogicalGpu],
    host: Host | None = None,
    rates: Mapping[str, MeasuredRate] | None = None,
) -> list[DeviceModel]:
    """GPU:0..n-1 then CPU:0, with the policy's memory limits; GPU rates are the card's measured
    ones (`rates`, by UUID), else its preset's, else the default (`card_rates`).

    Logical GPUs carved out of one card (virtual devices) share its rates equally; the CPU's
    limit is the host's memory (None when unknown).
    """
    per_card = Counter(g.gpu.cuda_index for g in logical)
    out = []
    for g in logical:
        flops, bandwidth, _ = card_rates(g.gpu, rates)
        share = per_card[g.gpu.cuda_index]
        name = full_name("GPU", g.index)
        out.append(DeviceModel(name, "GPU", flops / share, bandwidth / share, g.limit))
    limit = host.memory_total if host is not None else None
    out.append(cpu_model(limit))
    return out


def cpu_model(memory_limit: int | None = None) -> DeviceModel:
    """The host CPU, TF's CPU:0, at the modest default rates."""
    name = full_name("CPU", 0)
    return DeviceModel(name, "CPU", CPU_FLOPS, CPU_BANDWIDTH, memory_limit, CPU_OVERHEAD)


def network_link(cluster: Cluster) -> LinkModel:
    """The link between a cluster's tasks (`network_of`: the cluster file's, else default)."""
    from ..devices.cluster_spec import network_of

    net = network_of(cluster)
    return LinkModel(net.bandwidth, net.latency)


def cluster_models(
    cluster: Cluster, per_task: Mapping[TaskName, Sequence[LogicalGpu]],
    rates: Mapping[str, MeasuredRate] | None = None,
) -> tuple[list[DeviceModel], list[int]]:  # fmt: skip
    """Every task's devices for the cost model, by full name: all GPUs (task by task), then
    each task's CPU:0; and the task (its position in the cluster) of each."""
    gpus: list[tuple[DeviceModel, int]] = []
    cpus: list[tuple[DeviceModel, int]] = []
    for i, task in enumerate(cluster.tasks):
        for m in device_models(per_task[task.name], task.view.machine.host, rates):
            local = m.name.rsplit("/device:", 1)[1]
            (gpus if m.kind == "GPU" else cpus).append(
                (m._replace(name=full_device(task.name, local)), i)
            )
    both = gpus + cpus
    return [m for m, _ in both], [t for _, t in both]
