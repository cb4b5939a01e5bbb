"""Shared fixtures: run the CLI through its real entry point with an injected context."""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuplace.cli import AppContext, main
from tests.fakes.fake_libcuda import no_libcuda
from tests.fakes.fake_pynvml import FakeNvml


@dataclass
class Result:
    code: int
    out: str
    err: str


Run = Callable[..., Result]
# `devices --check` times its rates on small arrays (the defaults take seconds on a CPU)
SMALL_CHECK = {"GPUPLACE_CHECK_SIZES": "matmul=64,stream=64KiB"}


ROOT = Path(__file__).resolve().parents[1]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile gpuplace (and the tests' and benchmarks' helpers) to bytecode once, as an
    installed package is: hundreds of tests start `python -m gpuplace` or a benchmark, and
    where PYTHONDONTWRITEBYTECODE is set each of those processes would compile every module it
    imports again (about 0.25 s of CPU each). Once per run: in the controller, not per worker."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    for folder in ("gpuplace", "tests", "bench"):
        compileall.compile_dir(ROOT / folder, quiet=1)


def _compiled_core_runs() -> bool:
    """Whether this process runs any of gpuplace's compiled modules (gpuplace/compiled.py)."""
    from gpuplace.compiled import pure_requested, running

    return not pure_requested() and running()[0] > 0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test marked `pure_python` patches or counts what a compiled module does inside (a
    method of a class the build makes a C type, a list it reads in C): where the compiled core
    runs, it runs, unchanged, in a pytest of its own on the modules' Python source
    (GPUPLACE_PURE_PYTHON=1), and passes where that passes."""
    if pyfuncitem.get_closest_marker("pure_python") is None or not _compiled_core_runs():
        return None
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["GPUPLACE_PURE_PYTHON"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         pyfuncitem.nodeid],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"on the Python source:\n{proc.stdout[-6000:]}{proc.stderr[-2000:]}"
    )
    return True


@pytest.fixture(autouse=True)
def _installed_from_an_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Install hints read as for a pip user (`pip install 'gpuplace[cuda12]'`), not for the
    checkout the suite runs from; tests/test_install_hint.py covers the checkout case."""
    from gpuplace.devices import cuda_match

    monkeypatch.setattr(cuda_match, "installed_from", lambda: (None, False))


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """run(*args, env={...}, nvml=FakeNvml(...)) -> Result; never a real driver (nor libcuda:
    `order_probe=` a fake from tests/fakes/fake_libcuda.py), never a TTY."""

    def _run(*args: str, env: dict[str, str] | None = None, nvml: FakeNvml | None = None,
             **kw: object) -> Result:  # fmt: skip
        fake = nvml or FakeNvml(init_error=__import__("pynvml").NVMLError_LibraryNotFound)
        kw.setdefault("order_probe", no_libcuda)
        app = AppContext(env=env or {}, nvml_loader=lambda: fake, is_terminal=False, **kw)  # type: ignore[arg-type]
        code = main(list(args), app)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return _run


def write_spec(tmp_path: Path, text: str, name: str = "g.yaml") -> str:
    """Write a graph spec into tmp_path and return its path."""
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def on_k520(run: Run, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of gpuplace on the simulated machine 4xK520."""
    result = run("--machine", "4xK520", *args)
    return result.code, result.out, result.err
