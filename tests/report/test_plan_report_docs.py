"""The HTML report the docs show: the page docs/plan-report.md's command writes holds both
placements, and the pictures the README and the doc point at are there and small
(tests/test_docs.py runs the commands themselves and compares what they print)."""

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


def test_the_docs_command_writes_both_placements(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (command,) = re.findall(r"^\$ (gpuplace .*--format html.*)$", DOC.read_text(), re.M)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    _program, *args = shlex.split(command)
    result = run(*args)
    assert (result.code, result.err) == (0, ""), result.err
    page = parse((tmp_path / "plan.html").read_text(encoding="utf-8"))
    assert [s.attrs["data-strategy"] for s in page.iter("section")] == ["tensorflow", "balanced"]


def test_the_pictures_are_there_and_small() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"\]\((docs/img/[^)]+\.png)\)", readme) == ["docs/img/plan-report.png"]
    assert "](img/plan-report.png)" in DOC.read_text(encoding="utf-8")
    png = (ROOT / "docs/img/plan-report.png").read_bytes()
    assert png_size(png) == (1280, 860) and len(png) < 200 * 1024
