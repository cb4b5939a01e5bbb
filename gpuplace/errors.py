"""One exception tree for gpuplace; each class carries the exit code the CLI returns.

Exit codes (click's convention, shared by nvidia-smi-style tools): 0 success, 1 a runtime
failure (out of memory, a failed check, a placement this machine cannot satisfy), 2 bad input.
"""

from __future__ import annotations


class GpuplaceError(Exception):
    """Base class: a message meant for the user, already naming what, where and the fix."""

    exit_code = 1


class BadInput(GpuplaceError):
    """The user gave something gpuplace cannot accept (flag value, spec, machine file): exit 2."""

    exit_code = 2


class RuntimeFailure(GpuplaceError):
    """Valid input, but this machine or run failed it (out of memory, failed check): exit 1."""

    exit_code = 1


class CheckFailed(RuntimeFailure):
    """A CI smoke check (`--require-gpus`, `--min-memory`, `--check`) did not pass."""


class MissingDependency(RuntimeFailure):
    """An optional library (cupy, nvidia-ml-py) is needed for this and is not installed."""


class OutputError(RuntimeFailure):
    """Standard output could not be written (disk full, closed, the reader went away): exit 1."""

    def __init__(self, reason: str, errno: int | None = None) -> None:
        super().__init__(f"cannot write output: {reason}")
        self.errno = errno
