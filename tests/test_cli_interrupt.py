"""SIGINT (Ctrl-C) ends any command with `error: interrupted` and exit 130, never click's
"Aborted." with exit 1 nor a traceback: during a run, and from the console script's first line
on, while click, rich and numpy are still being imported."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

import pytest

import gpuplace.pipeline
from tests.conftest import Run
from tests.fakes.fake_pynvml import FakeNvml

SMALL = str(Path(__file__).resolve().parent.parent / "examples" / "small_model.yaml")


def _ctrl_c(*args: object, **kwargs: object) -> NoReturn:
    raise KeyboardInterrupt


def test_ctrl_c_during_a_run_is_one_line_and_exit_130(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpuplace.pipeline, "execute_prepared", _ctrl_c)
    result = run("--machine", "4xK520", "run", SMALL)
    assert (result.code, result.out, result.err) == (130, "", "\nerror: interrupted\n")


def test_ctrl_c_while_listing_devices_is_exit_130(run: Run) -> None:
    result = run("devices", nvml=FakeNvml(init_error=KeyboardInterrupt))
    assert (result.code, result.err) == (130, "\nerror: interrupted\n")


def test_debug_shows_where_it_was_interrupted(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpuplace.pipeline, "execute_prepared", _ctrl_c)
    result = run("--machine", "4xK520", "run", SMALL, "--debug")
    assert result.code == 130
    assert result.err.startswith("\nTraceback (most recent call last):\n")
    assert result.err.endswith("KeyboardInterrupt\nerror: interrupted\n")


# The console script's first lines: `-X importtime` prints a line as each module finishes
# loading. `python -m gpuplace` loads the package, then runs `__main__.entry`, whose first import
# (inside its `try`) prints the next line: from then on, while gpuplace, click, rich and numpy are
# still to load, a SIGINT is gpuplace's to handle. Before it, it is the interpreter's start-up's.
PACKAGE_LOADED = re.compile(r"\| +gpuplace$")


def _start_and_interrupt(delay_ms: int) -> tuple[int, str, str]:
    """(exit code, stdout, stderr without importtime's lines) of `gpuplace run` given a SIGINT
    `delay_ms` after `entry` started."""
    command = [sys.executable, "-X", "importtime", "-m", "gpuplace", "--machine", "4xK520"]
    child = subprocess.Popen(
        [*command, "run", SMALL], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stderr is not None
    lines, package = [], False
    for line in child.stderr:
        lines.append(line)
        if package:  # the first line from inside entry's try
            break
        package = bool(PACKAGE_LOADED.search(line.rstrip("\n")))
    time.sleep(delay_ms / 1000)
    child.send_signal(signal.SIGINT)
    out, rest = child.communicate(timeout=60)
    said = [x for x in (*lines, *rest.splitlines(keepends=True)) if not x.startswith("import time")]
    return child.returncode, out, "".join(said)


@pytest.mark.parametrize("delay_ms", [0, 5, 10, 20, 30, 50])
def test_ctrl_c_in_the_first_50_ms_is_exit_130_without_a_traceback(delay_ms: int) -> None:
    assert _start_and_interrupt(delay_ms) == (130, "", "\nerror: interrupted\n")


def test_an_interrupt_the_interpreter_wrapped_is_still_an_interrupt() -> None:
    """A Ctrl-C inside a class body's `__set_name__` (the stdlib's `platform` has one, imported
    on the way by `uuid`) comes out as RuntimeError caused by the KeyboardInterrupt."""
    from gpuplace.__main__ import _interrupt

    class Name:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    with pytest.raises(RuntimeError) as caught:
        type("Owner", (), {"field": Name()})
    assert _interrupt(caught.value)
    assert _interrupt(KeyboardInterrupt())
    assert not _interrupt(RuntimeError("a real error"))
    assert not _interrupt(ValueError())
