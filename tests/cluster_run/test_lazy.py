"""Dask is the `cluster` extra's and is imported only when a command works on a cluster:
`devices` and a run on one host never load it (their start-up goals stand)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TINY = """\
graph:
  - {name: a, op: constant, value: 1.0, shape: [2, 2]}
  - {name: b, op: relu, inputs: [a], device: /gpu:0}
"""


@pytest.mark.parametrize("argv", [["devices", "--json"], ["run", "SPEC"], ["plan", "SPEC"]])
def test_commands_on_one_host_never_import_dask(tmp_path: Path, argv: list[str]) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY)
    argv = [str(spec) if a == "SPEC" else a for a in argv]
    code = (
        "import sys\nfrom gpuplace.cli import main\n"
        f"rc = main(['--machine', '2xK520', *{argv!r}])\n"
        "print(sorted(m for m in ('dask', 'distributed', 'tornado') if m in sys.modules), "
        "file=sys.stderr)\nsys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "[]"


def test_a_cluster_run_without_the_extra_is_one_line_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY)
    code = (
        "import sys\nsys.modules['distributed'] = None  # as if not installed\n"
        "from gpuplace.cli import main\n"
        f"sys.exit(main(['--machine', '2x(1xK520)', 'run', {str(spec)!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: running across hosts needs Dask distributed, which is not installed; "
        "pip install 'gpuplace[cluster]'\n"
    )
