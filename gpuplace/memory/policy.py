"""TensorFlow's GPU memory policies as pure arithmetic, and the logical GPUs they produce.

- Default (`gpu_device.cc`): reserve the free memory minus a system margin (`MinSystemMemory`:
  225 MiB under 2 GiB free, else 500 / 1050 / 1536 / 1800 MiB for compute capability <= 6 / 7 /
  8 / newer), on every visible GPU, used or not.
- `allow_growth`: start at 2 MiB and grow by doubling regions (`bfc_allocator.cc` Extend), never
  release. `TF_FORCE_GPU_ALLOW_GROWTH=true|false` wins over the config; other values are ignored
  with TensorFlow's warning.
- `per_process_gpu_memory_fraction` F: limit = total x F, preallocated unless growth is on.
- `memory_limit` (per GPU) and virtual devices (`--virtual-gpus GPU:0=2GiB,2GiB`): logical GPUs
  with their own limits, numbered across the visible GPUs as TensorFlow numbers them.
- `max_memory` (`--max-memory GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB`, Accelerate's `max_memory`): a
  memory limit for each GPU it names (as `memory_limit` for one GPU; the others keep theirs) and
  a cap on what the CPU may hold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from ..devices.model import Host, LogicalGpu, VisibleGpu
from ..echo import TEXT_CHARS, sample, show
from ..errors import BadInput, Message, Part, Setting, Text
from ..units import GiB, MiB, human, parse_count, parse_size

ENV_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"
VIRTUAL_GPUS = Setting("virtual_gpus")
MAX_MEMORY = Setting("max_memory")


def min_system_memory(available: int, cc_major: int | None) -> int:
    """TF's `MinSystemMemory`: what it leaves free for the driver and other processes."""
    if available < 2 * GiB:
        return 225 * MiB
    if cc_major is None or cc_major <= 6:
        return 500 * MiB
    if cc_major <= 7:
        return 1050 * MiB
    if cc_major <= 8:
        return 1536 * MiB
    return 1800 * MiB


class Policy(NamedTuple):
    """The memory options in force (flags override the spec's `config.gpu_options`)."""

    allow_growth: bool = False
    fraction: float | None = None
    memory_limit: int | None = None
    virtual: Mapping[int, tuple[int, ...]] = MappingProxyType({})  # cuda index -> limits
    warnings: tuple[Text, ...] = ()
    virtual_source: Part = VIRTUAL_GPUS  # where `virtual` came from, for messages
    per_gpu: Mapping[int, int] = MappingProxyType({})  # max_memory: cuda index -> limit
    cpu_limit: int | None = None  # max_memory's CPU entry: what CPU:0 may hold

    def name(self) -> str:
        """A short label for tables: `default`, `allow_growth`, `fraction 0.4`, ..."""
        parts = []
        if self.fraction is not None:
            parts.append(f"fraction {self.fraction:g}")
        if self.memory_limit is not None:
            parts.append(f"limit {self.memory_limit // MiB} MiB")
        if self.virtual:
            parts.append("virtual GPUs")
        if self.per_gpu or self.cpu_limit is not None:
            parts.append("max_memory")
        if self.allow_growth:
            parts.append("allow_growth")
        return " + ".join(parts) or "default"


def _fraction(value: object, where: Part) -> float:
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        f = float("nan")
    if not 0 < f <= 1 or isinstance(value, bool):
        raise BadInput(
            Message(
                where, f": per_process_gpu_memory_fraction must be in (0, 1], got {value!r} "
                "(e.g. 0.4 lets the process use 40% of each GPU's total memory)",
            )
        )  # fmt: skip
    return f


# compiled on first use (`re`'s cache): most commands give no --virtual-gpus
_VIRTUAL = r"(?i)^\s*(?:/?(?:device:)?GPU:)?([0-9]+)\s*=\s*(.+)$"


def parse_virtual(text: str, where: Part = VIRTUAL_GPUS) -> dict[int, tuple[int, ...]]:
    """`GPU:0=2GiB,2GiB;GPU:1=1GiB` -> {0: (2 GiB, 2 GiB), 1: (1 GiB,)}; errors name `where`."""
    out: dict[int, tuple[int, ...]] = {}
    given: dict[int, str] = {}
    for part in text.split(";"):
        match = re.match(_VIRTUAL, part)
        index = None if match is None else parse_count(match.group(1))
        if match is None or index is None:
            raise BadInput(
                Message(
                    where, f": cannot read {show(part.strip(), TEXT_CHARS)}; expected "
                    "GPU:N=SIZE[,SIZE...] (e.g. GPU:0=2GiB,2GiB), several separated by ';'",
                )
            )  # fmt: skip
        sizes = tuple(parse_size(s.strip(), where) for s in match.group(2).split(","))
        if any(s <= 0 for s in sizes):
            raise BadInput(
                Message(
                    where,
                    f": every logical GPU needs memory > 0, got {show(part.strip(), TEXT_CHARS)}",
                )
            )
        if index in given:
            raise BadInput(
                Message(
                    where, f": GPU:{index} is given twice ({show(given[index], TEXT_CHARS)} "
                    f"and {show(part.strip(), TEXT_CHARS)}); give each GPU once, with all its "
                    f"logical GPUs' sizes after one '=' (e.g. GPU:{index}=1GiB,2GiB,2GiB)",
                )
            )  # fmt: skip
        given[index] = part.strip()
        out[index] = sizes
    return out


# compiled on first use, as _VIRTUAL
_MAX_ENTRY = r"(?i)^\s*(?:/?(?:device:)?(gpu|cpu|cuda)(?::([0-9]+))?|([0-9]+))\s*=\s*(.*)$"


def parse_max_memory(text: str, where: Part = MAX_MEMORY) -> tuple[dict[int, int], int | None]:
    """`GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB` (Accelerate's `max_memory`; `0=10GiB` and `cpu=...`
    too) -> ({0: 10 GiB, 1: 10 GiB}, 30 GiB); errors name `where` and the entry."""
    gpus: dict[int, int] = {}
    cpu: int | None = None
    seen: dict[str, str] = {}
    for part in text.split(","):
        entry = part.strip()
        match = re.match(_MAX_ENTRY, part)
        kind = "" if match is None else (match.group(1) or "gpu").lower()
        number = None if match is None else match.group(2) or match.group(3)
        index = None if number is None else parse_count(number)
        if match is None or (kind == "cpu") != (number is None) or (number and index is None):
            raise BadInput(
                Message(
                    where, f": cannot read {show(entry, TEXT_CHARS)}; expected DEVICE=SIZE with "
                    "DEVICE GPU:N (or N) or CPU, several separated by ',' "
                    "(e.g. GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB)",
                )
            )  # fmt: skip
        assert match is not None
        key = "CPU" if kind == "cpu" else f"GPU:{index}"
        if key in seen:
            raise BadInput(
                Message(
                    where, f": {key} is given twice ({show(seen[key], TEXT_CHARS)} and "
                    f"{show(entry, TEXT_CHARS)}); give each device once",
                )
            )  # fmt: skip
        seen[key] = entry
        size = parse_size(match.group(4).strip(), Setting("max_memory", key=key))
        if size <= 0:
            raise BadInput(
                Message(
                    where, f": {show(entry, TEXT_CHARS)}: a device needs memory > 0 to hold "
                    f"anything; give it a size (e.g. {key}=10GiB), or leave it out",
                )
            )  # fmt: skip
        if kind == "cpu":
            cpu = size
        else:
            gpus[int(index or 0)] = size
    return gpus, cpu


def _virtual_from_config(raw: object) -> dict[int, tuple[int, ...]]:
    """`gpu_options.experimental.virtual_devices`: a list (one entry per visible GPU) of
    `{memory_limit_mb: [..]}`, as TF's VirtualDevices proto."""
    if not isinstance(raw, list):
        raise BadInput(
            "config.gpu_options.experimental.virtual_devices: expected a list, one entry per visible GPU"
        )
    out: dict[int, tuple[int, ...]] = {}
    for i, entry in enumerate(raw):
        limits = entry.get("memory_limit_mb", []) if isinstance(entry, dict) else None
        if not isinstance(limits, list) or not all(
            isinstance(x, (int, float)) and x > 0 for x in limits
        ):
            raise BadInput(
                f"config.gpu_options.experimental.virtual_devices[{i}]: expected {{memory_limit_mb: [MB, ...]}}"
            )
        if limits:
            out[i] = tuple(int(x * MiB) for x in limits)
    return out


def _growth_from_env(env: Mapping[str, str], current: bool) -> tuple[bool, str | None]:
    """`GetAllowGrowthValue` (gpu_bfc_allocator.cc): the exact strings "true" and "false" win,
    with TF's warning when they change the configured value; anything else is ignored."""
    value = env.get(ENV_GROWTH)
    if value is None:
        return current, None
    if value in ("true", "false"):
        forced = value == "true"
        if forced == current:
            return forced, None
        return forced, (
            f"Overriding allow_growth setting because the {ENV_GROWTH} environment variable is "
            f"set. Original config value was {str(current).lower()}."
        )
    return current, (
        f'The {ENV_GROWTH} environment variable is set but could not be parsed: "{value}". '
        f'Valid values are "true" or "false". Using original config value of {str(current).lower()}.'
    )


def _fraction_and_limit(
    gpu_options: Mapping[str, Any], flags: Mapping[str, Any]
) -> tuple[float | None, int | None, Message | None]:
    """The fraction and the per-GPU limit in force, and a warning when the limit flag overrides
    the spec's fraction. Both as flags is refused: a logical device's memory_limit wins over
    per_process_gpu_memory_fraction in TensorFlow, so the fraction would be dropped."""
    text = flags.get("memory_limit")
    limit = None if text is None else parse_size(text, Setting("memory_limit"))
    if limit == 0:  # given, so never dropped: a GPU with no memory can hold nothing
        raise BadInput(
            Message(
                Setting("memory_limit", text, quote=True), ": each GPU needs a limit above 0 "
                "(e.g. ", Setting("memory_limit", "64MiB"), ")",
            )
        )  # fmt: skip
    fraction_flag = flags.get("memory_fraction")
    if fraction_flag is not None:
        if limit is not None:
            raise BadInput(
                Message(
                    Setting("memory_fraction", fraction_flag), " conflicts with ",
                    Setting("memory_limit", text), ": a per-GPU memory limit overrides the "
                    "fraction (in TensorFlow a logical device's memory_limit wins over "
                    "per_process_gpu_memory_fraction); give one of them",
                )
            )  # fmt: skip
        return _fraction(fraction_flag, Setting("memory_fraction")), None, None
    configured = gpu_options.get("per_process_gpu_memory_fraction")
    if configured is None:
        return None, limit, None
    fraction = _fraction(configured, "config.gpu_options")
    if limit is None:
        return fraction, None, None
    warning = Message(
        Setting("memory_limit", text), " overrides config.gpu_options."
        f"per_process_gpu_memory_fraction {fraction:g}: each GPU's limit is {text}",
    )  # fmt: skip
    return None, limit, warning


def resolve_policy(
    gpu_options: Mapping[str, Any],
    flags: Mapping[str, Any],
    env: Mapping[str, str],
) -> Policy:
    """The policy from the spec's gpu_options, the caller's settings (`flags`, by Options field
    name; they win) and the environment; messages name the settings as Settings."""
    configured = bool(gpu_options.get("allow_growth", False))
    if flags.get("allow_growth") is not None:
        configured = bool(flags["allow_growth"])
    growth, warning = _growth_from_env(env, configured)
    fraction, limit, overridden = _fraction_and_limit(gpu_options, flags)
    experimental = gpu_options.get("experimental") or {}
    source: Part = "config.gpu_options.experimental.virtual_devices"
    virtual = (
        _virtual_from_config(experimental["virtual_devices"])
        if "virtual_devices" in experimental
        else {}
    )
    if flags.get("virtual_gpus") is not None:  # given empty: refused by parse_virtual, not dropped
        source = VIRTUAL_GPUS
        virtual = parse_virtual(str(flags["virtual_gpus"]), source)
    if virtual and configured:  # TF's Python rule; the env var acts in the allocator, allowed
        grown: Part = (
            Setting("allow_growth")
            if flags.get("allow_growth")
            else "config.gpu_options.allow_growth"
        )
        raise BadInput(
            Message(
                "Memory growth cannot be configured on a PhysicalDevice with virtual devices "
                "configured (TensorFlow's rule): drop ", grown, " or ", source,
            )
        )  # fmt: skip
    if virtual and fraction is not None:
        raise BadInput(
            "It's invalid to set both virtual devices and per_process_gpu_memory_fraction at the "
            "same time (TensorFlow's config.proto): give each logical GPU its memory instead"
        )
    per_gpu: dict[int, int] = {}
    cpu_limit = None
    if flags.get("max_memory") is not None:
        per_gpu, cpu_limit = parse_max_memory(str(flags["max_memory"]))
        for other in ("memory_fraction", "virtual_gpus"):
            if per_gpu and flags.get(other) is not None:
                raise BadInput(
                    Message(
                        Setting("max_memory", flags["max_memory"], quote=True), " conflicts "
                        "with ", Setting(other), ": both set the GPUs' memory; give one of them",
                    )
                )  # fmt: skip
    warnings = tuple(w for w in (warning, overridden) if w)
    return Policy(growth, fraction, limit, virtual, warnings, source, per_gpu, cpu_limit)


def capped_host(host: Host, policy: Policy) -> Host:
    """The host as placement and estimates see it: its memory capped by max_memory's CPU entry."""
    cap = policy.cpu_limit
    if cap is None or (host.memory_total is not None and host.memory_total <= cap):
        return host
    return host._replace(memory_total=cap)


def _default_limit(gpu: VisibleGpu, policy: Policy) -> int:
    total = gpu.memory_total or 0
    free = gpu.memory_free if gpu.memory_free is not None else total
    if gpu.cuda_index in policy.per_gpu:
        return policy.per_gpu[gpu.cuda_index]
    if policy.memory_limit is not None:
        return policy.memory_limit
    if policy.fraction is not None:
        return int(total * policy.fraction)
    cc = gpu.gpu.compute_capability
    margin = min_system_memory(free, int(cc.split(".")[0]) if cc else None)
    return free - margin if margin < free else free


def _size(n: int) -> str:
    """A size as users type it: `2GiB` when whole, else whole MiB (`1365MiB`)."""
    return f"{n // GiB}GiB" if n % GiB == 0 else f"{n // MiB}MiB"


def _check_virtual(gpu: VisibleGpu, sizes: Sequence[int], policy: Policy) -> None:
    """Refuse logical GPUs that together ask more of a card than it has free (what TensorFlow
    reserves them from), before anything is placed: plan and run agree."""
    free = gpu.memory_free if gpu.memory_free is not None else gpu.memory_total
    want = sum(sizes)
    if free is None or want <= free:
        return
    each = free // len(sizes) // MiB * MiB
    source = policy.virtual_source
    example: tuple[Part, ...] = (f" ({free // MiB:,} logical GPUs of 1MiB at most)",)
    if each and source == VIRTUAL_GPUS:
        split = f"GPU:{gpu.cuda_index}=" + ",".join([_size(each)] * len(sizes))
        example = (" (e.g. ", Setting("virtual_gpus", split), ")")
    elif each:
        example = (f" (e.g. memory_limit_mb: [{sample([str(each // MiB)] * len(sizes))}])",)
    used = f" (other processes use {human(gpu.memory_used)})" if gpu.memory_used else ""
    what = f"the {len(sizes)} logical GPUs" if len(sizes) > 1 else "the logical GPU"
    raise BadInput(
        Message(
            source, f" asks {human(want)} in all for {what} of GPU:{gpu.cuda_index} "
            f"({gpu.product}), which has {human(free)} free{used}; give sizes that "
            f"add up to at most {human(free)}", *example,
        )
    )  # fmt: skip


def logical_gpus(gpus: Sequence[VisibleGpu], policy: Policy) -> list[LogicalGpu]:
    """TensorFlow's GPU:0..n-1 under `policy`: virtual devices in order per visible GPU."""
    source = policy.virtual_source
    unknown = sorted(set(policy.virtual) - {g.cuda_index for g in gpus})
    capped = sorted(set(policy.per_gpu) - {g.cuda_index for g in gpus})
    if capped:
        source = MAX_MEMORY
        unknown = capped
    if unknown:
        sees = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}" + (
            f" (GPU:0..GPU:{len(gpus) - 1})" if len(gpus) > 1 else " (GPU:0)" if gpus else ""
        )
        raise BadInput(Message(source, f" names GPU:{unknown[0]}, but this process sees {sees}"))
    if (
        policy.memory_limit is not None
        and gpus
        and all(g.cuda_index in policy.virtual for g in gpus)
    ):
        raise BadInput(
            Message(
                Setting("memory_limit", human(policy.memory_limit)), " conflicts with ", source,
                ": every visible GPU is split into logical GPUs with their own sizes, so the "
                "limit would apply to none; drop ", Setting("memory_limit"),
            )
        )  # fmt: skip
    out: list[LogicalGpu] = []
    for gpu in gpus:
        sizes = policy.virtual.get(gpu.cuda_index)
        if sizes:
            _check_virtual(gpu, sizes, policy)
        for limit in sizes or (_default_limit(gpu, policy),):
            reserve = 0 if policy.allow_growth else limit
            out.append(LogicalGpu(len(out), gpu, limit, reserve, policy.allow_growth))
    return out
