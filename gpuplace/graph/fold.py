"""Evaluate one registry op on constant numpy inputs: what the ONNX importer uses to fold shape
subgraphs (Shape -> Gather -> Concat -> Reshape) once dimensions are bound.

`evaluate("Gather", [np.array([2, 3, 4]), np.array(0)], {"axis": 0})` -> `[array(2)]`. The attrs
are checked and the shape rule runs first, so bad input is the same BadInput, naming the op, that
the loader gives; the values are the op's own compute run with numpy, in the dtypes the shape
rule says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import BadInput
from .model import DTYPES, TensorSpec
from .ops import get_op


def evaluate(
    op_type: str, inputs: Sequence[Any], attrs: Mapping[str, Any], name: str = ""
) -> list[Any]:
    """The outputs of op `op_type` (a registry name) on `inputs` (numpy arrays or values)."""
    import numpy as np

    opdef = get_op(op_type)
    label = name or op_type
    arrays = [np.asarray(x) for x in inputs]
    high = opdef.max_inputs
    if not opdef.min_inputs <= len(arrays) <= (len(arrays) if high is None else high):
        most = "any number of" if high is None else f"at most {high}"
        raise BadInput(
            f"op '{label}' ({op_type}) takes at least {opdef.min_inputs} and {most} inputs, "
            f"got {len(arrays)}"
        )
    for i, x in enumerate(arrays):
        if x.dtype.name not in DTYPES:
            raise BadInput(
                f"op '{label}' ({op_type}): input {i} is {x.dtype.name}; supported: "
                f"{', '.join(DTYPES)}"
            )
    checked = opdef.normalize(label, attrs)
    specs = opdef.infer(label, checked, tuple(TensorSpec(x.shape, x.dtype.name) for x in arrays))
    values = opdef.compute(np, arrays, checked)
    return [np.asarray(v, dtype=s.dtype) for v, s in zip(values, specs, strict=True)]
