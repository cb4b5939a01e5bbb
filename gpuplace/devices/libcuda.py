"""The order the CUDA driver itself numbers a real machine's GPUs in (FASTEST_FIRST).

nvitop's way (`nvitop/api/device.py`, `_parse_cuda_visible_devices`): a short child process loads
`libcuda.so.1` with ctypes and calls cuInit, cuDeviceGetCount, cuDeviceGetPCIBusId and
cuDeviceGetUuid (`_libcuda_child.py`), with CUDA_VISIBLE_DEVICES unset and
CUDA_DEVICE_ORDER=FASTEST_FIRST, and each device it lists is matched to NVML's by UUID, else by
bus id. A child, so that a hung or crashing driver costs one bounded wait (`TIMEOUT`), never
gpuplace itself, and no CUDA state is left in gpuplace's process. It runs only where NVML found
two GPUs or more (`nvml.probe`); when it cannot answer, the reason is kept and the order is
emulated (`order.py`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .model import Gpu, OrderProbe, ProbedOrder
from .order import emulated_fastest_first
from .pci import bus_key

TIMEOUT = 30.0  # seconds: cuInit on a large node without persistence mode can take several
CHILD = Path(__file__).with_name("_libcuda_child.py")
ASKED = "asked the CUDA driver (libcuda.so.1, CUDA_DEVICE_ORDER=FASTEST_FIRST)"
__all__ = ["OrderProbe", "child_env", "match", "probe_order", "run_child"]


def child_env(base: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: `base` without CUDA_VISIBLE_DEVICES, in CUDA's default order."""
    env = {k: v for k, v in base.items() if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    env["CUDA_DEVICE_ORDER"] = "FASTEST_FIRST"
    return env


def run_child(
    command: Sequence[str], env: Mapping[str, str], timeout: float
) -> dict[str, Any] | str:
    """The child's JSON answer, or one sentence saying why there is none."""
    import json  # here, not at the top: most commands never ask the driver (start-up)
    import signal
    import subprocess

    try:
        done = subprocess.run(
            list(command), env=dict(env), capture_output=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"the libcuda probe did not answer within {timeout:g} s"
    except OSError as exc:
        return f"the libcuda probe could not start: {exc.strerror or type(exc).__name__}"
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return f"the libcuda probe was killed by {name}"
    if done.returncode != 0:
        last = (done.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:]
        said = f": {last[0][:200]}" if last else ""
        return f"the libcuda probe exited with status {done.returncode}{said}"
    try:
        doc = json.loads(done.stdout[:65536].decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "the libcuda probe did not print its JSON answer"
    if not isinstance(doc, dict):
        return "the libcuda probe did not print its JSON answer"
    return doc


def _uuid_body(uuid: str) -> str:
    """A UUID without its GPU-/MIG- prefix, lower case (CUuuid bytes carry no prefix)."""
    return uuid.lower().removeprefix("mig-").removeprefix("gpu-")


def _nvml_index(gpus: Sequence[Gpu], device: Any) -> int | None:
    if not isinstance(device, dict):
        return None
    uuid = _uuid_body(str(device.get("uuid", "")))
    for g in gpus:
        if uuid and _uuid_body(g.uuid) == uuid:
            return g.nvml_index
    bus = bus_key(str(device.get("bus", "")))  # a MIG device: its parent's bus
    return next(
        (g.nvml_index for g in gpus if bus is not None and bus_key(g.pci_bus_id) == bus), None
    )


def match(gpus: Sequence[Gpu], doc: Mapping[str, Any]) -> ProbedOrder:
    """The child's answer `doc` as NVML indices in CUDA's order. GPUs CUDA does not enumerate
    (lost, or hidden by MIG's single-device rule) follow in the emulated order."""
    if "error" in doc:
        return ProbedOrder(None, f"libcuda: {str(doc['error'])[:200]}")
    listed = doc.get("devices")
    if not isinstance(listed, list) or not listed:
        return ProbedOrder(None, "libcuda enumerates no device")
    order: list[int] = []
    for device in listed[: len(gpus) + 1]:
        index = _nvml_index(gpus, device)
        if index is None or index in order:
            seen = str(device.get("bus", "?"))[:40] if isinstance(device, dict) else "?"
            return ProbedOrder(
                None, f"libcuda lists a device NVML does not match once (bus {seen})"
            )
        order.append(index)
    rest = [g.nvml_index for g in emulated_fastest_first(gpus) if g.nvml_index not in order]
    detail = ASKED
    if rest:
        names = ", ".join(map(str, rest))
        detail += f"; nvml {names}: not enumerated by CUDA (lost, or hidden by MIG), listed last"
    return ProbedOrder((*order, *rest), detail)


def probe_order(
    gpus: Sequence[Gpu],
    base_env: Mapping[str, str] | None = None,
    command: Sequence[str] | None = None,
    timeout: float = TIMEOUT,
) -> ProbedOrder:
    """Ask the CUDA driver the order it numbers `gpus` (NVML's) in, by default in a child of this
    Python (`command`: another child, for tests) with this process's environment (`base_env`)."""
    argv = list(command) if command is not None else [sys.executable, "-I", "-S", str(CHILD)]
    answer = run_child(argv, child_env(os.environ if base_env is None else base_env), timeout)
    if isinstance(answer, str):
        return ProbedOrder(None, answer)
    return match(gpus, answer)
