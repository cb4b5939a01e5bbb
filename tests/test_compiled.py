"""The compiled core (gpuplace/compiled.py, setup.py): in a source tree every listed module is
built and newer than its source, `--version` says what runs, `GPUPLACE_PURE_PYTHON=1` runs the
source, and the compiled modules print exactly what their Python source prints."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from gpuplace.compiled import COMPILED, PURE_ENV, pure_requested, source

ROOT = Path(__file__).resolve().parents[1]
needs_build = pytest.mark.skipif(
    pure_requested() or shutil.which(os.environ.get("CC", "cc")) is None,
    reason=f"no C compiler (the build installs the core as Python) or {PURE_ENV} is set",
)


def gpuplace(*args: str, pure: bool, module: bool = True) -> subprocess.CompletedProcess[str]:
    """`python -m ARGS` (`python ARGS` unless `module`), with or without PURE_ENV set."""
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if pure:
        env[PURE_ENV] = "1"
    return subprocess.run([sys.executable, *(["-m"] if module else []), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600, check=False)  # fmt: skip


@needs_build
def test_every_compiled_module_is_built_and_newer_than_its_source() -> None:
    for name in COMPILED:
        spec = find_spec(name)
        assert spec is not None and spec.origin is not None
        built = Path(spec.origin)
        assert built.suffix == ".so", f"{name} runs as Python: run `make build`"
        for dep in (ROOT / source(name), (ROOT / source(name)).with_suffix(".pxd")):
            if dep.exists():
                assert built.stat().st_mtime >= dep.stat().st_mtime, (
                    f"{built.name} is older than {dep.name}: run `make build`"
                )


def test_no_module_outside_the_list_loads_a_build() -> None:
    """A module taken off COMPILED must not go on loading an old build (`make build` removes
    those)."""
    listed = {source(name)[: -len(".py")] for name in COMPILED}
    stale = [p for p in (ROOT / "gpuplace").rglob("*.so")
             if p.relative_to(ROOT).as_posix().split(".", 1)[0] not in listed]  # fmt: skip
    assert not stale, f"builds of modules no longer compiled: {stale}; run `make build`"


@needs_build
def test_version_says_whether_the_compiled_core_runs() -> None:
    on, off = (
        gpuplace("gpuplace", "--version", pure=False),
        gpuplace("gpuplace", "--version", pure=True),
    )
    assert (on.returncode, off.returncode) == (0, 0)
    assert on.stdout == (
        f"gpuplace, version 0.1.0\ncompiled core: on ({len(COMPILED)} modules compiled with Cython)\n"
    )
    assert off.stdout == (
        f"gpuplace, version 0.1.0\ncompiled core: off ({PURE_ENV}=1: running them as Python)\n"
    )


def test_the_pure_python_switch_loads_every_compiled_module_from_its_source() -> None:
    code = "import importlib, gpuplace.compiled as c; print(*[importlib.import_module(n).__file__ for n in c.COMPILED])"
    files = gpuplace("-c", code, pure=True, module=False)
    assert files.returncode == 0, files.stderr
    assert [Path(f).relative_to(ROOT).as_posix() for f in files.stdout.split()] == [
        source(name) for name in COMPILED
    ]


def test_coverage_omits_exactly_the_compiled_modules() -> None:
    """coverage.py cannot trace compiled code: pyproject.toml omits those modules from the report
    (this file's last test runs them as Python against the compiled build instead)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert sorted(config["tool"]["coverage"]["run"]["omit"]) == sorted(map(source, COMPILED))


@needs_build
@pytest.mark.slow
def test_compiled_and_python_source_print_the_same(tmp_path: Path) -> None:
    """plan (TF's, balanced, tight memory, an ONNX model) and run of every example spec and of
    random DAGs with prints, variables and fan-ins: the same exit codes, documents and messages,
    but for the run's measured seconds."""
    outputs = []
    for pure in (False, True):
        folder = tmp_path / str(pure)
        folder.mkdir()
        probe = gpuplace("tests.compiled_probe", str(folder), pure=pure)
        assert probe.returncode == 0, probe.stderr
        runs = json.loads(probe.stdout.replace(str(folder), "FOLDER"))
        for one in runs:  # a copy's measured seconds
            one[2] = re.sub(r'"seconds": [-+0-9.e]+', '"seconds": 0', one[2])
        outputs.append(runs)
    compiled, pure = outputs
    assert len(compiled) == len(pure) > 60
    assert sum(code == 0 for _, code, _, _ in compiled) > 50
    for one, other in zip(compiled, pure, strict=True):
        assert one == other, f"gpuplace {' '.join(one[0])}: the compiled core differs"


def test_version_quotes_a_hostile_switch_value_on_one_bounded_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    for value, shown in (("a\nb", "'a\\nb'"), ("x" * 100_000, "x" * 197 + "...")):
        out = subprocess.run([sys.executable, "-m", "gpuplace", "--version"], capture_output=True,
                             text=True, env={**env, PURE_ENV: value}, cwd=ROOT, check=False)  # fmt: skip
        assert (out.returncode, out.stderr) == (0, "")
        assert out.stdout.splitlines()[1] == (
            f"compiled core: off ({PURE_ENV}={shown}: running them as Python)"
        )
