"""Mutants of real specs for the CLI fuzzer: the examples/ specs and the docs' YAML blocks
(graph specs and the machine file), changed in their structure (keys deleted, duplicated,
renamed, swapped; values of the wrong type, huge, negative, NaN, long, unicode, deeply nested;
items repeated by reference, which YAML writes as aliases) and then in their text (characters
inserted or cut, lines repeated or swapped, a cut-off end, deep brackets), with a command line
drawn for each (command, machine, flags).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ("4xK520", "1xK40c", "4xK20m", "2xA100-80GB,1xT4")
FLAGS = (("--strategy", "balanced"), ("--strategy", "round-robin"), ("--replicate", "2"),
         ("--allow-soft-placement",), ("--json",), ("--verify",), ("--explain",),
         ("--allow-growth",), ("--memory-fraction", "0.5"), ("--memory-limit", "64MiB"),
         ("--log-placement",))  # fmt: skip
# Values a careless or hostile author writes. No absolute path and no `save`: today's code
# writes wherever a spec says, and the fuzzer must not write outside its folder.
ODD: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 3, 2**31, 2**63, -(2**63) - 1, 10**400, -(10**40), 0.5,
    -0.0, 1e308, 1e-320, float("nan"), float("inf"), float("-inf"), "", " ", "x" * 5000,
    "Ω≈ç√", "\u202e\u0663\u0661", "𝟘𝟙", "\x1b[2J", "a\tb", "../x", "~/x", "/gpu:0", "/cpu:0",
    "/device:GPU:9", "GPU:*", "float64", "int32", "bool", "float16", "matmul", "constant",
    "add_n", "split", "placeholder", "random_normal", "MatMul", "a", "s:1", [], {}, [1, 2],
    [[1], [2, 3]], [-1], [0], [2, 3], [10**6, 10**6], [1] * 70, {"op": "constant"}, ["a", 1],
    {"gpus": 2, "split": ["x"]},
)  # fmt: skip
# Values that are wrong for one field in particular (checked by a kernel, if no check runs first)
TYPED: dict[str, tuple[Any, ...]] = {
    "shape": ([1] * 65, [-1], [0], [2**40], [3, 0, 2], [10**6, 10**6], "2,3", [2.5], [2, 2, -1]),
    "value": (10**400, [1, True], [[1, 2], [3]], [float("nan")], "1.0", [10**20], [[[1]]], True),
    "dtype": ("int64", "bool", "float16", "int8", "complex64", None, "float32 "),
    "axis": ([0, 0], 99, -99, [0, 1, 2, 3], 0.5, "0", [-1, 1]),
    "num_split": (10**7, 0, -1, 3, True, 2.0),
    "sizes": ([1, -1, -1], [0], [10**9], [], [-2, 3]),
    "perm": ([0, 0], [1], [2, 0, 1], [-1, 0], [0, 1, 2, 3, 4]),
    "seed": (-1, 2**64, "x", 1.5),
    "inputs": ([], ["a"] * 50, ["missing"], ["a:9"], "a", [1], ["MatMul:1"]),
    "device": ("/gpu:99", "/cpu:1", "/job:x/task:9/device:GPU:0", "", "/device:TPU:0", "gpu"),
    "towers": ([], ["/gpu:0"] * 20, "/gpu:0", [None], ["/gpu:9"]),
    "name": ("", "a b", "_x", "x" * 300, "a/b", "../x", "MatMul", "c:0"),
    "keepdims": (2, "yes", None),
    "transpose_a": (1, "true"),
    "initializer": ("orthogonal", None, 1),
    "stddev": (-1.0, float("nan"), 1e308, 0),
    "memory": ("1e400B", "-1GiB", "0B", 10**30, "16EiB", "9" * 400 + "GiB"),
    "count": (0, -1, 10**6, 300),
    "compute_capability": ("9.9.9", 9.0, "x", "0.0"),
    "pci_bus_id": ("zz", "00000000:00:00.0", "0" * 300),
    "gpus": (0, 1, 10**6, "all", [0, 0], [99], -2),
    "split": (["nope"], "x", [], ["x", "x"]),
    "merge": ("max", None, "add_n"),
    "fetch": ([], ["nope"], "c", [["c"]], ["c:7"]),
    "per_process_gpu_memory_fraction": (0, -1, 1.5, float("nan"), "0.5"),
}  # fmt: skip
KEYS: tuple[Any, ...] = (
    "op", "name", "inputs", "device", "graph", "towers", "replicate", "shape", "value", "dtype",
    "axis", "keepdims", "perm", "num_split", "sizes", "seed", "initializer", "message",
    "colocate_with", "fetch", "config", "gpus", "memory", "count", "mig", "processes", "host",
    "split", "merge", "transpose_a", "stddev", "parts", "index", "zzz", 7, "",
)  # fmt: skip
TEXT = st.text(alphabet=st.sampled_from(list(":{}[],&*!|>'\"#%@`-? \n\t0123456789.eaΩ\x00\r\ufeff")),
               min_size=1, max_size=6)  # fmt: skip


@dataclass(frozen=True)
class Seed:
    """A spec or machine file to start from, and the commands that read it."""

    name: str
    data: Any
    machine_file: bool
    commands: tuple[str, ...]


@dataclass(frozen=True)
class Mutant:
    """A mutated file, the command line that reads it, and how it was made (for reports)."""

    seed: str
    file: str
    text: str
    argv: tuple[str, ...]
    steps: tuple[str, ...]

    def describe(self, limit: int = 600) -> str:
        shown = self.text if len(self.text) <= limit else self.text[:limit] + "...(cut)"
        return (f"seed {self.seed}; {'; '.join(self.steps)}\n$ gpuplace {' '.join(self.argv)}\n"
                f"{self.file}:\n{shown}")  # fmt: skip


def seeds() -> list[Seed]:
    """examples/**.yaml and every YAML block of the docs (graph specs, the machine file)."""
    found: list[Seed] = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        # big_model holds 10 GiB of weights, keras_seed 1.2 GiB and 200 GFLOP: planned, never run
        planned = path.name in ("big_model.yaml", "keras_seed.yaml")
        commands = ("plan",) if planned else ("run", "plan", "mem")
        found.append(Seed(str(path.relative_to(ROOT)), yaml.safe_load(path.read_text()), False,
                          commands))  # fmt: skip
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for n, block in enumerate(re.findall(r"```yaml[^\n]*\n(.*?)```", text, re.S)):
            data = yaml.safe_load(block)
            where = f"{doc.relative_to(ROOT)} yaml block {n}"
            if isinstance(data, dict) and "gpus" in data:
                found.append(Seed(where, data, True, ("devices", "mem")))
            elif isinstance(data, dict) and "graph" in data:
                found.append(Seed(where, data, False, ("run", "plan", "mem")))
    return found


def _slots(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in `node`, breadth first."""
    out: list[tuple[Any, Any]] = []
    todo = [node]
    while todo:
        here = todo.pop(0)
        keys = list(here) if isinstance(here, dict) else range(len(here))
        for k in keys:
            out.append((here, k))
            if isinstance(here[k], (dict, list)):
                todo.append(here[k])
    return out[:2000]


def _nested(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def _structure_step(draw: st.DrawFn, data: Any) -> str:
    """Change `data` in place once; say how."""
    slots = _slots(data)
    if not slots:
        return "nothing to change"
    parent, key = draw(st.sampled_from(slots))
    action = draw(st.sampled_from(
        ["replace", "replace", "delete", "add", "rename", "repeat", "alias", "swap", "nest"]
    ))  # fmt: skip
    if action == "replace":
        typed = TYPED.get(key) if isinstance(key, str) else None
        pool = typed if typed and draw(st.booleans()) else ODD
        parent[key] = copy.deepcopy(draw(st.sampled_from(pool)))
    elif action == "delete":
        del parent[key]
    elif action == "add" and isinstance(parent[key], dict):
        parent[key][draw(st.sampled_from(KEYS))] = copy.deepcopy(draw(st.sampled_from(ODD)))
    elif action == "rename" and isinstance(parent, dict):
        parent[draw(st.sampled_from(KEYS))] = parent.pop(key)
    elif action in ("repeat", "alias") and isinstance(parent, list):
        item, times = parent[key], draw(st.integers(1, 12))
        copies = [item if action == "alias" else copy.deepcopy(item) for _ in range(times)]
        parent[key : key + 1] = [item, *copies]
    elif action == "swap" and len(parent) > 1:
        other = draw(st.sampled_from([k for _, k in _slots(parent)[: len(parent)] if k != key]))
        parent[key], parent[other] = parent[other], parent[key]
    elif action == "nest":
        parent[key] = _nested(parent[key], draw(st.integers(1, 80)))
    else:
        return f"{action} at {key!r}: not applicable"
    return f"{action} at {key!r}"


@st.composite
def _text_step(draw: st.DrawFn, text: str) -> tuple[str, str]:
    """One edit of the text, and what it was."""
    at = draw(st.integers(0, len(text)))
    lines = text.split("\n")
    action = draw(st.sampled_from(["insert", "cut", "line-twice", "swap-lines", "truncate",
                                   "brackets", "bom"]))  # fmt: skip
    if action == "insert":
        return text[:at] + draw(TEXT) + text[at:], f"insert at {at}"
    if action == "cut":
        return text[:at] + text[at + draw(st.integers(1, 20)) :], f"cut at {at}"
    if action == "line-twice" and lines:
        k = draw(st.integers(0, len(lines) - 1))
        return "\n".join([*lines[: k + 1], lines[k], *lines[k + 1 :]]), f"line {k + 1} twice"
    if action == "swap-lines" and len(lines) > 1:
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines), f"swap lines {i + 1} and {j + 1}"
    if action == "brackets":
        n = draw(st.sampled_from([100, 1000, 20_000]))
        return text[:at] + "[" * n + "]" * n + text[at:], f"{n} brackets at {at}"
    if action == "bom":
        return "\ufeff" + text, "a byte-order mark"
    return text[:at], f"truncated at {at}"


def _dump(data: Any, as_json: bool) -> str:
    if not as_json:
        try:
            return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
        except (RecursionError, yaml.YAMLError):
            pass
    return json.dumps(data, allow_nan=True)


@st.composite
def mutants(draw: st.DrawFn, pool: list[Seed]) -> Mutant:
    """A seed, mutated 1-3 times in structure and, two times in five, in its text too (most
    text edits only make a syntax error), with a command line."""
    seed = draw(st.sampled_from(pool))
    data = copy.deepcopy(seed.data)
    steps = [draw(_structure_step(data)) for _ in range(draw(st.integers(1, 3)))]
    as_json = draw(st.booleans())
    text = _dump(data, as_json)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # most text edits break the syntax
        text, step = draw(_text_step(text))
        steps.append(step)
    command = draw(st.sampled_from(seed.commands))
    if seed.machine_file:
        flags = draw(st.sampled_from([(), ("--json",)]))
        return Mutant(seed.name, "m.yaml", text, ("--machine", "m.yaml", command, *flags),
                      tuple(steps))  # fmt: skip
    name = draw(st.sampled_from(["g.yaml", "g.json"]))
    chosen = draw(st.lists(st.sampled_from(FLAGS), max_size=2, unique=True))
    machine = draw(st.sampled_from(MACHINES))
    argv = ("--machine", machine, command, name, *(f for flag in chosen for f in flag))
    return Mutant(seed.name, name, text, argv, tuple(steps))
