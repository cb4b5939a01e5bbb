"""gpuplace: see the GPUs a CUDA program would see, and place work on them as TensorFlow does.

The public API is imported lazily so that `import gpuplace` stays cheap (no numpy, no cupy):

    machine = gpuplace.discover("4xK520")             # or discover() for this machine (NVML)
    seen = gpuplace.view(machine, os.environ)          # after CUDA_VISIBLE_DEVICES
    graph = gpuplace.load("examples/guide/04_multi_tower.yaml")
    placement = gpuplace.place(graph, len(seen.gpus))  # TensorFlow's rules, with reasons
    prepared = gpuplace.prepare("graph.yaml", seen, gpuplace.Options(strategy="balanced"), os.environ)
    outcome = gpuplace.execute_prepared(prepared, seen)  # values, copies, memory per device
    estimate = gpuplace.estimate_plan(prepared, seen)  # makespan and lower bounds (plan's)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"
_EXPORTS = {
    "discover": "gpuplace.devices",
    "load_machine": "gpuplace.devices",
    "view": "gpuplace.devices",
    "visible": "gpuplace.devices",
    "load": "gpuplace.graph",
    "loads": "gpuplace.graph",
    "place": "gpuplace.placement",
    "Options": "gpuplace.session",
    "prepare": "gpuplace.session",
    "execute_prepared": "gpuplace.session",
    "predict_memory": "gpuplace.session",
    "estimate_plan": "gpuplace.session",
    "verify": "gpuplace.session",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuplace' has no attribute {name!r}")
    return getattr(import_module(module), name)
