"""This host's CPU (TensorFlow's /device:CPU:0): model name, cores, physical memory."""

from __future__ import annotations

import os

from .model import Host


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "Model", "Hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform  # only off Linux: it costs every command's start-up a few ms

    return platform.processor() or platform.machine() or "unknown CPU"


def _memory_total() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def probe_host() -> Host:
    """Read the real host (Linux /proc, POSIX sysconf; portable fallbacks elsewhere)."""
    return Host(cpu_model=_cpu_model(), cores=os.cpu_count() or 1, memory_total=_memory_total())
