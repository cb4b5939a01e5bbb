"""`python -m gpuplace`, and the console script `gpuplace` (`entry`).

`entry` starts its `try` before it imports anything, so a SIGINT (Ctrl-C) while gpuplace, click,
rich or numpy are still loading ends as one during a run does (`cli/interrupt.py`): one line,
`error: interrupted`, and exit 130, not a traceback.
"""

import sys


def entry() -> None:  # pragma: no cover - the console script; tests run it in a subprocess
    """Run the command line and exit with its code."""
    try:
        from .cli.main import run_console

        code = run_console()
    except KeyboardInterrupt:  # while the command line loads (then `main` handles its own)
        import contextlib
        import os
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr closed or None
            sys.stderr.write("\nerror: interrupted\n")
            sys.stderr.flush()
        # Nothing is left to clean up (the command has not started, or has ended); and an
        # interrupted import can leave the interpreter sure the interrupt went unhandled,
        # which it would exit by (-SIGINT), not by 130.
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":
    entry()
