"""`--verify`: run a graph again in float64 on the CPU and compare every fetch with a run's values.

Relative tolerance per dtype (1e-2 float16, 1e-4 float32, 1e-9 float64, exact for integers),
against the reference's largest finite magnitude. The reference run has no side effects: `save`
ops are skipped and `print` ops forward their input without printing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..devices.names import full_name
from ..graph import get_op
from ..graph.model import Graph
from .backends import NumpyBackend
from .executor import execute

CPU0 = full_name("CPU", 0)
TOLERANCE = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}
# Where a float dtype overflows to inf: the hint for a value infinite only in that dtype.
OVERFLOWS = {"float16": "65504", "float32": "3.4e38"}


@dataclass(frozen=True)
class Verified:
    """One fetch compared with the float64 CPU run: the largest error relative to the
    reference's largest finite magnitude, against the dtype's tolerance."""

    fetch: str
    dtype: str
    max_rel_error: float
    tolerance: float
    ok: bool
    hint: str = ""  # why it differs, when gpuplace can tell (float16 overflow, ...)
    against: str = "float64 CPU"  # the reference: the float64 CPU run, or onnxruntime's


class _Float64:
    """Kernels as registered, computing in float64: host values (constants, random draws,
    variables) are drawn as specified, then widened, so both runs start from the same numbers."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.host_value = kernel.host_value

    def compute(self, xp: Any, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        if self.host_value:
            outs = self.kernel.compute(xp, inputs, attrs)
            return [o.astype(np.float64) if o.dtype.kind == "f" else o for o in outs]
        if attrs.get("dtype") in TOLERANCE:
            attrs = {**attrs, "dtype": "float64"}
        return list(self.kernel.compute(xp, inputs, attrs))


def verify_values(graph: Graph, values: Mapping[str, Any], simulated: bool) -> list[Verified]:
    """Compare `values` (fetch -> array, what a run of `graph` fetched) with a float64 run of
    `graph` on the host's CPU (`simulated`: the host is simulated): one Verified per fetch."""
    devices = {op.name: CPU0 for op in graph.ops}
    cpu = NumpyBackend("/device:CPU:0", simulated=simulated)
    reference = execute(graph, devices, {CPU0: cpu}, lambda t: _Float64(get_op(t)), effects=False)
    return [compare(name, value, reference.values[name]) for name, value in values.items()]


def compare(name: str, value: Any, reference: Any, against: str = "float64 CPU") -> Verified:
    ref = np.asarray(reference, dtype=np.float64)
    got = np.asarray(value, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: equal values, no warning
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
        finite = np.abs(ref[np.isfinite(ref)])
        scale = float(np.max(finite)) if finite.size else 0.0
        diff = np.where(same, 0.0, np.abs(got - ref))
        err = float(np.max(diff)) / (scale or 1.0) if ref.size else 0.0
    dtype = str(value.dtype)
    tol = TOLERANCE.get(dtype, 0.0)
    ok = bool(np.isfinite(err) and err <= tol)
    hint = ""
    if not ok and dtype in OVERFLOWS and bool(np.any(~np.isfinite(got) & np.isfinite(ref))):
        hint = f"{dtype} overflows above {OVERFLOWS[dtype]}"
    return Verified(name, dtype, err, tol, ok, hint, against)
