"""The hostile-input table's vocabulary: a `Case` (a command line, the files it needs, what it
must end with) and builders for the files (raw .npy bytes, symbolic links, folders).

Text in argv, env and files may hold `{world}`: the absolute path of the case's folder, which is
also its working directory, `HOME` (`{world}/home`) and `XDG_CACHE_HOME` (`{world}/cache`) live
inside it, so a write anywhere under the world is seen by the before/after comparison.
"""

from __future__ import annotations

import ast
import json
import os
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.hostile.sandbox import Limits, Outcome

# The classes of the issue (#12), in its order, and what held then (kept so).
CLASSES = {
    "files": "files destroyed or written where they should not be",
    "memory": "memory blow-ups killed by the kernel instead of refused",
    "traceback": "tracebacks",
    "exit": "wrong exit codes or silent acceptance",
    "flood": "messages that flood the terminal",
    "silent": "silently wrong",
    "cliff": "cliffs (quadratic or worse in the input)",
    "held": "what held: keep it so",
}
SCREEN = 4000  # characters: one screen of messages at most
ERROR_LINE = re.compile(r"^(error|Error): ", re.M)  # ours, or click's usage error
# Python's own exceptions in a message: input that reached code which never checked it
LEAKED = re.compile(
    r"\b(ValueError|TypeError|OverflowError|KeyError|IndexError|AttributeError|RecursionError|"
    r"ZeroDivisionError|UnicodeDecodeError|UnicodeEncodeError|AssertionError|NameError)\b"
)


def broken_promise(outcome: Outcome, codes: tuple[int, ...] = (0, 1, 2),
                   error_line: bool = True) -> str | None:  # fmt: skip
    """The first promise of #12 that `outcome` breaks, in words shared by every run that breaks
    it the same way (so the fuzzer can count distinct failures); None when it kept them all:
    it ended by itself (no hang, no kill) with an allowed code, printed no traceback and at
    most a screen of messages, said a failure in one `error:` line, and no Python exception
    leaked into that line (a ValueError in an error is input that no check caught)."""
    if outcome.timed_out:
        return "hang"
    status = outcome.code if outcome.signal is None else 128 + outcome.signal
    if status not in codes:
        return f"exit {status}" + (" (killed)" if outcome.signal and status != 130 else "")
    if "Traceback" in outcome.stderr:
        last = outcome.stderr.strip().splitlines()[-1]
        frames = re.findall(r'gpuplace/([\w/]+\.py)", line \d+, in ([\w<>]+)', outcome.stderr)
        where = ":".join(frames[-1]) if frames else "outside gpuplace"
        return f"traceback ({_shape(last.split(':')[0])} in {where})"
    if len(outcome.stderr) > SCREEN:
        return f"more than a screen on stderr ({_shape(outcome.stderr.splitlines()[-1])[:50]})"
    said = len(ERROR_LINE.findall(outcome.stderr))
    if error_line and outcome.code in (1, 2) and said != 1:
        return f"exit {outcome.code} with {said} 'error:' lines"
    for line in outcome.stderr.splitlines():
        leaked = LEAKED.search(line) if ERROR_LINE.match(line) else None
        if leaked:
            shape = _shape(line[: leaked.start()])[-60:]
            return f"exit {outcome.code}: Python's {leaked.group(1)} in the error ({shape})"
    return None


def about_messages(problem: str) -> bool:
    """Whether `broken_promise` said `problem` of the messages (their size, their `error:`
    line, a leaked exception) rather than of how the run ended."""
    return "screen" in problem or "'error:' lines" in problem or "Python's" in problem


def _shape(line: str) -> str:
    """A message without its particulars (names, numbers), to tell kinds of messages apart."""
    return re.sub(r"'[^']*'|\d+", "_", line)


@dataclass(frozen=True)
class Link:
    """A symbolic link to `target` (as written, relative or absolute)."""

    target: str


@dataclass(frozen=True)
class Folder:
    """An empty folder."""


Content = str | bytes | Link | Folder
Check = Callable[[Path, Outcome], None]


@dataclass(frozen=True)
class Case:
    """One hostile input and what `gpuplace` must do with it.

    `code`: the exit code (or the codes) allowed; `phrase`: a regular expression searched, case
    ignored, in stderr (for exit 0, in stdout and stderr); `outputs`: the paths under the world a
    run may create or change (everything else must be left as it was); `check`: a last look at
    the world after the run; `error_line`: a failure says one `error:` line (False: it may be
    silent, as after a closed pipe). `fresh` starts a new interpreter (for signals and closed
    streams) instead of forking the suite's zygote. `xfail`: why today's code fails it (#12)."""

    name: str
    kind: str
    argv: tuple[str, ...]
    code: int | tuple[int, ...]
    phrase: str
    files: Mapping[str, Content] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    check: Check | None = None
    fresh: bool = False
    stdout: str = "pipe"
    interrupt_after: float | None = None
    limits: Limits = field(default_factory=Limits)
    max_stdout: int | None = None
    error_line: bool = True
    xfail: str | None = None

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.name}"

    def codes(self) -> tuple[int, ...]:
        return self.code if isinstance(self.code, tuple) else (self.code,)


def fill(text: str, world: Path) -> str:
    return text.replace("{world}", str(world))


def build_world(world: Path, files: Mapping[str, Content]) -> None:
    """Create the case's folder: a home, and each file, link and folder of `files`."""
    (world / "home").mkdir(parents=True)
    for rel, content in files.items():
        path = world / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Link):
            os.symlink(fill(content.target, world), path)
        elif isinstance(content, Folder):
            path.mkdir(exist_ok=True)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(fill(content, world).encode("utf-8"))


def npy(shape: str = "(2, 2)", descr: str = "<f4", data: bytes | None = None,
        version: tuple[int, int] = (1, 0), header: str | None = None) -> bytes:  # fmt: skip
    """Raw .npy bytes with any header (a lying shape, a pickled dtype, ...), written by hand so
    numpy cannot refuse to write what a hostile file holds. `data` None: as many bytes as the
    header claims when that is small, else none."""
    text = header or f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    size_field = "<H" if version[0] == 1 else "<I"
    prefix = 10 if version[0] == 1 else 12
    pad = -(prefix + len(text) + 1) % 64
    body = (text + " " * pad + "\n").encode("latin1")
    if data is None:
        data = b"\0" * min(_claimed_bytes(shape, descr), 1 << 20)
    return b"\x93NUMPY" + bytes(version) + struct.pack(size_field, len(body)) + body + data


def _claimed_bytes(shape: str, descr: str) -> int:
    """The bytes a header's shape and dtype claim (0 when they are not plain numbers)."""
    try:
        dims = ast.literal_eval(shape)
        count = 1
        for d in dims:
            count *= int(d)
        return max(count, 0) * int(descr.lstrip("<>|=")[1:] or 0)
    except (ValueError, SyntaxError, TypeError):
        return 0


def spec(*ops: str, fetch: str | None = None) -> str:
    """A graph spec of flow-style op mappings (`{name: a, op: constant, value: 1.0}`)."""
    text = "graph:\n" + "".join(f"  - {op}\n" for op in ops)
    return text + (f"fetch: [{fetch}]\n" if fetch else "")


def q(text: str) -> str:
    """`text` as a YAML double-quoted scalar (JSON's escapes are YAML's)."""
    return json.dumps(text)


SIM = ("--machine", "4xK520")
MATMUL = spec(
    "{name: a, op: constant, value: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape: [2, 3]}",
    "{name: b, op: constant, value: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape: [3, 2]}",
    "{name: c, op: matmul, inputs: [a, b]}",
)
