"""Field checks for machine files: each value a real GPU could report, or one clear error.

Every error names the file and GPU (`label`, e.g. `node.yaml: gpus[1]`), the field, the value and
what is allowed (exit 2). MIG follows NVIDIA's MIG guide: only MIG-capable GPUs (A100, H100, H200
and newer data-center cards) take MIG devices; the GPU instances share the card's memory and its 7
compute slices (a `3g.40gb` profile takes 3), and compute instances of one GPU instance share it.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

from ..errors import BadInput
from ..units import GiB, human, parse_size
from .model import GpuProcess, MigInstance
from .presets import PRESETS, Preset

# Patterns, compiled on first use (`re`'s cache): most commands read no machine file
GPU_UUID = r"^GPU-[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
_CC = r"^\d+\.\d+$"
_PROFILE_SLICES = r"^(?:\d+c\.)?(\d+)g\."
MIG_SLICES = 7
PROCESS_TYPES = ("C", "G", "C+G")


def number(
    entry: Mapping[str, Any], key: str, label: str, top: float | None = None
) -> float | None:
    """`entry[key]` as a number in [0, top] (None when absent)."""
    value = entry.get(key)
    if value is None:
        return None
    allowed = "a number >= 0" if top is None else f"a number from 0 to {top:g}"
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise BadInput(f"{label}.{key}: expected {allowed}, got {value!r}")
    if top is not None and value > top:
        raise BadInput(f"{label}.{key}: expected {allowed}, got {value!r}")
    return float(value)


def whole(entry: Mapping[str, Any], key: str, label: str, top: int | None = None) -> int | None:
    """`entry[key]` as a whole number in [0, top] (None when absent)."""
    value = entry.get(key)
    if value is None:
        return None
    allowed = "a whole number >= 0" if top is None else f"a whole number from 0 to {top}"
    ok = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if not ok or isinstance(value, bool) or value < 0 or (top is not None and value > top):
        raise BadInput(f"{label}.{key}: expected {allowed}, got {value!r}")
    return int(value)


def power(
    entry: Mapping[str, Any], preset: Preset | None, label: str
) -> tuple[float | None, float | None]:
    """(draw, limit) in watts; the draw cannot exceed the limit (the preset's when not given)."""
    draw = number(entry, "power", label)
    limit = number(entry, "power_limit", label)
    source = "power_limit"
    if limit is None and preset is not None:
        limit, source = preset.power_limit_watts, f"the {preset.key} preset's power limit"
    if draw is not None and limit is not None and draw > limit:
        raise BadInput(
            f"{label}.power: {draw:g} W is more than {source} ({limit:g} W); a GPU never draws "
            "more than its power limit: lower power, or raise power_limit"
        )
    return draw, limit


def gpu_uuid(entry: Mapping[str, Any], label: str) -> str | None:
    if "uuid" not in entry:
        return None
    value = str(entry["uuid"])
    if not re.match(GPU_UUID, value):
        raise BadInput(
            f"{label}.uuid: {value!r} is not a GPU UUID; expected nvidia-smi -L's form, "
            "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hex digits)"
        )
    return value


def compute_capability(entry: Mapping[str, Any], preset: Preset | None, label: str) -> str | None:
    value = entry.get("compute_capability")
    if value is None or value == "":
        return preset.compute_capability if preset else None
    text = str(value)
    if not re.match(_CC, text):
        raise BadInput(
            f'{label}.compute_capability: expected major.minor such as "8.6", got {value!r}'
        )
    return text


def speed(
    entry: Mapping[str, Any], preset: Preset | None, label: str
) -> tuple[int | None, int | None]:
    """(SM count, max clock in MHz): the entry's, else the preset's; they rank GPUs of one
    compute capability in CUDA's FASTEST_FIRST order (`order.py`)."""
    out: list[int | None] = []
    for key, default in (
        ("sm_count", preset.sm_count if preset else None),
        ("clock_mhz", preset.clock_mhz if preset else None),
    ):
        value = entry.get(key)
        if value is None:
            out.append(default or None)
            continue
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1_000_000:
            raise BadInput(
                f"{label}.{key}: expected a whole number from 1 to 1000000, got {value!r}"
            )
        out.append(value)
    return out[0], out[1]


def processes(raw: object, label: str) -> tuple[GpuProcess, ...]:
    if not isinstance(raw, list):
        raise BadInput(f"{label}.processes: expected a list of {{pid, name, memory}}, got {raw!r}")
    out = []
    for i, p in enumerate(raw):
        where = f"{label}.processes[{i}]"
        if not isinstance(p, dict) or "pid" not in p:
            raise BadInput(f"{where}: expected {{pid, name, memory}}, got {p!r}")
        pid = p["pid"]
        if not isinstance(pid, int) or isinstance(pid, bool) or pid < 0:
            raise BadInput(f"{where}.pid: expected a whole number >= 0, got {pid!r}")
        ptype = str(p.get("type", "C"))
        if ptype not in PROCESS_TYPES:
            raise BadInput(f"{where}.type: expected C, G or C+G (nvidia-smi's Type), got {ptype!r}")
        memory = parse_size(p["memory"], f"{where}.memory") if "memory" in p else None
        out.append(GpuProcess(pid, str(p.get("name", "?")), memory, ptype))
    return tuple(out)


def _mig_capable(name: str, preset: Preset | None, cc: str | None, label: str) -> None:
    if preset is not None and not preset.mig:
        capable = ", ".join(p.key for p in PRESETS.values() if p.mig)
        raise BadInput(
            f"{label}.mig: {preset.product} (preset {preset.key}) does not support MIG; MIG "
            f"devices need a MIG-capable GPU (presets: {capable}); remove mig, or change name"
        )
    if preset is None and cc is not None and float(cc.split(".")[0]) < 8:
        raise BadInput(
            f"{label}.mig: {name!r} has compute capability {cc}, and MIG needs 8.0 or newer "
            "(A100, H100, H200); remove mig, or change compute_capability"
        )


def _mig(m: object, j: int, position: int, product: str, label: str) -> MigInstance:
    where = f"{label}.mig[{j}]"
    if not isinstance(m, dict) or "memory" not in m:
        raise BadInput(f"{where}: expected {{profile, memory, gi, ci}}, got {m!r}")
    memory = parse_size(m["memory"], f"{where}.memory")
    if memory <= 0:
        raise BadInput(f"{where}.memory: a MIG device needs memory > 0, got {m['memory']!r}")
    used = parse_size(m.get("memory_used", 0), f"{where}.memory_used")
    if used > memory:
        raise BadInput(f"{where}.memory_used: {human(used)} is more than its {human(memory)}")
    gi = whole(m, "gi", where)
    ci = whole(m, "ci", where)
    return MigInstance(
        index=j,
        uuid="MIG-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"gpuplace-sim/{position}/mig/{j}")),
        product=f"{product} MIG {m.get('profile', f'{memory // GiB}gb')}",
        gpu_instance_id=j + 1 if gi is None else gi,
        compute_instance_id=0 if ci is None else ci,
        memory_total=memory,
        memory_used=used,
    )


def _gpu_instances(
    raw: list[Any], migs: list[MigInstance], label: str
) -> dict[int, tuple[int, int]]:
    """GPU instance id -> (memory, compute slices); compute instances of one GI share both."""
    instances: dict[int, tuple[int, int]] = {}
    owner: dict[tuple[int, int], int] = {}
    for j, (m, mig) in enumerate(zip(raw, migs, strict=True)):
        ids = (mig.gpu_instance_id, mig.compute_instance_id)
        if ids in owner:
            raise BadInput(
                f"{label}.mig[{j}]: GPU instance {ids[0]}, compute instance {ids[1]} is also "
                f"mig[{owner[ids]}]'s (gi defaults to the position + 1, ci to 0); give each MIG "
                "device its own gi/ci"
            )
        owner[ids] = j
        match = re.match(_PROFILE_SLICES, str(m.get("profile", "")))
        slices = int(match.group(1)) if match else 0
        memory = mig.memory_total or 0
        if ids[0] in instances and instances[ids[0]][0] != memory:
            raise BadInput(
                f"{label}.mig[{j}].memory: {human(memory)}, but GPU instance {ids[0]} has "
                f"{human(instances[ids[0]][0])}; its compute instances share that memory"
            )
        instances[ids[0]] = (memory, max(slices, instances.get(ids[0], (0, 0))[1]))
    return instances


def migs(
    raw: object, gpu: tuple[str, Preset | None, str | None, int], position: int, label: str
) -> tuple[MigInstance, ...]:
    """The MIG devices of one GPU (`gpu` is its name, preset, compute capability and memory)."""
    if raw is None or raw == []:
        return ()
    if not isinstance(raw, list):
        raise BadInput(f"{label}.mig: expected a list of {{profile, memory, gi, ci}} instances")
    name, preset, cc, card = gpu
    _mig_capable(name, preset, cc, label)
    product = preset.product if preset else name
    out = [_mig(m, j, position, product, label) for j, m in enumerate(raw)]
    instances = _gpu_instances(raw, out, label).values()
    slices = sum(s for _, s in instances)
    if slices > MIG_SLICES:
        raise BadInput(
            f"{label}.mig: the profiles take {slices} compute slices ({slices}g) in all, more "
            f"than the {MIG_SLICES} a MIG GPU has; shrink or remove MIG devices"
        )
    memory = sum(m for m, _ in instances)
    if memory > card:
        raise BadInput(
            f"{label}.mig: the GPU instances hold {human(memory)} in all, more than the card's "
            f"{human(card)}; shrink or remove MIG devices"
        )
    return tuple(out)
