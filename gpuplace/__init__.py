"""gpuplace: see the GPUs a CUDA program would see, and place work on them as TensorFlow does.

The public API is imported lazily so that `import gpuplace` stays cheap (no numpy, no cupy):

    machine = gpuplace.discover("4xK520")             # or discover() for this machine (NVML)
    seen = gpuplace.view(machine, os.environ)          # after CUDA_VISIBLE_DEVICES
    graph = gpuplace.load("examples/guide/04_multi_tower.yaml")
    placement = gpuplace.place(graph, len(seen.gpus))  # TensorFlow's rules, with reasons
    prepared = gpuplace.prepare("graph.yaml", seen, gpuplace.Options(strategy="balanced"), os.environ)
    memory, oom = gpuplace.predict_memory(prepared, seen)  # peaks per device, before running
    step = gpuplace.predict_training(prepared)  # with Options(training="adam"): one training step
    outcome = gpuplace.execute_prepared(prepared, seen)  # values, copies, memory per device
    estimate = gpuplace.estimate_plan(prepared, seen)  # makespan and lower bounds (plan's)
    checks = gpuplace.verify(prepared, outcome, seen)  # against a float64 CPU run
    runs = gpuplace.compare_policies("graph.yaml", seen, gpuplace.Options(), os.environ)  # mem --compare
    held = gpuplace.reservations(seen, gpuplace.Options(), os.environ, compare=True)  # no graph

`view(machine, env)` is what a process with environment `env` sees (its GPUs in CUDA order, with
warnings and why others are hidden); `visible(machine.gpus, "2,0")` is the same rule as a pure
function of CUDA_VISIBLE_DEVICES's value, returning only the GPUs (indices count in the order of the
GPUs given: `machine.gpus` is nvidia-smi's, CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID;
`gpuplace.devices.cuda_order(machine, None)[0]` is CUDA's default). Results are plain dataclasses.
Errors are `GpuplaceError`s (`BadInput`: the input is wrong; `RuntimeFailure`: this machine or
run failed it), one line naming the setting as the caller wrote it (`Options.memory_fraction`).
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # typing's, without importing typing: the console script starts sooner
if TYPE_CHECKING:  # the real signatures for type checkers; at run time, __getattr__ imports
    from typing import Any

    from .devices import discover as discover
    from .devices import load_machine as load_machine
    from .devices import view as view
    from .devices.visible import visible as visible
    from .errors import BadInput as BadInput
    from .errors import GpuplaceError as GpuplaceError
    from .errors import RuntimeFailure as RuntimeFailure
    from .graph import load as load
    from .graph import loads as loads
    from .limits import Limits as Limits
    from .options import Options as Options
    from .pipeline import compare_policies as compare_policies
    from .pipeline import estimate_plan as estimate_plan
    from .pipeline import execute_prepared as execute_prepared
    from .pipeline import predict_memory as predict_memory
    from .pipeline import predict_training as predict_training
    from .pipeline import prepare as prepare
    from .pipeline import reservations as reservations
    from .pipeline import verify as verify
    from .placement import place as place

__version__ = "0.1.0"
# compiled.pure_requested's rule, inline: no module imported for it on start-up
if __import__("os").environ.get("GPUPLACE_PURE_PYTHON", "0") not in ("", "0"):
    from .compiled import pure_python

    pure_python()
_EXPORTS = {
    "discover": "gpuplace.devices",
    "load_machine": "gpuplace.devices",
    "view": "gpuplace.devices",
    "visible": "gpuplace.devices",
    "load": "gpuplace.graph",
    "loads": "gpuplace.graph",
    "place": "gpuplace.placement",
    "Options": "gpuplace.options",
    "Limits": "gpuplace.limits",
    "prepare": "gpuplace.pipeline",
    "execute_prepared": "gpuplace.pipeline",
    "predict_memory": "gpuplace.pipeline",
    "predict_training": "gpuplace.pipeline",
    "estimate_plan": "gpuplace.pipeline",
    "compare_policies": "gpuplace.pipeline",
    "reservations": "gpuplace.pipeline",
    "verify": "gpuplace.pipeline",
    "GpuplaceError": "gpuplace.errors",
    "BadInput": "gpuplace.errors",
    "RuntimeFailure": "gpuplace.errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuplace' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
