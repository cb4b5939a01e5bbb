"""TensorFlow's kernel registry for the op types gpuplace models, as captured from TensorFlow's
CPU and CUDA builds (`tools/tf_capture/kernels.py` writes `data/tf_kernels.json` and
`data/tf_kernels_listing.json`; see that script to capture again).

`match("Relu", (("T", "int32"),))` answers which device types have a kernel for a node with
those type attrs, and which registered kernel serves each, the way `FindKernelRegistration`
(`op_kernel.cc`) looks: the device type's own kernels whose type constraints all hold, else a
DEFAULT (device-agnostic) kernel whose constraints hold. A kernel's host-memory args (an int32
tensor a GPU kernel keeps in host memory) travel with it; they do not change where the op is
placed. The table is read on the first call (placing a graph), never at import.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

# TensorFlow's DataType names (types.proto) for gpuplace's dtypes
DT = {"float16": "DT_HALF", "float32": "DT_FLOAT", "float64": "DT_DOUBLE", "int32": "DT_INT32",
      "int64": "DT_INT64", "bool": "DT_BOOL"}  # fmt: skip
BUILD = "cuda"  # the build gpuplace places for: `pip install tensorflow` on Linux
BUILD_NAMES = {"cpu": "CPU build", "cuda": "CUDA build"}
DEVICE_TYPES = ("GPU", "CPU")  # the device types a gpuplace machine has, by priority

Attrs = tuple[tuple[str, str], ...]  # a node's type attrs: (("T", "int32"),)


def dt(dtype: str) -> str:
    """`int32` -> `DT_INT32`, as TensorFlow prints a dtype in attrs and kernel lists."""
    return DT.get(dtype, f"DT_{dtype.upper()}")


class Kernel(NamedTuple):
    """One registered kernel: its device type (`CPU`, `GPU` or `DEFAULT`), its type
    constraints narrowed to gpuplace's dtypes, and its host-memory args."""

    device: str
    constraints: tuple[tuple[str, tuple[str, ...]], ...]
    host_memory: tuple[str, ...]

    def holds(self, attrs: Attrs) -> bool:
        """`KernelAttrsMatch`: every constrained attr has an allowed value."""
        given = dict(attrs)
        return all(given.get(name) in allowed for name, allowed in self.constraints)

    def describe(self, attrs: Attrs) -> str:
        """`the DEFAULT kernel with dtype=DT_INT32, output in host memory`, for reasons."""
        shown = ", ".join(f"{name}={dt(dict(attrs)[name])}" for name, _ in self.constraints)
        text = f"the {self.device} kernel" + (f" with {shown}" if shown else "")
        if self.host_memory:
            text += f", {', '.join(self.host_memory)} in host memory"
        return text


class KernelMatch(NamedTuple):
    """Which registered kernel serves a node on each device type (absent: none)."""

    tf_type: str
    attrs: Attrs
    found: tuple[tuple[str, Kernel], ...]  # (device type, kernel serving it), by priority

    @property
    def devices(self) -> frozenset[str]:
        return frozenset(t for t, _ in self.found)

    def kernel(self, device_type: str) -> Kernel | None:
        return next((k for t, k in self.found if t == device_type), None)

    def notable(self, device_type: str) -> bool:
        """Whether the kernel serving `device_type` is worth a word: a DEFAULT kernel, or one
        that keeps the op's outputs in host memory (TensorFlow's int32 kernels on GPUs)."""
        kernel = self.kernel(device_type)
        if kernel is None:
            return False
        outputs = _data()["outputs"][self.tf_type]
        return kernel.device == "DEFAULT" or any(o in kernel.host_memory for o in outputs)

    def attrs_text(self) -> str:
        """`T=DT_INT32` (the attrs a kernel's constraints name, as TensorFlow prints them)."""
        return ", ".join(f"{name}={dt(value)}" for name, value in self.attrs)

    def missing(self, device_type: str) -> str:
        """`no GPU kernel for Relu with T=DT_INT32 in TensorFlow 2.21's registry (CUDA build)`."""
        with_attrs = f" with {self.attrs_text()}" if self.attrs else ""
        return f"no {device_type} kernel for {self.tf_type}{with_attrs} in {registry_name()}"


def registry_name(build: str = BUILD) -> str:
    """`TensorFlow 2.21's registry (CUDA build)`."""
    version = ".".join(_data()["tf_version"].split(".")[:2])
    return f"TensorFlow {version}'s registry ({BUILD_NAMES[build]})"


def tf_version() -> str:
    """The TensorFlow version the table was captured from (`2.21.0`)."""
    return str(_data()["tf_version"])


def known(tf_type: str) -> bool:
    """Whether the table has `tf_type` (gpuplace's own ops, e.g. LoadNpy, are not TF's)."""
    return tf_type in _data()["kernels"]


def type_attrs(tf_type: str) -> tuple[str, ...]:
    """The op's attrs of type `type` in TensorFlow's OpDef (`("T", "Tidx")` for Mean)."""
    return tuple(_data()["type_attrs"][tf_type])


@cache
def match(tf_type: str, attrs: Attrs) -> KernelMatch:
    """The kernels serving a `tf_type` node with these type attrs on CPU and GPU devices."""
    kernels = _kernels(tf_type)
    defaults = [k for k in kernels if k.device == "DEFAULT" and k.holds(attrs)]
    found: list[tuple[str, Kernel]] = []
    for device_type in DEVICE_TYPES:
        own = [k for k in kernels if k.device == device_type and k.holds(attrs)]
        chosen = own[0] if own else defaults[0] if defaults else None
        if chosen is not None:
            found.append((device_type, chosen))
    return KernelMatch(tf_type, attrs, tuple(found))


def dtypes_with_kernels(tf_type: str, attr: str) -> frozenset[str]:
    """The dtypes of `attr` that some kernel of `tf_type` allows (for a hint)."""
    return frozenset(
        v for k in _kernels(tf_type) for name, allowed in k.constraints if name == attr
        for v in allowed
    )  # fmt: skip


def listing(tf_type: str, build: str = BUILD) -> str:
    """What TensorFlow prints under "Registered kernels:" for `tf_type` (`KernelsRegisteredForOp`),
    every dtype included, in the registry's order; `  <no registered kernels>` if none."""
    lines = _listing()["builds"][build].get(tf_type) or ["  <no registered kernels>"]
    return "\n".join(lines)


def node_attrs(tf_type: str) -> dict[str, str]:
    """The attrs (not type attrs) a `tf_type` node has by default, as TensorFlow prints them in
    an error (`transpose_a=false`); read only when wording one."""
    return dict(_listing()["defaults"].get(tf_type, {}))


@cache
def _kernels(tf_type: str) -> tuple[Kernel, ...]:
    return tuple(
        Kernel(device, tuple((n, tuple(v)) for n, v in constraints.items()), tuple(host))
        for device, constraints, host in _data()["kernels"][tf_type]
    )


@cache
def _data() -> dict[str, Any]:
    return _read("tf_kernels.json")


@cache
def _listing() -> dict[str, Any]:
    return _read("tf_kernels_listing.json")


def _read(name: str) -> dict[str, Any]:
    text = (Path(__file__).parent / "data" / name).read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]
