"""`python -m gpuplace`, and the console script `gpuplace` (`entry`).

`entry` starts its `try` before it imports anything, so a SIGINT (Ctrl-C) while gpuplace, click,
rich or numpy are still loading ends as one during a run does (`cli/interrupt.py`): one line,
`error: interrupted`, and exit 130, not a traceback.
"""

import sys

INTERRUPTED = 130  # 128 + SIGINT


def entry() -> None:  # pragma: no cover - the console script; tests run it in a subprocess
    """Run the command line and exit with its code."""
    try:
        from .cli.main import run_console

        code = run_console()
    except KeyboardInterrupt:  # while the command line loads (then `main` handles its own)
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _write_stderr("\nerror: interrupted\n")
        code = INTERRUPTED
    if code == INTERRUPTED:
        # Nothing is left to clean up. And an import the interrupt cut short can leave the
        # interpreter sure the interrupt went unhandled: it would exit by SIGINT, not by 130.
        _write_stderr("")
        import os

        os._exit(code)
    sys.exit(code)


def _write_stderr(text: str) -> None:
    """Write and flush stderr, if there is one that takes it."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # closed, or None
        pass


if __name__ == "__main__":
    entry()
