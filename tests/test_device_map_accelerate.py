"""docs/device-map.md's Python snippet runs: Accelerate takes gpuplace's device map of
`branches.onnx` for the PyTorch model it was exported from (every parameter under a key), and
the dispatched model computes what the plain one does.

It needs a Python with torch and accelerate (neither is a gpuplace dependency): this one when it
has them, else the one GPUPLACE_TORCH_PYTHON names (e.g. a venv with `pip install torch
accelerate onnx`); otherwise it is skipped, saying so. On a machine without the map's GPUs,
each GPU index is replaced by "cpu" before the snippet reads the map.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "device-map.md"
SNIPPET = re.compile(
    r"<!-- run-by: tests/test_device_map_accelerate.py -->\n```python\n(.*?)```", re.S
)

HARNESS = """\
import json, sys
import torch
sys.path.insert(0, {tools!r})
import make_onnx_examples

torch.manual_seed(0)
model = make_onnx_examples._models()["branches"][0].eval()
x = torch.randn(4, 16)
with torch.no_grad():
    want = model(x)
with open("map.json") as f:
    doc = json.load(f)
gpus = torch.cuda.device_count()
if any(isinstance(v, int) and v >= gpus for v in doc["device_map"].values()):
    doc["device_map"] = {{k: "cpu" for k in doc["device_map"]}}
    with open("map.json", "w") as f:
        json.dump(doc, f)
{snippet}
with torch.no_grad():
    got = model(x.to(next(model.parameters()).device))
assert torch.allclose(got.cpu(), want, atol=1e-6), (got, want)
print("dispatched", len(device_map), "keys")
"""


def _torch_python() -> str | None:
    candidates = [sys.executable, os.environ.get("GPUPLACE_TORCH_PYTHON", "")]
    for python in filter(None, candidates):
        probe = [python, "-c", "import torch, accelerate"]
        if subprocess.run(probe, capture_output=True, check=False, timeout=120).returncode == 0:
            return python
    return None


def test_the_snippet_is_in_the_docs() -> None:
    (snippet,) = SNIPPET.findall(DOC.read_text(encoding="utf-8"))
    assert 'device_map = json.load(f)["device_map"]' in snippet


@pytest.mark.slow
def test_accelerate_takes_the_device_map(run: Run, tmp_path: Path) -> None:
    python = _torch_python()
    if python is None:
        pytest.skip("no Python with torch and accelerate (set GPUPLACE_TORCH_PYTHON to one)")
    out = tmp_path / "map.json"
    model = str(ROOT / "gpuplace" / "examples" / "onnx" / "branches.onnx")
    result = run("--machine", "4xK520", "plan", model, "--dim", "batch=262144",
                 "--strategy", "balanced", "--format", "device-map", "-o", str(out))  # fmt: skip
    assert result.code == 0, result.err
    assert len(set(json.loads(out.read_text())["device_map"].values())) == 4
    (snippet,) = SNIPPET.findall(DOC.read_text(encoding="utf-8"))
    script = HARNESS.format(tools=str(ROOT / "tools"), snippet=textwrap.dedent(snippet))
    done = subprocess.run(
        [python, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "dispatched 16 keys"
