"""A small op table and graph builders for placement tests (no loader, no registry)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplace.graph.model import Graph, Op, TensorRef
from gpuplace.placement import Placement, place

BOTH = frozenset({"CPU", "GPU"})
CPU_ONLY = frozenset({"CPU"})
GPU_ONLY = frozenset({"GPU"})
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def gpu(i: int) -> str:
    return f"/job:localhost/replica:0/task:0/device:GPU:{i}"


@dataclass(frozen=True)
class Meta:
    tf_type: str
    kernels: frozenset[str]
    generator: bool = False
    resident: bool = False


METAS = {
    "constant": Meta("Const", BOTH, generator=True),
    "matmul": Meta("MatMul", BOTH),
    "add_n": Meta("AddN", BOTH),
    "variable": Meta("VariableV2", BOTH, generator=True, resident=True),  # as the registry
    "print": Meta("Print", CPU_ONLY),
    "save": Meta("SaveV2", CPU_ONLY),
    "load": Meta("RestoreV2", CPU_ONLY, generator=True),
    "nccl": Meta("NcclAllReduce", GPU_ONLY),
}


def meta(op_type: str) -> Meta:
    return METAS[op_type]


def op(
    name: str, op_type: str, *inputs: str, device: str = "", colocate_with: str | None = None
) -> Op:
    refs = tuple(TensorRef(i) for i in inputs)
    return Op(name, op_type, refs, device=device, colocate_with=colocate_with)


def graph(*ops: Op) -> Graph:
    return Graph(ops=ops, fetch=(TensorRef(ops[-1].name),))


def run(g: Graph, gpus: int, soft: bool = False) -> Placement:
    return place(g, gpus, allow_soft_placement=soft, op_meta=meta)


def devices(p: Placement) -> dict[str, str]:
    """op -> short device (`GPU:0`)."""
    return {name: d.device.rsplit("/device:", 1)[1] for name, d in p.decisions.items()}


def matmul_graph(ab: str = "", mm: str = "") -> Graph:
    """The guide's first example: a, b constants and their MatMul."""
    return graph(
        op("a", "constant", device=ab),
        op("b", "constant", device=ab),
        op("MatMul", "matmul", "a", "b", device=mm),
    )
