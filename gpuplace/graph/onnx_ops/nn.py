"""ONNX operators for MLPs, CNNs and transformer math (see the package docstring): `dense.py`
(MatMul, Gemm, elementwise math, activations, Softmax), ..."""

from __future__ import annotations

from ..opdef import OpDef
from . import dense

OPS: tuple[OpDef, ...] = (*dense.OPS,)
