"""`--help`: whole one-line summaries, options grouped by purpose, and examples that run: every
example line in every command's help is executed here, so help cannot drift from behaviour."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from gpuplace.cli.help import SECTIONS
from gpuplace.cli.main import COMMANDS as NAMES
from gpuplace.cli.main import cli
from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = sorted(NAMES)


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def test_the_command_list_has_whole_summaries_that_fit_80_columns(run: Run) -> None:
    out = run("--help").out
    listed = out[out.index("Commands:\n") :].splitlines()[1:]
    assert [line.split()[0] for line in listed] == COMMANDS
    for line in listed:
        assert len(line) <= 80 and "..." not in line, line
        command = cli.get_command(None, line.split()[0])  # type: ignore[arg-type]
        assert command is not None and line.split(None, 1)[1] == command.short_help


@pytest.mark.parametrize("name", COMMANDS)
def test_options_are_grouped_and_examples_come_last(run: Run, name: str) -> None:
    out = run(name, "--help").out
    titles = [line[:-1] for line in out.splitlines() if line and not line[0].isspace()
              and line.endswith(":")]  # fmt: skip
    known = [t for t, _ in SECTIONS]
    assert titles[-1] == "Examples"
    assert titles[-2] in ("Other options", "Options")
    grouped = titles[:-2]
    assert grouped == sorted(grouped, key=known.index)  # the order SECTIONS gives
    assert "GRAPH.yaml  " not in out  # the argument is in the usage line, not listed as an option


SERVES = ("worker",)  # serves until stopped: its examples run in tests/cluster_run instead


def _all_examples() -> list[tuple[str, str]]:
    from click.testing import CliRunner

    found = []
    for name in (c for c in COMMANDS if c not in SERVES):
        out = CliRunner().invoke(cli, [name, "--help"], terminal_width=80).output
        found += [(name, line.strip()) for line in out[out.index("Examples:\n") :].splitlines()[1:]
                  if line.strip()]  # fmt: skip
    return found


@pytest.mark.parametrize(("name", "line"), _all_examples())
def test_every_help_example_runs(
    run: Run, name: str, line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.symlink(ROOT / "examples", tmp_path / "examples")  # examples/... as from the repo root
    monkeypatch.chdir(tmp_path)  # what an example writes stays in tmp_path
    words = shlex.split(line)
    env = dict(w.split("=", 1) for w in words[: words.index("gpuplace")])
    argv = words[words.index("gpuplace") + 1 :]
    assert name in argv
    result = run(*argv, env=env)
    assert result.code == 0, (line, result.err)
    assert result.out


def test_a_click_usage_error_has_gpuplace_s_prefix(run: Run) -> None:
    result = run("run", "g.yaml", "--bogus")
    assert (result.code, result.out) == (2, "")
    assert result.err.splitlines()[-1] == "error: No such option '--bogus'."
