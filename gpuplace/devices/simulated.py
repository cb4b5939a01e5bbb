"""Simulated machines: `--machine 4xK520`, `2xA100-80GB,1xT4`, or a YAML machine file.

A simulated machine is used only when asked for (never as a fallback), and every GPU it holds
carries `simulated=True` so that every output can say so. Fields a spec leaves out get
deterministic defaults: UUIDs and PCI bus ids are stable per position in the machine.
"""

from __future__ import annotations

import difflib
import re
import uuid as uuidlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..units import GiB, parse_size
from .model import Gpu, GpuProcess, Host, Machine, MigInstance
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
    """A stable GPU UUID for the GPU at `position` of a simulated machine."""
    return "GPU-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"gpuplace-sim/{position}/{product}"))


def _bus_id(position: int, preset_bus: str | None, taken: set[str]) -> str:
    candidates = [preset_bus] if preset_bus else []
    candidates += [f"{0x10 + 0x10 * (position + k):02X}"[-2:] for k in range(256)]
    for bus in candidates:
        full = f"00000000:{bus}:00.0"
        if full not in taken:
            return full
    raise BadInput("too many simulated GPUs: no free PCI bus id")  # pragma: no cover


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_machine(spec: str) -> Machine:
    """Build the simulated machine named by `spec` (a preset list or a machine file path)."""
    text = spec.strip()
    if not text:
        raise BadInput(f"--machine: empty spec; expected {SPEC_FORMS}")
    path = Path(text)
    if text.endswith((".yaml", ".yml", ".json")) or path.is_file():
        return _from_file(path, spec)
    gpus: list[dict[str, Any]] = []
    for item in text.split(","):
        match = _ITEM.match(item)
        if match is None:
            raise BadInput(f"--machine: cannot read {item.strip()!r}; expected {SPEC_FORMS}")
        count = int(match.group(1) or 1)
        if count < 1:
            raise BadInput(
                f"--machine: {item.strip()!r} asks for {count} GPUs; the count must be at least 1"
                " (for a machine with no GPU, use CUDA_VISIBLE_DEVICES= )"
            )
        gpus.append({"name": match.group(2), "count": count})
    return build_machine(gpus, host=None, description=text, where="--machine")


def _from_file(path: Path, spec: str) -> Machine:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--machine: cannot read machine file {spec!r}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise BadInput(f"{where}: YAML syntax error: {exc.problem}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("gpus", []), list):
        raise BadInput(f"{path}: a machine file is a mapping with a 'gpus:' list")
    for key in data:
        if key not in TOP_FIELDS:
            raise BadInput(
                f"{path}: unknown field {key!r}{_suggest(str(key), list(TOP_FIELDS))}; "
                f"accepted: {', '.join(TOP_FIELDS)}"
            )
    host = _host(data.get("host"), str(path))
    machine = build_machine(data.get("gpus") or [], host, str(data.get("name") or spec), str(path))
    return Machine(
        source="simulated",
        host=machine.host,
        gpus=machine.gpus,
        description=machine.description,
        driver_version=str(data["driver_version"]) if "driver_version" in data else None,
        cuda_version=str(data["cuda_version"]) if "cuda_version" in data else None,
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


def build_machine(entries: list[Any], host: Host | None, description: str, where: str) -> Machine:
    """Turn GPU entries (dicts with `name` and optional fields) into a simulated Machine."""
    gpus: list[Gpu] = []
    taken: set[str] = set()
    for n, entry in enumerate(entries):
        label = f"{where}: gpus[{n}]" if where != "--machine" else where
        if not isinstance(entry, dict):
            raise BadInput(f"{label}: expected a mapping with at least 'name', got {entry!r}")
        for key in entry:
            if key not in GPU_FIELDS:
                raise BadInput(
                    f"{label}: unknown field {key!r}{_suggest(str(key), list(GPU_FIELDS))}; "
                    f"accepted: {', '.join(GPU_FIELDS)}"
                )
        count = entry.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise BadInput(f"{label}: count must be a whole number >= 1, got {count!r}")
        for k in range(count):
            gpu = _gpu(entry, len(gpus), k, taken, label)
            taken.add(gpu.pci_bus_id)
            gpus.append(gpu)
    return Machine(
        source="simulated", host=host or SIM_HOST, gpus=tuple(gpus), description=description
    )


def _preset_or_fail(name: str, label: str, has_memory: bool) -> Preset | None:
    preset = find_preset(name)
    if preset is None and not has_memory:
        keys = [p.key for p in PRESETS.values()]
        close = difflib.get_close_matches(name, keys + [k.lower() for k in keys], n=1, cutoff=0.4)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadInput(
            f"{label}: unknown GPU preset {name!r}{hint}; presets: {', '.join(keys)}"
            + (
                "; in a machine file, give 'memory' to describe another GPU"
                if label != "--machine"
                else "; run `gpuplace devices --presets` to list them"
            )
        )
    return preset


def _opt_int(entry: Mapping[str, Any], key: str, label: str) -> int | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise BadInput(f"{label}.{key}: expected a number >= 0, got {value!r}")
    return int(value)


def _gpu(entry: Mapping[str, Any], position: int, k: int, taken: set[str], label: str) -> Gpu:
    name = str(entry.get("name", "")).strip()
    if not name:
        raise BadInput(
            f"{label}: every GPU needs a 'name' (a preset such as A100-80GB, or a product)"
        )
    preset = _preset_or_fail(name, label, "memory" in entry)
    if "memory" in entry:
        memory = parse_size(entry["memory"], f"{label}.memory")
    else:
        memory = preset.memory if preset else 0
    if memory <= 0:
        raise BadInput(f"{label}.memory: a GPU needs memory > 0, got {entry.get('memory')!r}")
    product = preset.product if preset else name
    processes = _processes(entry.get("processes") or [], label)
    used_default = sum(p.memory or 0 for p in processes)
    used = parse_size(entry.get("memory_used", used_default), f"{label}.memory_used")
    if used > memory:
        raise BadInput(f"{label}.memory_used: {used} bytes used is more than the {memory} total")
    preset_bus = preset.bus_ids[k] if preset and k < len(preset.bus_ids) else None
    bus = str(entry["pci_bus_id"]) if "pci_bus_id" in entry and k == 0 else None
    power = entry.get("power")
    power_limit = entry.get("power_limit", preset.power_limit_watts if preset else None)
    return Gpu(
        nvml_index=position,
        product=product,
        uuid=str(entry["uuid"]) if "uuid" in entry and k == 0 else sim_uuid(position, product),
        pci_bus_id=bus or _bus_id(position, preset_bus, taken),
        memory_total=memory,
        memory_used=used,
        memory_free=memory - used,
        compute_capability=str(
            entry.get("compute_capability") or (preset and preset.compute_capability) or ""
        )
        or None,
        utilization_percent=_opt_int(entry, "utilization", label) or 0,
        temperature_celsius=_opt_int(entry, "temperature", label),
        power_draw_watts=float(power) if power is not None else None,
        power_limit_watts=float(power_limit) if power_limit is not None else None,
        performance_state="P0",
        persistence_mode=False,
        display_active=False,
        compute_mode="Default",
        mig_enabled=bool(entry.get("mig")),
        mig_capable=bool(entry.get("mig")) or bool(preset and preset.mig),
        mig_instances=_migs(entry.get("mig") or [], position, product, label),
        processes=processes,
        simulated=True,
    )


def _processes(raw: object, label: str) -> tuple[GpuProcess, ...]:
    if not isinstance(raw, list):
        raise BadInput(f"{label}.processes: expected a list of {{pid, name, memory}}")
    out = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or "pid" not in p:
            raise BadInput(f"{label}.processes[{i}]: expected {{pid, name, memory}}, got {p!r}")
        memory = (
            parse_size(p["memory"], f"{label}.processes[{i}].memory") if "memory" in p else None
        )
        out.append(
            GpuProcess(int(p["pid"]), str(p.get("name", "?")), memory, str(p.get("type", "C")))
        )
    return tuple(out)


def _migs(raw: object, position: int, product: str, label: str) -> tuple[MigInstance, ...]:
    if not isinstance(raw, list):
        raise BadInput(f"{label}.mig: expected a list of {{profile, memory}} instances")
    out = []
    for j, m in enumerate(raw):
        if not isinstance(m, dict) or "memory" not in m:
            raise BadInput(f"{label}.mig[{j}]: expected {{profile, memory, gi, ci}}, got {m!r}")
        memory = parse_size(m["memory"], f"{label}.mig[{j}].memory")
        profile = str(m.get("profile", f"{memory // GiB}gb"))
        mig_uuid = "MIG-" + str(
            uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"gpuplace-sim/{position}/mig/{j}")
        )
        out.append(
            MigInstance(
                index=j,
                uuid=mig_uuid,
                product=f"{product} MIG {profile}",
                gpu_instance_id=int(m.get("gi", j + 1)),
                compute_instance_id=int(m.get("ci", 0)),
                memory_total=memory,
                memory_used=parse_size(m.get("memory_used", 0), f"{label}.mig[{j}].memory_used"),
            )
        )
    return tuple(out)
