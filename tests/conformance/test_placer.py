"""TensorFlow 2.21's placer heuristics, replayed from real TensorFlow.

`tests/conformance/data/placer.json` was written by `tools/tf_capture/placer.py`: each case is
a gpuplace graph that the script built with tf.compat.v1 ops and ran in a TF 2.21 (CPU build)
session with three CPU devices and log_device_placement, keeping where TF put every op.

Mapping: the rules checked here (`MatchIdentityOperation`, generators following their
consumers, colocation) compare requested devices and never look at a device's type, and a
CPU-only TF process cannot have GPUs, so TF's CPU:k stands for gpuplace's GPU:k: the capture
wrote `/cpu:k` for each `/gpu:k` of the case, and GPU:k here is TF's CPU:k. On both sides
device 0 is the highest-priority device, where an op with no better reason goes. gpuplace runs
each case on a machine with three GPUs; CPU:0, which the mapped TF run does not have, has no
say (every op in these cases has a GPU kernel, and none requests the CPU).
"""

from __future__ import annotations

import json
import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpuplace.graph import loads
from gpuplace.placement import place
from tests.conftest import Run

DATA = Path(__file__).parent / "data" / "placer.json"
DOC = Path(__file__).resolve().parents[2] / "docs" / "placement-rules.md"


@cache
def document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


CASES = [pytest.param(case, id=case["name"]) for case in document()["cases"]]


def placed(case: dict[str, Any]) -> dict[str, str]:
    spec = json.dumps({"graph": case["graph"], "fetch": case["fetch"]})
    graph = loads(spec, f"{case['name']}.json")
    decisions = place(graph, 3, allow_soft_placement=case["soft"]).decisions
    return {name: d.device.rsplit("/device:", 1)[1] for name, d in decisions.items()}


def test_captured_from_tensorflow_2_21() -> None:
    assert document()["tensorflow"] == "2.21.0"
    assert all("placed" in case for case in document()["cases"])
    identity = [c for c in document()["cases"] if "identity" in c["name"]]
    assert len(identity) >= 25
    # the rule decided somewhere: an Identity away from the default device, by its input
    assert any(c["placed"].get("i") not in (None, "GPU:0") for c in identity)


@pytest.mark.parametrize("case", CASES)
def test_placed_as_tensorflow_placed(case: dict[str, Any]) -> None:
    assert placed(case) == case["placed"], case["why"]


def test_the_docs_example_prints_what_the_docs_show(run: Run, tmp_path: Path) -> None:
    """docs/placement-rules.md's spec, run with the command it shows, prints what it shows."""
    doc = DOC.read_text(encoding="utf-8")
    spec = re.search(r"```yaml file=identity.yaml\n(.*?)```", doc, re.S)
    shown = re.search(r"```console\n\$ (gpuplace .*?)\n(.*?)```", doc, re.S)
    assert spec is not None and shown is not None
    (tmp_path / "identity.yaml").write_text(spec.group(1))
    args = shlex.split(shown.group(1))[1:]
    args[args.index("identity.yaml")] = str(tmp_path / "identity.yaml")
    result = run(*args)
    assert (result.code, result.err) == (0, "")
    assert result.out == shown.group(2)
