"""`run --json` writes its document as bytes to stdout's binary buffer (`cli/output.py:
echo_json`): the same text as through the text stream, after what was written as text, and
its write failures said in one line like every other output's."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplace.cli.main import main
from gpuplace.report.records import json_bytes, json_text
from tests.conftest import Run

GUIDE = Path(__file__).resolve().parent.parent / "examples" / "guide" / "01_log_placement.yaml"
RUN_JSON = ["--machine", "4xK520", "run", str(GUIDE), "--json"]


def without_seconds(text: str) -> dict[str, object]:
    doc = json.loads(text)
    for copy in doc["copies"]:
        copy.pop("seconds")
    return doc  # type: ignore[no-any-return]


def test_a_stdout_without_a_buffer_gets_the_same_text(
    monkeypatch: pytest.MonkeyPatch, run: Run
) -> None:
    through_bytes = run(*RUN_JSON)
    text = io.StringIO()  # no .buffer: written as text
    monkeypatch.setattr(sys, "stdout", text)
    assert main(RUN_JSON) == 0
    assert through_bytes.code == 0 and through_bytes.out.endswith("}\n")
    assert text.getvalue().endswith("}\n")
    assert without_seconds(text.getvalue()) == without_seconds(through_bytes.out)


def test_json_bytes_is_json_text_in_ascii() -> None:
    doc = {"op": "é\x7f", "v": [float("nan"), 1.5], "big": 2**70, "lone": "\ud800"}
    assert json_bytes(doc) == json_text(doc).encode("ascii")
    assert json_text(doc) == json.dumps(
        {**doc, "v": ["nan", 1.5]}, indent=2
    )  # json.dumps's layout and escapes


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_run_json_to_a_full_disk_is_one_line_and_exit_1() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "gpuplace", *RUN_JSON],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert (done.returncode, done.stderr) == (
        1,
        "error: cannot write output: No space left on device\n",
    )


def test_the_console_context_keeps_what_run_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The console script's context holds the run's results until the process ends (no freeing
    them object by object first); any other context lets them go as the command returns."""
    from gpuplace.cli.context import AppContext
    from gpuplace.results import Outcome, Prepared

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    console = AppContext(kept=[])
    assert main(RUN_JSON, console) == 0
    kinds = [type(x).__name__ for x in console.kept or []]
    assert kinds == ["Layout", "dict", "Prepared", "Outcome"]
    assert isinstance(console.kept[2], Prepared) and isinstance(console.kept[3], Outcome)  # type: ignore[index]
    assert "placement" in console.kept[1]  # type: ignore[index,operator]
    other = AppContext()
    assert main(RUN_JSON, other) == 0 and other.kept is None
