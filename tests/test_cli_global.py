"""The group's options (--machine, --debug, GPUPLACE_MACHINE) and the entry point's error handling:
exit codes, one-line errors, output that cannot be written."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Run

GUIDE = Path(__file__).resolve().parent.parent / "examples" / "guide" / "01_log_placement.yaml"
PY = [sys.executable, "-m", "gpuplace"]


def test_machine_after_the_command_means_the_same(run: Run) -> None:
    before = run("--machine", "4xK20m", "devices")
    after = run("devices", "--machine", "4xK20m")
    assert (after.code, after.err) == (0, "")
    assert after.out == before.out
    assert after.out.startswith("Simulated machine 4xK20m (every device below is simulated)\n")


def test_machine_on_both_sides_must_agree(run: Run) -> None:
    same = run("--machine", "2xT4", "devices", "--machine", "2xT4")
    assert (same.code, same.err) == (0, "")
    clash = run("--machine", "2xT4", "devices", "--machine", "4xK520")
    assert (clash.code, clash.out) == (2, "")
    assert clash.err == (
        "error: --machine is given twice with different values: '2xT4' before the command and "
        "'4xK520' after it; give it once\n"
    )


def test_debug_after_the_command_shows_the_traceback_and_keeps_the_exit_code(run: Run) -> None:
    result = run("devices", "--machine", "0xK520", "--debug")
    assert result.code == 2
    assert result.err.startswith("Traceback (most recent call last):\n")
    assert "gpuplace.errors.BadInput: --machine: '0xK520' asks for 0 GPUs" in result.err
    assert result.err.endswith(
        "error: --machine: '0xK520' asks for 0 GPUs; the count must be at least 1 (for a machine "
        "with no GPU, use CUDA_VISIBLE_DEVICES= )\n"
    )
    assert "Traceback" not in run("devices", "--machine", "0xK520").err


def test_debug_keeps_the_exit_code_of_a_graph_command(run: Run, tmp_path: Path) -> None:
    missing = str(tmp_path / "nonexist.yaml")
    plain = run("--machine", "4xK520", "run", missing)
    debug = run("--debug", "--machine", "4xK520", "run", missing)
    assert plain.code == debug.code == 2
    assert "Traceback" not in plain.err and "Traceback" in debug.err
    assert debug.err.endswith(plain.err)


def test_help_lists_the_global_options_after_the_command(run: Run) -> None:
    result = run("devices", "--help")
    assert result.code == 0
    lines = [line.split()[0] for line in result.out.splitlines() if line.startswith("  -")]
    assert lines[-4:] == ["--machine", "--cluster", "--debug", "-h,"]


def test_env_var_is_named_in_its_errors(run: Run) -> None:
    result = run("devices", env={"GPUPLACE_MACHINE": "bogus"})
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "error: GPUPLACE_MACHINE: unknown GPU preset 'bogus'; presets: K40c, K20m, K520, T4, "
        "V100-16GB, V100-32GB, A100-40GB, A100-80GB, H100-80GB, H200; run `gpuplace devices "
        "--presets` to list them\n"
    )


@pytest.mark.parametrize(
    "args", [["--machine", "1xT4", "devices"], ["devices", "--machine", "1xT4"]]
)
def test_the_flag_wins_over_the_env_var(run: Run, args: list[str]) -> None:
    result = run(*args, env={"GPUPLACE_MACHINE": "bogus"})
    assert (result.code, result.err) == (0, "")
    assert result.out.startswith("Simulated machine 1xT4 ")


@pytest.mark.parametrize("args", [["--machine", "", "devices"], ["devices", "--machine", " "]])
def test_empty_machine_is_rejected_not_the_real_machine(run: Run, args: list[str]) -> None:
    result = run(*args)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "error: --machine: empty spec; expected a preset list such as 4xK520, 1xK40c or "
        "2xA100-80GB,1xT4 (presets: K40c, K20m, K520, T4, V100-16GB, V100-32GB, A100-40GB, "
        "A100-80GB, H100-80GB, H200), or the path of a YAML machine file. To use this machine's "
        "own GPUs, leave --machine out\n"
    )


def test_empty_env_var_is_unset(run: Run) -> None:
    result = run("devices", env={"GPUPLACE_MACHINE": ""})
    assert result.code == 0 and result.out.startswith("This machine\n")


class _Failing(io.StringIO):
    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


def test_full_disk_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch, run: Run) -> None:
    monkeypatch.setattr(sys, "stdout", _Failing(OSError(28, "No space left on device")))
    result = run("--machine", "4xK520", "devices")
    assert (result.code, result.err) == (1, "error: cannot write output: No space left on device\n")


def test_closed_stdout_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch, run: Run) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    result = run("--machine", "4xK520", "devices")
    assert (result.code, result.err) == (
        1,
        "error: cannot write output: standard output is closed\n",
    )


def test_broken_pipe_is_silent(monkeypatch: pytest.MonkeyPatch, run: Run) -> None:
    monkeypatch.setattr(sys, "stdout", _Failing(BrokenPipeError(32, "Broken pipe")))
    result = run("--machine", "4xK520", "devices")
    assert (result.code, result.err) == (1, "")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_dev_full_through_the_real_entry_point() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*PY, "--machine", "4xK520", "devices"], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert (done.returncode, done.stderr) == (
        1,
        "error: cannot write output: No space left on device\n",
    )


def test_closed_stdout_through_the_real_entry_point() -> None:
    command = " ".join([*PY, "--machine", "4xK520", "devices"]) + " >&-"
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (
        1,
        "error: cannot write output: standard output is closed\n",
    )


def test_reader_that_goes_away_is_silent() -> None:
    command = " ".join([*PY, "--machine", "255xT4", "devices", "--json"]) + " | true"
    done = subprocess.run(
        ["bash", "-c", command + "; exit ${PIPESTATUS[0]}"], capture_output=True, text=True
    )
    assert done.stderr == ""
    assert done.returncode in (0, 1)  # 0 when the pipe took it all before `true` exited
    head = subprocess.run(
        ["sh", "-c", " ".join([*PY, "--machine", "2xK520", "devices"]) + " | head -1"],
        capture_output=True,
        text=True,
    )
    assert head.stdout == "Simulated machine 2xK520 (every device below is simulated)\n"
    assert head.stderr == ""


# `run`, `plan` and `mem` take --machine / --debug after the command (`@global_options`)
COMMANDS = [
    ("run", [str(GUIDE), "--json"]),
    ("plan", [str(GUIDE), "--json"]),
    ("mem", ["--json"]),
]


@pytest.mark.parametrize(("command", "args"), COMMANDS)
def test_graph_commands_take_machine_after_the_command(
    run: Run, command: str, args: list[str]
) -> None:
    before = run("--machine", "1xK40c", command, *args)
    after = run(command, *args, "--machine", "1xK40c")
    assert before.code == after.code == 0
    assert after.out == before.out and '"description": "1xK40c"' in after.out


@pytest.mark.parametrize("command", ["run", "plan", "mem"])
def test_graph_commands_take_debug_after_the_command(
    run: Run, command: str, tmp_path: Path
) -> None:
    result = run(command, str(tmp_path / "missing.yaml"), "--machine", "1xK40c", "--debug")
    assert result.code == 2
    assert result.err.startswith("Traceback (most recent call last):\n")
