"""What `plan` and `run --explain` print on a terminal: a rich table up to
`cli/output.py: TABLE_ROWS` rows; past it, the plain layout a pipe gets (rich would lay the whole
table out, and measure every cell, before printing its first row)."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from gpuplace.cli import output
from gpuplace.cli.context import AppContext
from gpuplace.cli.main import main
from tests.conftest import Result, Run
from tests.fakes.fake_pynvml import FakeNvml

GUIDE = Path(__file__).parent.parent / "examples" / "guide" / "01_log_placement.yaml"
EXPLAIN = """\
Run on the simulated machine 1xK520 (strategy tensorflow)
Placement
┏━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━┓
┃ OP     ┃ TYPE     ┃ DEVICE ┃ REASON                                                                         ┃ SHAPE ┃ DTYPE   ┃ BYTES ┃ COPIES IN ┃
┡━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━┩
│ a      │ constant │ GPU:0  │ generator follows its consumer MatMul on GPU:0                                 │ [2,3] │ float32 │ 24 B  │ -         │
│ b      │ constant │ GPU:0  │ generator follows its consumer MatMul on GPU:0                                 │ [3,2] │ float32 │ 24 B  │ -         │
│ MatMul │ matmul   │ GPU:0  │ no device requested: GPU:0 is the highest-priority device with a MatMul kernel │ [2,2] │ float32 │ 16 B  │ -         │
└────────┴──────────┴────────┴────────────────────────────────────────────────────────────────────────────────┴───────┴─────────┴───────┴───────────┘
MatMul:
[[22. 28.]
 [49. 64.]]
"""
WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}


def tty(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    """The CLI as if stdout were a 200-column terminal without colour."""
    fake = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound)
    code = main(list(args), AppContext(env=dict(WIDE), nvml_loader=lambda: fake, is_terminal=True))
    out, err = capsys.readouterr()
    return Result(code, "\n".join(line.rstrip() for line in out.splitlines()) + "\n", err)


def chain(tmp_path: Path, n: int) -> str:
    """A spec of `n` ops: a constant, then n - 1 relus in a chain."""
    lines = ["graph:", "  - {name: c, op: constant, value: 1.0, shape: [2]}"]
    lines += [f"  - {{name: r{i}, op: relu, inputs: [{f'r{i - 1}' if i > 1 else 'c'}]}}" for i in range(1, n)]  # fmt: skip
    path = tmp_path / "chain.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_short_explain_is_a_rich_table_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--machine", "1xK520", "run", str(GUIDE), "--explain", "--no-log-placement")
    result = tty(capsys, *args)
    assert (result.code, result.out) == (0, EXPLAIN)


@pytest.mark.parametrize("command", [("plan",), ("run", "--explain")])
def test_a_table_past_table_rows_prints_what_a_pipe_gets(
    capsys: pytest.CaptureFixture[str], run: Run, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...],
) -> None:  # fmt: skip
    spec = chain(tmp_path, 12)
    args = ("--machine", "2xK520", command[0], spec, *command[1:])
    monkeypatch.setattr(output, "TABLE_ROWS", 12)
    drawn = tty(capsys, *args)
    assert drawn.code == 0 and "┏" in drawn.out and "│ r11 " in drawn.out
    monkeypatch.setattr(output, "TABLE_ROWS", 11)
    monkeypatch.setattr(output, "_fits", _never)  # not measured either
    long = tty(capsys, *args)
    piped = run(*args, env=dict(WIDE))
    assert (long.code, piped.code) == (0, 0)
    assert long.out == piped.out and long.err == piped.err
    assert "\nr11 " in long.out and "┏" not in long.out


def test_a_renderable_table_past_table_rows_is_not_measured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.table import Table

    table = Table("A")
    for i in range(3):
        table.add_row(str(i))
    monkeypatch.setattr(output, "TABLE_ROWS", 2)
    monkeypatch.setattr(output, "_fits", _never)
    app = AppContext(env=dict(WIDE), is_terminal=True)
    assert output.echo_renderable(app, table, fallback="A\n0\n1\n2") is False
    assert capsys.readouterr().out == "A\n0\n1\n2\n"


def _never(*_: object) -> bool:
    raise AssertionError("a table past TABLE_ROWS was measured")
