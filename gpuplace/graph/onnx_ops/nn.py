"""ONNX operators for MLPs, CNNs and transformer math (see the package docstring): `dense.py`
(MatMul, Gemm, elementwise math, activations, Softmax), `conv.py` (Conv, pools,
BatchNormalization), `norm.py` (LayerNormalization, ReduceMean/Sum/Max, Flatten)."""

from __future__ import annotations

from ..opdef import OpDef
from . import conv, dense, norm

OPS: tuple[OpDef, ...] = (*dense.OPS, *conv.OPS, *norm.OPS)
