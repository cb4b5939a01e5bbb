"""What `plan` and `run --explain` print on a terminal: the tables fitted to its width (80
columns at least: reasons and copies wrapped, then the least needed columns left out, and a line
naming them), up to `cli/output.py: TABLE_ROWS` rows; past it, and with `--wide`, the plain
layout a pipe gets."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from gpuplace.cli import output
from gpuplace.cli.context import AppContext
from gpuplace.cli.main import main
from tests.conftest import Result, Run
from tests.fakes.fake_pynvml import FakeNvml

GUIDE = Path(__file__).parent.parent / "examples" / "guide"
EXPLAIN_80 = """\
Run on the simulated machine 1xK520 (strategy tensorflow)
OP      TYPE      DEVICE  REASON                SHAPE  DTYPE    BYTES  COPIES IN
a       constant  GPU:0   generator follows     [2,3]  float32  24 B   -
                          its consumer MatMul
                          on GPU:0
b       constant  GPU:0   generator follows     [3,2]  float32  24 B   -
                          its consumer MatMul
                          on GPU:0
MatMul  matmul    GPU:0   no device requested:  [2,2]  float32  16 B   -
                          GPU:0 is the
                          highest-priority
                          device with a MatMul
                          kernel
MatMul:
[[22. 28.]
 [49. 64.]]
"""


def tty(capsys: pytest.CaptureFixture[str], *args: str, width: int = 80) -> Result:
    """The CLI as if stdout were a terminal `width` columns wide, without colour."""
    fake = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound)
    env = {"COLUMNS": str(width), "NO_COLOR": "1"}
    code = main(list(args), AppContext(env=env, nvml_loader=lambda: fake, is_terminal=True))
    out, err = capsys.readouterr()
    return Result(code, out, err)


def chain(tmp_path: Path, n: int) -> str:
    """A spec of `n` ops: a constant, then n - 1 relus in a chain."""
    lines = ["graph:", "  - {name: c, op: constant, value: 1.0, shape: [2]}"]
    lines += [f"  - {{name: r{i}, op: relu, inputs: [{f'r{i - 1}' if i > 1 else 'c'}]}}" for i in range(1, n)]  # fmt: skip
    path = tmp_path / "chain.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_explain_on_an_80_column_terminal_wraps_the_reasons(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--machine", "1xK520", "run", str(GUIDE / "01_log_placement.yaml"), "--explain",
            "--no-log-placement")  # fmt: skip
    result = tty(capsys, *args)
    assert (result.code, result.out) == (0, EXPLAIN_80)


@pytest.mark.parametrize("width", [40, 80, 100, 132, 200])
@pytest.mark.parametrize("command", [("plan",), ("run", "--explain", "--no-log-placement")])
def test_every_table_line_fits_and_nothing_is_cut(
    capsys: pytest.CaptureFixture[str], run: Run, width: int, command: tuple[str, ...]
) -> None:
    spec = str(GUIDE / "04_multi_tower.yaml")
    result = tty(capsys, "--machine", "4xK20m", command[0], spec, *command[1:], width=width)
    assert result.code == 0
    piped = run("--machine", "4xK20m", command[0], spec, *command[1:]).out
    tables = [line for line in result.out.splitlines()
              if not line.startswith(("rates:", "Estimated", "Plan on", "Run on"))]  # fmt: skip
    assert all(len(line) <= max(width, 80) for line in tables)
    notes = result.out.split("\n(")[1:]  # the lines naming what was left out, if any
    shown = "".join("\n(".join(result.out.split("\n(")[:1]).split())
    for note in notes:
        shown += "".join(note.split(")", 1)[-1].split())
    words = "".join(piped.split())  # every character a pipe gets, but for what was left out
    if notes:
        assert len(shown) < len(words) and "left out to fit" in notes[0].replace("\n", " ")
    else:
        assert sorted(shown) == sorted(words)


@pytest.mark.parametrize("command", [("plan",), ("run", "--explain")])
def test_wide_and_long_tables_print_what_a_pipe_gets(
    capsys: pytest.CaptureFixture[str], run: Run, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...],
) -> None:  # fmt: skip
    spec = chain(tmp_path, 12)
    args = ("--machine", "2xK520", command[0], spec, *command[1:])
    piped = run(*args, env={"COLUMNS": "80", "NO_COLOR": "1"})
    fitted = tty(capsys, *args)
    assert fitted.code == 0 and fitted.out != piped.out
    wide = tty(capsys, *args, "--wide")
    assert (wide.out, wide.err) == (piped.out, piped.err)
    monkeypatch.setattr(output, "TABLE_ROWS", 11)  # 12 rows: past it
    long = tty(capsys, *args)
    assert (long.out, long.err) == (piped.out, piped.err)


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpuplace.report.text import MIN_WRAP, fit_table  # noqa: E402

WORDS = st.text(alphabet="abcdefghij:/-_ ", min_size=0, max_size=60).map(lambda t: t.strip())


@given(
    rows=st.lists(st.tuples(WORDS, WORDS, WORDS, WORDS), min_size=1, max_size=6),
    width=st.integers(min_value=20, max_value=160),
)
def test_fit_table_fits_when_it_can_and_keeps_every_word(
    rows: list[tuple[str, str, str, str]], width: int
) -> None:
    header = ("A", "B", "WHY", "LIST")
    text, dropped = fit_table(header, rows, width, drop=("B", "A"), wrap=("WHY", "LIST"))
    lines = text.splitlines()
    kept = [h for h in header if h not in dropped]
    widest_word = max((len(w) for r in rows for c in r for w in c.split()), default=0)
    floor = sum(max(len(str(r[header.index(h)])) for r in [header, *rows])
                for h in kept if h not in ("WHY", "LIST")) + 2 * (len(kept) - 1)  # fmt: skip
    if floor + 2 * max(MIN_WRAP, widest_word) <= width:  # room for both wrapped columns
        assert all(len(line) <= width for line in lines)
    assert dropped == [h for h in ("B", "A") if h in dropped]  # in the order given
    cells = "".join(str(r[header.index(h)]) for r in [header, *rows] for h in kept)
    assert sorted("".join(text.split())) == sorted("".join(cells.split()))  # never cut or lost


@pytest.mark.parametrize("command", [("plan",), ("run",)])
def test_a_large_spec_shows_its_stages_on_a_terminal_stderr_only(
    capsys: pytest.CaptureFixture[str], run: Run, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...],
) -> None:  # fmt: skip
    spec = chain(tmp_path, 12)
    fake = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound)

    def stderr_tty(*flags: str) -> Result:
        app = AppContext(env={}, nvml_loader=lambda: fake, is_terminal=False,
                         stderr_is_terminal=True)  # fmt: skip
        code = main(["--machine", "2xK520", command[0], spec, *flags], app)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    quiet = stderr_tty()
    assert (quiet.code, quiet.err) == (0, "")  # a small spec: no stages
    monkeypatch.setattr(output, "STAGES_FROM", 10)
    shown = stderr_tty()
    assert shown.code == 0 and "loading and placing" in shown.err
    assert shown.out == quiet.out  # stdout as before
    assert stderr_tty("--json").err == ""  # never with JSON
    assert run("--machine", "2xK520", command[0], spec).err == ""  # nor in a pipe
