"""Simulated machines: `--machine 4xK520`, `2xA100-80GB,1xT4`, or a YAML machine file.

A simulated machine is used only when asked for (never as a fallback), and every GPU it holds
carries `simulated=True` so that every output can say so. Fields a spec leaves out get
deterministic defaults: UUIDs are stable per position in the machine, and PCI bus ids increase
down the list, as NVML numbers GPUs in PCI bus order (`pci.py`). Values no GPU could report are
errors naming the file, the GPU, the field and what is allowed (`sim_fields.py`).
"""

from __future__ import annotations

import importlib
import os
import re
import stat
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..echo import clip_middle, show
from ..errors import BadInput
from ..gc_pause import gc_paused
from ..limits import MACHINE_ALIASES, MACHINE_FILE_BYTES, read_text
from ..units import GiB, human, parse_size
from . import sim_fields as fields
from .model import Gpu, Host, Machine
from .pci import MAX_GPUS, BusRequest, assign_bus_ids
from .presets import PRESETS, Preset, find_preset

_ITEM = re.compile(r"^\s*(?:(-?\d+)\s*[xX]\s*)?([A-Za-z0-9][A-Za-z0-9_.\- ]*?)\s*$")
SIM_HOST = Host(cpu_model="Simulated CPU", cores=8, memory_total=64 * GiB, simulated=True)
SPEC_FORMS = (
    "a preset list such as 4xK520, 1xK40c or 2xA100-80GB,1xT4 (presets: "
    + ", ".join(p.key for p in PRESETS.values())
    + "), or the path of a YAML machine file"
)
GPU_FIELDS = (
    "name",
    "count",
    "memory",
    "pci_bus_id",
    "uuid",
    "compute_capability",
    "sm_count",
    "clock_mhz",
    "memory_used",
    "utilization",
    "temperature",
    "power",
    "power_limit",
    "processes",
    "mig",
)
TOP_FIELDS = ("name", "gpus", "host", "driver_version", "cuda_version")


def sim_uuid(position: int, product: str) -> str:
    """A stable GPU UUID for the GPU at `position` of a simulated machine: `uuid.uuid5` of
    NAMESPACE_URL, computed with the interpreter's own SHA-1 (`uuid5` imports hashlib, whose
    OpenSSL binding costs every simulated command ~10 ms of start-up)."""
    try:
        sha1 = importlib.import_module("_sha1").sha1
    except ImportError:  # an interpreter built without it
        import hashlib

        sha1 = hashlib.sha1
    name = f"gpuplace-sim/{position}/{product}".encode()
    digest = sha1(uuidlib.NAMESPACE_URL.bytes + name).digest()
    return "GPU-" + str(uuidlib.UUID(bytes=digest[:16], version=5))


def _suggest(word: str, options: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, options, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_machine(spec: str, source: str = "load_machine(spec)") -> Machine:
    """Build the simulated machine named by `spec` (a preset list or a machine file path);
    `source` is the argument, flag or environment variable it came from, which errors name."""
    text = spec.strip()
    if not text:
        leave = (
            f"leave {source} out" if source.startswith("-")
            else f"unset {source}" if source.isupper()
            else "call gpuplace.discover() without a spec"
        )  # fmt: skip
        raise BadInput(
            f"{source}: empty spec; expected {SPEC_FORMS}. To use this machine's own GPUs, {leave}"
        )
    if text.endswith((".yaml", ".yml", ".json")) or _is_file(text):
        return _from_file(Path(text), source)
    gpus: list[dict[str, Any]] = []
    for item in text.split(","):
        match = _ITEM.match(item)
        if match is None:
            raise BadInput(
                f"{source}: cannot read {clip_middle(item.strip())!r}; expected {SPEC_FORMS}"
            )
        count = int(match.group(1) or 1)
        if count < 1:
            raise BadInput(
                f"{source}: {item.strip()!r} asks for {count} GPUs; the count must be at least 1"
                " (for a machine with no GPU, use CUDA_VISIBLE_DEVICES= )"
            )
        gpus.append({"name": match.group(2), "count": count})
    total = sum(g["count"] for g in gpus)
    if total > MAX_GPUS:
        raise BadInput(
            f"{source}: {text!r} makes {total} GPUs; a simulated machine has at most {MAX_GPUS} "
            "(one per PCI bus, 01-FF): ask for fewer"
        )
    return build_machine(gpus, host=None, description=text, where=source)


def _is_file(text: str) -> bool:
    """Whether `text` names an existing file (False for what no file could be named: a name
    too long, a NUL in it)."""
    try:
        return stat.S_ISREG(os.stat(text).st_mode)
    except (OSError, ValueError):
        return False


def _from_file(path: Path, source: str) -> Machine:
    """A machine file: YAML or JSON, read by the same bounded parser as specs."""
    from ..parse import parse

    hint = f"a machine file describes at most {MAX_GPUS} GPUs: trim it"
    text = read_text(path, MACHINE_FILE_BYTES, f"{source}: cannot read machine file", hint)
    with gc_paused():
        data = parse(text, str(path), MACHINE_ALIASES).data
    if not isinstance(data, dict) or not isinstance(data.get("gpus", []), list):
        raise BadInput(f"{path}: a machine file is a mapping with a 'gpus:' list")
    _known_fields(str(path), data, TOP_FIELDS)
    host = _host(data.get("host"), str(path))
    machine = build_machine(
        data.get("gpus") or [], host, str(data.get("name") or path), str(path), from_file=True
    )
    return Machine(
        source="simulated",
        host=machine.host,
        gpus=machine.gpus,
        description=machine.description,
        driver_version=str(data["driver_version"]) if "driver_version" in data else None,
        cuda_version=str(data["cuda_version"]) if "cuda_version" in data else None,
    )


def _known_fields(label: str, data: dict[Any, Any], accepted: Sequence[str]) -> None:
    """BadInput naming the first field of `data` not in `accepted`, with a suggestion."""
    for key in data:
        if key not in accepted:
            raise BadInput(
                f"{label}: unknown field {key!r}{_suggest(str(key), list(accepted))}; "
                f"accepted: {', '.join(accepted)}"
            )


def _host(raw: object, where: str) -> Host:
    if raw is None:
        return SIM_HOST
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: host: expected a mapping with cores and memory")
    for key in raw:
        if key not in ("cores", "memory", "cpu_model"):
            raise BadInput(
                f"{where}: host: unknown field {key!r}; accepted: cpu_model, cores, memory"
            )
    cores = raw.get("cores", SIM_HOST.cores)
    if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
        raise BadInput(f"{where}: host.cores: expected a whole number >= 1, got {cores!r}")
    memory = parse_size(raw.get("memory", SIM_HOST.memory_total or 0), f"{where}: host.memory")
    model = str(raw.get("cpu_model", SIM_HOST.cpu_model))
    return Host(cpu_model=model, cores=cores, memory_total=memory, simulated=True)


def _entry_count(entry: object, label: str) -> int:
    if not isinstance(entry, dict):
        raise BadInput(f"{label}: expected a mapping with at least 'name', got {show(entry)}")
    _known_fields(label, entry, GPU_FIELDS)
    count = entry.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise BadInput(f"{label}: count must be a whole number >= 1, got {count!r}")
    if count > 1 and "uuid" in entry:
        raise BadInput(
            f"{label}.uuid: a UUID names one GPU, and this entry has count: {count}; "
            "write each GPU as its own entry with its own uuid"
        )
    return count


def build_machine(
    entries: list[Any], host: Host | None, description: str, where: str, from_file: bool = False
) -> Machine:
    """Turn GPU entries (dicts with `name` and optional fields) into a simulated Machine."""
    labels = [f"{where}: gpus[{n}]" if from_file else where for n in range(len(entries))]
    counts = [_entry_count(entry, label) for entry, label in zip(entries, labels, strict=True)]
    if sum(counts) > MAX_GPUS:
        raise BadInput(
            f"{where}: the machine file has {sum(counts)} GPUs; a simulated machine has at most "
            f"{MAX_GPUS} (one per PCI bus, 01-FF): list fewer"
        )
    gpus: list[Gpu] = []
    requests: list[BusRequest] = []
    for entry, label, count in zip(entries, labels, counts, strict=True):
        for k in range(count):
            gpu, request = _gpu(entry, len(gpus), k, label, from_file)
            gpus.append(gpu)
            requests.append(request)
    buses = assign_bus_ids(requests)
    gpus = [g._replace(pci_bus_id=bus) for g, bus in zip(gpus, buses, strict=True)]
    _unique_uuids(gpus, requests)
    return Machine(
        source="simulated", host=host or SIM_HOST, gpus=tuple(gpus), description=description
    )


def _unique_uuids(gpus: list[Gpu], requests: list[BusRequest]) -> None:
    seen: dict[str, int] = {}
    for i, gpu in enumerate(gpus):
        j = seen.setdefault(gpu.uuid.lower(), i)
        if j != i:
            raise BadInput(
                f"{requests[i].label}.uuid: {gpu.uuid!r} is also the UUID of {requests[j].name}; "
                "every GPU has its own UUID"
            )


def _preset_or_fail(name: str, label: str, has_memory: bool, from_file: bool) -> Preset | None:
    preset = find_preset(name)
    if preset is None and not has_memory:
        import difflib

        keys = [p.key for p in PRESETS.values()]
        close = difflib.get_close_matches(name, keys + [k.lower() for k in keys], n=1, cutoff=0.4)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadInput(
            f"{label}: unknown GPU preset {clip_middle(name)!r}{hint}; presets: {', '.join(keys)}"
            + (
                "; in a machine file, give 'memory' to describe another GPU"
                if from_file
                else "; run `gpuplace devices --presets` to list them"
            )
        )
    return preset


def _memory(entry: Mapping[str, Any], preset: Preset | None, label: str) -> int:
    """Total bytes: `memory`, else the preset's."""
    if "memory" in entry:
        memory = parse_size(entry["memory"], f"{label}.memory")
    else:
        memory = preset.memory if preset else 0
    if memory <= 0:
        raise BadInput(f"{label}.memory: a GPU needs memory > 0, got {entry.get('memory')!r}")
    return memory


def _gpu(
    entry: Mapping[str, Any], position: int, k: int, label: str, from_file: bool
) -> tuple[Gpu, BusRequest]:
    name = str(entry.get("name", "")).strip()
    if not name:
        raise BadInput(
            f"{label}: every GPU needs a 'name' (a preset such as A100-80GB, or a product)"
        )
    preset = _preset_or_fail(name, label, "memory" in entry, from_file)
    memory = _memory(entry, preset, label)
    product = preset.product if preset else name
    processes = fields.processes(entry.get("processes") or [], label)
    in_use = sum(p.memory or 0 for p in processes)
    used = parse_size(entry.get("memory_used", in_use), f"{label}.memory_used")
    if used > memory:
        raise BadInput(f"{label}.memory_used: {used} bytes used is more than the {memory} total")
    if used < in_use:
        raise BadInput(
            f"{label}.memory_used: {human(used)} is less than its processes use ({human(in_use)}); "
            "raise memory_used, or leave it out to use their sum"
        )
    draw, limit = fields.power(entry, preset, label)
    cc = fields.compute_capability(entry, preset, label)
    sm_count, clock_mhz = fields.speed(entry, preset, label)
    migs = fields.migs(entry.get("mig"), (name, preset, cc, memory), position, label)
    request = BusRequest(
        label=label,
        text=str(entry["pci_bus_id"]) if "pci_bus_id" in entry and k == 0 else None,
        seed=preset.bus_ids[k] if preset and k < len(preset.bus_ids) else None,
    )
    gpu = Gpu(
        nvml_index=position,
        product=product,
        uuid=fields.gpu_uuid(entry, label) or sim_uuid(position, product),
        pci_bus_id="",  # assigned once the whole machine is known (bus order)
        memory_total=memory,
        memory_used=used,
        memory_free=memory - used,
        compute_capability=cc,
        utilization_percent=fields.whole(entry, "utilization", label, top=100) or 0,
        temperature_celsius=fields.whole(entry, "temperature", label),
        power_draw_watts=draw,
        power_limit_watts=limit,
        performance_state="P0",
        persistence_mode=False,
        display_active=False,
        compute_mode="Default",
        mig_enabled=bool(migs),
        mig_capable=bool(migs) or bool(preset and preset.mig),
        mig_instances=migs,
        processes=processes,
        sm_count=sm_count,
        clock_mhz=clock_mhz,
        simulated=True,
    )
    return gpu, request
