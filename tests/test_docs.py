"""Every command shown in README.md, CONTRIBUTING.md and docs/*.md runs here, so the docs cannot
drift from what gpuplace does.

The conventions (docs/README of this runner, in one place):

- A fenced block marked `console` is executed: each `$ ` line is a bash command (a trailing
  `# comment` is bash's), run in order in one bash process per block, stdout and stderr
  together; the lines up to the next `$ ` line are its expected output. A line `...` matches any
  number of lines (long parts), and `…` within a line any text on that line (volatile parts:
  dates, timings, process ids, the host's CPU).
- A block whose info string has `file=NAME` (```` ```yaml file=lab-node.yaml ````) is written
  as NAME into the document's sandbox before the console blocks after it run.
- Any other block that shows a `$ ` line must sit right under an HTML comment
  `<!-- tested-by: tests/PATH.py::test_name -->` naming the test that runs it (it needs a fake
  or a machine the docs runner cannot give: a cupy on an old driver, a host's memory); the test
  must exist.

Each document runs in its own folder, where `examples/` is the repository's; the environment has
no CUDA_* or GPUPLACE_* variables (so no document depends on the machine's), HOME is the
folder, and `devices --check` measures its rates on small arrays (GPUPLACE_CHECK_SIZES).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
TESTED_BY = re.compile(r"<!-- tested-by: (\S+?)::(\w+) -->\s*$")
MARK = "@@gpuplace-docs-command@@"


@dataclass
class Command:
    line: str
    expected: list[str]


@dataclass
class Block:
    doc: str
    lineno: int
    commands: list[Command] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # written before the commands run


def _blocks(path: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """The console blocks of one document (each with the files defined before it), and the
    other blocks that show commands: (line number, the text just above the fence)."""
    text = path.read_text(encoding="utf-8")
    files: dict[str, str] = {}
    out: list[Block] = []
    shown: list[tuple[int, str]] = []
    for m in FENCE.finditer(text):
        info, body = m.group(1).split(), m.group(2)
        lineno = text.count("\n", 0, m.start()) + 1
        named = [w.removeprefix("file=") for w in info[1:] if w.startswith("file=")]
        if named:
            files[named[0]] = body
        if info[:1] == ["console"]:
            block = Block(path.name, lineno, files=dict(files))
            for line in body.splitlines():
                if line.startswith("$ "):
                    block.commands.append(Command(line[2:], []))
                elif block.commands:
                    block.commands[-1].expected.append(line)
            out.append(block)
        elif any(line.startswith("$ ") for line in body.splitlines()):
            above = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            shown.append((lineno, above))
    return out, shown


def _line_matches(expected: str, actual: str) -> bool:
    if "…" not in expected:
        return expected == actual
    return re.fullmatch(".*".join(map(re.escape, expected.split("…"))), actual) is not None


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; an expected `...` line matches any number of actual lines, and `…` within
    a line any text."""
    memo: dict[tuple[int, int], bool] = {}

    def at(i: int, j: int) -> bool:
        if (i, j) not in memo:
            if i == len(expected):
                memo[i, j] = j == len(actual)
            elif expected[i] == "...":
                memo[i, j] = any(at(i + 1, k) for k in range(j, len(actual) + 1))
            else:
                memo[i, j] = (
                    j < len(actual) and _line_matches(expected[i], actual[j]) and at(i + 1, j + 1)
                )
        return memo[i, j]

    return at(0, 0)


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


ALL = [(doc, block) for doc in DOCS for block in _blocks(doc)[0]]


def test_the_runner_finds_the_documents_and_their_commands() -> None:
    names = {block.doc for _, block in ALL}
    assert {"README.md", "devices.md", "run.md", "memory.md"} <= names
    assert sum(len(block.commands) for _, block in ALL) >= 20
    assert _matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert _matches(["a", "...", "b"], ["a", "b"]) and not _matches(["a", "..."], ["b"])
    assert not _matches(["a", "b"], ["a", "b", "c"])
    assert _matches(["pid … ok"], ["pid 4706 ok"]) and not _matches(["pid … ok"], ["pid 4706 no"])


@pytest.mark.parametrize(
    "doc", [d for d in DOCS if d.name != "benchmarks.md"], ids=lambda p: p.name
)
def test_commands_outside_console_blocks_name_the_test_that_runs_them(doc: Path) -> None:
    for lineno, above in _blocks(doc)[1]:
        found = TESTED_BY.search(above)
        assert found, (
            f"{doc.name}:{lineno}: a block shows commands; make it `console` or add <!-- tested-by: tests/x.py::test_y --> above it"
        )
        test_file, name = found.groups()
        assert re.search(rf"^def {name}\(", (ROOT / test_file).read_text(), re.M), (
            f"{doc.name}:{lineno}: {test_file}::{name} does not exist"
        )


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "GPUPLACE_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(folder), PYTHONUNBUFFERED="1", GPUPLACE_CHECK_SIZES="matmul=64,stream=64KiB",
    )  # fmt: skip
    for name in ("COLUMNS", "NO_COLOR", "TF_FORCE_GPU_ALLOW_GROWTH", "XDG_CACHE_HOME"):
        env.pop(name, None)
    return env


@pytest.mark.slow
@pytest.mark.parametrize(
    ("doc", "block"), ALL, ids=[f"{b.doc}:{b.lineno}" for _, b in ALL]
)  # fmt: skip
def test_every_console_block_prints_what_the_docs_show(
    doc: Path, block: Block, tmp_path: Path
) -> None:
    os.symlink(ROOT / "examples", tmp_path / "examples")
    for name, text in block.files.items():
        (tmp_path / name).write_text(text)
    script = "".join(  # the marker keeps $? for an `echo $?` that follows a command
        f"__rc=$?; echo {MARK}; (exit $__rc)\n{c.line}\n" for c in block.commands
    )
    done = subprocess.run(  # one pipe for stdout and stderr: the order they were written in
        ["bash", "-c", script], cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL, check=False, timeout=300,
    )  # fmt: skip
    parts = done.stdout.split(f"{MARK}\n")[1:]
    assert len(parts) == len(block.commands), done.stdout
    for command, output in zip(block.commands, parts, strict=True):
        expected, actual = _trim(command.expected), _trim(output.splitlines())
        assert _matches(expected, actual), (
            f"{block.doc}:{block.lineno}: $ {command.line}\n--- shown:\n"
            + "\n".join(expected) + "\n--- printed:\n" + "\n".join(actual)
        )  # fmt: skip
