"""ONNX models in: a `.onnx` file (a protobuf ModelProto) -> the same `Graph` a spec loads to.

The only module that imports `onnx` (lazily: without it, one line naming the extra). Bounded
before anything is parsed: the file's bytes against `limits.spec_bytes`, its node count
against `limits.ops`. Then, in the graph's own order (ONNX graphs are topologically sorted):

- each graph input that is not an initializer becomes a `placeholder` named after it, its
  symbolic dims bound by `dims` (`--dim batch=32`; an unbound one is refused, listing them all);
- each initializer becomes a resident `variable` holding the tensor's own array (no copy when the
  tensor's bytes are raw), made when a node first reads it as data;
- each node becomes the registry op of its ONNX type (`graph/ops.py`: `Gemm`, `Reshape`, ...),
  named by its ONNX name (unnamed: `<OpType>_<index>`; made unique as TensorFlow would), its
  PyTorch module path (`/encoder/layer.0/attn/MatMul` -> `encoder.layer.0.attn`) on `Op.module`;
- inputs whose values decide shapes (Reshape's `shape`, Slice's `starts`, ...) become attrs
  (`SHAPE_INPUTS`); nodes whose inputs are all known and small (Constant, Shape of a bound
  input, the Gather/Concat/Range that follow) are computed here with the ops' own numpy compute
  and folded away;
- shapes and dtypes come from gpuplace's own inference and are checked against ONNX's shape
  inference, node by node; a disagreement names the node;
- an op gpuplace lacks becomes an `Opaque` op with the shapes ONNX infers (plan estimates it;
  run refuses it), or is refused naming the node and the supported ops when they are unknown;
- the graph outputs are fetched under their ONNX names (an `identity` op carries the name when
  the node that makes the tensor is named otherwise).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from ..echo import clip_middle
from ..errors import BadInput
from ..gc_pause import gc_paused
from ..limits import SPEC_SIZE_ENV, Limits, read_bytes
from .model import Config, Graph
from .onnx_graph import Importer, supported_ops

EXTRA = "pip install 'gpuplace[onnx]'"


def onnx_module() -> ModuleType:
    """`import onnx`, or BadInput naming the extra that installs it."""
    needs = f"reading an ONNX model needs the onnx extra: {EXTRA}"
    try:
        import onnx
    except ImportError:
        raise BadInput(needs) from None
    if onnx is None:  # compiled by Cython, `import onnx` gives None where sys.modules["onnx"]
        raise BadInput(needs)  # is None (how a test hides the extra), not ImportError
    return onnx


def looks_like_onnx(head: bytes) -> bool:
    """Whether bytes start like a serialized ModelProto: field 1 (ir_version, a varint) first,
    as every writer emits it; a YAML or JSON spec never starts with byte 0x08."""
    return len(head) >= 2 and head[0] == 0x08 and 1 <= head[1] <= 0x7F


def is_onnx_path(path: str | os.PathLike[str]) -> bool:
    """A file gpuplace reads as an ONNX model: named `.onnx`, or a regular file starting like
    one (a FIFO or device is never opened here: the spec reader refuses or bounds it)."""
    if os.fspath(path).lower().endswith(".onnx"):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return looks_like_onnx(f.read(2))
    except (OSError, ValueError):
        return False


def load_onnx(
    path: str | os.PathLike[str],
    *,
    dims: Mapping[str, int] | None = None,
    devices: Mapping[str, str] | None = None,
    config: Config | None = None,
    limits: Limits | None = None,
    source: str | None = None,
    data: bytes | None = None,
) -> Graph:
    """Read the ONNX model at `path` (bounded) and import it; `dims` binds symbolic dims,
    `devices` pins ops by name or module prefix (`Placer`), `config` is the wrapper's. `data`:
    the file's bytes, read already (a pipe can be read only once)."""
    limits = limits or Limits()
    name = clip_middle(os.fspath(path))
    hint = f"set {SPEC_SIZE_ENV} to raise the limit (e.g. {SPEC_SIZE_ENV}=4GiB)"
    if data is None:
        data = read_bytes(path, limits.spec_bytes, f"cannot read ONNX model {name!r}", hint)
    if not looks_like_onnx(data[:2]):
        raise BadInput(
            f"{name}: not an ONNX model (a .onnx file is a protobuf ModelProto, which starts with "
            f"byte 0x08; this one starts with {data[:8]!r}); export the model again, or give a "
            "YAML or JSON spec"
        )
    onnx = onnx_module()
    with gc_paused():  # a large model makes many objects, none of them garbage
        return _import(onnx, data, name, path, limits, source, dims, devices, config)


def _import(
    onnx: ModuleType, data: bytes, name: str, path: str | os.PathLike[str], limits: Limits,
    source: str | None, dims: Mapping[str, int] | None, devices: Mapping[str, str] | None,
    config: Config | None,
) -> Graph:  # fmt: skip
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as err:  # google.protobuf.message.DecodeError, or a RuntimeError from upb
        raise BadInput(
            f"{name}: not a readable ONNX model (the protobuf does not parse: {err}); the file "
            "may be truncated or corrupt, export it again"
        ) from None
    return Importer(onnx, model, source or os.fspath(path), limits).build(
        dims or {}, devices or {}, config or Config(), Path(path).resolve()
    )


def refuse_opaque(graph: Graph) -> None:
    """Before a run: an imported op gpuplace has no kernel for stops it (exit 2), naming the
    node and the ops gpuplace runs; `plan` takes it (its cost estimated)."""
    for op in graph.ops:
        if op.type == "Opaque":
            raise BadInput(
                f"{graph.source}: node {op.name!r} is an ONNX {op.attrs.get('onnx_type')} op, "
                "which gpuplace cannot run (plan estimates it); supported ops: "
                f"{', '.join(supported_ops())}"
            )
