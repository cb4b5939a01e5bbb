"""What messages echo of hostile or huge input stays within one screen: a long value is cut, a long
list shows its first and last items and the count between (gpuplace/echo.py), everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplace.echo import LINE_CHARS, clip, fit_line, sample, show
from gpuplace.errors import BadInput, Message, Setting
from gpuplace.units import MAX_SIZE, parse_count, parse_size
from tests.conftest import Run, write_spec


def test_clip_and_show_cut_long_values() -> None:
    assert clip("short") == "short"
    assert clip("x" * 100, 10) == "xxxxxxx..."
    assert show("a" * 100) == "'" + "a" * 56 + "..."
    assert show(10**5000) == "<an integer of 16,610 bits>"  # repr refuses past 4,300 digits


def test_sample_shows_the_first_and_last_items_and_the_count() -> None:
    assert sample(["a", "b", "c"]) == "a, b, c"
    names = [f"op{i}" for i in range(2000)]
    assert sample(names, " -> ") == (
        "op0 -> op1 -> op2 -> op3 -> ... (1,992 more) ... -> op1996 -> op1997 -> op1998 -> op1999"
    )
    assert sample(["x" * 100], width=8) == "xxxxx..."


def test_fit_line_keeps_the_start_and_the_end_within_one_screen() -> None:
    line = "error: " + "v" * 100_000 + " Fix: do this"
    fitted = fit_line(line)
    assert len(fitted) <= LINE_CHARS
    assert fitted.startswith("error: vvv") and fitted.endswith("vvv Fix: do this")
    assert " ... (98,068 characters cut) ... " in fitted
    assert fit_line("short") == "short"


def test_an_error_quoting_huge_input_renders_within_one_screen() -> None:
    error = BadInput(Message(Setting("virtual_gpus", "GPU:0=" + "1MiB," * 50_000), ": bad"), "fix")
    assert len(str(error)) <= LINE_CHARS and str(error).endswith(": bad Fix: fix")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("9" * 400 + "GiB", "is larger than any memory (gpuplace takes sizes up to 8 EiB"),
        ("9000000TiB", "'9000000TiB' is larger than any memory"),
        ("1e400B", "cannot read '1e400B' as a size"),
        ("\u0661\u0660GiB", "cannot read '\u0661\u0660GiB' as a size"),  # ١٠: Arabic-Indic digits
        (MAX_SIZE + 1, "9223372036854775808 is larger than any memory"),
    ],
)
def test_absurd_sizes_are_refused_not_overflowed(text: str | int, message: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_size(text, "--min-memory")
    assert message in str(caught.value) and len(str(caught.value)) < 400


def test_parse_count_takes_ascii_digits_only() -> None:
    assert [parse_count(t) for t in ("12", "007", "\uff13", "\u00b2", "", "-1")] == [
        12, 7, None, None, None, None,
    ]  # fmt: skip
    assert parse_count("9" * 18) == 10**18 - 1
    assert parse_count("9" * 19) is None and parse_count("9" * 5000) is None  # int() refuses 4,300


SPEC = "graph:\n  - {name: x, op: random_normal, shape: [2, 2]}\n  - {name: y, op: relu, inputs: [x]}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--memory-limit", "1e400B"), "error: --memory-limit: cannot read '1e400B' as a size"),
        (("--memory-limit", "9" * 400 + "GiB"), "error: --memory-limit: '999"),
        (("--virtual-gpus", "GPU:0=" + "9" * 400 + "MiB"), "error: --virtual-gpus: '999"),
        (("--virtual-gpus", "GPU:" + "9" * 5000 + "=1GiB"), "error: --virtual-gpus: cannot read"),
        (("--replicate", "9" * 5000), "error: --replicate '999"),
        (("--replicate", "\u00b2"), "error: --replicate '\u00b2': expected a number of GPUs"),
        (("--replicate", "\u0663"), "error: --replicate '\u0663': expected a number of GPUs"),
    ],
)
def test_absurd_numbers_in_flags_are_one_line_and_exit_2(
    run: Run, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = run("--machine", "4xK520", "run", write_spec(tmp_path, SPEC), *args)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(message) and result.err.count("\n") == 1
    assert len(result.err) <= LINE_CHARS + len("error: \n")


def test_a_cycle_of_2000_ops_shows_its_ends_and_its_length(run: Run, tmp_path: Path) -> None:
    ops = [f"  - {{name: op{i}, op: relu, inputs: [op{(i + 1) % 2000}]}}" for i in range(2000)]
    result = run("--machine", "1xK520", "run", write_spec(tmp_path, "graph:\n" + "\n".join(ops)))
    assert (result.code, result.err) == (
        2,
        f"error: {tmp_path / 'g.yaml'}:2: cycle in the graph: op0 -> op1999 -> op1998 -> op1997 "
        "-> ... (1,993 more) ... -> op3 -> op2 -> op1 -> op0 (a cycle of 2,000 ops); an op cannot "
        "depend on its own output, remove one of these inputs\n",
    )


def test_10000_logical_gpus_are_sampled_in_tensorflows_message(run: Run, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "graph:\n  - {name: a, op: ones, shape: [1], device: /gpu:10000}\n")
    virtual = "GPU:0=" + ",".join(["1MiB"] * 10_000)
    result = run("--machine", "1xA100-80GB", "run", spec, "--virtual-gpus", virtual)
    assert result.code == 1 and len(result.err) < LINE_CHARS
    assert (
        "/job:localhost/replica:0/task:0/device:GPU:101, ... (9,969 more) ..., "
        "/job:localhost/replica:0/task:0/device:GPU:9985" in result.err
    )
    assert result.err.endswith("this machine has 10000 GPUs (GPU:0 to GPU:9999); request one of "
                               "its devices, or pass --allow-soft-placement.\n")  # fmt: skip


def test_a_long_cuda_device_order_is_cut_in_its_warning(run: Run) -> None:
    result = run("--machine", "1xK520,1xT4", "devices", env={"CUDA_DEVICE_ORDER": "A" * 100_000})
    assert result.code == 0
    warning = result.err.splitlines()[0]
    assert warning.startswith("warning: CUDA_DEVICE_ORDER='AAAA") and len(warning) < 600
    assert warning.endswith("export CUDA_DEVICE_ORDER=PCI_BUS_ID (or unset it)")


def test_min_memory_failures_of_many_gpus_are_sampled(run: Run) -> None:
    result = run("--machine", "255xT4", "devices", "--min-memory", "1TiB")
    assert result.code == 1 and "... (247 more) ..." in result.err
    assert len(result.err) <= LINE_CHARS + len("error: \n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--require-gpus", "9" * 5000), "error: Invalid value for '--require-gpus': '999"),
        (
            ("--require-gpus", "\uff13"),
            "error: Invalid value for '--require-gpus': '\uff13' is not",
        ),
        (("--" + "x" * 5000,), "error: No such option"),  # click words the rest by version
    ],
)
def test_click_usage_errors_quote_flags_within_one_screen(
    run: Run, args: tuple[str, ...], message: str
) -> None:
    result = run("--machine", "4xK520", "devices", *args)
    assert (result.code, result.out) == (2, "")
    last = result.err.splitlines()[-1]
    assert last.startswith(message) and len(last) <= LINE_CHARS
