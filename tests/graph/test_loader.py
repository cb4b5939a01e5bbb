"""Loading specs: TensorFlow's names and device scopes, towers, inputs, order, fetch, config."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path
from textwrap import dedent
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.devices.names import DeviceSpec
from gpuplace.errors import BadInput
from gpuplace.graph import Graph, Op, TensorRef, TensorSpec, load, loads
from gpuplace.graph.loader import new_op, new_ref
from gpuplace.graph.model import columns, wiring
from gpuplace.graph.resolve import _bad_names
from gpuplace.graph.scope import Device, Scope
from gpuplace.graph.walk import Walker, is_op_name

GUIDE = Path(__file__).resolve().parents[2] / "examples" / "guide"


def spec(text: str) -> Graph:
    return loads(dedent(text), "spec.yaml")


def wired(graph: Graph) -> tuple[object, ...]:
    """The loader's Wiring of `graph`, checked against the one worked out from its names."""
    got = graph.wiring
    assert got is not None and got.ops is graph.ops and wiring(graph) is got
    again = wiring(replace(graph, wiring=None))
    assert again is not got
    fields_ = ("index", "producers", "arity", "outputs")
    assert [getattr(got, f) for f in fields_] == [getattr(again, f) for f in fields_]
    # the loader's columns: each op's fields as they are, the outputs the very tuples
    ops = graph.ops
    assert got.columns is not None and columns(graph) is got.columns
    names, types, devices, outputs = got.columns
    assert names == [op.name for op in ops] and types == [op.type for op in ops]
    assert devices == [op.device for op in ops]
    assert len(outputs) == len(ops) and all(
        o is op.outputs for o, op in zip(outputs, ops, strict=True)
    )
    assert again.columns is None and columns(replace(graph, wiring=None)) == got.columns
    return tuple(getattr(got, f) for f in fields_)


def table(graph: Graph) -> list[tuple[str, str, list[str], str]]:
    return [(op.name, op.type, [str(r) for r in op.inputs], op.device) for op in graph.ops]


def test_guide_log_placement() -> None:
    graph = load(GUIDE / "01_log_placement.yaml")
    assert table(graph) == [
        ("a", "constant", [], ""),
        ("b", "constant", [], ""),
        ("MatMul", "matmul", ["a", "b"], ""),
    ]
    assert graph.ops[2].outputs == (TensorSpec((2, 2)),)
    assert graph.fetch == (TensorRef("MatMul"),)
    assert graph.config.log_device_placement is True
    assert [op.line for op in graph.ops] == [6, 7, 8]
    assert graph.source.endswith("01_log_placement.yaml")


def test_guide_manual_placement_scopes_the_constants() -> None:
    graph = load(GUIDE / "02_manual_placement.yaml")
    assert [op.device for op in graph.ops] == ["/device:CPU:0", "/device:CPU:0", ""]


def test_guide_multi_tower_names_as_tensorflow() -> None:
    graph = load(GUIDE / "04_multi_tower.yaml")
    assert table(graph) == [
        ("Const", "constant", [], "/device:GPU:2"),
        ("Const_1", "constant", [], "/device:GPU:2"),
        ("MatMul", "matmul", ["Const", "Const_1"], "/device:GPU:2"),
        ("Const_2", "constant", [], "/device:GPU:3"),
        ("Const_3", "constant", [], "/device:GPU:3"),
        ("MatMul_1", "matmul", ["Const_2", "Const_3"], "/device:GPU:3"),
        ("AddN", "add_n", ["MatMul", "MatMul_1"], "/device:CPU:0"),
    ]
    assert graph.fetch == (TensorRef("AddN"),)


def test_towers_copy_written_names_and_expose_the_list() -> None:
    graph = spec("""
        graph:
          - {name: w, op: ones, shape: [2, 2]}
          - towers: [/gpu:0, /gpu:1, GPU:2]
            graph:
              - {name: c, op: matmul, inputs: [w, d]}
              - {name: d, op: zeros, shape: [2, 2]}
          - {name: total, op: add_n, inputs: [c]}
          - {name: second, op: identity, inputs: [c_1]}
        """)
    ops = graph.by_name()
    assert [ops[name].device for name in ("d", "d_1", "d_2")] == [
        "/device:GPU:0",
        "/device:GPU:1",
        "/device:GPU:2",
    ]
    assert [str(r) for r in ops["c_1"].inputs] == ["w", "d_1"]
    assert [str(r) for r in ops["total"].inputs] == ["c", "c_1", "c_2"]
    assert [str(r) for r in ops["second"].inputs] == ["c_1"]


def test_expand_takes_name_prefixes_for_replicas() -> None:
    body = [{"op": "constant", "value": 1.0}, {"name": "y", "op": "neg", "inputs": ["Const"]}]
    walker = Walker("/")
    top = Scope()
    gpus = [
        Device(DeviceSpec(device_type="GPU", device_index=i), f"/device:GPU:{i}") for i in (0, 1)
    ]
    walker.expand(body, [(gpus[0], "replica_0/"), (gpus[1], "replica_1/")], top, None)
    assert [(e.name, e.device) for e in walker.entries] == [
        ("replica_0/Const", "/device:GPU:0"),
        ("replica_0/y", "/device:GPU:0"),
        ("replica_1/Const", "/device:GPU:1"),
        ("replica_1/y", "/device:GPU:1"),
    ]
    assert top.names == {"Const": [0, 2], "y": [1, 3]}


def test_default_names_follow_tensorflow_unique_name() -> None:
    graph = spec("""
        graph:
          - {op: constant, value: 1.0}
          - {op: constant, value: 2.0}
          - {name: Const_1, op: constant, value: 3.0}
          - {name: matmul, op: zeros, shape: [1, 1]}
          - {op: matmul, inputs: [matmul, matmul]}
          - {op: split, inputs: [matmul], num_split: 1}
        """)
    names = [op.name for op in graph.ops]
    # TF's Graph.unique_name in file order, written names too, case-insensitively: the
    # written Const_1 comes after the generated one and is renamed (as TF 2.21 does)
    assert names == ["Const", "Const_1", "Const_1_1", "matmul", "MatMul_1", "split"]
    assert graph.ops[0].attrs["value"] == 1.0 and graph.ops[2].attrs["value"] == 3.0


def test_nested_scopes_merge_field_by_field() -> None:
    graph = spec("""
        graph:
          - device: /job:localhost/replica:0/task:0
            graph:
              - {name: a, op: constant, value: 1.0, device: GPU:1}
              - device: /cpu:1
                graph:
                  - {name: b, op: constant, value: 1.0, device: /device:GPU:*}
                  - {name: c, op: constant, value: 1.0, device: null}
              - graph: [{name: e, op: constant, value: 1.0}]
              - {name: f, op: constant, value: 1.0}
          - {name: d, op: constant, value: 1.0, device: /gpu:0}
        """)
    assert [op.device for op in graph.ops] == [
        "/job:localhost/replica:0/task:0/device:GPU:1",
        "/job:localhost/replica:0/task:0/device:GPU:1",
        "",
        "/job:localhost/replica:0/task:0",
        "/job:localhost/replica:0/task:0",
        "/device:GPU:0",
    ]


def test_inputs_may_name_later_ops_and_run_in_order() -> None:
    graph = spec("""
        graph:
          - {name: out, op: add, inputs: [x, y]}
          - {name: y, op: neg, inputs: [x]}
          - {name: x, op: ones, shape: [3]}
        """)
    assert [op.name for op in graph.ops] == ["x", "y", "out"]
    assert graph.fetch == (TensorRef("out"),)


def test_output_references_and_default_fetch() -> None:
    graph = spec("""
        graph:
          - {name: x, op: ones, shape: [4, 2]}
          - {name: s, op: split, inputs: [x], sizes: [1, -1]}
          - {name: t, op: neg, inputs: ['s:1']}
          - {name: keep, op: save, inputs: [t], path: out.npy}
        """)
    ops = graph.by_name()
    assert ops["s"].outputs == (TensorSpec((1, 2)), TensorSpec((3, 2)))
    assert ops["t"].inputs == (TensorRef("s", 1),)
    assert ops["keep"].outputs == ()
    # s:1 and t are consumed; s:0 is not; save has no outputs
    assert graph.fetch == (TensorRef("s", 0),)


def test_explicit_fetch_expands_tower_names() -> None:
    graph = spec("""
        graph:
          - towers: [/gpu:0, /gpu:1]
            graph: [{name: c, op: ones, shape: [1]}]
        fetch: c
        """)
    assert graph.fetch == (TensorRef("c"), TensorRef("c_1"))


def test_colocate_with_is_resolved() -> None:
    graph = spec("""
        graph:
          - {name: v, op: variable, shape: [2], device: /cpu:0}
          - {name: u, op: neg, inputs: [v], colocate_with: v}
        """)
    assert graph.by_name()["u"].colocate_with == "v"


def test_json_gives_the_same_graph_without_lines() -> None:
    text = (GUIDE / "04_multi_tower.yaml").read_text()
    from_yaml = loads(text)
    from_json = loads(json.dumps(yaml.safe_load(text)))
    assert table(from_json) == table(from_yaml)
    assert [op.outputs for op in from_json.ops] == [op.outputs for op in from_yaml.ops]
    assert {op.line for op in from_json.ops} == {None}


def test_yaml_flow_mapping_is_not_mistaken_for_json() -> None:
    graph = loads("{graph: [{name: a, op: zeros, shape: [1]}]}")
    assert [op.name for op in graph.ops] == ["a"]


def test_yaml_anchors_and_merge_keys() -> None:
    graph = spec("""
        graph:
          - &base {name: a, op: zeros, shape: [2, 2], dtype: float64}
          - {<<: *base, name: b}
        """)
    assert [op.outputs[0] for op in graph.ops] == [TensorSpec((2, 2), "float64")] * 2


def test_config_passes_memory_options_through() -> None:
    graph = spec("""
        config:
          allow_soft_placement: true
          gpu_options:
            allow_growth: true
            per_process_gpu_memory_fraction: 0.4
            experimental: {virtual_devices: [{memory_limit_mb: [1024, 1024]}]}
          placement: {strategy: tensorflow}
        graph: [{name: a, op: zeros, shape: [1]}]
        """)
    config = graph.config
    assert (config.allow_soft_placement, config.log_device_placement) == (True, False)
    assert config.gpu_options["per_process_gpu_memory_fraction"] == 0.4
    assert config.gpu_options["experimental"]["virtual_devices"][0]["memory_limit_mb"] == [
        1024,
        1024,
    ]
    assert config.placement == {"strategy": "tensorflow"}


def test_load_reads_the_npy_header_relative_to_the_spec(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((3, 5), dtype=np.int64))
    (tmp_path / "g.yaml").write_text("graph:\n  - {name: x, op: load, path: x.npy}\n")
    op = load(tmp_path / "g.yaml").ops[0]
    assert op.outputs == (TensorSpec((3, 5), "int64"),)
    assert op.attrs["path"] == str(tmp_path / "x.npy")


def test_new_op_and_new_ref_equal_the_dataclasses() -> None:
    args = (
        "c",
        "matmul",
        (TensorRef("a"),),
        "/device:GPU:0",
        {"x": 1},
        (TensorSpec((1,)),),
        "a",
        3,
        "encoder.layer.0",
    )
    assert new_op(*args) == Op(*args)
    assert type(new_op(*args)) is Op and type(new_ref("s")) is TensorRef
    assert [getattr(new_op(*args), f.name) for f in fields(Op)] == list(args)
    assert new_ref("s", 1) == TensorRef("s", 1)
    assert [getattr(new_ref("s", 1), f.name) for f in fields(TensorRef)] == ["s", 1]
    assert new_ref("s") == TensorRef("s")


NAME_TEXT = st.text(alphabet="aZ09._-/>\n é", max_size=4)


@given(st.lists(NAME_TEXT, min_size=1, max_size=4, unique=True))
def test_bad_names_is_the_rule_for_each_name_and_their_case(names: list[str]) -> None:
    # the direct pass's check on all names at once, against the rule written out plainly
    plain = any(not is_op_name(n) for n in names) or len({n.lower() for n in names}) < len(names)
    assert _bad_names(dict.fromkeys(names, 0)) is plain


def test_importing_the_graph_package_does_not_import_numpy() -> None:
    code = "import sys, gpuplace.graph; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("path", sorted(GUIDE.glob("*.yaml")), ids=lambda p: p.name)
def test_every_guide_example_loads(path: Path) -> None:
    assert load(path).ops


def test_loading_restores_the_garbage_collector() -> None:
    loads("graph: [{name: a, op: zeros, shape: [1]}]")
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        loads("graph: [{name: a, op: zeros, shape: [1]}]")
        assert not gc.isenabled()
    finally:
        gc.enable()
    gc.freeze()  # an application's own freeze is left alone
    try:
        frozen = gc.get_freeze_count()
        loads("graph: [{name: a, op: zeros, shape: [1]}]")
        # not undone (an unfreeze leaves 0); another thread of the suite may free a few
        assert gc.get_freeze_count() > frozen // 2
    finally:
        gc.unfreeze()


def test_one_pass_load_equals_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flat spec takes `direct` (one pass); the general path must build the same graph."""
    text = dedent(
        """
        graph:
          - {name: a, op: constant, value: 1.0, shape: [2, 2]}
          - {op: random_normal, shape: [2, 2], seed: 3, device: /gpu:0}
          - {name: m, op: matmul, inputs: [a, random_normal], transpose_b: true}
          - {op: relu, inputs: [m], colocate_with: m}
          - {name: s, op: split, inputs: [Relu], num_split: 2}
          - {op: add, inputs: [a, a]}
          - {name: t, op: tanh, inputs: [add], device: /cpu:0}
        """
    )
    import gpuplace.graph.loader as loader

    results: list[object] = []
    real = loader.direct
    monkeypatch.setattr(loader, "direct", lambda *a: results.append(real(*a)) or results[-1])
    fast = loads(text, "spec.yaml")
    assert results and results[0] is not None  # the one pass took it
    monkeypatch.setattr(loader, "direct", lambda *a: None)
    slow = loads(text, "spec.yaml")
    assert repr(fast) == repr(slow)
    assert [str(r) for r in fast.fetch] == ["s", "s:1", "t"]
    assert wired(fast) == wired(slow)
    assert wired(fast)[1:3] == ([0, 1, 2, 3, 0, 0, 5], [0, 0, 2, 1, 1, 2, 1])


# the loader's general path: inputs that point forward, `name:k`, towers (tests/strategy too)
GENERAL_PATH = """
graph:
  - {name: b, op: add, inputs: ["s:1", a]}
  - {name: a, op: constant, value: 1.0, shape: [2, 2]}
  - {name: s, op: split, inputs: [a], num_split: 2}
  - towers: [/cpu:0, /cpu:0]
    graph:
      - {name: t, op: relu, inputs: [b]}
"""


def test_wiring_of_the_general_path() -> None:
    """Inputs that point forward, `name:k` and towers: the loader's indices are those of the
    run order, with each input's output; a graph made with other ops is wired again."""
    graph = spec(GENERAL_PATH)
    assert [op.name for op in graph.ops] == ["a", "s", "b", "t", "t_1"]
    assert wired(graph) == (
        {"a": 0, "s": 1, "b": 2, "t": 3, "t_1": 4},
        [0, 1, 0, 2, 2],
        [0, 1, 2, 1, 1],
        [0, 1, 0, 0, 0],
    )
    fewer = replace(graph, ops=graph.ops[:3])
    assert wiring(fewer).index == {"a": 0, "s": 1, "b": 2} and wiring(fewer) is wiring(fewer)
    stray = Graph((Op("x", "relu", (TensorRef("nowhere"),)),), ())
    assert wiring(stray).producers == [-1]
    found = columns(fewer)  # read off the ops, once: kept on the graph's wiring
    assert found == (["a", "s", "b"], ["constant", "split", "add"], ["", "", ""],
                     [op.outputs for op in graph.ops[:3]])  # fmt: skip
    assert columns(fewer) is found and wiring(fewer).columns is found


CLASHING = st.sampled_from(
    [None, None, "Const", "const", "Const_1", "CONST_1", "Const_1_1", "a", "A"]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(CLASHING, min_size=1, max_size=12))
def test_one_pass_names_equal_the_general_paths(names: list[str | None]) -> None:
    """Flat specs whose names clash with generated ones or but for case: the one pass either
    gives TF's names or leaves the spec to the general path, never other names."""
    from unittest import mock

    import gpuplace.graph.loader as loader

    seen: set[str] = set()
    items = []
    for name in names:
        if name is None or name not in seen:
            seen.add(name or "")
            items.append({"op": "constant", "value": 1.0, **({"name": name} if name else {})})
    text = json.dumps({"graph": items})
    fast = [op.name for op in loads(text).ops]
    with mock.patch.object(loader, "direct", lambda *a: None):
        assert fast == [op.name for op in loads(text).ops]
    assert len({n.lower() for n in fast}) == len(fast)


_SEED = {"op": "constant", "value": 1.0, "shape": [2, 2]}
# (op, inputs, attrs): mostly right, sometimes not
_GOOD = [
    ("relu", 1, {}), ("tanh", 1, {}), ("add", 2, {}), ("matmul", 2, {}), ("add_n", 3, {}),
    ("matmul", 2, {"transpose_b": True}), ("zeros", 0, {"shape": [2, 2]}),
    ("split", 1, {"num_split": 2}), ("random_normal", 0, {"shape": [2, 2]}),
    ("random_normal", 0, {"shape": [2, 2], "seed": 1}),
]  # fmt: skip
_BAD = [("relu", 2, {}), ("zeros", 0, {}), ("bogus", 1, {}), ("add", 2, {"transpose_b": True})]
_KINDS = st.sampled_from(_GOOD * 8 + _BAD)  # (op, inputs, attrs): mostly right
_NAMES = st.sampled_from([*["n"] * 30, *[None] * 5, "A", "a", "_bad", "c\nd", 3])  # n: n<position>
_DEVICES = st.sampled_from(
    [*["-"] * 20, *["/gpu:0", "/device:CPU:0", "/gpu:1"] * 3, "gpu 0", None, 1]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_KINDS, _NAMES, st.lists(st.integers(0, 12), min_size=3, max_size=3), _DEVICES), max_size=10))  # fmt: skip
def test_one_pass_load_equals_the_general_path_on_any_flat_spec(ops: list[tuple[Any, ...]]) -> None:
    """The one pass shares what an op type alone says (its attrs, its inference per input
    specs, each device written) between the ops that write nothing else: on any flat spec it
    builds the general path's graph, or leaves the spec to the general path's error."""
    from unittest import mock

    import gpuplace.graph.loader as loader

    items: list[dict[str, Any]] = [{"name": "s0", **_SEED}]
    for at, ((kind, arity, extra), name, picks, device) in enumerate(ops):
        item: dict[str, Any] = {"op": kind, **extra}
        if name is not None:
            item["name"] = f"n{at}" if name == "n" else name
        known = [i.get("name", "s0") for i in items]
        if arity:
            item["inputs"] = [known[k % len(known)] for k in picks[:arity]]
        if device != "-":
            item["device"] = device
        items.append(item)
    text = json.dumps({"graph": items})

    def load_it() -> str:
        try:
            return repr(loads(text, "spec.json"))
        except BadInput as err:
            return f"error: {err}"

    fast = load_it()
    if not fast.startswith("error"):
        wired(loads(text, "spec.json"))
    with mock.patch.object(loader, "direct", lambda *a: None):
        assert fast == load_it()
        if not fast.startswith("error"):
            wired(loads(text, "spec.json"))
