"""Thousands of broken specs: each loads, or raises BadInput with a short one-line message.

Mutations of good specs (values swapped for wrong types, fields dropped or added, names
broken, lists reordered, huge or negative shapes) and garbage text (random edits of the YAML
and JSON). Anything else escaping the loader is a bug; a spec that loads must be consistent.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.errors import BadInput
from gpuplace.graph import Graph, loads

# yaml.safe_dump's text, written by libyaml (the same text for these specs, at C speed; checked
# on all 1500 mutated specs): about a tenth of this file's CPU time with the Python emitter.
SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _yaml(spec: object) -> str:
    return yaml.dump(spec, Dumper=SafeDumper)


GOOD: list[dict[str, Any]] = [
    {
        "config": {"log_device_placement": True, "gpu_options": {"allow_growth": True}},
        "graph": [
            {
                "name": "a",
                "op": "constant",
                "value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                "shape": [2, 3],
            },
            {
                "device": "/cpu:0",
                "graph": [
                    {
                        "name": "b",
                        "op": "constant",
                        "value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                        "shape": [3, 2],
                    },
                ],
            },
            {"name": "c", "op": "matmul", "inputs": ["a", "b"]},
        ],
        "fetch": ["c"],
    },
    {
        "graph": [
            {
                "towers": ["/device:GPU:2", "/device:GPU:3"],
                "graph": [
                    {"op": "constant", "value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "shape": [2, 3]},
                    {"op": "constant", "value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "shape": [3, 2]},
                    {"op": "matmul", "inputs": ["Const", "Const_1"]},
                ],
            },
            {"op": "add_n", "inputs": ["MatMul"], "device": "/cpu:0"},
        ],
    },
    {
        "graph": [
            {"name": "x", "op": "placeholder", "shape": [4, 6], "dtype": "float32"},
            {
                "name": "w",
                "op": "variable",
                "shape": [6, 6],
                "initializer": "random_normal",
                "seed": 1,
            },
            {"name": "y", "op": "matmul", "inputs": ["x", "w"], "transpose_b": True},
            {"name": "s", "op": "split", "inputs": ["y"], "num_split": 2, "axis": 1},
            {"name": "r", "op": "relu", "inputs": ["s:1"], "colocate_with": "y"},
            {"name": "m", "op": "reduce_mean", "inputs": ["r"], "axis": [0], "keepdims": True},
            {"name": "t", "op": "transpose", "inputs": ["m"], "perm": [1, 0]},
            {"name": "q", "op": "reshape", "inputs": ["t"], "shape": [-1]},
            {"name": "k", "op": "concat", "inputs": ["q", "q"], "axis": 0},
            {"name": "z", "op": "cast", "inputs": ["k"], "dtype": "int32"},
            {"name": "p", "op": "print", "inputs": ["later"]},
            {"name": "later", "op": "softmax", "inputs": ["s:0"]},
            {"name": "u", "op": "random_uniform", "shape": [3], "minval": -1, "maxval": 1},
            {"name": "f", "op": "fill", "shape": [3], "value": 2, "dtype": "int64"},
        ],
        "fetch": ["z", "p", "u", "f"],
    },
    {
        "graph": [
            {"name": "a", "op": "zeros", "shape": [2, 2]},
            {"name": "b", "op": "ones", "shape": [2, 2], "device": "/device:GPU:0"},
            {"name": "c", "op": "constant", "value": [[1, 2], [3, 4]], "dtype": "float32"},
            {"name": "v", "op": "variable", "shape": [2, 2], "initializer": "constant", "value": 1},
            {"name": "d", "op": "sub", "inputs": ["c", "b"]},
            {"name": "e", "op": "div", "inputs": ["d", "v"]},
            {"name": "f", "op": "mul", "inputs": ["e", "a"]},
            {"name": "g", "op": "exp", "inputs": ["f"]},
            {"name": "h", "op": "log", "inputs": ["g"]},
            {"name": "i", "op": "sigmoid", "inputs": ["h"]},
            {"name": "j", "op": "tanh", "inputs": ["i"]},
            {"name": "k", "op": "neg", "inputs": ["j"]},
            {"name": "l", "op": "identity", "inputs": ["k"]},
            {"name": "m", "op": "add_n", "inputs": ["l", "k", "j"]},
            {"name": "n", "op": "reduce_sum", "inputs": ["m"]},
            {"name": "o", "op": "reduce_max", "inputs": ["m"], "axis": -1},
            {"name": "p", "op": "split", "inputs": ["o"], "sizes": [1, -1]},
            {"name": "q", "op": "save", "inputs": ["p:1"], "path": "out.npy"},
        ],
    },
]

ODD_VALUES = [
    None, True, False, 0, -1, 1, 2.5, -3.0, float("inf"), 10**30, 2**63, "", "x", "a:b:c",
    "/gpu:x", "/cpu:0/gpu:0", "/device:GPU:²", "GPU:*", "op 1", "\n", [], {}, [1, 2],
    [[1], [2, 3]], [-5, 3], [10**20, 10**20], {"a": 1}, {"op": "constant"}, ["a", 1], [None],
    "matmul", "float64", "s:7", "c", "Const",
]  # fmt: skip
KEYS = ["op", "name", "inputs", "device", "graph", "towers", "shape", "value", "dtype", "axis",
        "fetch", "config", "colocate_with", "perm", "seed", "initializer", "zzz", 3]  # fmt: skip


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*path, i))
    return out


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        node = node[step]
    return node


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    spec = copy.deepcopy(draw(st.sampled_from(GOOD)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(spec)[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, last = _get(spec, path[:-1]), path[-1]
        action = draw(st.sampled_from(["replace", "delete", "add", "duplicate", "rename"]))
        if action == "replace":
            parent[last] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))
        elif action == "delete":
            del parent[last]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(KEYS))] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))
        elif action == "duplicate" and isinstance(parent, list):
            parent.insert(draw(st.integers(0, len(parent))), copy.deepcopy(parent[last]))
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(KEYS))] = parent.pop(last)
    return spec


def _check(text: str) -> None:
    try:
        graph = loads(text, "fuzz.yaml")
    except BadInput as err:
        message = str(err)
        assert "\n" not in message and len(message) < 600, message
        assert message.startswith("fuzz.yaml"), message
        return
    _consistent(graph)


def _consistent(graph: Graph) -> None:
    names = [op.name for op in graph.ops]
    assert len(set(names)) == len(names)
    seen: dict[str, int] = {}
    for op in graph.ops:
        for ref in op.inputs:
            assert ref.index < len(graph.ops[seen[ref.op]].outputs)
        seen[op.name] = len(seen)
    for ref in graph.fetch:
        assert ref.op in seen


FUZZ = settings(max_examples=1500, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


@pytest.mark.slow  # 1500 mutated specs, each loaded as YAML or JSON
@FUZZ
@given(spec=mutated(), as_json=st.booleans())
def test_mutated_specs_load_or_fail_cleanly(spec: dict[str, Any], as_json: bool) -> None:
    _check(json.dumps(spec) if as_json else _yaml(spec))


@settings(max_examples=800, deadline=None, derandomize=True)
@given(
    base=st.sampled_from(GOOD),
    as_json=st.booleans(),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.text(max_size=3)),
                   min_size=1, max_size=4),
)  # fmt: skip
def test_garbage_text_fails_cleanly(
    base: dict[str, Any], as_json: bool, edits: list[tuple[int, int, str]]
) -> None:
    text = json.dumps(base, indent=1) if as_json else _yaml(base)
    for at, cut, insert in edits:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + cut :]
    _check(text)
