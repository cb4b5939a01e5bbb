"""Capture TensorFlow 2.21's placer on a two-task cluster: tests/conformance/data/cluster.json.

    /work/tfenv-cpu/bin/python tools/tf_capture/cluster.py tests/conformance/data/cluster.json

Two `tf.distribute.Server`s of job `worker` run in this one process on free 127.0.0.1 ports
(CPU build: each task has CPU:0 only). Each case is a gpuplace graph (the `graph:` list of a
spec) built with tf.compat.v1 ops as `placer.py` builds them, device strings unchanged, and run
with log_device_placement in a session on the case's master task (its server's target). The
JSON keeps each case's graph, its master task and where TF put each op, or TF's error.
gpuplace replays them on a cluster of two CPU-only tasks (tests/conformance/test_cluster.py).
What a CPU-only build cannot show (a GPU on another task beats the master's CPU) follows
`SortPrioritizedDeviceVector` in the source; gpuplace's unit tests cover it.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

from _session import run_logged, tf
from placer import build, const, op

TASKS = 2


def case(name: str, why: str, graph: list[dict[str, Any]], fetch: list[str],
         master: int = 0, soft: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"name": name, "why": why, "soft": soft, "master": master, "graph": graph,
            "fetch": fetch}  # fmt: skip


C = const("c", [1.0, 2.0])


def one(device: str | None, soft: bool = False, master: int = 0) -> list[dict[str, Any]]:
    return [C, op("neg", "m", "c", device=device)]


CASES = [
    case("unplaced-on-master-0", "no device: the session's task (task 0)", one(None), ["m"]),
    case("unplaced-on-master-1", "no device: the session's task (task 1)", one(None), ["m"], 1),
    case("task-only", "/task:1 alone matches task 1's devices", one("/task:1"), ["m"]),
    case("job-only-master-0", "/job:worker: any worker device, the session's first",
         one("/job:worker"), ["m"]),
    case("job-only-master-1", "/job:worker with the session on task 1", one("/job:worker"),
         ["m"], 1),
    case("device-only", "/device:CPU:0 without a job: the session's task", one("/device:CPU:0"),
         ["m"], 1),
    case("full-remote", "a full name on the other task", one("/job:worker/task:1/device:CPU:0"),
         ["m"]),
    case("localhost-in-cluster", "/job:localhost does not exist inside a cluster",
         one("/job:localhost/replica:0/task:0/device:CPU:0"), ["m"]),
    case("localhost-in-cluster-soft", "soft placement keeps the job: still an error",
         one("/job:localhost/device:CPU:0"), ["m"], soft=True),
    case("missing-task-soft", "a task the cluster lacks: an error with soft placement too",
         one("/job:worker/task:5/device:CPU:0"), ["m"], soft=True),
    case("missing-job", "a job the cluster lacks", one("/job:ps/task:0"), ["m"]),
    case("missing-replica-soft", "replica 1 does not exist", one("/job:worker/replica:1"),
         ["m"], soft=True),
    case("gpu-on-cpu-task-soft", "a GPU of a CPU-only task: soft placement stays on the task",
         one("/job:worker/task:1/device:GPU:0"), ["m"], soft=True),
    case("gpu-unqualified-soft", "/gpu:0 with soft placement: the session's task's CPU",
         one("/gpu:0"), ["m"], 1, soft=True),
    case("generator-follows-remote", "a constant follows its one consumer to task 1",
         [C, op("neg", "m", "c", device="/task:1"), op("neg", "k", "m")], ["k"]),
    case("colocated-remote", "colocation with an op on task 1 pins to task 1",
         [C, op("neg", "n", "c", device="/job:worker/task:1"),
          op("neg", "m", "n", colocate_with="n"), op("neg", "k", "m")], ["k"]),
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(c: dict[str, Any], servers: list[Any]) -> dict[str, Any]:
    graph, made, _ = build(c["graph"], device=str)  # device strings as written
    fetches = [made[name] for name in c["fetch"]]
    ran = run_logged(graph, fetches, soft=c["soft"], target=servers[c["master"]].target)
    if "error" in ran:
        return {**c, "error": ran["error"]}
    return {**c, "placed": {e["name"]: ran["placed"][e["name"]][1] for e in c["graph"]}}


def main() -> None:
    spec = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{free_port()}" for _ in range(TASKS)]})
    servers = [tf.distribute.Server(spec, "worker", i, start=True) for i in range(TASKS)]
    document = {
        "tensorflow": tf.__version__,
        "how": "tools/tf_capture/cluster.py (graph mode, two CPU-only worker tasks in one "
        "process; the session on the case's master task)",
        "cases": [run(c, servers) for c in CASES],
    }
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(document, out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
