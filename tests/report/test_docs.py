"""The commands docs/plan-report.md and the README show for the HTML report run as shown: each
`$ gpuplace ...` line of a console block prints the lines under it (the page's size masked), and
the pictures they point at are there and small."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.report.browser import png_size
from tests.report.page import parse

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plan-report.md"
SIZE = re.compile(r"\(\d+(\.\d)? KiB\)")


def console_commands(text: str) -> list[tuple[str, list[str]]]:
    """(command, the lines it prints) for each `$ ` line of the ```console blocks."""
    found: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                found.append((line[2:], []))
            else:
                found[-1][1].append(line)
    return found


def run_here(run: Run, command: str, where: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a shown `gpuplace ...` command in `where` (examples/ linked in); its stdout."""
    (where / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(where)
    program, *args = shlex.split(command)
    assert program == "gpuplace"
    result = run(*args)
    assert (result.code, result.err) == (0, ""), result.err
    return result.out


def test_the_docs_commands_print_what_the_docs_show(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = console_commands(DOC.read_text(encoding="utf-8"))
    assert len(commands) == 1
    command, shown = commands[0]
    out = run_here(run, command, tmp_path, monkeypatch)
    assert SIZE.sub("(N KiB)", out).splitlines() == [SIZE.sub("(N KiB)", s) for s in shown]
    page = parse((tmp_path / "plan.html").read_text(encoding="utf-8"))
    assert [s.attrs["data-strategy"] for s in page.iter("section")] == ["tensorflow", "balanced"]


def test_the_readme_line_runs_and_its_picture_is_there(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [line for line in readme.splitlines() if "--format html" in line]
    assert len(lines) == 1
    command = re.findall(r"`(gpuplace [^`]*--format html[^`]*)`", lines[0])
    assert len(command) == 1 and "-o plan.html" in command[0]
    out = run_here(run, command[0], tmp_path, monkeypatch)
    assert SIZE.sub("(N KiB)", out) == "Plan report (tensorflow beside balanced) written to plan.html (N KiB)\n"  # fmt: skip
    pictures = re.findall(r"\]\((docs/img/[^)]+\.png)\)", lines[0])
    assert pictures == ["docs/img/plan-report.png"]
    for doc, picture in ((ROOT, pictures[0]), (DOC.parent, "img/plan-report.png")):
        png = (doc / picture).read_bytes()
        assert png_size(png) == (1280, 860) and len(png) < 200 * 1024
    assert "](img/plan-report.png)" in DOC.read_text(encoding="utf-8")
