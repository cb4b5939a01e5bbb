"""Hostile inputs, ONNX models (graph/onnx_import.py): files that are not models, cut short, lie
about their sizes, or are not files at all; each is one error line and exit 2."""

from __future__ import annotations

from onnx import TensorProto

from tests.hostile.cases import SIM, Case, Link
from tests.onnx.models import mlp

GOOD = mlp().SerializeToString()


def _huge_initializer() -> bytes:
    m = mlp()
    m.graph.initializer[0].dims[:] = [2**40, 2**40]  # 2**80 elements declared over 32 floats
    return m.SerializeToString()


def _external() -> bytes:
    m = mlp()
    w = m.graph.initializer[0]
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="../../../etc/passwd")
    w.ClearField("raw_data")
    return m.SerializeToString()


DIM = ("--dim", "batch=2")
CASES = [
    Case("onnx-truncated", "exit", (*SIM, "run", "m.onnx", *DIM), 2, r"m\.onnx.*truncated",
         {"m.onnx": GOOD[: len(GOOD) // 3]}),
    Case("onnx-wrong-magic", "exit", (*SIM, "plan", "m.onnx"), 2, r"m\.onnx: not an ONNX model",
         {"m.onnx": b"\x89PNG\r\n\x1a\n" + GOOD}),
    Case("onnx-empty", "exit", (*SIM, "mem", "m.onnx"), 2, r"m\.onnx: not an ONNX model",
         {"m.onnx": b""}),
    Case("onnx-dev-zero", "memory", (*SIM, "plan", "m.onnx"), 2, r"m\.onnx.*device",
         {"m.onnx": Link("/dev/zero")}),
    Case("onnx-over-size-limit", "memory", (*SIM, "plan", "m.onnx", *DIM), 2,
         r"more than.*GPUPLACE_MAX_SPEC_SIZE", {"m.onnx": GOOD},
         env={"GPUPLACE_MAX_SPEC_SIZE": "100"}),
    Case("onnx-huge-declared-initializer", "memory", (*SIM, "run", "m.onnx", *DIM), 2,
         r"fc1\.weight.*declares shape", {"m.onnx": _huge_initializer()}),
    Case("onnx-external-data", "files", (*SIM, "run", "m.onnx", *DIM), 2,
         r"fc1\.weight.*external file", {"m.onnx": _external()}),
    Case("onnx-huge-dim", "memory", (*SIM, "run", "m.onnx", "--dim", f"batch={10**18}"), (1, 2),
         r"batch|larger|TiB|EiB", {"m.onnx": GOOD}),
]  # fmt: skip
