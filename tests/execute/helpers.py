"""A tiny kernel table and graph builders, so executor tests do not depend on the op registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from gpuplace.execute.executor import Kernel
from gpuplace.graph.model import Graph, Op, TensorRef, TensorSpec

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def gpu(index: int) -> str:
    return f"/job:localhost/replica:0/task:0/device:GPU:{index}"


@dataclass
class Constant:
    """A host-value kernel: a fresh array from attrs, as constants and variable inits are."""

    host_value: bool = True
    seen: list[tuple[str, ModuleType]] = field(default_factory=list)

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        self.seen.append((attrs.get("tag", ""), xp))
        return [np.array(attrs["value"], dtype=attrs.get("dtype", "float32"))]


@dataclass
class Apply:
    """A device kernel calling `xp.<func>` on its inputs; records the current cupy device."""

    func: str
    outputs: int = 1
    host_value: bool = False
    seen: list[tuple[str, int | None]] = field(default_factory=list)

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        cuda = getattr(xp, "cuda", None)
        self.seen.append((attrs.get("tag", ""), cuda.Device().id if cuda else None))
        result = getattr(xp, self.func)(*inputs, **attrs.get("kwargs", {}))
        return list(result) if self.outputs > 1 else [result]


def kernel_table() -> dict[str, Kernel]:
    """Fresh kernels (their `seen` lists start empty); `variable` is a resident constant."""
    return {
        "constant": Constant(),
        "variable": Constant(),
        "add": Apply("add"),
        "negative": Apply("negative"),
        "matmul": Apply("matmul"),
        "sum": Apply("sum"),
        "split": Apply("split", outputs=2),
    }


def ref(text: str) -> TensorRef:
    name, _, index = text.partition(":")
    return TensorRef(name, int(index or 0))


def op(
    name: str,
    type_: str,
    *inputs: str,
    shape: tuple[int, ...] = (2, 2),
    outputs: int = 1,
    **attrs: Any,
) -> Op:
    """An op whose every output is `shape` float32 (what the registry would infer)."""
    specs = tuple(TensorSpec(shape) for _ in range(outputs))
    return Op(
        name, type_, tuple(ref(i) for i in inputs), attrs={"tag": name, **attrs}, outputs=specs
    )


def graph(*ops: Op, fetch: tuple[str, ...]) -> Graph:
    return Graph(tuple(ops), tuple(ref(f) for f in fetch))
