"""The settings of a run, as `gpuplace run`'s flags or the Python API's `Options` give them,
and the checks that need only the settings (and the graph's placeholders or GPU count)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import BadInput, Message, RuntimeFailure, Setting
from .graph.model import STRATEGIES, Graph
from .units import parse_count

# Options fields checked by type: the types accepted (a bool only where listed), and in words
_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "allow_soft_placement": ((bool,), "True, False or None"),
    "log_device_placement": ((bool,), "True, False or None"),
    "allow_growth": ((bool,), "True, False or None"),
    "memory_fraction": ((int, float), "a number in (0, 1], e.g. 0.4"),
    "memory_limit": ((str, int), "a size per GPU, e.g. '64MiB' (or int bytes)"),
    "virtual_gpus": ((str,), "text such as 'GPU:0=2GiB,2GiB'"),
    "max_memory": ((str,), "text such as 'GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB'"),
    "device_map": ((Mapping,), "module paths mapped to GPU indices or 'cpu', e.g. {'model': 0}"),
    "replicate": ((int, str), "a number of GPUs (2 or more) or 'all'"),
    "out_dir": ((str, os.PathLike), "a folder, e.g. 'out'"),
    "allow_writes_anywhere": ((bool,), "True or False"),
    "training": ((str,), "an optimizer: 'sgd', 'momentum', 'adam' or 'adamw'"),
    "training_dtype": ((str,), "'float32', 'float16' or 'bfloat16'"),
}


@dataclass(frozen=True)
class Options:
    """How to place and run a spec, over its `config` (None keeps the spec's value); what
    `gpuplace run`'s flags set. For `prepare`.

    allow_soft_placement, log_device_placement: TensorFlow's session options.
    feeds: placeholder name -> value: a .npy path or JSON text (as `--feed`), or an array or
        nested list.
    allow_growth, memory_fraction (0 < F <= 1), memory_limit (per GPU: '64MiB', or int bytes),
        virtual_gpus ('GPU:0=2GiB,2GiB;GPU:1=1GiB'): TensorFlow's GPU memory policies.
    max_memory ('GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB', Accelerate's max_memory): a memory limit
        for each GPU named (the others keep theirs) and a cap on what CPU:0 may hold.
    strategy: 'tensorflow' (TensorFlow's placer, the default), 'balanced' or 'round-robin'.
    replicate: data parallelism over N GPUs (an int >= 2, or 'all'), as Keras' multi_gpu_model.
    out_dir: the folder a spec's `save` paths start at (default: the spec's folder);
    allow_writes_anywhere: let `save` paths be absolute, start with `~`, climb out with `..` or
        go through symbolic links (by default a spec writes only under that folder).
    dims: an ONNX model's symbolic dims by name, e.g. {'batch': 32} (as `--dim batch=32`).
    device_map: an Accelerate-shaped device map ({'model.layers.0': 0, 'lm_head': 'cpu'}, as
        `plan --format device-map` writes or `infer_auto_device_map` returns): each op asks for
        the device of the longest module prefix that covers it (`placement/devmap.py: pin`), to
        judge that map under gpuplace's placer, memory and cost model.
    training: size one training step with this optimizer ('sgd', 'momentum', 'adam', 'adamw';
        over config.training): `predict_training`, and `balanced` places for that footprint;
        training_dtype: 'float16' or 'bfloat16' for mixed precision (float32 master weights).
        The run itself still runs the forward graph.

    A value of the wrong type is refused here (BadInput); values are checked against the spec
    and the machine by `prepare`.
    """

    allow_soft_placement: bool | None = None
    log_device_placement: bool | None = None
    feeds: Mapping[str, Any] = field(default_factory=dict)
    allow_growth: bool | None = None
    memory_fraction: float | None = None
    memory_limit: str | int | None = None
    virtual_gpus: str | None = None
    max_memory: str | None = None
    strategy: str | None = None
    replicate: int | str | None = None
    out_dir: str | os.PathLike[str] | None = None
    allow_writes_anywhere: bool = False
    dims: Mapping[str, int] = field(default_factory=dict)
    device_map: Mapping[str, int | str] | None = None
    training: str | None = None
    training_dtype: str | None = None

    def __post_init__(self) -> None:
        """Refuse a value of the wrong type (a str for a bool, a list for feeds) here, where
        the caller wrote it, rather than as an AttributeError inside `prepare`."""
        for name, (kinds, what) in _FIELD_TYPES.items():
            value = getattr(self, name)
            wrong = isinstance(value, bool) and bool not in kinds
            if value is not None and (wrong or not isinstance(value, kinds)):
                raise BadInput(Message(Setting(name, value), f": expected {what}"))
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise BadInput(
                Message(
                    Setting("strategy", self.strategy),
                    f": not a placement strategy; expected one of {', '.join(map(repr, STRATEGIES))}",
                )
            )
        if not isinstance(self.dims, Mapping) or not all(
            isinstance(k, str) and type(v) is int and v >= 1 for k, v in self.dims.items()
        ):
            raise BadInput(
                Message(
                    Setting("dims", self.dims),
                    ": expected symbolic dim names mapped to sizes >= 1, e.g. {'batch': 32}",
                )
            )
        if self.device_map is not None and not all(isinstance(k, str) for k in self.device_map):
            raise BadInput(
                Message(
                    Setting("device_map", self.device_map),
                    ": expected module paths (str) mapped to GPU indices or 'cpu', e.g. {'model': 0}",
                )
            )
        if not isinstance(self.feeds, Mapping) or not all(isinstance(k, str) for k in self.feeds):
            raise BadInput(
                Message(
                    Setting("feeds", self.feeds),
                    ": expected a mapping of placeholder names to values, e.g. {'x': '[[1.0, 2.0]]'}",
                )
            )

    def memory_flags(self) -> dict[str, Any]:
        """The memory policy's settings by field name, as `memory.policy.resolve` takes them."""
        return {
            "allow_growth": self.allow_growth, "memory_fraction": self.memory_fraction,
            "memory_limit": self.memory_limit, "virtual_gpus": self.virtual_gpus,
            "max_memory": self.max_memory,
        }  # fmt: skip


def replicate_count(given: int | str | None) -> int | str | None:
    """`--replicate N|all` (Options.replicate) as the loader takes it; BadInput naming the
    setting for anything else."""
    if given is None:
        return None
    value = given if isinstance(given, int) else given.strip()
    if value == "all":
        return value
    two, every = Setting("replicate", 2), Setting("replicate", "all")
    count = value if isinstance(value, int) else parse_count(value)
    if count is None and isinstance(value, str) and value.isascii() and value.isdigit():
        raise BadInput(
            Message(
                Setting("replicate", given, quote=True), ": more GPUs than any machine has; give "
                "the number of GPUs to replicate over (e.g. ", two, ") or ", every,
            )
        )  # fmt: skip
    if count is None:
        raise BadInput(
            Message(
                Setting("replicate", given, quote=True),
                ": expected a number of GPUs (2 or more) or 'all' (e.g. ", two, ")",
            )
        )  # fmt: skip
    if count < 2:
        raise BadInput(
            Message(
                Setting("replicate", given), ": data parallelism needs at least 2 GPUs (as "
                "Keras' multi_gpu_model: gpus >= 2); give ", two, " or more, or ", every,
            )
        )  # fmt: skip
    return count


def check_replicas(count: int | str, gpus: int) -> None:
    """`--replicate` (Options.replicate) against the logical GPUs this process has (exit 1:
    this machine cannot)."""
    if gpus >= (2 if count == "all" else int(count)):
        return
    seen = f"this process sees {gpus} GPU{'' if gpus == 1 else 's'}" + (
        f" (GPU:0..GPU:{gpus - 1})" if gpus > 1 else ""
    )
    fix: Message | str
    if gpus >= 2:
        fix = Message(
            "give ", Setting("replicate", gpus), " or fewer, or ", Setting("replicate", "all")
        )
    elif gpus == 1:
        split = Setting("virtual_gpus")
        fix = Message("split its card into logical GPUs with ", split, " (e.g. GPU:0=1GiB,1GiB)")
    else:
        fix = "run it on a machine with 2 or more GPUs"
    need = ", and data parallelism needs 2 or more" if count == "all" else ""
    raise RuntimeFailure(Message(Setting("replicate", count), f": {seen}{need}"), fix, joint="; ")


def check_feed_names(graph: Graph, feeds: Mapping[str, Any]) -> None:
    """A feed for a graph without placeholders: say so, rather than list no placeholders."""
    if not feeds or any(op.type == "placeholder" for op in graph.ops):
        return
    names = graph.by_name()
    for name in feeds:
        if name not in names:
            raise BadInput(
                Message(
                    Setting("feeds", key=name), f": no op named {name!r} in {graph.source}, and "
                    "the graph has no placeholders: there is nothing to feed; drop ",
                    Setting("feeds"),
                )
            )  # fmt: skip
