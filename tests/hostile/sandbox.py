"""Run `gpuplace` where a blow-up fails a test instead of the machine.

Every run is a process of its own under `resource.setrlimit` (address space, CPU seconds, file
size; no core files) and a wall timeout: a case that allocates without bound gets MemoryError or
dies, one that spins gets SIGXCPU, one that hangs is killed at the timeout, and each of these is
reported as such. Runs are forked from a zygote that has gpuplace imported already
(`forkserver.py`), or, for what only a fresh interpreter shows (signals during start-up, a
closed stdout), started as `python -S -m gpuplace`.

The timeouts are generous (they catch hangs); no test asserts how fast anything ran.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.hostile.forkserver import set_limits

ROOT = Path(__file__).resolve().parents[2]
GiB = 1024**3
MiB = 1024**2
KiB = 1024
PATHS = os.pathsep.join(
    dict.fromkeys([str(ROOT), *(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))])
)
WALL_S = 60.0  # only to catch hangs: every case needs a small fraction of it
FRESH_BASE = 512 * MiB  # what a new interpreter maps once gpuplace and numpy are imported


@dataclass(frozen=True)
class Limits:
    """What one run may use: address space beyond what an interpreter with gpuplace imported
    maps (`base`), file size in bytes, CPU seconds, wall seconds."""

    address_space: int = 2 * GiB
    cpu_s: int = 60
    file_size: int = 256 * MiB
    wall_s: float = WALL_S

    def rlimits(self, base: int) -> dict[str, int]:
        return {"as": base + self.address_space, "cpu": self.cpu_s, "fsize": self.file_size}


@dataclass(frozen=True)
class Outcome:
    """How a run ended: its exit code, or the signal that killed it, or the timeout."""

    code: int | None
    signal: int | None
    timed_out: bool
    stdout: str
    stderr: str
    wall_s: float
    maxrss_kb: int = 0  # peak resident memory (forked runs; 0: not measured)
    argv: tuple[str, ...] = field(default=())

    def verdict(self) -> str:
        """One line for assertion messages: how it ended, and the end of its stderr."""
        if self.timed_out:
            how = f"HANG: still running after {self.wall_s:.0f} s (killed)"
        elif self.signal is not None:
            name = signal.Signals(self.signal).name
            why = {"SIGXCPU": " (the CPU limit)", "SIGKILL": " (the memory limit or OOM)"}
            how = f"KILLED by {name}{why.get(name, '')}"
        else:
            how = f"exit {self.code}"
        if "MemoryError" in self.stderr:
            how += " after hitting the address-space limit (MemoryError)"
        tail = self.stderr[-800:]
        return f"gpuplace {' '.join(a[:80] for a in self.argv)[:400]}: {how}; stderr: {tail!r}"


def clean_env(root: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a run: nothing from the caller's (no CUDA_VISIBLE_DEVICES,
    GPUPLACE_MACHINE or rates file leaks in), a home and a cache inside the case's folder."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }
    env.update(extra or {})
    return env


def _decode(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "backslashreplace") if path.exists() else ""


class ForkServer:
    """The client side of `forkserver.py`: one zygote for the session, one fork per run."""

    def __init__(self) -> None:
        env = clean_env(ROOT, {"PYTHONPATH": str(ROOT)})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.hostile.forkserver"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env, text=True,
        )  # fmt: skip
        ready = self._reply(120.0)
        assert ready.get("ready"), f"the fork server did not start: {ready}"
        self.vm_bytes = _vm_size(int(ready["pid"])) or FRESH_BASE

    def _reply(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            code = self.proc.poll()
            raise RuntimeError(f"the hostile suite's fork server went away (exit {code})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, argv: list[str], env: Mapping[str, str], cwd: Path, out: Path,
            limits: Limits) -> Outcome:  # fmt: skip
        """`gpuplace ARGV` in a forked child; its stdout and stderr go to files under `out`."""
        stdout, stderr = out / "stdout", out / "stderr"
        rlimits = limits.rlimits(self.vm_bytes)  # the child starts with the zygote's mappings
        request = {"argv": argv, "env": dict(env), "cwd": str(cwd), "stdout": str(stdout),
                   "stderr": str(stderr), "limits": rlimits, "timeout": limits.wall_s}  # fmt: skip
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self._reply(limits.wall_s + 60)
        status = int(reply["status"])
        return Outcome(
            code=os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
            signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            timed_out=bool(reply["timed_out"]),
            stdout=_decode(stdout),
            stderr=_decode(stderr),
            wall_s=float(reply["wall"]),
            maxrss_kb=int(reply["maxrss_kb"]),
            argv=tuple(argv),
        )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:  # a run in flight: the server takes it down too
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _vm_size(pid: int) -> int:
    """The virtual memory of process `pid` in bytes (0 where /proc does not say)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        status = Path(f"/proc/{pid}/status").read_text()
        return int(status.split("VmSize:")[1].split()[0]) * 1024
    return 0


def run_fresh(argv: list[str], env: Mapping[str, str], cwd: Path, limits: Limits,
              stdout: str = "pipe", interrupt_after: float | None = None) -> Outcome:  # fmt: skip
    """`python -S -m gpuplace ARGV` in a new interpreter: without `site`, whose .pth files
    take tens of milliseconds on a loaded machine before any of gpuplace's code could act on a
    signal (the packages are on PYTHONPATH instead). `stdout`: "pipe", "closed" (fd 1 closed
    before it starts), "full" (/dev/full) or "broken" (a pipe whose reader has gone).
    `interrupt_after`: send SIGINT that many seconds after the interpreter is up: after the
    time a bare `python -S -c "import gpuplace"` takes right now (the interpreter's start-up
    and the package's `__init__`, which `-m` runs before `__main__` and its handler), so that a
    loaded machine (a slow start) still interrupts gpuplace's own code, not the start-up."""
    rlimits = limits.rlimits(FRESH_BASE)
    if interrupt_after is not None:
        bare = time.monotonic()
        subprocess.run([sys.executable, "-S", "-c", "import gpuplace"], check=True, cwd=cwd,
                       env={**env, "PYTHONPATH": PATHS})  # fmt: skip
        interrupt_after += time.monotonic() - bare

    def preexec() -> None:  # pragma: no cover - runs in the child
        set_limits(rlimits)
        if stdout == "closed":
            os.close(1)

    target: int | None = subprocess.PIPE
    if stdout == "full":
        target = os.open("/dev/full", os.O_WRONLY)
    elif stdout == "broken":
        reader, target = os.pipe()
        os.close(reader)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-S", "-m", "gpuplace", *argv], cwd=cwd, env={**env, "PYTHONPATH": PATHS},
        stdin=subprocess.DEVNULL, stdout=target, stderr=subprocess.PIPE, preexec_fn=preexec,
    )  # fmt: skip
    if isinstance(target, int) and target != subprocess.PIPE:
        os.close(target)
    if interrupt_after is not None:
        time.sleep(interrupt_after)
        proc.send_signal(signal.SIGINT)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=limits.wall_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        out, err = proc.communicate()
    wall = time.monotonic() - start
    code = proc.returncode
    return Outcome(
        code=None if code < 0 else code, signal=-code if code < 0 else None,
        timed_out=timed_out, stdout=(out or b"").decode("utf-8", "backslashreplace"),
        stderr=err.decode("utf-8", "backslashreplace"), wall_s=wall, argv=tuple(argv),
    )  # fmt: skip


def snapshot(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every entry under `root` (relative path -> kind and content hash), without following
    symlinks: what a case must leave as it found it, except the paths in `skip` (and what
    lies under them)."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if any(rel == s or rel.startswith(f"{s}/") for s in skip):
                continue
            if path.is_symlink():
                found[rel] = f"link -> {os.readlink(path)}"
            elif path.is_dir():
                found[rel] = f"dir {path.stat().st_mode & 0o7777:o}"
            elif path.is_file():
                found[rel] = f"file {hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"
            else:
                found[rel] = "other"
    return found
