"""placement/devmap.py: module paths from op names, the shortest uniform prefixes, and a device
map pinned back onto a graph."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.errors import BadInput
from gpuplace.graph.model import Graph, Op, TensorRef
from gpuplace.placement.devmap import (
    DOTTED,
    SCOPED,
    accelerate_value,
    grouped,
    lookup,
    module_path,
    op_paths,
    pin,
    short_device,
)


@pytest.mark.parametrize(
    ("name", "dotted", "scoped"),
    [
        ("/model/layers.0/mlp/fc1/MatMul", ("model", "layers", "0", "mlp", "fc1", "MatMul"),
         ("model", "layers.0", "mlp", "fc1", "MatMul")),
        ("model.layers.0.mlp.fc1.weight", ("model", "layers", "0", "mlp", "fc1", "weight"),
         ("model.layers.0.mlp.fc1.weight",)),
        ("tower_0/dense/kernel", ("tower_0", "dense", "kernel"), ("tower_0", "dense", "kernel")),
        ("onnx::MatMul_223", ("onnx::MatMul_223",), ("onnx::MatMul_223",)),
        ("/Flatten", ("Flatten",), ("Flatten",)),
    ],
)  # fmt: skip
def test_module_paths_from_exporter_state_dict_and_tensorflow_names(
    name: str, dotted: tuple[str, ...], scoped: tuple[str, ...]
) -> None:
    assert module_path(name, DOTTED) == dotted
    assert module_path(name, SCOPED) == scoped


def _graph(*ops: tuple[str, str, tuple[str, ...]]) -> Graph:
    return Graph(
        ops=tuple(Op(n, t, tuple(TensorRef(i) for i in inputs)) for n, t, inputs in ops), fetch=()
    )


def test_a_bare_weight_goes_under_the_module_of_the_op_that_reads_it() -> None:
    graph = _graph(
        ("x", "placeholder", ()),
        ("onnx::MatMul_223", "variable", ()),
        ("/transformer/h.0/attn/c_attn/MatMul", "MatMul", ("x", "onnx::MatMul_223")),
    )
    assert op_paths(graph) == [
        ("x", ("x",)),  # an input, not a weight: stays at the root
        ("onnx::MatMul_223", ("transformer", "h", "0", "attn", "c_attn", "onnx::MatMul_223")),
        ("/transformer/h.0/attn/c_attn/MatMul",
         ("transformer", "h", "0", "attn", "c_attn", "MatMul")),
    ]  # fmt: skip
    assert op_paths(graph, SCOPED)[1] == ("onnx::MatMul_223", ("onnx::MatMul_223",))


GPU0, GPU1, CPU = (
    f"/job:localhost/replica:0/task:0/device:{d}" for d in ("GPU:0", "GPU:1", "CPU:0")
)


def test_the_shortest_uniform_prefixes_in_the_order_ops_appear() -> None:
    ops = [
        ("model.embed.weight", GPU0),
        ("/model/embed/Gather", GPU0),
        ("model.layers.0.fc.weight", GPU0),
        ("/model/layers.0/fc/MatMul", GPU0),
        ("model.layers.1.fc.weight", GPU1),
        ("/model/layers.1/fc/MatMul", GPU1),
        ("/model/layers.1/Relu", CPU),
        ("lm_head.weight", CPU),
        ("/lm_head/MatMul", CPU),
    ]
    groups = grouped((module_path(n), d) for n, d in ops)
    assert groups == {
        "model.embed": (GPU0, 2),
        "model.layers.0": (GPU0, 2),
        "model.layers.1.fc": (GPU1, 2),
        "model.layers.1.Relu": (CPU, 1),
        "lm_head": (CPU, 2),
    }
    assert {k: accelerate_value(d) for k, (d, _) in groups.items()} == {
        "model.embed": 0, "model.layers.0": 0, "model.layers.1.fc": 1,
        "model.layers.1.Relu": "cpu", "lm_head": "cpu",
    }  # fmt: skip
    assert grouped([(("a", "b"), GPU1), (("c",), GPU1)]) == {"": (GPU1, 2)}  # Accelerate's ""
    assert short_device(GPU1) == "/device:GPU:1"


PART = st.sampled_from(["model", "layers", "0", "1", "fc", "weight", "MatMul"])
DEVICE = st.sampled_from([GPU0, GPU1, CPU])


@given(st.dictionaries(st.lists(PART, min_size=1, max_size=4).map(tuple), DEVICE, max_size=30))
def test_every_op_takes_its_device_from_its_longest_key_and_no_shorter_key_would_do(
    by_path: dict[tuple[str, ...], str],
) -> None:
    ops = list(by_path.items())
    groups = grouped(ops)
    for path, device in ops:
        key = lookup(path, groups)
        assert key is not None and groups[key][0] == device
    for key in groups:  # minimal: the prefix one part shorter holds ops on other devices
        if key:
            parent = tuple(key.split("."))[:-1]
            under = {d for p, d in ops if p[: len(parent)] == parent}
            assert len(under) > 1
    assert sum(n for _, n in groups.values()) == len(ops)


def test_pin_requests_each_op_s_device_from_the_longest_key() -> None:
    graph = _graph(
        ("model.layers.0.fc.weight", "variable", ()),
        ("/model/layers.0/fc/MatMul", "MatMul", ("model.layers.0.fc.weight",)),
        ("/model/layers.1/fc/MatMul", "MatMul", ("/model/layers.0/fc/MatMul",)),
        ("/Where", "Where", ()),
    )
    pinned = pin(graph, {"model": 1, "model.layers.1": "cpu"}, gpus=2)
    assert [op.device for op in pinned.graph.ops] == [
        "/device:GPU:1", "/device:GPU:1", "/device:CPU:0", "",
    ]  # fmt: skip
    assert pinned.uncovered == ("/Where",)
    with pytest.raises(BadInput) as caught:
        pin(graph, {"model": 2}, gpus=2)
    assert str(caught.value) == (
        "Options.device_map['model']: 2 is not a device of this machine; expected a GPU index "
        "0..1 or 'cpu'"
    )
    with pytest.raises(BadInput, match="'disk' is not a device"):
        pin(graph, {"": "disk"}, gpus=2)


def test_options_refuse_a_device_map_with_keys_that_are_not_module_paths() -> None:
    from gpuplace import Options

    with pytest.raises(BadInput) as caught:
        Options(device_map={0: 1})  # type: ignore[dict-item]
    assert str(caught.value) == (
        "Options.device_map={0: 1}: expected module paths (str) mapped to GPU indices or 'cpu', "
        "e.g. {'model': 0}"
    )
    with pytest.raises(BadInput, match=r"^Options.device_map=\['model'\]: expected module paths"):
        Options(device_map=["model"])  # type: ignore[arg-type]
