"""Rates measured by `gpuplace devices --check` on real GPUs, kept in a small JSON file.

The file maps a GPU's UUID (what `nvidia-smi -L` prints) to what was measured on it:
`{uuid: {"product", "tflops", "bandwidth_gbs", "measured": "2026-11-29"}}`. It lives at
`$GPUPLACE_RATES`, else `$XDG_CACHE_HOME/gpuplace/rates.json`, else `~/.cache/gpuplace/rates.json`,
all resolved from the environment mapping given (never `os.environ`). A missing file means no
measurements; a corrupt one is a warning, and the balanced strategy falls back to the presets.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class MeasuredRate:
    """One GPU's measured dense float32 matmul throughput and memory bandwidth."""

    product: str
    tflops: float
    bandwidth_gbs: float
    measured: str  # ISO date, 2026-11-29


@dataclass(frozen=True)
class Rates:
    """The measurements found in the rates file (by GPU UUID), where it is, and what was wrong."""

    path: Path | None = None
    by_uuid: Mapping[str, MeasuredRate] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def rates_path(env: Mapping[str, str]) -> Path | None:
    """Where the rates file lives under `env`; None when neither it nor a home is named."""
    if env.get("GPUPLACE_RATES"):
        return Path(env["GPUPLACE_RATES"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "gpuplace" / "rates.json"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".cache" / "gpuplace" / "rates.json"
    return None


def _entry(value: Any) -> MeasuredRate:
    rate = MeasuredRate(
        str(value["product"]),
        float(value["tflops"]),
        float(value["bandwidth_gbs"]),
        str(value["measured"]),
    )
    if not all(math.isfinite(x) and x > 0 for x in (rate.tflops, rate.bandwidth_gbs)):
        raise ValueError("rates must be positive numbers")
    return rate


def read_rates(path: Path | None) -> Rates:
    """The measurements in `path`: none when it is missing, none and a warning when corrupt."""
    if path is None or not path.exists():
        return Rates(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            raise ValueError("expected an object keyed by GPU UUID")
        by_uuid = {str(uuid): _entry(value) for uuid, value in doc.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warning = (
            f"ignoring the measured rates in {path} ({type(exc).__name__}: {exc}); the presets "
            "are used instead. Rerun `gpuplace devices --check` to measure again"
        )
        return Rates(path, {}, (warning,))
    return Rates(path, by_uuid)


def load_rates(env: Mapping[str, str]) -> Rates:
    """The measurements in the rates file `env` points at."""
    return read_rates(rates_path(env))


def save_rates(path: Path, measured: Mapping[str, MeasuredRate]) -> Path:
    """Merge `measured` into the file at `path` (newer measurements replace older ones) and
    write it atomically; a corrupt existing file is replaced."""
    merged = {**read_rates(path).by_uuid, **measured}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps({u: asdict(r) for u, r in sorted(merged.items())}, indent=2) + "\n"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
