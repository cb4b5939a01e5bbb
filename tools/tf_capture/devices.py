"""Capture how TensorFlow 2.21 reads device strings (tests/conformance/data/device_strings.json).

    /work/tfenv-cpu/bin/python tools/tf_capture/devices.py tests/conformance/data/device_strings.json

For each string S, in graph mode (tf.compat.v1) on the CPU build, with one CPU and
allow_soft_placement off (tf.compat.v1.Session's default):

    a = tf.constant(1.0, name="a")
    with g.device(S):
        b = tf.negative(a, name="b")
    sess.run(b)   # log_device_placement=True

and records what Python's DeviceSpec said (`python_error`: the exception's type and message,
or `requested`: b's NodeDef device, the canonical string), then what the session said
(`device`: where the placer put b, or `run_error`: TF's message). TensorFlow is not a
dependency of gpuplace or its tests; the JSON is.
"""

from __future__ import annotations

import json
import sys

from _session import run_logged, tf

STRINGS = [
    # no constraint
    "", "/", "//", "///",
    # the bare types, case-insensitive
    "/cpu:0", "/CPU:0", "/Cpu:0", "/cPU:0", "cpu:0", "CPU:0", "cpu", "CPU", "/cpu", "/CPU",
    "/cpu:*", "cpu:*", "/gpu:0", "/GPU:0", "/Gpu:0", "gpu:0", "gpu", "/gpu", "/gpu:*",
    "/gpu:1", "/tpu:0", "/TPU:0", "/custom:0", "/epu:0",
    # indices read by Python's int(): whitespace, signs, underscores, unicode digits
    "/cpu:0 ", "/cpu: 0", "/cpu:\t0\n", "/cpu:+0", "/cpu:-0", "/cpu:00", "/cpu:0_0",
    "/cpu:0__0", "/cpu:_0", "/cpu:0_", "/cpu:\u0660", "/cpu:\uff10", "/cpu:\u09e6",
    "/cpu:\u00b2", "/cpu:\u2070", "/cpu:+1", "/cpu: 1", "/cpu:1_0", "/cpu:1", "/cpu:01",
    "/gpu: 1", "/gpu:+1", "/gpu:0_1", "/gpu:\u0661", "/gpu:\uff11",
    "/cpu:x", "/cpu:", "/cpu: ", "/cpu:0x1", "/cpu:1e0", "/cpu:0.0", "/cpu:++0", "/cpu:+-0",
    "/cpu:0 0", "/cpu:\u00a00",
    # negative and large indices: Python accepts them, the C++ placer decides
    "/cpu:-1", "/gpu:-1", "/device:GPU:-1", "/device:CPU:-1", "/device:CPU:-0",
    "/cpu:2147483647", "/cpu:2147483648", "/cpu:4294967296", "/cpu:4294967297",
    "/cpu:18446744073709551615", "/cpu:18446744073709551616", "/cpu:99999999999999999999",
    "/cpu:" + "1" * 5000, "/cpu:" + "x" * 5000, "/job:" + "a" * 5000,
    # the /device: form: the type is kept as written (cpu and gpu upper-cased)
    "/device:CPU:0", "/device:cpu:0", "/device:Cpu:0", "/device:CPU:*", "/device:CPU: 0",
    "/device:CPU:0_0", "/device:CPU:+0", "device:CPU:0", "/device:GPU:0", "/device:gpu:0",
    "/device:Gpu:0", "/device:GPU:*", "/device:*:0", "/device:*:*", "/job:*", "/job:*/task:*",
    "/device:TPU:0", "/device:tpu:0", "/device:foo:0",
    "/device:XLA_CPU:0", "/device:CPU", "/device:CPU:", "/device::0", "/device:",
    "/device", "/device:CPU:0:0", "/device:CPU:x", "/device: CPU:0", "/device:CPU :0",
    # job, replica, task
    "/job:localhost", "/job:localhost/replica:0/task:0/device:CPU:0",
    "/job:localhost/replica:0/task:0/cpu:0", "/job:localhost/cpu:0", "/replica:0/task:0/cpu:0",
    "/task:0", "/replica:0", "/replica: 0/cpu:0", "/task:+0/cpu:0", "/replica:0_0",
    "/task:\u0660/cpu:0", "/job:*/cpu:0", "/job:localhost/replica:1/cpu:0", "/task:1",
    "/job:worker/cpu:0", "/job:worker", "/job:loc alhost", "/job:localhost ", "/job:/cpu:0",
    "/job:1abc/cpu:0", "/job:_x/cpu:0", "/job:a_1/cpu:0", "/job:a-b/cpu:0", "/job:a:b",
    "/job", "/job:", "/replica:-1/cpu:0", "/task:-1", "/replica:x", "/task:", "/replica",
    "/cpu:0/job:localhost", "/cpu:0/replica:0", "/JOB:localhost", "/Replica:0",
    # repeated, misplaced and unknown parts
    "/cpu:0/gpu:0", "/cpu:0/cpu:0", "/device:CPU:0/device:CPU:0", "/gpu:0/device:GPU:0",
    "/cpu:0/cpu:1", "/cpu:0:0", "/foo:0", "/foo", "foobar", "*", ":", "/:", "/cpu :0",
    "/ cpu:0", " /cpu:0", "/cpu:0/", "cpu:0/", "//cpu:0", "/cpu:0//", "/cpu:0/extra",
    "/job:localhost/replica:0/task:0/device:CPU:0/extra", "/CPU:0\n",
]  # fmt: skip


def capture(spec: str) -> dict[str, object]:
    case: dict[str, object] = {"spec": spec}
    graph = tf.Graph()
    with graph.as_default():
        a = tf.constant(1.0, name="a")
        try:
            with graph.device(spec):
                b = tf.negative(a, name="b")
        except Exception as err:  # what TF raises is what is recorded
            case["python_error"] = [type(err).__name__, str(err)]
            return case
    case["requested"] = b.device
    ran = run_logged(graph, [b])
    if "error" in ran:
        case["run_error"] = ran["error"]
    else:
        case["device"] = ran["placed"]["b"][1]
    return case


# gpuplace op -> how the capture builds it from `a` (a float32 [2] constant), for the
# "Malformed device specification" message with other ops than Neg
OPS = {
    "identity": lambda a: tf.identity(a, name="b"),
    "add": lambda a: tf.math.add(a, a, name="b"),
    "constant": lambda a: tf.constant([1.0, 2.0], name="b"),
}


def malformed(kind: str) -> dict[str, str]:
    graph = tf.Graph()
    with graph.as_default():
        a = tf.constant([1.0, 2.0], name="a")
        with graph.device("/device:GPU:-1"):
            b = OPS[kind](a)
    return {"op": kind, "run_error": run_logged(graph, [b])["error"]}


def main() -> None:
    cases = [capture(spec) for spec in STRINGS]
    document = {
        "tensorflow": tf.__version__,
        "python": sys.version.split()[0],
        "how": "tools/tf_capture/devices.py (graph mode, 1 CPU, allow_soft_placement off)",
        "cases": cases,
        "malformed_ops": [malformed(kind) for kind in OPS],
    }
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(document, out, indent=1, ensure_ascii=True)
        out.write("\n")


if __name__ == "__main__":
    main()
