"""Hostile inputs, class 5: messages that flood the terminal. Whatever is echoed back (a cycle,
GPU names, an environment variable, a name, a path) is capped: first and last items and the
count, one screen at most. Every case of every table also checks stderr's size; these make the
echo as long as it can get."""

from __future__ import annotations

import json
from pathlib import Path

from tests.hostile.cases import SIM, Case, q, spec
from tests.hostile.sandbox import Outcome

ONE = spec("{name: a, op: ones, shape: [2]}")
LONG = "x" * 100_000
SCREEN_OUT = 6000  # `devices` on 4 GPUs prints ~2,000 characters; the rest would be the echo


def _no_control_characters(world: Path, outcome: Outcome) -> None:
    """An echoed name cannot drive the terminal: no escape or other control character."""
    raw = [c for c in outcome.stderr if (ord(c) < 32 and c not in "\n\t") or c == "\x7f"]
    assert not raw, f"control characters echoed raw: {raw[:5]}: {outcome.stderr[:300]!r}"


def cycle(n: int) -> str:
    """n ops, each reading the next, the last reading the first."""
    return spec(*(f"{{name: op{i}, op: neg, inputs: [op{(i + 1) % n}]}}" for i in range(n)))


CASES = [
    Case("cycle-2000-ops", "flood", (*SIM, "plan", "g.yaml"), 2, "cycle", {"g.yaml": cycle(2000)}),
    Case("machine-10000-gpus", "flood", ("--machine", ",".join(["1xK520"] * 10_000), "devices"),
         2, "255"),
    Case("machine-10000-unknown", "flood",
         ("--machine", ",".join(f"NoSuchGpu{i}" for i in range(10_000)), "devices"), 2,
         "NoSuchGpu0"),
    Case("machine-file-10000-gpus", "held", ("--machine", "m.yaml", "devices"), 2, "255",
         {"m.yaml": json.dumps({"gpus": [{"name": f"Card{i}", "memory": "1GiB"}
                                         for i in range(10_000)]})}),
    Case("machine-10000xK520", "held", ("--machine", "10000xK520", "devices"), 2, "255"),
    Case("cuda-device-order-100k", "flood", (*SIM, "devices"), 0, "CUDA_DEVICE_ORDER",
         env={"CUDA_DEVICE_ORDER": LONG}, max_stdout=SCREEN_OUT),
    Case("cuda-visible-100k", "flood", (*SIM, "devices"), 0, "CUDA_VISIBLE_DEVICES",
         env={"CUDA_VISIBLE_DEVICES": "0," + LONG}, max_stdout=SCREEN_OUT),
    Case("cuda-visible-uuid-100k", "flood", (*SIM, "devices"), 0, "CUDA_VISIBLE_DEVICES",
         env={"CUDA_VISIBLE_DEVICES": "GPU-" + "f" * 100_000}, max_stdout=SCREEN_OUT),
    Case("op-name-100k", "flood", (*SIM, "run", "g.yaml"), 2, r"g\.yaml",
         {"g.yaml": spec("{name: a, op: ones, shape: [2]}",
                         f"{{name: b, op: neg, inputs: [{LONG}]}}")}),
    Case("replicate-ops-listed-whole", "flood", (*SIM, "plan", "g.yaml"), 2, "names no op",
         {"g.yaml": spec("{name: x, op: placeholder, shape: [64, 8]}",
                         "{replicate: {gpus: 4, split: [x]}, graph: ["
                         f"{{name: {'v' * 5000}, op: variable, shape: [8, 2]}}, "
                         "{name: h, op: matmul, inputs: [x, w]}]}")}),
    Case("machine-file-gpu-5000-chars", "flood", ("--machine", "m.yaml", "devices"), 2, r"m\.yaml",
         {"m.yaml": "gpus:\n  - " + "x" * 5000 + "\n"}),
    Case("unknown-field-100k", "flood", (*SIM, "run", "g.json"), 2, "unknown field",
         {"g.json": json.dumps({"graph": [{"name": "a", "op": "ones", "shape": [2], LONG: 1}]})}),
    Case("unknown-op-100k", "held", (*SIM, "run", "g.yaml"), 2, "unknown op",
         {"g.yaml": spec(f"{{name: a, op: {LONG}}}")}),
    Case("device-100k", "flood", (*SIM, "run", "g.yaml"), 2, r"device",
         {"g.yaml": spec(f"{{name: a, op: ones, shape: [2], device: /gpu:{LONG}}}")}),
    Case("fetch-100k", "flood", (*SIM, "run", "g.yaml"), 2, r"fetch",
         {"g.yaml": ONE + f"fetch: [{LONG}]\n"}),
    Case("feed-name-100k", "flood", (*SIM, "run", "g.yaml", "--feed", LONG + "=[1]"), 2,
         "--feed", {"g.yaml": ONE}),
    Case("feed-value-100k", "flood", (*SIM, "run", "g.yaml", "--feed", "x=[" + "1," * 50_000 + "]"),
         2, "--feed x",
         {"g.yaml": spec("{name: x, op: placeholder, shape: [2]}",
                         "{name: y, op: neg, inputs: [x]}")}),
    Case("load-path-100k", "flood", (*SIM, "run", "g.yaml"), 2, r"load|path",
         {"g.yaml": spec(f"{{name: x, op: load, path: {q(LONG + '.npy')}}}")}),
    Case("virtual-gpus-20000-over-the-card", "flood",
         (*SIM, "plan", "g.yaml", "--virtual-gpus", "GPU:0=" + ",".join(["1MiB"] * 20_000)), 2,
         "--virtual-gpus", {"g.yaml": ONE}),
    Case("memory-limit-100k", "flood", (*SIM, "plan", "g.yaml", "--memory-limit", LONG), 2,
         "--memory-limit", {"g.yaml": ONE}),
    Case("virtual-gpus-100k", "flood", (*SIM, "plan", "g.yaml", "--virtual-gpus", LONG), 2,
         "--virtual-gpus", {"g.yaml": ONE}),
    Case("constant-values-mismatch-100k", "held", (*SIM, "run", "g.yaml"), 2, r"value",
         {"g.yaml": spec("{name: c, op: constant, shape: [3], value: ["
                         + ", ".join(["1.0"] * 50_000) + "]}")}),
    Case("escape-sequences-echoed", "held", (*SIM, "run", "g.yaml"), 2, r"g\.yaml",
         {"g.yaml": spec("{name: a, op: ones, shape: [2]}",
                         '{name: b, op: neg, inputs: ["\\e]0;pwned\\a\\e[2J"]}')},
         check=_no_control_characters),
]  # fmt: skip
