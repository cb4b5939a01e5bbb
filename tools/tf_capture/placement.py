"""Capture real TensorFlow placements for the kernel conformance tests.

Usage (from the repository root; TensorFlow is not a gpuplace dependency):

    python tools/tf_capture/placement.py \
        --cpu /work/tfenv-cpu/bin/python --cuda /work/tfenv-cuda/bin/python

writes `tests/conformance/data/kernels.json`, which `tests/conformance/test_kernels.py`
replays through gpuplace. Each case is one gpuplace spec (constant inputs, then the op under
test, named `t`, of every op type and dtype gpuplace has) under one request for `t`: none,
`/cpu:0`, or `/gpu:0` with soft placement on or off.

- "cpu" cases ran for real: TensorFlow 2.21's CPU build, graph mode (`tf.compat.v1`), a
  Session run with `output_partition_graphs`; recorded are the device of every node the spec
  names, the values fetched, or the error TensorFlow raised (its first line).
- "gpu" cases cannot run here (no GPU); their expectation for `t` on a machine with one GPU is
  derived from the CUDA build's own kernel lookup (`_pywrap_kernel_registry.TryFindKernelClass`,
  which runs `FindKernelDef` on `t`'s real NodeDef with the device set to GPU), with the
  placer's rule for a lone op: GPU:0 when the GPU has a kernel, else CPU:0 (soft placement,
  or no request), else an error.
- "no_kernel": TensorFlow's "No OpKernel was registered" message for a node no kernel serves
  (MatMul on uint8, CPU build), taken first, as in a fresh process (later Session runs register
  XLA's JIT kernels, which then show in the list).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "conformance", "data", "kernels.json")
FLOATS = ("float16", "float32", "float64")
NUMERIC = (*FLOATS, "int32", "int64")
ALL = (*NUMERIC, "bool")
REQUESTS = (("", False), ("/cpu:0", False), ("/gpu:0", True), ("/gpu:0", False))
X = [[1, -2, 3], [4, 5, -6]]  # a [2, 3] input
Y = [[2, 1, 1], [1, 2, 4]]
SQ = [[1, 2], [3, -4]]
POS = [[1, 2, 3], [4, 5, 6]]


def const(name: str, value: Any, dtype: str) -> dict[str, Any]:
    if dtype == "bool":
        value = [[v > 0 for v in row] for row in value]
    return {"name": name, "op": "constant", "value": value, "dtype": dtype}


# (case kind, dtypes, the inputs' values, t's attrs, and its op where that is not the kind); a
# case's inputs are constants x (and y) of t's dtype; add_n reads x, y and x again
TABLE: tuple[tuple[str, tuple[str, ...], tuple[Any, ...], dict[str, Any]], ...] = (
    *((k, NUMERIC, (X,), {}) for k in ("neg", "relu")),
    *((k, FLOATS, (X,), {}) for k in ("exp", "tanh", "sigmoid", "softmax")),
    ("log", FLOATS, (POS,), {}),
    ("identity", ALL, (X,), {}),
    *((k, NUMERIC, (X, Y), {}) for k in ("add", "sub", "mul", "div")),
    ("matmul", NUMERIC, (SQ, SQ), {}),
    ("add_n", NUMERIC, (X, Y, X), {}),
    *((k, NUMERIC, (POS,), {"axis": [1]}) for k in ("reduce_sum", "reduce_mean", "reduce_max")),
    ("transpose", ALL, (X,), {}),
    ("reshape", ALL, (X,), {"shape": [3, 2]}),
    ("concat", ALL, (X, Y), {"axis": 1}),
    ("split", ALL, (X,), {"num_split": 3, "axis": 1}),
    ("split_v", ALL, (X,), {"op": "split", "sizes": [1, 2], "axis": 1}),
    ("batch_slice", ALL, (X,), {"parts": 2, "index": 1}),
    ("zeros", ALL, (), {"shape": [2, 3]}),
    ("zeros_fill", ALL, (), {"op": "zeros", "shape": [40, 25]}),  # 1000 elements: a Fill
    ("fill", ALL, (), {"shape": [2, 3], "value": 1}),
    ("variable", ALL, (), {"shape": [2, 3]}),
)


def cases() -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(kind, dtype, spec entries without t's device) for every op type x dtype: TABLE, Const,
    and Cast from every dtype to every dtype."""
    out: list[tuple[str, str, list[dict[str, Any]]]] = []
    for kind, dtypes, values, extra in TABLE:
        for dtype in dtypes:
            names = ["x", "y", "x"][: len(values)]
            inputs = [const(n, v, dtype) for n, v in zip(names, values, strict=True)][:2]
            t = {"name": "t", "op": extra.get("op", kind), **({"inputs": names} if names else {})}
            t.update({k: v for k, v in extra.items() if k != "op"})
            if not names:  # a generator: its dtype is its own
                t["dtype"] = dtype
            out.append((kind, dtype, [*inputs, t]))
    for dtype in ALL:
        out.append(("constant", dtype, [const("t", X, dtype)]))
        for src in ALL:
            cast = {"name": "t", "op": "cast", "inputs": ["x"], "dtype": dtype}
            out.append((f"cast_from_{src}", dtype, [const("x", X, src), cast]))
    return out


def build(tf: Any, entries: list[dict[str, Any]], device: str) -> dict[str, Any]:
    """The TF1 graph TF1's Python API builds for the spec; t under `device`."""
    made: dict[str, Any] = {}
    for e in entries:
        scope = tf.device(device) if e["name"] == "t" and device else tf.device(None)
        with scope:
            made[e["name"]] = op(tf, e, [made[i] for i in e.get("inputs", [])])
    return made


def op(tf: Any, e: dict[str, Any], xs: list[Any]) -> Any:
    kind, name = e["op"], e["name"]
    dtype = getattr(tf, e.get("dtype", "float32"))
    simple = {"neg": tf.negative, "relu": tf.nn.relu, "exp": tf.exp, "log": tf.math.log,
              "tanh": tf.tanh, "sigmoid": tf.sigmoid, "softmax": tf.nn.softmax,
              "identity": tf.identity, "transpose": tf.transpose}  # fmt: skip
    if kind == "constant":
        return tf.constant(e["value"], dtype=dtype, name=name)
    if kind in simple:
        return simple[kind](xs[0], name=name)
    if kind == "add":
        return tf.raw_ops.AddV2(x=xs[0], y=xs[1], name=name)  # what `x + y` builds
    if kind == "sub":
        return tf.subtract(*xs, name=name)
    if kind == "mul":
        return tf.multiply(*xs, name=name)
    if kind == "div":
        return tf.math.truediv(*xs, name=name)
    if kind == "matmul":
        return tf.linalg.matmul(*xs, name=name)
    if kind == "add_n":
        return tf.math.add_n(xs, name=name)
    if kind.startswith("reduce_"):
        fn = {
            "reduce_sum": tf.reduce_sum,
            "reduce_mean": tf.reduce_mean,
            "reduce_max": tf.reduce_max,
        }
        return fn[kind](xs[0], axis=e["axis"], name=name)
    if kind == "reshape":
        return tf.reshape(xs[0], e["shape"], name=name)
    if kind == "concat":
        return tf.concat(xs, axis=e["axis"], name=name)
    if kind == "split":
        return tf.split(xs[0], e.get("sizes") or e["num_split"], axis=e["axis"], name=name)
    if kind == "batch_slice":  # x[start:stop] along axis 0, part `index` of `parts`
        step = 2 // e["parts"]
        begin, end = [step * e["index"]], [step * e["index"] + step]
        return tf.strided_slice(xs[0], begin, end, strides=[1], name=name)
    if kind == "cast":
        return tf.cast(xs[0], dtype, name=name)
    if kind == "zeros":
        return tf.zeros(e["shape"], dtype=dtype, name=name)
    if kind == "fill":
        return tf.fill(e["shape"], tf.constant(e["value"], dtype=dtype), name=name)
    if kind == "variable":
        return tf.compat.v1.Variable(
            tf.zeros(e["shape"], dtype=dtype), name=name, use_resource=False
        )
    raise SystemExit(f"no TF builder for {kind}")


def node_names(made: dict[str, Any]) -> dict[str, str]:
    """spec name -> the TF node carrying it."""
    out = {}
    for name, value in made.items():
        first = value[0] if isinstance(value, list) else value
        out[name] = first.op.name
    return out


def run_cpu(entries: list[dict[str, Any]], device: str, soft: bool) -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        try:
            made = build(tf, entries, device)
        except (TypeError, ValueError) as err:  # the op's OpDef refuses the dtype
            return {"construct_error": str(err).split("\n")[0]}
        nodes = node_names(made)
        if nodes["t"] != "t":  # tf.cast to the input's dtype returns the input: no op
            return {"construct_error": f"TensorFlow builds no op t (t is {nodes['t']})"}
        init = tf.compat.v1.global_variables_initializer()
        fetch = made["t"]
    config = tf.compat.v1.ConfigProto(allow_soft_placement=soft)
    # no grappler, no constant folding: the nodes run are the nodes built
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.do_constant_folding = False
    config.graph_options.optimizer_options.opt_level = -1  # L0
    options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    meta = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        try:
            sess.run(init)
            value = sess.run(fetch, options=options, run_metadata=meta)
        except tf.errors.OpError as err:
            return {"error": error_text(err.message), "error_class": type(err).__name__}
    placed = {n.name: n.device for g in meta.partition_graphs for n in g.node}
    values = value if isinstance(value, list) else [value]
    return {
        "devices": {name: placed[node] for name, node in nodes.items() if node in placed},
        "values": [summary(np.asarray(v)) for v in values],
    }


def summary(value: Any) -> Any:
    """A value as a list, or for more than 100 elements its shape and sum."""
    if value.size <= 100:
        return value.tolist()
    return {"shape": list(value.shape), "sum": value.astype("float64").sum().item()}


def error_text(message: str) -> str:
    """The placer's message without the Python traceback TF 2 wraps around it (`Graph execution
    error:`, `Detected at node ...`, `Node: 't'`) and the `[[t]]` it appends."""
    lines = message.split("\n")
    if "Node: " in message:
        lines = lines[next(i for i, line in enumerate(lines) if line.startswith("Node: ")) + 1 :]
    text = "\n".join(lines)
    return text.split("\n\t [[")[0].rstrip("\n")


def gpu_kernels(entries: list[dict[str, Any]]) -> dict[str, bool]:
    """Whether the CUDA build has a GPU (and a CPU) kernel for t's real NodeDef."""
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_kernel_registry as registry

    graph = tf.Graph()
    with graph.as_default():
        try:
            made = build(tf, entries, "")
        except (TypeError, ValueError) as err:
            return {"construct_error": str(err).split("\n")[0]}  # type: ignore[dict-item]
        if node_names(made)["t"] != "t":
            return {"construct_error": "TensorFlow builds no op t"}  # type: ignore[dict-item]
        node = graph.get_operation_by_name("t").node_def
    found = {}
    for kind in ("GPU", "CPU"):
        node.device = f"/device:{kind}:0"
        found[kind] = bool(registry.TryFindKernelClass(node.SerializeToString()))
    found["tf_type"] = node.op  # type: ignore[assignment]
    return found


def dump(build_name: str) -> None:
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    # first, as in a fresh process: later runs register XLA's JIT kernels, which then show in
    # the list of registered kernels
    extra = no_kernel_message() if build_name == "cpu" else None
    records = []
    for kind, dtype, entries in cases():
        if build_name == "cpu":
            for device, soft in REQUESTS:
                records.append({"kind": kind, "dtype": dtype, "device": device, "soft": soft,
                                "result": run_cpu(entries, device, soft)})  # fmt: skip
        else:
            records.append({"kind": kind, "dtype": dtype, "kernels": gpu_kernels(entries)})
    json.dump({"tf_version": tf.__version__, "records": records, "no_kernel": extra}, sys.stdout)


def no_kernel_message() -> dict[str, str]:
    """The placer's "No OpKernel was registered" error, from a node no CPU kernel serves
    (MatMul on uint8: its OpDef allows the dtype, the CPU build registers no kernel for it)."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        a = tf.constant([[1]], dtype=tf.uint8, name="a")
        u = tf.raw_ops.MatMul(a=a, b=a, name="u")
    with tf.compat.v1.Session(graph=graph) as sess:
        try:
            sess.run(u)
        except tf.errors.OpError as err:
            return {"node": "u", "op": "MatMul", "dtype": "uint8", "error": error_text(err.message)}
    raise SystemExit("MatMul on uint8 ran: pick another node without a kernel")


def expected_gpu(found: dict[str, bool], device: str, soft: bool) -> dict[str, str]:
    """Where TF's placer puts a lone op t on a machine with CPU:0 and GPU:0 (or its error)."""
    if device == "/cpu:0":
        return {"device": "CPU:0"} if found["CPU"] else {"error": "no CPU kernel"}
    if found["GPU"]:
        return {"device": "GPU:0"}
    if device == "/gpu:0" and not soft:
        return {"error": "Cannot assign a device for operation t: Could not satisfy explicit "
                "device specification '/device:GPU:0' because no supported kernel for GPU "
                "devices is available."}  # fmt: skip
    return {"device": "CPU:0"} if found["CPU"] else {"error": "no kernel"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dump", choices=("cpu", "cuda"), help="(internal)")
    parser.add_argument("--cpu", help="python of a tensorflow-cpu install")
    parser.add_argument("--cuda", help="python of a tensorflow (CUDA build) install")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    if args.dump:
        dump(args.dump)
        return
    if not (args.cpu and args.cuda):
        parser.error("--cpu and --cuda are both required")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    got = {}
    for name, python in (("cpu", args.cpu), ("cuda", args.cuda)):
        text = subprocess.run(
            [python, os.path.abspath(__file__), "--dump", name], check=True,
            capture_output=True, text=True, env=env,
        ).stdout  # fmt: skip
        got[name] = json.loads(text)
    specs = {f"{k}/{d}": entries for k, d, entries in cases()}
    out_cases = []
    for r in got["cpu"]["records"]:
        if "construct_error" in r["result"]:
            continue
        out_cases.append({"build": "cpu", "gpus": 0, **r, "spec": f"{r['kind']}/{r['dtype']}"})
    for r in got["cuda"]["records"]:
        if "construct_error" in r["kernels"]:
            continue
        for device, soft in REQUESTS:
            out_cases.append({
                "build": "cuda", "gpus": 1, "kind": r["kind"], "dtype": r["dtype"],
                "device": device, "soft": soft, "tf_type": r["kernels"]["tf_type"],
                "result": expected_gpu(r["kernels"], device, soft),
                "spec": f"{r['kind']}/{r['dtype']}",
            })  # fmt: skip
    doc = {
        "tf_version": got["cpu"]["tf_version"],
        "captured": datetime.date.today().isoformat(),
        "script": "tools/tf_capture/placement.py",
        "builds": {
            "cpu": "tensorflow-cpu (ran)",
            "cuda": "tensorflow CUDA build (kernel lookup only)",
        },
        "no_kernel": got["cpu"]["no_kernel"],  # TF's message for a node with no kernel
        "specs": specs,  # "kind/dtype" -> the spec's graph: entries (t without a device)
        "cases": out_cases,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {len(out_cases)} cases")


if __name__ == "__main__":
    main()
