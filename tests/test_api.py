"""The library API: lazy, cheap to import, and enough to do what the CLI does."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gpuplace


def test_import_is_cheap() -> None:
    code = "import sys, gpuplace; sys.exit(1 if {'numpy', 'cupy', 'yaml', 'click'} & set(sys.modules) else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_end_to_end_through_the_api() -> None:
    seen = gpuplace.view(gpuplace.discover("4xK20m"), {})
    graph = gpuplace.load("examples/guide/04_multi_tower.yaml")
    placement = gpuplace.place(graph, len(seen.gpus))
    assert placement.decisions["AddN"].device.endswith("CPU:0")
    prepared = gpuplace.prepare("examples/guide/04_multi_tower.yaml", seen, gpuplace.Options(), {})
    outcome = gpuplace.execute_prepared(prepared, seen)
    assert outcome.result.values["AddN"].tolist() == [[44.0, 56.0], [98.0, 128.0]]
    assert sorted(gpuplace.__all__) == gpuplace.__all__ and "place" in gpuplace.__all__


def test_unknown_attribute() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gpuplace.nope  # noqa: B018
