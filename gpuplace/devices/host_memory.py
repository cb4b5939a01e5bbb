"""How much memory this host can still give the process: the least of what Linux says is
available (`MemAvailable` in /proc/meminfo, what `free` shows as available), the room under the
process's cgroup memory limits (a container's: v2 `memory.max` - `memory.current` at each level,
v1 `memory.limit_in_bytes` - `memory.usage_in_bytes`) and under an address-space rlimit
(`ulimit -v`, RLIMIT_AS - VmSize).

A run on the CPU or on simulated GPUs holds its tensors in this memory, and past it the kernel
kills the process (SIGKILL) instead of failing an allocation; `pipeline.execute_prepared` refuses
such a run up front. Each source is parsed by a pure function of the text read, so tests pass
their own texts (`available_memory(read=...)`); a source that cannot be read is left out, and
None means none could be (not Linux).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

Reader = Callable[[str], "str | None"]  # path -> its text, or None when it cannot be read
_READ_LIMIT = 1 << 16  # these files are small; /proc and /sys files give no size to check


def read_small_file(path: str) -> str | None:
    """The first 64 KiB of `path` as text, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(_READ_LIMIT).decode("ascii", "replace")
    except OSError:
        return None


def _field_kib(text: str, name: str) -> int | None:
    """`name:   123 kB` in /proc/meminfo or /proc/self/status, in bytes."""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key == name:
            words = rest.split()
            return int(words[0]) * 1024 if words and words[0].isdigit() else None
    return None


def mem_available(meminfo: str) -> int | None:
    """MemAvailable from /proc/meminfo's text, in bytes."""
    return _field_kib(meminfo, "MemAvailable")


def cgroup_room(limit: str | None, usage: str | None) -> int | None:
    """Bytes left under one cgroup limit (None: no limit, `max`, or unreadable). cgroup v1
    writes no limit as a number near 2**63."""
    if limit is None or usage is None:
        return None
    limit, usage = limit.strip(), usage.strip()
    if not (limit.isdigit() and usage.isdigit()) or len(limit) > 18:
        return None
    cap = int(limit)
    return None if cap >= 2**62 else max(cap - int(usage), 0)


# cgroup v2 (one hierarchy) and v1 (a memory controller of its own): where, and which files
_CGROUPS = (
    ("", "/sys/fs/cgroup", "memory.max", "memory.current"),
    ("memory", "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"),
)


def cgroup_rooms(own: str, read: Reader) -> list[int]:
    """The room under each memory limit from the process's cgroups (`own`: the text of
    /proc/self/cgroup, lines `id:controllers:path`) up to the root, v2 and v1 alike."""
    rooms = []
    for line in own.splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        for wanted, root, limit, usage in _CGROUPS:
            if controllers != wanted and wanted not in controllers.split(","):
                continue
            parts = [p for p in path.strip().split("/") if p and p != ".."][:64]
            for depth in range(len(parts), -1, -1):
                folder = "/".join([root, *parts[:depth]])
                room = cgroup_room(read(f"{folder}/{limit}"), read(f"{folder}/{usage}"))
                if room is not None:
                    rooms.append(room)
    return rooms


def address_room(rlimit_as: int | None, status: str | None) -> int | None:
    """Bytes of address space left under RLIMIT_AS (None: no limit), from /proc/self/status."""
    if rlimit_as is None or status is None:
        return None
    size = _field_kib(status, "VmSize")
    return None if size is None else max(rlimit_as - size, 0)


def _rlimit_as() -> int | None:
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        return None if soft == resource.RLIM_INFINITY else soft
    return None


def available_memory(
    read: Reader = read_small_file, rlimit_as: Callable[[], int | None] = _rlimit_as
) -> int | None:
    """Bytes this process can still allocate before the kernel stops it (the least of the
    sources above), or None when no source can be read."""
    meminfo = read("/proc/meminfo")
    found = [
        mem_available(meminfo) if meminfo is not None else None,
        *cgroup_rooms(read("/proc/self/cgroup") or "", read),
        address_room(rlimit_as(), read("/proc/self/status")),
    ]
    known = [n for n in found if n is not None]
    return min(known) if known else None
