"""A zygote for the hostile suite: one process imports gpuplace (numpy, yaml, click, rich) once,
then forks one child per case, which runs `gpuplace` as its console script does, under resource
limits. A fresh interpreter per case costs ~0.3 s of CPU; a fork costs a few milliseconds.

Run as `python -m tests.hostile.forkserver` (what `sandbox.ForkServer` does): one JSON request
per line on stdin, one JSON reply per line on stdout. A request names argv, env, cwd, the files
for the child's stdout and stderr, its limits and a wall timeout; the reply gives the child's wait
status, its peak RSS and its wall time, and whether it was killed for running past the timeout.

The child is a process of its own (its own process group, limits, cwd, environment and standard
streams), so a blow-up kills or fails the child, never this server or the test run.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import pkgutil
import resource
import signal
import sys
import time
import traceback
from typing import Any

LIMITS = {"as": resource.RLIMIT_AS, "cpu": resource.RLIMIT_CPU, "fsize": resource.RLIMIT_FSIZE}


def preimport() -> None:
    """Import every gpuplace module (and so numpy, yaml, click and rich) before forking."""
    import gpuplace

    for module in pkgutil.walk_packages(gpuplace.__path__, "gpuplace."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def set_limits(limits: dict[str, int]) -> None:
    """Apply `limits` (address space and file size in bytes, CPU in seconds); no core files."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for name, value in limits.items():
        # CPU: SIGXCPU at the soft limit, SIGKILL one second later at the hard one
        hard = value + 1 if name == "cpu" else value
        resource.setrlimit(LIMITS[name], (value, hard))


def _streams(request: dict[str, Any]) -> None:
    """Point fds 0-2 at the request's files and give Python fresh streams over them."""
    stdin = os.open(request.get("stdin") or os.devnull, os.O_RDONLY)
    stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
        line_buffering=True,
    )  # fmt: skip


def _exit_code(exc: SystemExit) -> int:
    """The process exit status the interpreter gives for `sys.exit(code)`."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def child(request: dict[str, Any]) -> None:
    """Become `gpuplace ARGV` in the request's world, run it, and end as the interpreter would."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's handler is not gpuplace's
    os.chdir(request["cwd"])
    _streams(request)
    set_limits(request["limits"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["gpuplace", *request["argv"]]
    from gpuplace.__main__ import entry

    code = 1
    try:
        entry()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:  # as CPython: the traceback, then death by SIGINT
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        traceback.print_exc()
        code = 120  # what CPython exits with when the final flush of stdout fails
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


RUNNING: list[int] = []  # the child being waited for


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (the suite is closing): take the running child's process group down too."""
    for pid in RUNNING:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    os._exit(0)


def wait(pid: int, timeout: float) -> dict[str, Any]:
    """Reap `pid`, killing its process group once `timeout` seconds have passed."""
    start = time.monotonic()
    delay = 0.0005
    timed_out = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > timeout:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # anything the child left behind in its group
    return {
        "status": status,
        "timed_out": timed_out,
        "wall": time.monotonic() - start,
        "maxrss_kb": usage.ru_maxrss,
    }


def serve() -> None:
    """Answer requests until stdin closes."""
    preimport()
    signal.signal(signal.SIGTERM, _terminate)
    replies = sys.stdout
    sys.stdout = sys.stderr  # nothing but replies on the protocol pipe
    print(json.dumps({"ready": True, "pid": os.getpid()}), file=replies, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child ends in os._exit
            try:
                child(request)
            finally:
                os._exit(99)
        RUNNING[:] = [pid]
        print(json.dumps(wait(pid, request["timeout"])), file=replies, flush=True)
        RUNNING.clear()


if __name__ == "__main__":
    serve()
