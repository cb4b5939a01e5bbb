"""Hostile inputs, classes 2 and 7: memory blow-ups that must be refused before they happen
(expansion bombs, huge files, lying .npy headers, a run larger than the host), and cliffs
(inputs whose cost must grow linearly, not quadratically)."""

from __future__ import annotations

import dataclasses
import json

from tests.hostile.cases import SIM, Case, npy, spec
from tests.hostile.sandbox import GiB, Limits

TB = 2**38  # float32 elements in 1 TiB: more than any host this runs on has
PIB_MACHINE = """host: {cores: 8, memory: 4096TiB}
gpus:
  - {name: Huge, memory: 1024TiB, compute_capability: "9.0", count: 2}
"""


def towers_bomb(levels: int, width: int) -> str:
    """Towers nested `levels` deep, `width` towers each: width**levels ops in a few hundred bytes."""
    devices = json.dumps(["/cpu:0"] * width)
    lines, indent = ["graph:"], "  "
    for _ in range(levels):
        lines += [f"{indent}- towers: {devices}", f"{indent}  graph:"]
        indent += "    "
    return "\n".join([*lines, f"{indent}- {{op: constant, value: 1.0}}", ""])


def scope_bomb(levels: int) -> str:
    """Billion laughs over device scopes: each level lists the one below it ten times."""
    lines = ["graph:", "  - &b0 {op: constant, value: 1.0}"]
    for k in range(1, levels + 1):
        below = ", ".join([f"*b{k - 1}"] * 10)
        lines.append(f"  - &b{k} {{device: /cpu:0, graph: [{below}]}}")
    return "\n".join(lines) + "\n"


def value_bomb(levels: int) -> str:
    """A constant whose `value` is a nested list of 10**levels elements, through aliases."""

    def nested(k: int) -> str:
        if k == 0:
            return "[" + ", ".join(["1.0"] * 10) + "]"
        return f"[&v{k - 1} {nested(k - 1)}, " + ", ".join([f"*v{k - 1}"] * 9) + "]"

    return spec(f"{{name: c, op: constant, value: {nested(levels - 1)}}}")


FEED_SPEC = spec("{name: x, op: placeholder, shape: [1000000, 1000000]}",
                 "{name: y, op: neg, inputs: [x]}")  # fmt: skip
LIAR = npy("(1000000, 1000000)", data=b"\0" * 64)  # claims 4 TB, holds 64 bytes
BOMB = Limits(address_space=GiB, cpu_s=10, wall_s=10.0)
SLOW = Limits(cpu_s=30, wall_s=30.0)  # cliffs: linear code needs seconds, today's minutes


def _add_n(count: int) -> str:
    inputs = ", ".join(["a"] * count)
    return spec(
        "{name: a, op: constant, value: 1.0}", f"{{name: s, op: add_n, inputs: [{inputs}]}}"
    )


def _big_machine_file(gpus: int, processes: int) -> str:
    """A machine file as a script writes one (JSON is YAML): `gpus` GPUs with `processes`
    processes each; 4 x 96,000 is about 24 MB."""
    rows = [{"pid": p, "name": f"proc-{p:08d}-pad", "memory": "1MiB"} for p in range(processes)]
    gpu = {"name": "H200", "memory_used": f"{processes}MiB", "processes": rows}
    return json.dumps({"gpus": [gpu] * gpus})


BOMBS = [
    Case("towers-2^40", "memory", (*SIM, "run", "g.yaml"), 2, r"ops", {"g.yaml": towers_bomb(10, 16)}),
    Case("towers-2^24", "memory", (*SIM, "plan", "g.yaml"), 2, r"ops", {"g.yaml": towers_bomb(6, 16)}),
    Case("scope-aliases-10^9", "memory", (*SIM, "run", "g.yaml"), 2, r"ops", {"g.yaml": scope_bomb(9)}),
    Case("value-aliases-10^10", "memory", (*SIM, "run", "g.yaml"), 2, r"alias bomb",
         {"g.yaml": value_bomb(10)}),
    Case("split-10^7", "memory", (*SIM, "plan", "g.yaml"), 2, r"split|pieces",
         {"g.yaml": spec("{name: x, op: zeros, shape: [10000000]}",
                         "{name: s, op: split, inputs: [x], num_split: 10000000}")}),
    Case("spec-dev-zero", "memory", (*SIM, "run", "/dev/zero"), 2, r"/dev/zero"),
    Case("spec-dev-urandom", "memory", (*SIM, "plan", "/dev/urandom"), 2, r"/dev/urandom"),
    Case("tensor-10^12", "held", (*SIM, "run", "g.yaml"), 1, r"larger than",
         {"g.yaml": spec("{name: z, op: zeros, shape: [1000000, 1000000]}")}),
    Case("machine-dev-zero", "held", ("--machine", "/dev/zero", "devices"), 2, r"/dev/zero"),
    Case("rates-dev-zero", "memory", (*SIM, "plan", "g.yaml", "--strategy", "balanced"), 0,
         r"warning:.*rates", {"g.yaml": spec("{name: a, op: ones, shape: [2]}")},
         env={"GPUPLACE_RATES": "/dev/zero"}),
    Case("rates-dev-urandom", "memory", (*SIM, "run", "g.yaml", "--strategy", "balanced"), 0,
         r"warning:.*rates", {"g.yaml": spec("{name: a, op: ones, shape: [2]}")},
         env={"GPUPLACE_RATES": "/dev/urandom"}),
    Case("feed-npy-claims-4TB", "memory",
         ("--machine", "m.yaml", "run", "g.yaml", "--feed", "x=x.npy"), 2, r"x\.npy",
         {"g.yaml": FEED_SPEC, "x.npy": LIAR, "m.yaml": PIB_MACHINE}),
    Case("load-npy-claims-4TB", "memory", ("--machine", "m.yaml", "run", "g.yaml"), 2, r"x\.npy",
         {"g.yaml": spec("{name: x, op: load, path: x.npy}"), "x.npy": LIAR,
          "m.yaml": PIB_MACHINE}),
    Case("host-ram-cpu", "memory", ("--machine", "m.yaml", "run", "g.yaml"), 1, r"plan",
         {"g.yaml": spec(f"{{name: z, op: zeros, shape: [{TB}], device: /cpu:0}}",
                         "{name: r, op: reduce_sum, inputs: [z], device: /cpu:0}"),
          "m.yaml": PIB_MACHINE}),
    Case("host-ram-simulated-gpus", "memory", ("--machine", "m.yaml", "run", "g.yaml"), 1,
         r"plan",
         {"g.yaml": spec(f"{{name: z, op: zeros, shape: [{TB}], device: /gpu:0}}",
                         f"{{name: o, op: ones, shape: [{TB}], device: /gpu:1}}",
                         "{name: s, op: reduce_sum, inputs: [z], device: /gpu:0}",
                         "{name: t, op: reduce_sum, inputs: [o], device: /gpu:1}"),
          "m.yaml": PIB_MACHINE}),
]  # fmt: skip

CLIFFS = [
    Case("add_n-250k-inputs", "cliff", (*SIM, "run", "g.yaml"), 0, r"250000",
         {"g.yaml": _add_n(250_000)}, limits=SLOW),
    Case("replicate-all-8000-gpus", "cliff",
         ("--machine", "H200", "plan", "g.yaml", "--replicate", "all",
          "--virtual-gpus", "GPU:0=" + ",".join(["1MiB"] * 8000)), 0, r"replica_7999",
         {"g.yaml": spec("{name: x, op: placeholder, shape: [8000, 4]}",
                         "{name: y, op: relu, inputs: [x]}")},
         limits=SLOW),
    Case("virtual-gpus-20000", "cliff",
         ("--machine", "H200", "plan", "g.yaml",
          "--virtual-gpus", "GPU:0=" + ",".join(["1MiB"] * 20_000)), (0, 2), r"GPU",
         {"g.yaml": spec("{name: a, op: ones, shape: [2]}")}, limits=SLOW),
    Case("machine-file-24MB", "cliff", ("--machine", "m.yaml", "devices"), (0, 2), r"H200|m\.yaml",
         {"m.yaml": _big_machine_file(4, 96_000)}, limits=SLOW),
]  # fmt: skip

# A bomb gets a smaller budget: refusing one needs next to nothing, and today's blow-ups end sooner
CASES = [*(dataclasses.replace(c, limits=BOMB) for c in BOMBS), *CLIFFS]
