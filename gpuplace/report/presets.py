"""`gpuplace devices --presets`: the GPUs a simulated machine can be built from."""

from __future__ import annotations

from typing import Any

from ..devices.presets import PRESETS
from ..units import mib
from .schema import SCHEMA_VERSION
from .text import columns


def presets_json() -> dict[str, Any]:
    """`devices --presets --json`: the presets, with the document's schema version."""
    presets = [
        {
            "preset": p.key,
            "product": p.product,
            "memory_total": p.memory,
            "compute_capability": p.compute_capability,
            "fp32_tflops": p.tflops,
        }
        for p in PRESETS.values()
    ]
    return {"schema_version": SCHEMA_VERSION, "presets": presets}


def presets_plain() -> str:
    rows = [
        (p.key, p.product, mib(p.memory), p.compute_capability, f"{p.tflops:g}")
        for p in PRESETS.values()
    ]
    body = columns(("PRESET", "PRODUCT", "MEMORY", "CC", "FP32 TFLOPS"), rows)
    return body + "\nUse them as --machine 4xK520 or --machine 2xA100-80GB,1xT4."
