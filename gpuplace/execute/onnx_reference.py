"""`run --verify` on an imported ONNX model: the same inputs through onnxruntime, an independent
implementation of the model, when it is installed. The only module that imports onnxruntime."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import RuntimeFailure
from ..graph.model import Graph
from .verify import Verified, compare


def onnxruntime_checks(graph: Graph, values: Mapping[str, Any]) -> list[Verified]:
    """Each fetch of an imported model (`values`, by ONNX output name) against onnxruntime's
    CPU run of the same file with the same feeds; [] when onnxruntime is not installed or the
    graph was not imported from ONNX."""
    if graph.onnx_model is None:
        return []
    try:
        import onnxruntime
    except ImportError:
        return []
    feeds = {
        op.name: np.asarray(op.attrs["value"])
        for op in graph.ops
        if op.type == "placeholder" and "value" in op.attrs
    }
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: its warnings are not gpuplace's to print
    try:
        session = onnxruntime.InferenceSession(
            graph.onnx_model, options, providers=["CPUExecutionProvider"]
        )
        names = [o.name for o in session.get_outputs()]
        wanted = [n for n in names if n in values]
        got = session.run(wanted, {i.name: feeds[i.name] for i in session.get_inputs()})
    except Exception as err:  # onnxruntime's own errors (Fail, InvalidArgument, ...)
        raise RuntimeFailure(
            f"--verify: onnxruntime cannot run {graph.onnx_model}: {err}"
        ) from None
    against = f"onnxruntime {onnxruntime.__version__}"
    return [
        compare(name, values[name], ref, against) for name, ref in zip(wanted, got, strict=True)
    ]
