"""Capture TensorFlow 2.21's placer on small graphs: tests/conformance/data/placer.json.

    /work/tfenv-cpu/bin/python tools/tf_capture/placer.py tests/conformance/data/placer.json

Each case is a gpuplace graph (the `graph:` list of a spec). This script builds the same
graph with tf.compat.v1 ops in graph mode (constant -> tf.constant, neg -> tf.negative,
identity -> tf.identity, add -> tf.math.add (AddV2), matmul -> tf.matmul, variable ->
tf.compat.v1.Variable(use_resource=False) (VariableV2), `device:` -> `with g.device`,
`colocate_with:` -> `with g.colocate_with`), on the CPU build with three CPU devices
(ConfigProto's device_count), and runs the fetches with log_device_placement. The rules
checked here do not depend on the device type, only on which device each op requests, so
gpuplace's GPU:k is TF's CPU:k (both are the highest-priority devices, and index 0 is the
default): every `/gpu:k` and `GPU` in a device string becomes `/cpu:k` and `CPU` for TF, and
TF's CPU:k comes back as GPU:k. The JSON keeps each case's graph and where TF put each
of its ops.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

from _session import run_logged, tf

CPUS = 3


def const(name: str, value: object, device: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"name": name, "op": "constant", "value": value}
    if device is not None:
        op["device"] = device
    return op


def op(kind: str, name: str, *inputs: str, device: str | None = None,
       colocate_with: str | None = None) -> dict[str, Any]:  # fmt: skip
    made: dict[str, Any] = {"name": name, "op": kind, "inputs": list(inputs)}
    if device is not None:
        made["device"] = device
    if colocate_with is not None:
        made["colocate_with"] = colocate_with
    return made


def case(name: str, why: str, graph: list[dict[str, Any]], fetch: list[str],
         soft: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"name": name, "why": why, "soft": soft, "graph": graph, "fetch": fetch}


C = const("c", [1.0, 2.0])
G1, G2 = "/gpu:1", "/gpu:2"


def between(name: str, why: str, first: str, then: str, soft: bool = False) -> dict[str, Any]:
    """c -> n (on `first`) -> Identity i -> m (on `then`), fetching m."""
    graph = [C, op("neg", "n", "c", device=first), op("identity", "i", "n"),
             op("neg", "m", "i", device=then)]  # fmt: skip
    return case(name, why, graph, ["m"], soft)


CASES = [
    between("identity-between-same-device", "MatchIdentityOperation: input and its one consumer "
         "request /gpu:1, the Identity nothing: it goes to its input's device",
            G1, G1),
    between("identity-between-different-devices", "input on /gpu:1, consumer on /gpu:2: the "
         "default device",
            G1, G2),
    case("identity-consumer-unplaced", "input requests /gpu:1, consumer nothing: no match",
         [C, op("neg", "n", "c", device=G1), op("identity", "i", "n"), op("neg", "m", "i")],
         ["m"]),
    case("identity-input-unplaced", "input requests nothing, consumer /gpu:1: no match",
         [C, op("neg", "n", "c"), op("identity", "i", "n"), op("neg", "m", "i", device=G1)],
         ["m"]),
    case("identity-all-unplaced", "both request nothing: a match, the input's device (GPU:0)",
         [C, op("neg", "n", "c"), op("identity", "i", "n"), op("neg", "m", "i")], ["m"]),
    case("identity-two-consumers", "two consumers on /gpu:1: more than one out-edge, no match",
         [C, op("neg", "n", "c", device=G1), op("identity", "i", "n"),
          op("neg", "m1", "i", device=G1), op("neg", "m2", "i", device=G1)], ["m1", "m2"]),
    case("identity-read-twice-by-one-op", "one consumer reading it twice: two out-edges",
         [C, op("neg", "n", "c", device=G1), op("identity", "i", "n"),
          op("add", "m", "i", "i", device=G1)], ["m"]),
    case("identity-no-consumer", "no consumer: its one out-edge goes to _SINK, which requests "
         "nothing, unlike its input on /gpu:1",
         [C, op("neg", "n", "c", device=G1), op("identity", "i", "n")], ["i"]),
    case("identity-no-consumer-input-unplaced", "no consumer, input requests nothing: the "
         "input's device",
         [C, op("neg", "n", "c"), op("identity", "i", "n")], ["i"]),
    case("identity-no-consumer-input-colocated", "no consumer; its input (requesting nothing "
         "itself but colocated with an op on /gpu:2, whose device TF copies) is on GPU:2",
         [C, op("neg", "p", "c", device=G2), op("neg", "n", "c", colocate_with="p"),
          op("identity", "i", "n")], ["i", "p"]),
    case("identity-no-consumer-input-in-group", "no consumer: the out-edge to _SINK requests "
         "nothing, as its input n does; n sits on GPU:2 with its colocation group (p asks for "
         "/gpu:2), and the Identity follows it there",
         [C, op("neg", "n", "c"), op("neg", "p", "c", device=G2, colocate_with="n"),
          op("identity", "i", "n")], ["i", "p"]),
    case("identity-unplaced-ends-input-in-group", "input and consumer request nothing; the "
         "input's colocation group puts it on GPU:2, and the Identity follows it",
         [C, op("neg", "n", "c"), op("neg", "p", "c", device=G2, colocate_with="n"),
          op("identity", "i", "n"), op("neg", "m", "i")], ["m", "p"]),
    case("identity-of-generator", "input is a constant on /gpu:1 and the consumer is on "
         "/gpu:1, but constants are placed in the second pass: the Identity's input has no "
         "device yet, so it takes the default",
         [const("k", [1.0, 2.0], G1), op("identity", "i", "k"), op("neg", "m", "i", device=G1)],
         ["m"]),
    case("identity-of-unplaced-generator", "unplaced constant and consumer on /gpu:1",
         [const("k", [1.0, 2.0]), op("identity", "i", "k"), op("neg", "m", "i", device=G1)],
         ["m"]),
    case("identity-pinned", "an Identity that requests a device is not matched",
         [C, op("neg", "n", "c", device=G1), op("identity", "i", "n", device=G2),
          op("neg", "m", "i", device=G1)], ["m"]),
    case("identity-chain-of-two", "n(/gpu:1) -> i1 -> i2 -> m(/gpu:1): i1's consumer (i2) "
         "and i2's input (i1) request nothing, so neither matches",
         [C, op("neg", "n", "c", device=G1), op("identity", "i1", "n"),
          op("identity", "i2", "i1"), op("neg", "m", "i2", device=G1)], ["m"]),
    case("identity-chain-of-three", "the middle one matches (both neighbours request nothing) "
         "and follows i1 onto the default device",
         [C, op("neg", "n", "c", device=G1), op("identity", "i1", "n"),
          op("identity", "i2", "i1"), op("identity", "i3", "i2"),
          op("neg", "m", "i3", device=G1)], ["m"]),
    case("identity-chain-unplaced-ends", "all unplaced: every Identity follows its input",
         [C, op("neg", "n", "c"), op("identity", "i1", "n"), op("identity", "i2", "i1"),
          op("neg", "m", "i2")], ["m"]),
    case("identity-two-branches", "two Identities of one input, each with one consumer on "
         "/gpu:2: both match",
         [C, op("neg", "n", "c", device=G2), op("identity", "i1", "n"),
          op("identity", "i2", "n"), op("neg", "m1", "i1", device=G2),
          op("neg", "m2", "i2", device=G2)], ["m1", "m2"]),
    between("identity-same-device-different-strings", "the rule compares the requested strings: "
         "/device:GPU:1 and /job:localhost/replica:0/task:0/device:GPU:1 differ",
            "/device:GPU:1", "/job:localhost/replica:0/task:0/device:GPU:1"),
    between("identity-same-canonical-string", "/gpu:1 and /device:GPU:1 are both /device:GPU:1 "
         "in the NodeDef: a match",
            "/gpu:1", "/device:GPU:1"),
    between("identity-partial-request", "input and consumer both request /gpu:* : a match, the "
         "input's device",
            "/gpu:*", "/gpu:*"),
    case("identity-colocated-away", "the Identity is colocated with an op on /gpu:2 (TF "
         "copies that device into its request), so it is not matched",
         [C, op("neg", "p", "c", device=G2), op("neg", "n", "c", device=G1),
          op("identity", "i", "n", colocate_with="p"), op("neg", "m", "i", device=G1)],
         ["m", "p"]),
    case("identity-consumer-colocated", "the consumer is colocated with p on /gpu:2 and so "
         "requests /gpu:2; the input requests /gpu:2 too: a match",
         [C, op("neg", "p", "c", device=G2), op("neg", "n", "c", device=G2),
          op("identity", "i", "n"), op("neg", "m", "i", colocate_with="p")], ["m"]),
    case("identity-into-matmul", "MatMul on /gpu:1 reading an Identity of an op on /gpu:1",
         [const("a", [[1.0, 2.0], [3.0, 4.0]]), op("neg", "n", "a", device=G1),
          op("identity", "i", "n"), op("matmul", "mm", "i", "a", device=G1)], ["mm"]),
    case("identity-of-variable", "an Identity of a variable on /gpu:1 (TF reads it through "
         "v/read, colocated with v) with its consumer on /gpu:1",
         [{"name": "v", "op": "variable", "shape": [2], "initializer": "zeros", "device": G1},
          op("identity", "i", "v"), op("neg", "m", "i", device=G1)], ["m"]),
    case("variable-soft-missing-device", "soft placement: a variable asks for /gpu:7 (TF "
         "treats a ref generator's request as its resource device) and falls back to GPU:0",
         [{"name": "v", "op": "variable", "shape": [2], "initializer": "zeros",
           "device": "/gpu:7"}, op("neg", "m", "v", device=G1)], ["m"], soft=True),
    case("identity-of-variable-soft", "soft placement: variable and consumer on /gpu:7 "
         "(missing); the Identity of the variable follows it to GPU:0",
         [{"name": "v", "op": "variable", "shape": [2], "initializer": "zeros",
           "device": "/gpu:7"}, op("identity", "i", "v"), op("neg", "m", "i", device="/gpu:7")],
         ["m"], soft=True),
    case("variable-consumers-elsewhere", "a variable on /gpu:2 read by ops on /gpu:1 and "
         "unplaced: reading a ref does not colocate (only ref inputs do: Assign)",
         [{"name": "v", "op": "variable", "shape": [2], "initializer": "zeros", "device": G2},
          op("neg", "m", "v", device=G1), op("neg", "u", "v")], ["m", "u"]),
    between("identity-soft-missing-device", "soft placement: input and consumer ask for /gpu:7, "
         "which does not exist; they fall back to GPU:0 and the Identity follows its input",
            "/gpu:7", "/gpu:7", soft=True),
    between("identity-soft-same-device", "soft placement changes nothing when the devices exist",
            G2, G2, soft=True),
    case("identity-consumer-is-identity-pinned", "the consumer is itself an Identity pinned "
         "on /gpu:1, like the input",
         [C, op("neg", "n", "c", device=G1), op("identity", "i", "n"),
          op("identity", "j", "i", device=G1)], ["j"]),
    case("identity-then-generator-follows", "a constant read only by a matched Identity "
         "follows it (second pass)",
         [const("k", [1.0, 2.0]), op("neg", "n", "k", device=G2), op("identity", "i", "n"),
          const("k2", [3.0, 4.0]), op("add", "m", "i", "k2", device=G2)], ["m"]),
    between("identity-input-on-other-device-than-consumer-index", "input /gpu:1, consumer "
         "/gpu:* : different strings",
            G1, "/gpu:*"),
    case("identity-fetched-and-consumed", "fetching an Identity adds no edge before "
         "placement (TF places the whole graph): one consumer on /gpu:1, a match",
         [C, op("neg", "n", "c", device=G1), op("identity", "i", "n"),
          op("neg", "m", "i", device=G1)], ["m", "i"]),
    case("no-identity-generators-follow", "no Identity: constants follow their one consumer",
         [const("a", [1.0, 2.0]), const("b", [3.0, 4.0]), op("add", "s", "a", "b", device=G2)],
         ["s"]),
    case("generator-consumers-on-two-devices", "IsGeneratorNode: a constant read on /gpu:1 "
         "and /gpu:2 takes the default device",
         [const("a", [1.0, 2.0]), op("neg", "m1", "a", device=G1),
          op("neg", "m2", "a", device=G2)], ["m1", "m2"]),
    case("generator-pinned", "a constant requesting /gpu:2 stays there, its consumer on /gpu:1",
         [const("a", [1.0, 2.0], G2), op("neg", "m", "a", device=G1)], ["m"]),
    case("generator-unconsumed", "a constant with no consumer: the default device",
         [const("a", [1.0, 2.0]), const("b", [1.0, 2.0], G2)], ["a", "b"]),
    case("generator-small-zeros", "tf.zeros below 1000 elements is a Const: it follows",
         [{"name": "z", "op": "zeros", "shape": [2]}, op("neg", "m", "z", device=G2)], ["m"]),
    case("generator-large-zeros-is-fill", "tf.zeros of 1000 elements is a Fill, which reads a "
         "shape tensor: placed in the first pass, on the default device",
         [{"name": "z", "op": "zeros", "shape": [1000]}, op("neg", "m", "z", device=G2)],
         ["m"]),
    case("generator-read-by-identity", "a constant read only by an Identity whose consumer "
         "is on /gpu:2: the constant has no device yet in the first pass, so the Identity "
         "takes the default device and the constant follows it there",
         [const("k", [1.0, 2.0]), op("identity", "i", "k"), op("neg", "m", "i", device=G2)],
         ["m"]),
]  # fmt: skip


def tf_device(device: str) -> str:
    return device.replace("gpu", "cpu").replace("GPU", "CPU")


def gpuplace_device(tf_name: str) -> str:
    return tf_name.rsplit("/device:", 1)[1].replace("CPU", "GPU")


def build(spec: list[dict[str, Any]], device: Any = tf_device) -> tuple[Any, dict[str, Any], bool]:
    """The graph of a case, each op's `device:` through `device` (GPU -> CPU by default)."""
    graph = tf.Graph()
    made: dict[str, Any] = {}
    has_variables = False
    with graph.as_default():
        for entry in spec:
            # colocate_with resets the device scopes; a device scope inside it still applies
            # (gpuplace's `device:` on an op with `colocate_with:`)
            target = entry.get("colocate_with")
            with contextlib.ExitStack() as scopes:
                if target is not None:
                    scopes.enter_context(graph.colocate_with(made[target]))
                scopes.enter_context(graph.device(device(entry.get("device", ""))))
                made[entry["name"]] = make(entry, made)
            has_variables = has_variables or entry["op"] == "variable"
    return graph, made, has_variables


def make(entry: dict[str, Any], made: dict[str, Any]) -> Any:
    name, kind = entry["name"], entry["op"]
    inputs = [tensor(made, ref) for ref in entry.get("inputs", [])]
    if kind == "constant":
        return tf.constant(entry["value"], dtype=tf.float32, name=name)
    if kind == "zeros":
        return tf.zeros(entry["shape"], name=name)
    if kind == "variable":
        return tf.compat.v1.Variable(tf.zeros(entry["shape"]), name=name, use_resource=False)
    if kind == "identity":
        return tf.identity(inputs[0], name=name)
    if kind == "neg":
        return tf.negative(inputs[0], name=name)
    if kind == "add":
        return tf.math.add(inputs[0], inputs[1], name=name)
    if kind == "matmul":
        return tf.matmul(inputs[0], inputs[1], name=name)
    raise ValueError(kind)


def tensor(made: dict[str, Any], ref: str) -> Any:
    name, _, index = ref.partition(":")
    value = made[name]
    if isinstance(value, tf.Operation):
        return value.outputs[int(index or 0)]
    return value


def capture(c: dict[str, Any]) -> dict[str, Any]:
    graph, made, has_variables = build(c["graph"])
    fetches = [made[name] for name in c["fetch"]]
    init = None
    if has_variables:
        with graph.as_default():
            init = tf.compat.v1.global_variables_initializer()
    ran = run_logged(graph, fetches, soft=c["soft"], cpus=CPUS, setup=init)
    if "error" in ran:
        return {**c, "error": ran["error"]}
    names = [entry["name"] for entry in c["graph"]]
    placed = {n: gpuplace_device(ran["placed"][n][1]) for n in names}
    return {**c, "placed": placed, "log": [[n, *ran["placed"][n]] for n in ran["order"]]}


def main() -> None:
    document = {
        "tensorflow": tf.__version__,
        "how": "tools/tf_capture/placer.py (graph mode, 3 CPU devices; TF's CPU:k is GPU:k)",
        "cases": [capture(c) for c in CASES],
    }
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(document, out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
