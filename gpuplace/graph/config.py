"""A spec's `config:` block, checked: TensorFlow's ConfigProto fields gpuplace reads
(`log_device_placement`, `allow_soft_placement`, `gpu_options`), `placement.strategy` and
`log_format` (gpuplace's: how the placement log is written)."""

from __future__ import annotations

from typing import Any

from ..echo import show
from .model import LOG_FORMATS, STRATEGIES, TRAINING_DTYPES, TRAINING_OPTIMIZERS, Config
from .ops import suggest
from .scope import SpecError

CONFIG_KEYS = (
    "log_device_placement",
    "allow_soft_placement",
    "gpu_options",
    "placement",
    "log_format",
    "training",
)
PLACEMENT_KEYS = ("strategy",)
TRAINING_KEYS = ("optimizer", "dtype")


def read_config(raw: Any, where: object) -> Config:
    """The `config:` block; gpu_options and placement pass through as mappings."""
    if raw is None:
        return Config()
    if type(raw) is not dict:
        raise SpecError(f"config: expected a mapping, got {show(raw)}", where)
    for key in raw:
        if key not in CONFIG_KEYS:
            raise SpecError(f"config: unknown key {show(key)}{suggest(key, CONFIG_KEYS)}", raw)
    for key in ("log_device_placement", "allow_soft_placement"):
        if key in raw and type(raw[key]) is not bool:
            raise SpecError(f"config.{key}: expected true or false, got {show(raw[key])}", raw)
    gpu = _mapping(raw, "gpu_options")
    if "allow_growth" in gpu and type(gpu["allow_growth"]) is not bool:
        raise SpecError(
            f"config.gpu_options.allow_growth: expected true or false, got "
            f"{show(gpu['allow_growth'])}",
            gpu,
        )
    fraction = gpu.get("per_process_gpu_memory_fraction", 1)
    if type(fraction) not in (int, float) or not 0 < fraction <= 1:
        raise SpecError(
            "config.gpu_options.per_process_gpu_memory_fraction: expected a number in (0, 1] "
            f"(e.g. 0.4 for 40% of each GPU's memory), got {show(fraction)}",
            gpu,
        )
    experimental = gpu.get("experimental", {})
    if type(experimental) is not dict:
        raise SpecError(
            f"config.gpu_options.experimental: expected a mapping, got {show(experimental)}", gpu
        )
    if "virtual_devices" in experimental:
        _virtual_devices(experimental["virtual_devices"], experimental)
    placement = _mapping(raw, "placement")
    for key in placement:
        if key not in PLACEMENT_KEYS:
            raise SpecError(
                f"config.placement: unknown key {show(key)}{suggest(key, PLACEMENT_KEYS)}",
                placement,
            )
    strategy = placement.get("strategy", STRATEGIES[0])
    if strategy not in STRATEGIES:
        close = suggest(strategy, STRATEGIES)
        raise SpecError(
            f"config.placement: placement strategy {show(strategy)} is not one of "
            f"{', '.join(STRATEGIES)}{close if 'did you mean' in close else ''}",
            placement,
        )
    log_format = raw.get("log_format", LOG_FORMATS[0])
    if log_format not in LOG_FORMATS:
        raise SpecError(
            f"config.log_format: {show(log_format)} is not a log format; use guide (the "
            "guide's `a: /job:...` lines, the default) or tensorflow (TensorFlow 2.x's exact "
            "`a: (Const): /job:...` lines, in its order)",
            raw,
        )
    return Config(
        log_device_placement=raw.get("log_device_placement", False),
        allow_soft_placement=raw.get("allow_soft_placement", False),
        gpu_options=gpu,
        placement=placement,
        log_format=log_format,
        training=_training(raw.get("training"), raw),
    )


def _training(value: Any, where: dict[str, Any]) -> dict[str, str]:
    """`training: adam`, or `training: {optimizer: adam, dtype: float16}` (`where`: the config)."""
    if value is None:
        return {}
    raw = {"optimizer": value} if type(value) is str else value
    if type(raw) is not dict:
        raise SpecError(
            f"config.training: expected an optimizer ({', '.join(TRAINING_OPTIMIZERS)}) or "
            f"{{optimizer: adam, dtype: float16}}, got {show(value)}",
            where,
        )
    for key in raw:
        if key not in TRAINING_KEYS:
            raise SpecError(
                f"config.training: unknown key {show(key)}{suggest(key, TRAINING_KEYS)}", raw
            )
    if raw.get("optimizer") not in TRAINING_OPTIMIZERS:
        raise SpecError(
            f"config.training.optimizer: {show(raw.get('optimizer'))} is not an optimizer; use "
            f"one of {', '.join(TRAINING_OPTIMIZERS)}",
            raw,
        )
    if raw.get("dtype", "float32") not in TRAINING_DTYPES:
        raise SpecError(
            f"config.training.dtype: {show(raw['dtype'])} is not a training dtype; use one of "
            f"{', '.join(TRAINING_DTYPES)} (float16 and bfloat16 keep float32 master weights)",
            raw,
        )
    return dict(raw)


def _virtual_devices(value: Any, where: dict[str, Any]) -> None:
    """`experimental.virtual_devices`: one `{memory_limit_mb: [MB, ...]}` per visible GPU."""
    field = "config.gpu_options.experimental.virtual_devices"
    if type(value) is not list:
        raise SpecError(
            f"{field}: expected a list, one entry per visible GPU, e.g. "
            f"[{{memory_limit_mb: [2048, 2048]}}], got {show(value)}",
            where,
        )
    for i, entry in enumerate(value):
        limits = entry.get("memory_limit_mb", []) if type(entry) is dict else None
        if type(limits) is not list or not all(
            type(x) in (int, float) and 0 < x < float("inf") for x in limits
        ):
            raise SpecError(
                f"{field}[{i}]: expected {{memory_limit_mb: [MB, ...]}} with numbers > 0, "
                f"e.g. {{memory_limit_mb: [2048, 2048]}}, got {show(entry)}",
                entry if type(entry) is dict else where,
            )


def _mapping(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if type(value) is not dict:
        raise SpecError(f"config.{key}: expected a mapping, got {show(value)}", raw)
    return value
