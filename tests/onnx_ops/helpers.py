"""Run one ONNX op through gpuplace's registry (attrs checked, shapes inferred, numpy compute),
and the same op through onnxruntime as a one-node model built with onnx.helper."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from textwrap import dedent
from typing import Any

import numpy as np
import pytest

from gpuplace.errors import BadInput
from gpuplace.graph import TensorSpec, get_op, loads


def ours(op_type: str, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any] | None = None,
         xp: Any = np) -> list[np.ndarray]:  # fmt: skip
    """The op's outputs; the inferred specs must match what the kernel returns."""
    op = get_op(op_type)
    checked = op.normalize("node", dict(attrs or {}))
    specs = op.infer("node", checked, tuple(TensorSpec(x.shape, x.dtype.name) for x in inputs))
    outs = op.compute(xp, list(inputs), checked)
    assert [(tuple(o.shape), o.dtype.name) for o in outs] == [(s.shape, s.dtype) for s in specs]
    return outs


def spec(op_type: str, shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any] | None = None,
         dtype: str = "float32") -> tuple[TensorSpec, ...]:  # fmt: skip
    op = get_op(op_type)
    checked = op.normalize("node", dict(attrs or {}))
    return op.infer("node", checked, tuple(TensorSpec(tuple(s), dtype) for s in shapes))


def flops(op_type: str, shapes: Sequence[tuple[int, ...]],
          attrs: Mapping[str, Any] | None = None) -> float:  # fmt: skip
    op = get_op(op_type)
    checked = op.normalize("node", dict(attrs or {}))
    ins = tuple(TensorSpec(tuple(s)) for s in shapes)
    assert op.flops is not None
    return op.flops(checked, ins, op.infer("node", checked, ins))


def onnxruntime_run(op_type: str, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any],
                    constants: Sequence[np.ndarray | None] = (), opset: int = 20,
                    outputs: int = 1) -> list[np.ndarray]:  # fmt: skip
    """onnxruntime's answer for a one-node model: `inputs` are graph inputs, `constants` are
    later inputs given as initializers (axes, ...; None leaves that input out)."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    names = [f"x{i}" for i in range(len(inputs))]
    graph_inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for n, x in zip(names, inputs, strict=True)
    ]
    inits, node_inputs = [], list(names)
    for i, c in enumerate(constants):
        if c is None:
            node_inputs.append("")
            continue
        inits.append(numpy_helper.from_array(c, f"c{i}"))
        node_inputs.append(f"c{i}")
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op_type, node_inputs, outs, **attrs)
    graph = helper.make_graph(
        [node], "one", graph_inputs,
        [helper.make_empty_tensor_value_info(o) for o in outs],
        initializer=inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return list(session.run(None, dict(zip(names, inputs, strict=True))))


def load_error(text: str) -> str:
    """The one-line BadInput that loading the spec `text` (as g.yaml) raises."""
    with pytest.raises(BadInput) as info:
        loads(dedent(text).lstrip("\n"), "g.yaml")
    return str(info.value)
