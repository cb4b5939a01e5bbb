"""Under --json (or --format json) a failure is a JSON document on stdout as well as the line on
stderr, unless the command already wrote its own document there; it validates against the
shipped schema (gpuplace/schemas/error.schema.json)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "gpuplace/schemas/error.schema.json").read_text())
BIG = str(ROOT / "examples/big_model.yaml")


def error_doc(out: str) -> dict[str, object]:
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    return doc["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("argv", "kind", "code"),
    [
        (("run", "nope.yaml", "--json"), "bad_input", 2),
        (("plan", "nope.yaml", "--format", "json"), "bad_input", 2),
        (("plan", "nope.yaml", "--format=json"), "bad_input", 2),
        (("run", "g.yaml", "--json", "--bogus"), "usage", 2),
        (("mem", "--json", "--memory-fraction", "2"), "bad_input", 2),
        (("run", BIG, "--json"), "out_of_memory", 1),
    ],
)
def test_the_error_is_a_document_and_a_line(
    run: Run, argv: tuple[str, ...], kind: str, code: int
) -> None:
    result = run("--machine", "2xK520", *argv)
    assert result.code == code
    error = error_doc(result.out)
    assert (error["kind"], error["exit_code"]) == (kind, code)
    line = result.err.splitlines()[-1]
    assert line.startswith("error: ") and str(error["message"]) in line
    if error["fix"] is not None:
        assert line.endswith(f"Fix: {error['fix']}") or str(error["fix"]) in line


def test_a_document_already_written_is_not_followed_by_another(run: Run) -> None:
    result = run("--machine", "4xK520", "plan", BIG, "--json")
    assert result.code == 1 and "OOM when allocating" in result.err
    doc = json.loads(result.out)  # one document: the plan, its GPU:0 marked as not fitting
    assert "error" not in doc and doc["machine"]["simulated"] is True
    checked = run("--machine", "2xK520", "devices", "--json", "--require-gpus", "9")
    assert checked.code == 1 and checked.err.startswith("error: 9 GPUs required, 2 visible")
    assert "error" not in json.loads(checked.out)  # the listing, then the failed check


def test_without_json_stdout_stays_empty(run: Run) -> None:
    result = run("run", "nope.yaml")
    assert (result.code, result.out) == (2, "")


def test_a_literal_json_after_double_dash_is_not_a_flag() -> None:
    from gpuplace.cli.main import _asks_json

    assert _asks_json(["run", "g.yaml", "--json"])
    assert not _asks_json(["run", "--", "--json"])
    assert not _asks_json(["plan", "g.yaml", "--format", "dot"])
