"""Feeding placeholders (`--feed NAME=FILE.npy`, `--feed NAME=JSON`), as feed_dict does; messages
in the CLI's words."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gpuplace.cli.words import CLI
from gpuplace.errors import BadInput
from gpuplace.graph import Graph, apply_feeds, get_op, loads, require_fed

SPEC = """
graph:
  - {name: x, op: placeholder, shape: [2, 2]}
  - {name: k, op: placeholder, shape: [3], dtype: int32}
  - {name: y, op: matmul, inputs: [x, x]}
"""


@pytest.fixture
def graph() -> Graph:
    return loads(SPEC, "g.yaml")


def test_json_and_npy_values_land_in_the_placeholders(graph: Graph, tmp_path: Path) -> None:
    np.save(tmp_path / "k.npy", np.array([1, 2, 3], dtype=np.int64))
    fed = apply_feeds(graph, {"x": "[[1, 2], [3, 4]]", "k": str(tmp_path / "k.npy")})
    x, k = fed.by_name()["x"], fed.by_name()["k"]
    assert x.attrs["value"].dtype == np.float32 and x.attrs["value"].tolist() == [[1, 2], [3, 4]]
    assert k.attrs["value"].dtype == np.int32
    (value,) = get_op("placeholder").compute(np, [], x.attrs)
    assert value is x.attrs["value"]
    assert "value" not in graph.by_name()["x"].attrs  # the input graph is untouched
    require_fed(fed)


def test_every_unfed_placeholder_is_listed(graph: Graph) -> None:
    with pytest.raises(BadInput) as info:
        apply_feeds(graph, {})
    assert info.value.render(CLI) == (
        "You must feed a value for placeholder tensor 'x' with dtype float32 and shape [2,2], "
        "'k' with dtype int32 and shape [3]; pass --feed NAME=FILE.npy or --feed NAME=JSON for "
        "each (e.g. --feed x=[[1.0,2.0],[3.0,4.0]])"
    )


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ([2], "float32", "--feed x=[1.0,2.0]"),
        ([], "int32", "--feed x=1"),
        ([3], "int64", "--feed x=[1,2,3]"),
        ([2, 1], "bool", "--feed x=[[true],[false]]"),
        ([224, 224, 3], "float32", "--feed x=x.npy, written by numpy.save"),
        ([0, 3], "float32", "--feed x=x.npy, written by numpy.save"),
    ],
)
def test_the_unfed_example_fits_the_placeholder(
    shape: list[int], dtype: str, expected: str
) -> None:
    graph = loads(f"graph: [{{name: x, op: placeholder, shape: {shape}, dtype: {dtype}}}]")
    with pytest.raises(BadInput) as info:
        apply_feeds(graph, {})
    assert info.value.render(CLI).endswith(f"(e.g. {expected})")
    if "npy" not in expected:  # and the example feeds as it says
        apply_feeds(graph, {"x": expected.removeprefix("--feed x=")})


@pytest.mark.parametrize(
    ("feeds", "message"),
    [
        ({"z": "1"}, "--feed z: no op named 'z' in g.yaml; placeholders: k, x"),
        ({"y": "1"}, "--feed y: op 'y' is a matmul, not a placeholder; only placeholders are fed (placeholders in g.yaml: x, k)"),
        ({"x": "[1, 2]"}, "Cannot feed value of shape (2,) for Tensor 'x:0', which has shape '(2, 2)'; give a value of shape [2,2]"),
        ({"k": "[1.5, 2, 3]"}, "--feed k: cannot feed float64 values to placeholder 'k' of dtype int32 without changing them; give int32 values"),
        ({"k": "[1, 2, 99999999999]"}, "--feed k: cannot feed int64 values to placeholder 'k' of dtype int32 without changing them; give int32 values"),
        ({"k": "[1, 2"}, "--feed k=[1, 2: neither JSON (Expecting ',' delimiter) nor a .npy path; write e.g. --feed k=[1,2,3] or --feed k=k.npy"),
        ({"k": "[[1], [2, 3]]"}, "--feed k=[[1], [2, 3]]: lists of different lengths; give a rectangular list"),
        ({"k": '["a", "b", "c"]'}, "--feed k=[\"a\", \"b\", \"c\"]: expected numbers, got <U1 values"),
    ],
)  # fmt: skip
def test_bad_feeds(graph: Graph, feeds: dict[str, str], message: str) -> None:
    with pytest.raises(BadInput) as info:
        apply_feeds(graph, feeds)
    assert info.value.render(CLI) == message


def test_missing_npy_file(graph: Graph, tmp_path: Path) -> None:
    with pytest.raises(BadInput) as info:
        apply_feeds(graph, {"x": str(tmp_path / "nope.npy")})
    assert re.match(r"--feed x=.*nope\.npy: cannot read it as a \.npy file", info.value.render(CLI))


def test_unfed_placeholder_kernel_refuses_to_run() -> None:
    placeholder = get_op("placeholder")
    with pytest.raises(BadInput, match="a placeholder was not fed"):
        placeholder.compute(np, [], placeholder.normalize("x", {"shape": [1]}))


def test_an_empty_json_list_feeds_an_empty_placeholder_of_any_dtype() -> None:
    """`[]` reads as float64 in numpy, but it holds no values a cast could change."""
    graph = loads(
        "graph:\n  - {name: i, op: placeholder, shape: [0], dtype: int32}\n"
        "  - {name: b, op: placeholder, shape: [2, 0], dtype: bool}\n",
        "g.yaml",
    )
    fed = apply_feeds(graph, {"i": "[]", "b": "[[], []]"}).by_name()
    assert (fed["i"].attrs["value"].dtype, fed["i"].attrs["value"].shape) == (np.int32, (0,))
    assert (fed["b"].attrs["value"].dtype, fed["b"].attrs["value"].shape) == (np.bool_, (2, 0))
