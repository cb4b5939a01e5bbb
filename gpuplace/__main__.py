"""`python -m gpuplace`, and the console script `gpuplace` (`entry`).

`entry` starts its `try` before it imports anything, so a SIGINT (Ctrl-C) while gpuplace, click,
rich or numpy are still loading ends as one during a run does (`cli/interrupt.py`): one line,
`error: interrupted`, and exit 130, not a traceback.

The cyclic garbage collector is paused for the whole command (`gc_paused`): a command is one
short process, its large phases (load, place, run) pause it already, and the rest (imports,
flags, printing) makes no cyclic garbage worth tracing; tracing the modules as they load costs
a small command about 10% of its start-up. And when nothing is registered to run at exit, the
process ends without the interpreter's teardown, which costs as much again.

OpenBLAS's worker threads, which start when numpy is imported, wait for work by spinning for
2**28 cycles (about 0.1 s) before they sleep; on a 2-core machine that spin cost a 3-op `plan`
25 ms of its 150 (`bench/bench_startup.py`, issue 17, session 11), though the command calls no
BLAS. The command line shortens it to 2**20 cycles (`quiet_blas`), unless the user set it:
long enough that back-to-back BLAS calls find the threads awake (a 2048^2 matmul is unchanged).
"""

from __future__ import annotations

import os  # loaded with the interpreter: importing it here imports nothing
import sys

INTERRUPTED = 130  # 128 + SIGINT


def entry() -> None:  # pragma: no cover - the console script; tests run it in a subprocess
    """Run the command line and exit with its code."""
    try:
        quiet_blas(os.environ)  # before numpy starts OpenBLAS's threads
        from .gc_pause import gc_paused

        with gc_paused():  # see the module's docstring
            from .cli.main import run_console

            code = run_console()
    except BaseException as exc:  # while the command line loads (then `main` handles its own)
        if not _interrupt(exc):
            raise
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _write_stderr("\nerror: interrupted\n")
        code = INTERRUPTED
    if code == INTERRUPTED:
        # Nothing is left to clean up. And an import the interrupt cut short can leave the
        # interpreter sure the interrupt went unhandled: it would exit by SIGINT, not by 130.
        _write_stderr("")
        os._exit(code)
    if _nothing_at_exit():
        _write_stderr("")
        os._exit(code)  # the interpreter's teardown: ~15% of a small command, for nothing
    sys.exit(code)


def quiet_blas(environ: os._Environ[str] | dict[str, str]) -> None:
    """OpenBLAS's idle threads spin 2**20 cycles, not 2**28, before they sleep (see the
    module's docstring); a value already in `environ` is kept."""
    environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")


def _interrupt(exc: BaseException) -> bool:
    """Whether `exc` is a Ctrl-C: a KeyboardInterrupt, or an error the interpreter raised
    because one arrived at the wrong moment (one in a class body's `__set_name__`, as the stdlib's
    `platform` runs on import, comes out as RuntimeError with the interrupt as its cause)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1  # type: ignore[assignment]
    return False


def _nothing_at_exit() -> bool:
    """Whether an exit may skip the interpreter's teardown (freeing every module one by one):
    stdout flushes, nothing is registered to run at exit (coverage in a test's subprocess is)
    and no other thread runs."""
    import atexit

    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        return False
    threading = sys.modules.get("threading")
    alone = threading is None or threading.active_count() == 1
    callbacks = getattr(atexit, "_ncallbacks", lambda: 1)  # CPython's; elsewhere: tear down
    return alone and callbacks() == 0


def _write_stderr(text: str) -> None:
    """Write and flush stderr, if there is one that takes it."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # closed, or None
        pass


if __name__ == "__main__":
    entry()
