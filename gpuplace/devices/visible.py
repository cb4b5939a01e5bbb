"""CUDA_VISIBLE_DEVICES, applied exactly as the CUDA driver applies it, as a pure function.

Rules (CUDA Programming Guide, environment variables; nvitop `_parse_cuda_visible_devices`):
unset means every GPU; an empty string means none; entries are trimmed and an entry starting with
a digit (or a sign and a digit) counts only its leading integer, in the ASCII digits 0-9 alone
(`０` or `٠` is no index: CUDA does not read them); enumeration stops at the first
entry that names no GPU (`0,2,-1,1` is GPUs 0 and 2); integer indices count in the order CUDA
numbers the GPUs (CUDA_DEVICE_ORDER, `order.py`: FASTEST_FIRST by default, so on a machine of mixed
models `0` is the fastest GPU; under PCI_BUS_ID they are NVML's, nvidia-smi's, indices);
`GPU-` UUIDs may be abbreviated to any unique prefix; `MIG-<uuid>` and `MIG-GPU-<uuid>/<gi>/<ci>`
name MIG devices; a device named twice empties the list; the first entry fixes indices or UUIDs,
and an entry of the other kind ends the list.

MIG ("only single MIG instance enumeration is supported"): when an entry names a MIG device, CUDA
enumerates that one MIG device (the first named) and nothing else; otherwise, at the first GPU with
MIG enabled and MIG devices, CUDA enumerates that GPU's first MIG device and hides every other GPU
and MIG device. A MIG-enabled GPU without MIG devices is skipped.

`visibility` also says, one sentence per cause, why GPUs or entries are not visible, so that no GPU
disappears without a word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from ..echo import TEXT_CHARS, sample, show
from ..errors import BadInput
from .model import Gpu, Machine, MigInstance, VisibleGpu

# compiled on first use (`re`'s cache): only a CUDA_VISIBLE_DEVICES that is set is read
_LEADING_INT = r"^[+-]?[0-9]+"  # ASCII only: \d also matches "０" and "٠"
_MIG_TRIPLE = r"^MIG-(GPU-[0-9A-Fa-f-]+)/([0-9]{1,9})/([0-9]{1,9})$"
_MAX_DIGITS = 9  # an index with more digits names no GPU (and int() refuses 4,300 of them)
_KIND = {"index": "a GPU index", "uuid": "a UUID"}

Target = tuple[Gpu, MigInstance | None]
Named = tuple[str, Target]  # an entry of CUDA_VISIBLE_DEVICES and what it names


class Visibility(NamedTuple):
    """The GPUs a CUDA program sees, and why others (or entries naming them) are not seen."""

    gpus: tuple[VisibleGpu, ...]
    reasons: tuple[str, ...] = ()


def _uuid_matches(gpus: Sequence[Gpu], prefix: str) -> list[Gpu]:
    return [g for g in gpus if g.uuid.lower().startswith(prefix.lower())]


def _by_uuid_prefix(gpus: Sequence[Gpu], prefix: str) -> Gpu | None:
    """The one GPU whose UUID starts with `prefix` (CUDA accepts unique abbreviations)."""
    matches = _uuid_matches(gpus, prefix)
    return matches[0] if len(matches) == 1 else None


def _resolve_mig(gpus: Sequence[Gpu], entry: str) -> Target | None:
    triple = re.match(_MIG_TRIPLE, entry)
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


def _target(gpus: Sequence[Gpu], entry: str) -> tuple[str, Target | None]:
    """Return (kind, target) for one trimmed entry; kind is 'index', 'uuid' or 'invalid'."""
    number = re.match(_LEADING_INT, entry)
    if number:
        digits = number.group(0)
        index = int(digits) if len(digits.lstrip("+-0")) <= _MAX_DIGITS else -1
        return "index", (gpus[index], None) if 0 <= index < len(gpus) else None
    if entry.startswith("MIG-"):
        return "uuid", _resolve_mig(gpus, entry)
    if entry.startswith("GPU-"):
        gpu = _by_uuid_prefix(gpus, entry)
        return "uuid", (gpu, None) if gpu else None
    return "invalid", None


def _name(target: Target) -> str:
    gpu, mig = target
    return (
        f"nvml {gpu.nvml_index}"
        if mig is None
        else f"MIG device {mig.index} of nvml {gpu.nvml_index}"
    )


def _quoted(entries: Sequence[str]) -> str:
    return sample([show(e, TEXT_CHARS) for e in entries])


def _why_invalid(gpus: Sequence[Gpu], entry: str) -> str:
    if not entry:
        return "An empty entry names no GPU"
    shown = show(entry, TEXT_CHARS)
    if re.match(_LEADING_INT, entry):
        indices = f"0-{len(gpus) - 1}" if len(gpus) > 1 else "0" if gpus else "none: it has no GPU"
        return f"Entry {shown} is not a GPU index of this machine (indices: {indices})"
    if entry.startswith("GPU-"):
        matches = len(_uuid_matches(gpus, entry))
        if matches > 1:
            return f"Entry {shown} matches {matches} GPU UUIDs; an abbreviated UUID must match one"
        return f"Entry {shown} matches no GPU UUID of this machine"
    if entry.startswith("MIG-"):
        return f"Entry {shown} names no MIG device of this machine (or more than one)"
    if entry.lstrip("+-")[:1].isdigit():
        return f"Entry {shown} is not a GPU index (CUDA reads only the ASCII digits 0-9)"
    return f"Entry {shown} is not a GPU index, a GPU- UUID or a MIG- UUID"


def _stopped(reason: str, rest: Sequence[str]) -> str:
    after = ""
    if rest:
        verb = "is" if len(rest) == 1 else "are"
        after = f", so {_quoted(rest)} after it {verb} ignored"
    return f"{reason}: CUDA stops at the first invalid entry{after}."


def _parse(gpus: Sequence[Gpu], cuda_visible_devices: str) -> tuple[list[Named], str | None]:
    """The entries CUDA enumerates with what they name, and why it stopped early (or None)."""
    entries = [raw.strip() for raw in cuda_visible_devices.split(",")]
    named: list[Named] = []
    seen: dict[tuple[str, str], str] = {}
    mode: str | None = None
    for i, entry in enumerate(entries):
        kind, target = _target(gpus, entry)
        if target is None:
            return named, _stopped(_why_invalid(gpus, entry), entries[i + 1 :])
        if mode is not None and kind != mode:
            reason = f"Entry {show(entry, TEXT_CHARS)} is {_KIND[kind]} after {_KIND[mode]}, and CUDA never mixes them"
            return named, _stopped(reason, entries[i + 1 :])
        mode = mode or kind
        key = (target[0].uuid, target[1].uuid if target[1] else "")
        if key in seen:
            again = (
                "is listed twice"
                if seen[key] == entry
                else f"names the same GPU as {show(seen[key], TEXT_CHARS)}"
            )
            return [], (
                f"Entry {show(entry, TEXT_CHARS)} {again} ({_name(target)}): CUDA makes no GPU visible when a "
                "device is listed twice."
            )
        seen[key] = entry
        named.append((entry, target))
    return named, None


def _phrase(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _mig_reason(kept: Target, named: Sequence[Named], gpus: Sequence[Gpu]) -> str | None:
    """Why CUDA shows only `kept` (a MIG device) of the GPUs `named`, and how to see the rest."""
    gpu, mig = kept
    assert mig is not None
    others = [t[0] for _, t in named if t[0] is not gpu]
    own = [m.index for m in gpu.mig_instances if m is not mig]
    migs = [(g, m) for g in (gpu, *others) for m in g.mig_instances if m is not mig]
    if not others and not migs:
        return None
    named_nvml = ", ".join(str(i) for i in sorted(g.nvml_index for g in others))
    hidden = [f"nvml {named_nvml}"] if others else []
    if own:
        plural = "s" if len(own) > 1 else ""
        hidden.append(f"MIG device{plural} {', '.join(map(str, own))} of nvml {gpu.nvml_index}")
    text = (
        f"MIG is enabled on nvml {gpu.nvml_index} ({gpu.product}) and CUDA enumerates a single MIG "
        f"device, so it uses {_name(kept)} and hides {_phrase(hidden)}."
    )
    position = {g.nvml_index: i for i, g in enumerate(gpus)}  # CUDA_VISIBLE_DEVICES counts these
    plain = [str(position[g.nvml_index]) for g in others if not g.mig_enabled]
    if plain:
        text += f" To use the GPUs without MIG, set CUDA_VISIBLE_DEVICES={','.join(plain)}."
    if migs:
        g, m = migs[0]
        text += (
            " To use another MIG device, set CUDA_VISIBLE_DEVICES to its UUID, e.g. "
            f"{m.uuid} for {_name((g, m))}."
        )
    return text


def _single_mig(named: list[Named], gpus: Sequence[Gpu]) -> tuple[list[Target], list[str]]:
    """CUDA enumerates one MIG device at most: the first named, else the first of a MIG GPU."""
    mig_entries = [(e, t) for e, t in named if t[1] is not None]
    if mig_entries:
        first, target = mig_entries[0]
        rest = [e for e, _ in named if e != first]
        if not rest:
            return [target], []
        verb = "is" if len(rest) == 1 else "are"
        return [target], [
            f"With a MIG device in CUDA_VISIBLE_DEVICES, CUDA enumerates that one MIG device only "
            f"(the first named, {show(first, TEXT_CHARS)}), so {_quoted(rest)} {verb} ignored."
        ]
    reasons: list[str] = []
    for _, (gpu, _mig) in named:
        if gpu.mig_enabled and gpu.mig_instances:
            kept: Target = (gpu, gpu.mig_instances[0])
            reason = _mig_reason(kept, named, gpus)
            return [kept], [reason] if reason else []
        if gpu.mig_enabled:
            reasons.append(
                f"nvml {gpu.nvml_index} ({gpu.product}) has MIG enabled but no MIG device, so CUDA "
                "cannot use it: create MIG devices (nvidia-smi mig) or disable MIG."
            )
    return [t for _, t in named if not t[0].mig_enabled], reasons


def visibility(gpus: Sequence[Gpu], cuda_visible_devices: str | None) -> Visibility:
    """The GPUs a CUDA program sees, in CUDA order, given the value of CUDA_VISIBLE_DEVICES,
    and one sentence per cause for what it does not see.

    `gpus` are the physical GPUs in the order CUDA numbers them (`order.cuda_order`; a
    machine's `gpus` are in NVML order, CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID); `None` means
    the variable is unset.
    """
    stop: str | None = None
    if cuda_visible_devices is None:
        named: list[Named] = [(str(i), (g, None)) for i, g in enumerate(gpus)]
    elif cuda_visible_devices == "":
        named = []
    else:
        named, stop = _parse(gpus, cuda_visible_devices)
    targets, reasons = _single_mig(named, gpus)
    shown = tuple(VisibleGpu(cuda_index=i, gpu=g, mig=m) for i, (g, m) in enumerate(targets))
    return Visibility(gpus=shown, reasons=(*([stop] if stop else []), *reasons))


def visible(gpus: Sequence[Gpu], cuda_visible_devices: str | None) -> list[VisibleGpu]:
    """The GPUs a CUDA program sees, in CUDA order (see `visibility` for why others are not):
    `gpus` are a machine's in the order CUDA numbers them (`machine.gpus` is nvidia-smi's order,
    CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID; `cuda_order(machine, value)[0]` is CUDA's under any
    value), `cuda_visible_devices` the variable's value (None: unset)."""
    if isinstance(gpus, Machine) or not all(isinstance(g, Gpu) for g in gpus):
        got = "a Machine: pass machine.gpus" if isinstance(gpus, Machine) else f"{gpus!r:.40}"
        raise BadInput(f"visible: gpus must be a machine's GPUs (machine.gpus), got {got}")
    if cuda_visible_devices is not None and not isinstance(cuda_visible_devices, str):
        raise BadInput(
            "visible: cuda_visible_devices must be the variable's text (e.g. '1,0') or None, got "
            f"{type(cuda_visible_devices).__name__} {cuda_visible_devices!r:.40}"
        )
    return list(visibility(gpus, cuda_visible_devices).gpus)
