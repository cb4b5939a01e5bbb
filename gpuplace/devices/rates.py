"""Rates measured by `gpuplace devices --check` on real GPUs, kept in a small JSON file.

The file maps a GPU's UUID (what `nvidia-smi -L` prints) to what was measured on it:
`{uuid: {"product", "tflops", "bandwidth_gbs", "measured": "2026-11-29"}}`, and, under the key
`network`, what `devices --check` measured between the tasks of a live cluster, by its Dask
scheduler's address: `{"network": {scheduler: {"bandwidth_gbs", "latency_us", "measured"}}}`
(`plan` on that cluster uses it when the cluster names no network). It lives at
`$GPUPLACE_RATES`, else `$XDG_CACHE_HOME/gpuplace/rates.json`, else `~/.cache/gpuplace/rates.json`,
all resolved from the environment mapping given (never `os.environ`). A missing file means no
measurements; anything else that is not a small JSON object of rates (corrupt, nested too deeply,
too large, a folder, /dev/zero) is one warning, and the cost model falls back to the presets.
`devices --check` rewrites it atomically (`fileio.write_atomic`).
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from ..fileio import write_atomic

MAX_RATES_BYTES = 1 << 20  # a few hundred GPUs' rates; a bigger file is not one gpuplace wrote
_MAX_SHOWN = 200  # characters of a path or reason in a warning (a path may be 4,096)


class MeasuredRate(NamedTuple):
    """One GPU's measured dense float32 matmul throughput and memory bandwidth."""

    product: str
    tflops: float
    bandwidth_gbs: float
    measured: str  # ISO date, 2026-11-29


class MeasuredNetwork(NamedTuple):
    """The slowest worker-to-worker transfer measured on a cluster: GB/s and latency."""

    bandwidth_gbs: float
    latency_us: float
    measured: str  # ISO date


NETWORK_KEY = "network"  # not a GPU UUID (those start GPU- or MIG-)


class Rates(NamedTuple):
    """The measurements found in the rates file (by GPU UUID; the networks by scheduler
    address), where it is, and what was wrong."""

    path: Path | None = None
    by_uuid: Mapping[str, MeasuredRate] = MappingProxyType({})  # read-only: shared
    warnings: tuple[str, ...] = ()
    networks: Mapping[str, MeasuredNetwork] = MappingProxyType({})


def rates_path(env: Mapping[str, str]) -> Path | None:
    """Where the rates file lives under `env`; None when neither it nor a home is named."""
    if env.get("GPUPLACE_RATES"):
        return Path(env["GPUPLACE_RATES"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "gpuplace" / "rates.json"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".cache" / "gpuplace" / "rates.json"
    return None


class _NotRates(ValueError):
    """The file is not one `devices --check` wrote; the message says why, in plain words."""


def _entry(value: Any) -> MeasuredRate:
    rate = MeasuredRate(
        str(value["product"]),
        float(value["tflops"]),
        float(value["bandwidth_gbs"]),
        str(value["measured"]),
    )
    if not all(math.isfinite(x) and x > 0 for x in (rate.tflops, rate.bandwidth_gbs)):
        raise _NotRates("rates must be positive numbers")
    return rate


def _network(value: Any) -> MeasuredNetwork:
    rate = MeasuredNetwork(
        float(value["bandwidth_gbs"]), float(value["latency_us"]), str(value["measured"])
    )
    if not (math.isfinite(rate.bandwidth_gbs) and rate.bandwidth_gbs > 0) or not (
        math.isfinite(rate.latency_us) and rate.latency_us >= 0
    ):
        raise _NotRates("a network's rates must be positive numbers")
    return rate


def read_rates(path: Path | None) -> Rates:
    """The measurements in `path`: none when it is missing; none and one warning when it is
    anything but a small JSON object of rates (a cache must never break a command)."""
    if path is None:
        return Rates(path)
    try:
        doc = _read_json(path)
        if doc is None:
            return Rates(path)
        if not isinstance(doc, dict):
            raise _NotRates("expected an object keyed by GPU UUID")
        networks = doc.pop(NETWORK_KEY, {})
        if not isinstance(networks, dict):
            raise _NotRates(f"{NETWORK_KEY!r} must be an object keyed by scheduler address")
        by_uuid = {str(uuid): _entry(value) for uuid, value in doc.items()}
        by_scheduler = {str(where): _network(value) for where, value in networks.items()}
    except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
        warning = (
            f"ignoring the measured rates in {shown(path)} ({_reason(exc)}); the presets "
            "are used instead. Rerun `gpuplace devices --check` to measure again"
        )
        return Rates(path, {}, (warning,))
    return Rates(path, by_uuid, (), by_scheduler)


def _reason(exc: Exception) -> str:
    """Why the rates file is ignored, on one short line."""
    if isinstance(exc, RecursionError):
        said = "nested too deeply"
    elif isinstance(exc, OSError):
        said = exc.strerror or str(exc)
    elif isinstance(exc, _NotRates):
        said = str(exc)
    else:
        said = f"{type(exc).__name__}: {exc}"
    return _cut(" ".join(said.split()))


def shown(path: Path) -> str:
    """The rates file's path for a message: whole, unless it is long enough to flood one."""
    return _cut(str(path))


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else f"{text[: _MAX_SHOWN - 23]}...{text[-20:]}"


def _read_json(path: Path) -> Any:
    """The JSON document in the regular file at `path` (None: no file there). Opened without
    blocking and checked before a byte is read, so a FIFO, a folder or /dev/zero is refused,
    and read up to MAX_RATES_BYTES, so /dev/urandom or a huge file costs no more than that."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _NotRates("not a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_RATES_BYTES + 1)
    if len(data) > MAX_RATES_BYTES:
        raise _NotRates(f"larger than {MAX_RATES_BYTES >> 20} MiB")
    return json.loads(data.decode("utf-8-sig"))


def load_rates(env: Mapping[str, str]) -> Rates:
    """The measurements in the rates file `env` points at."""
    return read_rates(rates_path(env))


def save_rates(path: Path, measured: Mapping[str, MeasuredRate]) -> Path:
    """Merge `measured` into the file at `path` (newer measurements replace older ones) and
    write it atomically; a corrupt existing file is replaced."""
    found = read_rates(path)
    return _write(path, {**found.by_uuid, **measured}, found.networks)


def save_network(path: Path, scheduler: str, measured: MeasuredNetwork) -> Path:
    """Merge the network measured on the cluster at `scheduler` into the file at `path`."""
    found = read_rates(path)
    return _write(path, found.by_uuid, {**found.networks, scheduler: measured})


def _write(
    path: Path, by_uuid: Mapping[str, MeasuredRate], networks: Mapping[str, MeasuredNetwork]
) -> Path:
    doc: dict[str, Any] = {u: r._asdict() for u, r in sorted(by_uuid.items())}
    if networks:
        doc[NETWORK_KEY] = {s: r._asdict() for s, r in sorted(networks.items())}
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=2) + "\n"
    write_atomic(path, lambda f: f.write(text.encode("utf-8")))
    return path
