"""ONNX operators for MLPs, CNNs and transformer math (see the package docstring)."""

from __future__ import annotations

from ..opdef import OpDef

OPS: tuple[OpDef, ...] = ()
