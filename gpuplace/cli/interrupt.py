"""SIGINT (Ctrl-C): one line, `error: interrupted`, and exit 130 (128 + SIGINT, what a shell
reports for a process a Ctrl-C ended), never click's "Aborted!" and exit 1, nor a traceback
(with --debug, the traceback of where it was interrupted comes first).

Imports nothing of click's or gpuplace's: it also answers a Ctrl-C that arrives while they load.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

INTERRUPTED = 130
LINE = "error: interrupted"


def interrupted(exc: BaseException | None, debug: bool, new_line: bool = True) -> int:
    """Say that the command was interrupted and return 130.

    The line comes after a new line (`new_line`; click already wrote one when it caught the
    interrupt), as the terminal shows `^C` where the cursor was. A second Ctrl-C while it is
    said is ignored; then SIGINT's handler is put back as it was."""
    shown = ""
    if debug and exc is not None:
        import traceback

        shown = "".join(traceback.format_exception(exc))
    with _ignoring_sigint(), contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(f"{chr(10) if new_line else ''}{shown}{LINE}\n")  # None: no stderr
        sys.stderr.flush()
    return INTERRUPTED


@contextlib.contextmanager
def _ignoring_sigint() -> Iterator[None]:
    try:  # only the main thread may set handlers
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:
        before = None
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGINT, before)
