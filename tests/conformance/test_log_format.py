"""The placement log against real TensorFlow: `--log-format tensorflow` prints TF 2.21's lines
byte for byte, in its placer's order (captured by tools/tf_capture/capture.py from the CPU
build: `name: (Type): device` on stdout, consumers first, then the generators its second pass
places). The default stays the guide's `name: device` lines in graph order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuplace.graph import loads
from gpuplace.placement import place
from gpuplace.report.run import device_mapping, placement_log
from tests.conftest import Run, write_spec

ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((Path(__file__).parent / "data" / "log.json").read_text())
CASES = DATA["cases"]


def test_the_data_comes_from_tensorflow() -> None:
    assert DATA["tensorflow"].startswith("2.21") and DATA["build"] == "cpu"
    assert len(CASES) >= 60 and not any("error" in c for c in CASES)
    assert {c["mapping"] for c in CASES} == {"Device mapping: no known devices."}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_tensorflow_log_lines_byte_for_byte(case: dict[str, Any]) -> None:
    graph = loads(json.dumps(case["spec"]), f"{case['id']}.json")
    placement = place(graph, 0, allow_soft_placement=case["soft"])  # the CPU build: no GPU
    assert placement_log(graph, placement, "tensorflow") == "\n".join(case["log"])
    assert device_mapping(()) == case["mapping"]


GUIDE = [c for c in CASES if c["id"].startswith("guide/")]


@pytest.mark.parametrize("case", GUIDE, ids=[c["id"] for c in GUIDE])
def test_run_prints_tensorflows_lines_for_the_guide(run: Run, case: dict[str, Any]) -> None:
    """The whole command on a machine without a GPU, as the CPU build ran them."""
    path = str(ROOT / "examples" / case["id"])
    result = run("run", path, "--log-format", "tensorflow", "--allow-soft-placement")
    assert result.code == 0, result.err
    head = result.out.splitlines()[: 1 + len(case["log"])]
    assert head == [case["mapping"], *case["log"]]


def test_the_default_stays_the_guides_lines(run: Run) -> None:
    result = run("--machine", "1xK40c", "run", str(ROOT / "examples/guide/01_log_placement.yaml"))
    assert result.out.splitlines()[2:5] == [
        "a: /job:localhost/replica:0/task:0/device:GPU:0",
        "b: /job:localhost/replica:0/task:0/device:GPU:0",
        "MatMul: /job:localhost/replica:0/task:0/device:GPU:0",
    ]


GPU_LOG = """\
Device mapping:
/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: Tesla K20m, pci bus id: 0000:02:00.0, compute capability: 3.5 [simulated]
/job:localhost/replica:0/task:0/device:GPU:1 -> device: 1, name: Tesla K20m, pci bus id: 0000:03:00.0, compute capability: 3.5 [simulated]
/job:localhost/replica:0/task:0/device:GPU:2 -> device: 2, name: Tesla K20m, pci bus id: 0000:83:00.0, compute capability: 3.5 [simulated]
/job:localhost/replica:0/task:0/device:GPU:3 -> device: 3, name: Tesla K20m, pci bus id: 0000:84:00.0, compute capability: 3.5 [simulated]
MatMul: (MatMul): /job:localhost/replica:0/task:0/device:GPU:2
MatMul_1: (MatMul): /job:localhost/replica:0/task:0/device:GPU:3
AddN: (AddN): /job:localhost/replica:0/task:0/device:CPU:0
Const: (Const): /job:localhost/replica:0/task:0/device:GPU:2
Const_1: (Const): /job:localhost/replica:0/task:0/device:GPU:2
Const_2: (Const): /job:localhost/replica:0/task:0/device:GPU:3
Const_3: (Const): /job:localhost/replica:0/task:0/device:GPU:3
AddN:
[[ 44.  56.]
 [ 98. 128.]]
"""


def test_tensorflow_format_on_simulated_gpus(run: Run) -> None:
    """Simulated GPUs keep their mark in the mapping; the placement lines are TF's."""
    path = str(ROOT / "examples/guide/04_multi_tower.yaml")
    result = run("--machine", "4xK20m", "run", path, "--log-format", "tensorflow")
    assert (result.code, result.out) == (0, GPU_LOG)


SPEC = """\
config: {log_format: tensorflow}
graph:
  - {name: a, op: constant, value: [1.0]}
  - {op: neg, inputs: [a]}
"""


def test_config_log_format_and_the_flags_over_it(run: Run, tmp_path: Path) -> None:
    path = write_spec(tmp_path, SPEC)
    cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    # log_device_placement is off: no log, as TF; --log-placement prints it in TF's format
    assert "Neg: (Neg)" not in run("run", path).out
    assert run("run", path, "--log-placement").out.splitlines()[1:3] == [
        f"Neg: (Neg): {cpu}",
        f"a: (Const): {cpu}",
    ]
    # --log-format picks the format and asks for the log; --no-log-placement still wins
    assert run("run", path, "--log-format", "guide").out.splitlines()[1:3] == [
        f"a: {cpu}",
        f"Neg: {cpu}",
    ]
    quiet = run("run", path, "--log-format", "guide", "--no-log-placement")
    assert quiet.out == "Neg:\n[-1.]\n"


def test_a_bad_log_format_in_config_names_the_choices(run: Run, tmp_path: Path) -> None:
    path = write_spec(tmp_path, "config: {log_format: tf1}\n" + SPEC.split("\n", 1)[1])
    result = run("run", path)
    assert result.code == 2
    assert result.err == (
        f"error: {path}:1: config.log_format: 'tf1' is not a log format; use guide (the guide's "
        "`a: /job:...` lines, the default) or tensorflow (TensorFlow 2.x's exact "
        "`a: (Const): /job:...` lines, in its order)\n"
    )


def test_the_flags_choices_are_the_log_formats() -> None:
    from gpuplace.cli.run import run as command
    from gpuplace.graph.model import LOG_FORMATS

    flag = next(p for p in command.params if p.name == "log_format")
    assert tuple(flag.type.choices) == LOG_FORMATS  # type: ignore[attr-defined]


def test_the_docs_count_of_conformance_cases() -> None:
    """docs/run.md says how many specs were checked (its example runs in tests/test_docs.py)."""
    text = " ".join((ROOT / "docs" / "run.md").read_text(encoding="utf-8").split())
    others = len(CASES) - len(GUIDE)
    assert f"the guide's four examples and of {others} more specs" in text
