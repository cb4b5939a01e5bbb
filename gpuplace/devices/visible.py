"""CUDA_VISIBLE_DEVICES, applied exactly as the CUDA driver applies it, as a pure function.

Rules (CUDA Programming Guide, environment variables; nvitop `_parse_cuda_visible_devices`):
unset means every GPU; an empty string means none; entries are trimmed and an entry starting with
a digit (or a sign and a digit) counts only its leading integer; enumeration stops at the first
entry that names no GPU (`0,2,-1,1` is GPUs 0 and 2); integer indices are NVML (PCI) indices;
`GPU-` UUIDs may be abbreviated to any unique prefix; `MIG-<uuid>` and `MIG-GPU-<uuid>/<gi>/<ci>`
name MIG devices and only one MIG device is ever enumerated; a device named twice empties the
list; the first entry fixes indices or UUIDs, and an entry of the other kind ends the list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .model import Gpu, MigInstance, VisibleGpu

_LEADING_INT = re.compile(r"^[+-]?\d+")
_MIG_TRIPLE = re.compile(r"^MIG-(GPU-[0-9A-Fa-f-]+)/(\d+)/(\d+)$")

Target = tuple[Gpu, MigInstance | None]


def _by_uuid_prefix(gpus: Sequence[Gpu], prefix: str) -> Gpu | None:
    """The one GPU whose UUID starts with `prefix` (CUDA accepts unique abbreviations)."""
    matches = [g for g in gpus if g.uuid.lower().startswith(prefix.lower())]
    return matches[0] if len(matches) == 1 else None


def _resolve_mig(gpus: Sequence[Gpu], entry: str) -> Target | None:
    triple = _MIG_TRIPLE.match(entry)
    if triple:
        parent = _by_uuid_prefix(gpus, triple.group(1))
        if parent is None:
            return None
        gi, ci = int(triple.group(2)), int(triple.group(3))
        for mig in parent.mig_instances:
            if (mig.gpu_instance_id, mig.compute_instance_id) == (gi, ci):
                return parent, mig
        return None
    found = [
        (g, m) for g in gpus for m in g.mig_instances if m.uuid.lower().startswith(entry.lower())
    ]
    return found[0] if len(found) == 1 else None


def _resolve(gpus: Sequence[Gpu], entry: str) -> tuple[str, Target | None]:
    """Return (kind, target) for one trimmed entry; kind is 'index' or 'uuid'."""
    number = _LEADING_INT.match(entry)
    if number:
        index = int(number.group(0))
        target = next(((g, None) for g in gpus if g.nvml_index == index), None)
        return "index", target
    if entry.startswith("MIG-"):
        return "uuid", _resolve_mig(gpus, entry)
    if entry.startswith("GPU-"):
        gpu = _by_uuid_prefix(gpus, entry)
        return "uuid", (gpu, None) if gpu else None
    return "invalid", None


def _single_mig(targets: list[Target]) -> list[Target]:
    """CUDA enumerates one MIG device at most: the first named, else the first of a MIG GPU."""
    named = [t for t in targets if t[1] is not None]
    if named:
        return named[:1]
    for gpu, _ in targets:
        if gpu.mig_enabled:
            if gpu.mig_instances:
                return [(gpu, gpu.mig_instances[0])]
            continue
    return [t for t in targets if not t[0].mig_enabled]


def visible(gpus: Sequence[Gpu], cuda_visible_devices: str | None) -> list[VisibleGpu]:
    """The GPUs a CUDA program sees, in CUDA order, given the value of CUDA_VISIBLE_DEVICES.

    `gpus` are the physical GPUs in NVML order; `None` means the variable is unset.
    """
    if cuda_visible_devices is None:
        targets: list[Target] = [(g, None) for g in gpus]
    else:
        targets = []
        seen: set[tuple[str, str]] = set()
        mode: str | None = None
        for raw in cuda_visible_devices.split(","):
            kind, target = _resolve(gpus, raw.strip())
            if target is None or (mode is not None and kind != mode):
                break
            mode = mode or kind
            key = (target[0].uuid, target[1].uuid if target[1] else "")
            if key in seen:
                return []
            seen.add(key)
            targets.append(target)
    return [
        VisibleGpu(cuda_index=i, gpu=gpu, mig=mig)
        for i, (gpu, mig) in enumerate(_single_mig(targets))
    ]


def order_warning(visible_gpus: Sequence[VisibleGpu], cuda_device_order: str | None) -> str | None:
    """Warn when CUDA's default FASTEST_FIRST order may differ from the PCI order we report."""
    if cuda_device_order == "PCI_BUS_ID":
        return None
    if len({v.gpu.product for v in visible_gpus}) < 2:
        return None
    return (
        "the visible GPUs differ in model and CUDA_DEVICE_ORDER is "
        f"{cuda_device_order or 'unset (FASTEST_FIRST)'}: CUDA may number them fastest first, "
        "not in the PCI order shown here; export CUDA_DEVICE_ORDER=PCI_BUS_ID to make them agree"
    )
