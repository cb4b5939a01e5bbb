"""Capture TensorFlow's kernel registry for the op types gpuplace models.

Usage (from the repository root; TensorFlow is not a gpuplace dependency, so point the script
at interpreters that have it):

    python tools/tf_capture/kernels.py \
        --cpu /work/tfenv-cpu/bin/python --cuda /work/tfenv-cuda/bin/python

It runs itself under each interpreter with `--dump` (which imports TensorFlow and lists, for
every op type in OPS, each registered kernel from
`tensorflow.python.framework.kernels.get_registered_kernels_for_op`: its device type, its type
constraints, its host-memory args, its priority and label), checks that the CUDA build has its
GPU kernels registered even on a machine without a GPU (they are registered statically), and
writes two files:

- `gpuplace/graph/data/tf_kernels.json`: the table the placer reads. Per op type: the kernels
  of the CUDA build for the device types CPU, GPU and DEFAULT (TensorFlow's device-agnostic
  kernels, used for a device type when none of that type's own kernels match:
  `FindKernelRegistration` in `op_kernel.cc`), each with its constraints narrowed to the dtypes
  gpuplace has (a kernel left with no allowed dtype is dropped) and its host-memory args.
  The script checks that the CPU build's CPU kernels are the same set, and that the DEFAULT
  kernels only the CUDA build has (2.21: Sum on int32, in host memory) are shadowed on CPU
  devices by a CPU kernel for the same dtypes, so one table serves both builds on CPU devices.
- `gpuplace/graph/data/tf_kernels_listing.json`: per build, per op type, the lines TensorFlow
  prints under "Registered kernels:" (`KernelsRegisteredForOp`), in registry order, every
  dtype included, and the OpDef's defaulted attrs as a node shows them: read only to word a
  "No OpKernel was registered" error.

Kernels with a label (selected by a `_kernel` attr, which gpuplace never sets) are left out;
every kernel kept must have priority 0 (the script stops otherwise, since the placer would then
have to order device types by kernel priority first).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys

# The TensorFlow op types gpuplace builds (gpuplace/graph/ops.py: each OpDef's tf_type and the
# types its tf_type_for can return). LoadNpy, SaveNpy and Average are gpuplace's own.
OPS = (
    "Const", "Fill", "RandomUniform", "RandomStandardNormal", "Placeholder", "VariableV2",
    "Print", "Identity", "AddV2", "Sub", "Mul", "RealDiv", "Neg", "Exp", "Log", "Tanh", "Relu",
    "Sigmoid", "Softmax", "MatMul", "AddN", "StridedSlice", "Sum", "Mean", "Max", "Transpose",
    "Reshape", "ConcatV2", "Split", "SplitV", "Cast",
)  # fmt: skip
# gpuplace's dtypes, as TensorFlow names them (types.proto)
DTYPES = {
    "DT_HALF": "float16", "DT_FLOAT": "float32", "DT_DOUBLE": "float64", "DT_INT32": "int32",
    "DT_INT64": "int64", "DT_BOOL": "bool",
}  # fmt: skip
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "gpuplace", "graph", "data")


def dump() -> dict[str, object]:
    """Under a TensorFlow interpreter: every kernel of OPS, and what build this is."""
    import tensorflow as tf
    from tensorflow.core.framework import types_pb2
    from tensorflow.python.framework import kernels, op_def_registry

    ops: dict[str, object] = {}
    for op in OPS:
        op_def = op_def_registry.get(op)
        if op_def is None:
            raise SystemExit(f"{op}: not an op of TensorFlow {tf.__version__}")
        found = []
        for k in kernels.get_registered_kernels_for_op(op).kernel:
            constraints = [
                [c.name, [types_pb2.DataType.Name(t) for t in c.allowed_values.list.type]]
                for c in k.constraint
            ]
            found.append(
                {"device": k.device_type, "constraints": constraints,
                 "host_memory": list(k.host_memory_arg), "label": k.label,
                 "priority": k.priority}
            )  # fmt: skip
        type_attrs = [a.name for a in op_def.attr if a.type == "type"]
        defaults = {
            a.name: summarize(a.default_value) for a in op_def.attr
            if a.HasField("default_value") and a.type not in ("type", "list(type)")
        }  # fmt: skip
        outputs = [a.name for a in op_def.output_arg]
        ops[op] = {"type_attrs": type_attrs, "outputs": outputs, "defaults": defaults,
                   "kernels": found}  # fmt: skip
    return {
        "tf_version": tf.__version__,
        "cuda": bool(tf.test.is_built_with_cuda()),
        "package": "tensorflow" if tf.test.is_built_with_cuda() else "tensorflow-cpu",
        "ops": ops,
    }


def summarize(value: object) -> str:
    """An AttrValue as `SummarizeAttrValue` prints it, for the scalar kinds OpDefs default."""
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    if kind == "b":
        return "true" if value.b else "false"  # type: ignore[attr-defined]
    if kind == "s":
        return '"' + value.s.decode() + '"'  # type: ignore[attr-defined]
    if kind in ("i", "f"):
        return str(getattr(value, kind))
    if kind == "shape":
        shape = value.shape  # type: ignore[attr-defined]
        return (
            "<unknown>" if shape.unknown_rank else f"[{','.join(str(d.size) for d in shape.dim)}]"
        )
    return "<unsupported>"


def listing_line(kernel: dict[str, object]) -> str:
    """One line of `KernelsRegisteredForOp`: `  device='GPU'; T in [DT_FLOAT]`."""
    line = f"  device='{kernel['device']}'"
    if kernel["label"]:
        line += f"; label='{kernel['label']}'"
    for name, allowed in kernel["constraints"]:  # type: ignore[attr-defined]
        line += f"; {name} in [{', '.join(allowed)}]"
    return line


def table_entry(kernel: dict[str, object]) -> list[object] | None:
    """[device, {attr: [dtypes]}, [host-memory args]] narrowed to gpuplace's dtypes."""
    narrowed = {}
    for name, allowed in kernel["constraints"]:  # type: ignore[attr-defined]
        kept = [DTYPES[t] for t in allowed if t in DTYPES]
        if not kept:
            return None
        narrowed[name] = sorted(kept)
    narrowed = dict(sorted(narrowed.items()))
    return [kernel["device"], narrowed, sorted(kernel["host_memory"])]  # type: ignore[call-overload]


def table(build: dict[str, object], devices: tuple[str, ...]) -> dict[str, list[list[object]]]:
    out: dict[str, list[list[object]]] = {}
    for op, found in build["ops"].items():  # type: ignore[attr-defined]
        entries = []
        for kernel in found["kernels"]:
            if kernel["device"] not in devices or kernel["label"]:
                continue
            if kernel["priority"] != 0:
                raise SystemExit(f"{op}: kernel priority {kernel['priority']}: not modelled")
            entry = table_entry(kernel)
            if entry is not None and entry not in entries:
                entries.append(entry)
        out[op] = sorted(entries, key=json.dumps)
    return out


def capture(python: str) -> dict[str, object]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    text = subprocess.run(
        [python, os.path.abspath(__file__), "--dump"], check=True, capture_output=True,
        text=True, env=env,
    ).stdout  # fmt: skip
    return json.loads(text)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dump", action="store_true", help="(internal) print this build's kernels")
    parser.add_argument("--cpu", help="python of a tensorflow-cpu install")
    parser.add_argument("--cuda", help="python of a tensorflow (CUDA build) install")
    parser.add_argument("--out", default=DATA, help="folder for the two JSON files")
    args = parser.parse_args()
    if args.dump:
        json.dump(dump(), sys.stdout)
        return
    if not (args.cpu and args.cuda):
        parser.error("--cpu and --cuda are both required")
    cpu, cuda = capture(args.cpu), capture(args.cuda)
    if cpu["cuda"] or not cuda["cuda"]:
        raise SystemExit("--cpu must be a CPU-only build and --cuda a CUDA build")
    if cpu["tf_version"] != cuda["tf_version"]:
        raise SystemExit(f"versions differ: {cpu['tf_version']} and {cuda['tf_version']}")
    gpu_kernels = sum(
        k["device"] == "GPU"
        for o in cuda["ops"].values()
        for k in o["kernels"]  # type: ignore[attr-defined]
    )
    if not gpu_kernels:
        raise SystemExit("the CUDA build lists no GPU kernels")
    if table(cpu, ("CPU",)) != table(cuda, ("CPU",)):
        raise SystemExit("the CPU build's CPU kernels differ from the CUDA build's")
    for op, entries in table(cpu, ("DEFAULT",)).items():
        cuda_defaults = table(cuda, ("DEFAULT",))[op]
        if any(e not in cuda_defaults for e in entries):
            raise SystemExit(f"{op}: the CPU build has DEFAULT kernels the CUDA build lacks")
        for extra in (e for e in cuda_defaults if e not in entries):
            # only harmless where a CPU kernel matches the same dtypes: DEFAULT is then never
            # consulted for CPU devices
            if ["CPU", extra[1], []] not in table(cuda, ("CPU",))[op]:
                raise SystemExit(f"{op}: CUDA-only DEFAULT kernel {extra} changes CPU placement")
    kernels = table(cuda, ("CPU", "GPU", "DEFAULT"))
    version = str(cuda["tf_version"])
    data = {
        "tf_version": version,
        "captured": datetime.date.today().isoformat(),
        "source": "tensorflow.python.framework.kernels.get_registered_kernels_for_op",
        "builds": {
            "cpu": f"tensorflow-cpu {version}",
            "cuda": f"tensorflow {version} (CUDA build)",
        },
        "script": "tools/tf_capture/kernels.py",
        "type_attrs": {op: cuda["ops"][op]["type_attrs"] for op in OPS},  # type: ignore[index]
        "outputs": {op: cuda["ops"][op]["outputs"] for op in OPS},  # type: ignore[index]
        "kernels": kernels,
    }
    listing = {
        "tf_version": version,
        # the OpDef's attrs with defaults (not type attrs), as a node shows them in errors
        "defaults": {op: cuda["ops"][op]["defaults"] for op in OPS},  # type: ignore[index]
        "builds": {
            name: {op: [listing_line(k) for k in build["ops"][op]["kernels"]] for op in OPS}  # type: ignore[index]
            for name, build in (("cpu", cpu), ("cuda", cuda))
        },
    }
    os.makedirs(args.out, exist_ok=True)
    for name, doc in (("tf_kernels.json", data), ("tf_kernels_listing.json", listing)):
        with open(os.path.join(args.out, name), "w") as f:
            json.dump(doc, f, indent=None, separators=(",", ":"), sort_keys=False)
            f.write("\n")
        print(f"wrote {os.path.join(args.out, name)}")
    print(f"TensorFlow {version}: {len(OPS)} op types; CUDA build: {gpu_kernels} GPU kernels")


if __name__ == "__main__":
    main()
