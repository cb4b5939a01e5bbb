"""Bad specs: one BadInput (exit 2) whose message names file:line, op, field, value and fix."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

import numpy as np
import pytest

from gpuplace.errors import BadInput
from gpuplace.graph import load, loads


def error(text: str, source: str = "g.yaml") -> str:
    with pytest.raises(BadInput) as info:
        loads(dedent(text).lstrip("\n"), source)
    assert info.value.exit_code == 2
    return str(info.value)


def test_matmul_shapes_in_tensorflow_words() -> None:
    message = error("""
        graph:
          - {name: a, op: constant, value: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape: [2, 3]}
          - {name: b, op: constant, value: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape: [2, 3]}
          - {name: c, op: matmul, inputs: [a, b]}
        """)
    assert message == (
        "g.yaml:4: Dimensions must be equal, but are 3 and 2 for 'c' (op: 'MatMul') with input "
        "shapes: [2,3], [2,3]. Fix: the first input has 3 columns and the second 2 rows; use "
        "inputs whose inner dimensions agree, or set transpose_a or transpose_b"
    )


def test_broadcasting_in_the_same_words_with_the_op_type() -> None:
    message = error("""
        graph:
          - {name: a, op: zeros, shape: [2, 3]}
          - {name: b, op: zeros, shape: [3, 2]}
          - {name: c, op: mul, inputs: [a, b]}
        """)
    assert message.startswith(
        "g.yaml:4: Dimensions must be equal, but are 3 and 2 for 'c' (op: 'Mul') with input "
        "shapes: [2,3], [3,2]. Fix:"
    )


def test_cycle_prints_its_path() -> None:
    message = error("""
        graph:
          - {name: x, op: ones, shape: [1]}
          - {name: a, op: add, inputs: [x, c]}
          - {name: b, op: neg, inputs: [a]}
          - {name: c, op: neg, inputs: [b]}
        """)
    assert message == (
        "g.yaml:3: cycle in the graph: a -> b -> c -> a; an op cannot depend on its own output, "
        "remove one of these inputs"
    )


def test_self_loop() -> None:
    assert "cycle in the graph: a -> a;" in error("graph: [{name: a, op: neg, inputs: [a]}]")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("graph: [{name: a, op: matmull}]", "g.yaml:1: op 'a': unknown op 'matmull'; did you mean 'matmul' or 'MatMul' or 'mul'?"),
        ("graph: [{name: a, op: zeros, shape: [1], dtpye: float32}]", "g.yaml:1: op 'a' (zeros): unknown field 'dtpye'; did you mean 'dtype'?"),
        ("grpah: []", "g.yaml:1: unknown top-level key 'grpah'; did you mean 'graph'?"),
        ("graph: [{name: alpha, op: zeros, shape: [1]}, {name: b, op: neg, inputs: [alpah]}]", "g.yaml:1: op 'b': input 'alpah' names no op; did you mean 'alpha'?"),
        ("config: {log_device_placment: true}\ngraph: [{op: zeros, shape: [1]}]", "g.yaml:1: config: unknown key 'log_device_placment'; did you mean 'log_device_placement' or 'allow_soft_placement'?"),
        ("graph: [{devcie: /cpu:0, graph: []}]", "g.yaml:1: a device block takes device and graph; unknown key 'devcie'; did you mean 'device'?"),
    ],
)  # fmt: skip
def test_suggestions(text: str, expected: str) -> None:
    assert error(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("graph:\n  - {name: a, op: zeros, shape: [1]}\n  - {name: a, op: ones, shape: [1]}\n",
         "g.yaml:3: duplicate op name 'a'; rename one of them (first defined at line 2)"),
        ("graph:\n  - {name: a, op: zeros, shape: [2, 3]}\n  - {name: c, op: matmul, inputs: [a]}\n",
         "g.yaml:3: op 'c' (matmul) takes 2 inputs, got 1 (inputs: ['a']); list 2 inputs, e.g. inputs: [a, b]"),
        ("graph:\n  - {name: a, op: zeros, shape: [1], inputs: [a]}\n",
         "g.yaml:2: op 'a' (zeros) takes no inputs, got 1 (inputs: ['a']); remove 'inputs'"),
        ("graph:\n  - {name: a, op: constant, value: 1.0, device: /gpu:0/cpu:0}\n",
         "g.yaml:2: op 'a': Multiple device types are not allowed while parsing the device spec: /gpu:0/cpu:0. gpuplace: name one device type, e.g. /gpu:1 or /device:GPU:1."),
        ("graph:\n  - {name: a, op: constant, value: [1, 2, 3], shape: [2, 2]}\n",
         "g.yaml:2: op 'a' (constant): value has 3 elements but shape [2, 2] holds 4; give 4 values, or one value to fill the shape"),
        ("graph:\n  - {name: a, op: zeros, shape: [2], dtype: float}\n",
         "g.yaml:2: op 'a' (zeros): dtype: 'float' is not accepted; expected one of float16, float32, float64, int32, int64, bool"),
        ("graph:\n  - {name: a, op: zeros, shape: [2, -3]}\n",
         "g.yaml:2: op 'a' (zeros): shape: [2, -3] is not accepted; expected a list of non-negative integers, e.g. [2, 3] ([] for a scalar)"),
        ("graph:\n  - {name: a, op: zeros, shape: [2, 3]}\n  - {name: s, op: reduce_sum, inputs: [a], axis: 2}\n",
         "g.yaml:3: Invalid reduction dimension 2 for input with 2 dimensions. for 's' (op: 'Sum') with input shapes: [2,3]. Fix: axis must be in [-2, 1]"),
        ("graph:\n  - {name: a, op: zeros, shape: [2, 3]}\n  - {name: s, op: concat, inputs: [a, a], axis: -3}\n",
         "g.yaml:3: Concatenating dimension -3 out of range for input with 2 dimensions for 's' (op: 'ConcatV2') with input shapes: [2,3], [2,3]. Fix: use an axis in [-2, 1]"),
        ("graph:\n  - {name: a, op: zeros, shape: [4]}\n  - {name: s, op: split, inputs: [a], num_split: 2}\n  - {name: t, op: neg, inputs: ['s:2']}\n",
         "g.yaml:4: op 't': input 's:2' does not exist: s (split) has 2 outputs; use s:0 to s:1"),
        ("graph:\n  - {name: a, op: zeros, shape: [4], dtype: int32}\n  - {name: e, op: exp, inputs: [a]}\n",
         "g.yaml:3: Value for attr 'T' of int32 is not in the list of allowed values: float16, float32, float64 for 'e' (op: 'Exp'). Fix: cast the input first (op: cast, dtype: float32)"),
        ("graph:\n  - {name: a, op: zeros, shape: [4], dtype: int32}\n  - {name: b, op: zeros, shape: [4]}\n  - {name: c, op: add, inputs: [b, a]}\n",
         "g.yaml:4: Input 'y' of 'AddV2' Op has type int32 that does not match type float32 of argument 'x' for 'c'. Fix: cast one of them (op: cast, dtype: float32)"),
        ("graph:\n  - {name: a, op: zeros, shape: [6]}\n  - {name: r, op: reshape, inputs: [a], shape: [4, -1]}\n",
         "g.yaml:3: Cannot reshape a tensor with 6 elements to shape [4,-1] (4 elements) for 'r' (op: 'Reshape') with input shapes: [6]. Fix: the new shape must hold exactly 6 elements (use -1 for one dimension)"),
        ("graph:\n  - {name: b, op: ones, shape: [1], colocate_with: nope}\n",
         "g.yaml:2: op 'b': colocate_with 'nope' names no op; ops: b"),
        ("graph:\n  - towers: [/gpu:0, /gpu:1]\n    graph: [{name: c, op: ones, shape: [2, 2]}]\n  - {name: m, op: matmul, inputs: [c, c]}\n",
         "g.yaml:4: op 'm' (matmul) takes 2 inputs, got 4 (inputs: ['c', 'c']) (a name defined in towers means all its copies); list 2 inputs, e.g. inputs: [a, b]"),
        ("graph:\n  - {name: w, op: variable, shape: [2], initializer: zeros, mean: 1.0}\n",
         "g.yaml:2: op 'w' (variable): 'mean' does not apply to initializer zeros, which takes no parameters"),
        ("graph:\n  - {name: a, op: constant, value: 1.5, dtype: int32}\n",
         "g.yaml:2: op 'a' (constant): value 1.5 does not fit dtype int32; give integers in [-2147483648, 2147483647], or a float dtype"),
        ("graph: []\n",
         "g.yaml:1: 'graph' must be a non-empty list of ops, e.g. [{name: a, op: constant, value: 1.0}], got []"),
        ("- {name: a, op: zeros}\n",
         "g.yaml: expected a mapping with 'graph:' (a list of ops), got [{'name': 'a', 'op': 'zeros'}]"),
        ("graph: [{name: a, op: zeros}]\n",
         "g.yaml:1: op 'a' (zeros) needs 'shape'; zeros takes: shape, dtype"),
    ],
)  # fmt: skip
def test_messages(text: str, expected: str) -> None:
    assert error(text) == expected


def test_yaml_syntax_error_has_line_and_column() -> None:
    message = error("graph:\n  - {name: a, op: zeros, shape: [1\n  - x\n")
    assert message == (
        "g.yaml:4:1: YAML syntax error: while parsing a flow sequence did not find expected ',' "
        "or ']'"
    )


def test_json_syntax_error_in_a_json_file() -> None:
    message = error('{"graph": [\n  {"name": "a" "op": "zeros"}]}', "g.json")
    assert message == "g.json:2:16: JSON syntax error: Expecting ',' delimiter"


def test_json_spec_errors_get_their_line_too() -> None:
    text = json.dumps({"graph": [{"name": "a", "op": "zeros", "shape": [1]}, {"name": "b", "op": "neg", "inputs": ["x"]}]}, indent=1)  # fmt: skip
    assert error(text, "g.json") == "g.json:10: op 'b': input 'x' names no op; ops: a, b"


FETCH = "graph:\n  - {name: c, op: constant, value: [1.0, 2.0]}\n  - {name: s, op: save, inputs: [c], path: out.npy}\n  - {name: p, op: split, inputs: [c], num_split: 2}\n"


@pytest.mark.parametrize(
    ("fetch", "expected"),
    [
        ("fetch: [d]\n", "g.yaml:5: fetch 'd' names no op; ops: c, p, s"),
        ("fetch:\n  - c\n  - d\n", "g.yaml:7: fetch 'd' names no op; ops: c, p, s"),
        ("fetch: d\n", "g.yaml:5: fetch 'd' names no op; ops: c, p, s"),
        ("fetch: 3\n", "g.yaml:5: fetch: expected a list of op names, e.g. [c], got 3"),
        ("fetch: [c, 'p:x']\n", "g.yaml:5: fetch 'p:x' is not NAME or NAME:OUTPUT (e.g. s:1 for split s's second output)"),
        ("fetch:\n  - s:0\n", "g.yaml:6: fetch 's:0': op 's' is a save, which has no output to fetch (it writes its input to 'out.npy' and outputs nothing); name it alone to run it (fetch: [s]), or fetch the tensor it saves instead: fetch: [c]"),
        ("fetch: ['p:2']\n", "g.yaml:5: fetch 'p:2': op 'p' (split) has 2 outputs; fetch p:0 to p:1"),
        ("fetch: ['c:1']\n", "g.yaml:5: fetch 'c:1': op 'c' (constant) has 1 output; fetch c"),
    ],
)  # fmt: skip
def test_fetch_errors_cite_the_fetch_line_and_what_was_written(fetch: str, expected: str) -> None:
    assert error(FETCH + fetch) == expected


def test_fetch_errors_in_json_cite_the_item_line() -> None:
    text = (
        '{"graph": [\n  {"name": "c", "op": "constant", "value": 1.0}],\n "fetch": ["c",\n   "d"]}'
    )
    assert error(text, "g.json") == "g.json:4: fetch 'd' names no op; ops: c"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: &a [*a]\n", "recursive alias"),
        ("graph: !!python/object:os.system [x]\n", "YAML syntax error"),
        (
            "graph: [{name: a, op: zeros, shape: [!!int x]}]\n",
            "cannot read 'x' as tag:yaml.org,2002:int",
        ),
        ("graph: !!set {a, b}\n", "unsupported tag"),
        ("graph:\n  - ? [a]\n    : 1\n", "unhashable key"),
        ("[" * 5000 + "]" * 5000, "exceeded maximum nesting depth"),
        ("graph: [\x00]", "YAML error"),
    ],
)
def test_hostile_yaml(text: str, fragment: str) -> None:
    assert fragment in error(text)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"cannot read spec .*missing\.yaml"):
        load(tmp_path / "missing.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BadInput, match="not UTF-8 text"):
        load(tmp_path / "bin.yaml")


def test_load_op_needs_a_readable_npy(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text("graph:\n  - {name: x, op: load, path: x.npy}\n")
    with pytest.raises(
        BadInput, match=r"g.yaml:2: op 'x' \(load\): cannot read '.*x.npy' as a .npy"
    ):
        load(tmp_path / "g.yaml")
    np.save(tmp_path / "x.npy", np.array(["text"]))
    with pytest.raises(BadInput, match="holds <U4, which is not supported"):
        load(tmp_path / "g.yaml")
