"""Build gpuplace specs as TensorFlow graphs and record what TensorFlow says. Runs under the
real TensorFlow (`/work/tfenv-cpu/bin/python`), started by `capture.py`; TF only, no gpuplace.

    python tf_build.py CASES.json OUT.json

CASES.json: [{"id", "spec", "soft"}], each spec a gpuplace graph spec as data (the subset of
ops below). Each case is built in a fresh `tf.compat.v1` graph, in file order, the way the
spec describes it: an op's `name` is passed to TensorFlow as written (None: TF's default name),
`device` and device blocks are `tf.device`, a `towers` block calls its body once per device
(no name scope), and inputs name ops as gpuplace documents it (a written name means the op
written with it, else the op so named in its namespace, a tower body first, then the top
level, then every op's TensorFlow name; a name from a tower body outside it means every copy).
Then one `session.run` with `log_device_placement` (and `allow_soft_placement` when `soft`).

OUT.json: per case, `names` (every op's TensorFlow name, in creation order), `log` (the lines
TF's placer printed to stdout, read at the file descriptor, as `placer.cc`'s printf writes
them), `log_stderr` (the same lines from its INFO log on stderr, the volatile prefix cut) and
`mapping` (the `Device mapping:` message it logged), or `error` when TF refused the graph.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys
import tempfile

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()
LIBC = ctypes.CDLL(None)

# TF's Python default name of each op this builder makes (for names local to a tower body)
DEFAULT = {
    "constant": "Const", "placeholder": "Placeholder", "matmul": "MatMul", "add": "add",
    "sub": "sub", "mul": "mul", "relu": "Relu", "neg": "Neg", "identity": "Identity",
    "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "add_n": "AddN",
}  # fmt: skip
UNARY = {"relu": tf1.nn.relu, "neg": tf1.negative, "identity": tf1.identity,
         "sigmoid": tf1.sigmoid, "tanh": tf1.tanh, "exp": tf1.exp}  # fmt: skip
BINARY = {"add": (tf1.add, lambda x, y: x + y), "sub": (tf1.subtract, lambda x, y: x - y),
          "mul": (tf1.multiply, lambda x, y: x * y), "matmul": (tf1.matmul, tf1.matmul)}  # fmt: skip
PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


class Namespace:
    """Names visible in one namespace: written ones beat generated ones; then the outer."""

    def __init__(self, parent: Namespace | None, local: tf.Graph | None) -> None:
        self.parent = parent
        self.written: dict[str, list[tf.Tensor]] = {}
        self.generated: dict[str, list[tf.Tensor]] = {}
        self.local = local  # a tower body's own names: a scratch graph's unique_name

    def find(self, name: str) -> list[tf.Tensor] | None:
        ns: Namespace | None = self
        while ns is not None:
            found = ns.written.get(name) or ns.generated.get(name)
            if found:
                return found
            ns = ns.parent
        return None


class Builder:
    def __init__(self, graph: tf.Graph) -> None:
        self.graph = graph
        self.feeds: dict[tf.Tensor, np.ndarray] = {}
        self.last: list[tf.Tensor] = []

    def inputs(self, item: dict, ns: Namespace) -> list[tf.Tensor]:
        out: list[tf.Tensor] = []
        for text in item.get("inputs", []):
            found = ns.find(text)
            if found is None:
                found = [self.graph.get_operation_by_name(text).outputs[0]]
            out.extend(found)
        return out

    def op(self, item: dict, ns: Namespace) -> None:
        kind, name = item["op"], item.get("name")
        with tf1.device(item["device"]) if "device" in item else _nothing():
            ins = self.inputs(item, ns)
            dtype = item.get("dtype", "float32")
            if kind == "constant":
                t = tf1.constant(item["value"], dtype=dtype, shape=item.get("shape"), name=name)
            elif kind == "placeholder":
                t = tf1.placeholder(dtype, item["shape"], name=name)
                self.feeds[t] = np.zeros(item["shape"], dtype)
            elif kind in UNARY:
                t = UNARY[kind](ins[0], name=name)
            elif kind in BINARY:
                named, plain = BINARY[kind]
                t = named(ins[0], ins[1], name=name) if name else plain(ins[0], ins[1])
            elif kind == "add_n":
                t = tf1.add_n(ins, name=name)
            else:
                raise ValueError(f"tf_build: op {kind!r} is not in this builder")
        if name is not None:
            ns.written[name] = [t]
            if ns.local is not None:
                ns.local.unique_name(name)
        else:
            key = t.op.name if ns.local is None else ns.local.unique_name(DEFAULT[kind])
            ns.generated.setdefault(key, [t])
        self.last.append(t)

    def walk(self, items: list[dict], ns: Namespace) -> None:
        for item in items:
            if "op" in item:
                self.op(item, ns)
            elif "towers" in item:
                copies = []
                for device in item["towers"]:
                    local = Namespace(ns, tf.Graph())
                    with tf1.device(device):
                        self.walk(item["graph"], local)
                    copies.append(local)
                for local in copies:
                    for table, into in ((local.generated, ns.generated),
                                        (local.written, ns.written)):  # fmt: skip
                        for key, tensors in table.items():
                            into.setdefault(key, []).extend(tensors)
            else:
                with tf1.device(item["device"]) if "device" in item else _nothing():
                    self.walk(item["graph"], ns)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def run_case(case: dict) -> dict:
    graph = tf1.Graph()
    with graph.as_default():
        builder = Builder(graph)
        builder.walk(case["spec"]["graph"], Namespace(None, None))
    names = [op.name for op in graph.get_operations()]
    config = tf1.ConfigProto(log_device_placement=True, allow_soft_placement=case["soft"])
    fetch = builder.last[-1]
    out, err, error = _captured(lambda: _run(graph, config, fetch, builder.feeds))
    log = [line for line in out.splitlines() if ": (" in line]
    logged = [PREFIX.sub("", line) for line in err.splitlines()]
    placer = [
        line for line, raw in zip(logged, err.splitlines(), strict=True) if "placer.cc" in raw
    ]
    mapping = _mapping(err)
    result = {"id": case["id"], "names": names, "log": log, "log_stderr": placer,
              "mapping": mapping}  # fmt: skip
    if error is not None:
        result["error"] = error
    return result


def _run(graph: tf.Graph, config: tf1.ConfigProto, fetch: tf.Tensor, feeds: dict) -> None:
    with tf1.Session(graph=graph, config=config) as session:
        session.run(fetch, feed_dict=feeds)


def _mapping(err: str) -> str | None:
    """The `Device mapping:` message direct_session.cc logged (its lines after the prefix)."""
    lines = err.splitlines()
    for i, line in enumerate(lines):
        if "direct_session.cc" in line and "Device mapping:" in line:
            body = [PREFIX.sub("", line)]
            for more in lines[i + 1 :]:
                if PREFIX.match(more) or more.startswith("WARNING:"):
                    break
                body.append(more)
            return "\n".join(body)
    return None


def _captured(fn: object) -> tuple[str, str, str | None]:
    """Run fn with fds 1 and 2 sent to files (C++ printf and logging included)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        error = None
        try:
            fn()  # type: ignore[operator]
        except tf.errors.OpError as exc:
            error = exc.message
        finally:
            LIBC.fflush(None)
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        out.seek(0)
        err.seek(0)
        return out.read().decode(), err.read().decode(), error


def main() -> None:
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    results = [run_case(case) for case in cases]
    doc = {"tensorflow": tf.__version__, "results": results}
    with open(sys.argv[2], "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
