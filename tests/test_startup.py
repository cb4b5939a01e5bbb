"""Start-up of a small command (issue 17: `run`/`plan` of 3 ops within 1.5x `import numpy, yaml`;
bench/bench_startup.py measures it): what it must not import, and what skips the teardown.
No timing here: the modules loaded are what a test can pin."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.devices.simulated import sim_uuid

TINY = """\
graph:
  - {name: a, op: constant, value: 1.0, shape: [2, 2]}
  - {name: b, op: relu, inputs: [a]}
  - {name: c, op: add, inputs: [a, b]}
"""
# What a small run or plan has no use for: the other commands' modules, rich (no terminal),
# OpenSSL's hashlib (a simulated GPU's UUID), traceback (only for a failure or --debug), difflib
# (only for a "did you mean"), subprocess (only for the libcuda probe of a real machine), the
# device map's module (only for --device-map), training memory (only for a training step).
NOT_LOADED = ("gpuplace.cli.devices", "gpuplace.cli.mem", "rich", "_hashlib", "traceback", "cupy",
              "difflib", "subprocess", "gpuplace.placement.devmap", "gpuplace.memory.training")  # fmt: skip
# ...nor a JSON spec PyYAML, nor a run the plan's estimate.
NOT_FOR_JSON = ("yaml", "gpuplace.yaml_text")
NOT_FOR_RUN = (
    "gpuplace.placement.estimate",
    "gpuplace.placement.baselines",
)
# ...nor a plan the executor (it runs nothing).
NOT_FOR_PLAN = ("gpuplace.execute.executor",)


@pytest.mark.parametrize("command", ["run", "plan"])
@pytest.mark.parametrize("kind", ["yaml", "json"])
def test_a_small_command_loads_only_what_it_uses(tmp_path: Path, command: str, kind: str) -> None:
    spec = tmp_path / f"tiny.{kind}"
    spec.write_text(TINY if kind == "yaml" else json.dumps(yaml.safe_load(TINY)))
    unused = NOT_LOADED + (NOT_FOR_JSON if kind == "json" else ()) + (NOT_FOR_RUN if command == "run" else NOT_FOR_PLAN)  # fmt: skip
    loaded = f"[m for m in {unused!r} if m in sys.modules]"
    assert _after(command, spec, loaded) == []


# The dataclasses a small run or plan may build at import: each runs its generated methods
# through `exec` then (a frozen one ~4M instructions, as much as a module), so the records made
# at start-up are NamedTuples or plain classes instead. These stay dataclasses: the graph's and
# the placer's per-op records (tuned for their hot loops), those with mutable defaults,
# `__post_init__`, a field no comparison sees or a field named `index` (a tuple's method).
DATACLASSES = {
    "gpuplace.cli.context.AppContext", "gpuplace.devices.model.LogicalGpu",
    "gpuplace.devices.model.MigInstance", "gpuplace.devices.model.View",
    "gpuplace.graph.model.Config",
    "gpuplace.graph.model.Graph", "gpuplace.graph.model.Op", "gpuplace.graph.model.TensorRef",
    "gpuplace.graph.model.TensorSpec", "gpuplace.graph.model.Wiring",
    "gpuplace.graph.opdef.OpDef", "gpuplace.options.Options",
    "gpuplace.placement.candidates.LocalDevice", "gpuplace.placement.flat.Flat",
    "gpuplace.placement.model.Decision",
    "gpuplace.placement.model.Placement", "gpuplace.placement.timeline.Slot",
    "gpuplace.results.Prepared",
}  # fmt: skip


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_small_command_builds_no_new_dataclass_at_import(tmp_path: Path, command: str) -> None:
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps(yaml.safe_load(TINY)))
    made = (
        "sorted(f'{v.__module__}.{v.__qualname__}' for n, m in list(sys.modules.items())"
        " if n.startswith('gpuplace') for v in vars(m).values()"
        " if isinstance(v, type) and v.__module__ == n and '__dataclass_fields__' in vars(v))"
    )
    assert set(_after(command, spec, made, "--json")) - DATACLASSES == set()


def _after(command: str, spec: Path, expression: str, *flags: str) -> Any:
    """The value of `expression` (Python, `sys` imported) once `gpuplace --machine 4xK520
    COMMAND SPEC FLAGS` has run in a fresh interpreter; the command must succeed."""
    argv = ["--machine", "4xK520", command, str(spec), *flags]
    code = (
        f"import sys\nfrom gpuplace.cli import main\nrc = main({argv!r})\n"
        f"print(repr({expression}), file=sys.stderr)\nsys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stderr)


def test_the_console_script_exits_with_the_code_and_every_byte_written(tmp_path: Path) -> None:
    """Without teardown (nothing registered at exit), stdout and stderr still arrive whole."""
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY)
    cmd = [sys.executable, "-m", "gpuplace", "--machine", "4xK520"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    ok = subprocess.run([*cmd, "plan", str(spec), "--json"], capture_output=True, text=True, env=env, check=False)  # fmt: skip
    assert ok.returncode == 0 and ok.stdout.endswith("\n}\n") and ok.stderr == ""
    bad = subprocess.run([*cmd, "run", str(tmp_path / "none.yaml")], capture_output=True, text=True, env=env, check=False)  # fmt: skip
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("error: cannot read spec") and bad.stderr.endswith("\n")


@given(st.integers(0, 4096), st.text(max_size=40))
def test_a_simulated_uuid_is_uuid5_of_its_position_and_product(position: int, product: str) -> None:
    name = f"gpuplace-sim/{position}/{product}"
    assert sim_uuid(position, product) == f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, name)}"


def test_the_command_line_shortens_openblas_idle_spin_unless_the_user_set_it() -> None:
    from gpuplace.__main__ import quiet_blas

    environ: dict[str, str] = {}
    quiet_blas(environ)
    assert environ == {"OPENBLAS_THREAD_TIMEOUT": "20"}
    mine = {"OPENBLAS_THREAD_TIMEOUT": "28"}
    quiet_blas(mine)
    assert mine == {"OPENBLAS_THREAD_TIMEOUT": "28"}
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    code = (
        "import atexit, os, sys\n"
        "sys.argv = ['gpuplace', '--machine', '4xK520', 'devices', '--json']\n"
        "atexit.register(lambda: print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), file=sys.stderr))\n"
        "from gpuplace.__main__ import entry\n"
        "entry()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=False, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "20"
