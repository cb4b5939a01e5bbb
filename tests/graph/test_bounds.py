"""The bounds behind the input limits, one layer at a time: the bounded read, the YAML builder
(aliases counted, keys given twice, nesting), the op count before expansion, .npy headers,
bounded echoes, and the limits read from an environment."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuplace
from gpuplace.echo import clip_middle as clip
from gpuplace.echo import show
from gpuplace.errors import BadInput
from gpuplace.graph import load, loads
from gpuplace.graph.expansion import count_ops
from gpuplace.graph.npy import NpyError, read_header
from gpuplace.graph.scope import SpecError
from gpuplace.limits import AliasLimit, Limits, read_limits, read_text
from gpuplace.parse import parse


def test_read_text_refuses_a_pipe_past_the_limit_after_reading_only_the_limit() -> None:
    read, write = os.pipe()
    os.write(write, b"x" * 100)
    os.close(write)
    try:
        with pytest.raises(BadInput) as info:
            read_text(f"/proc/self/fd/{read}", 10, "cannot read spec", "raise it")
    finally:
        os.close(read)
    assert str(info.value) == (
        f"cannot read spec '/proc/self/fd/{read}': it holds more than 10 bytes; raise it"
    )


@pytest.mark.parametrize(
    ("path", "reason"),
    [("/dev/zero", "it is a device, not a file"), ("a\0b", "the path holds a NUL character"),
     ("/", "it is a folder, not a file"), ("missing.yaml", "No such file or directory")],
)  # fmt: skip
def test_read_text_refuses_what_is_not_a_readable_file(path: str, reason: str) -> None:
    with pytest.raises(BadInput, match=reason):
        read_text(path, 1 << 20, "cannot read spec", "")


def test_read_text_drops_a_bom_and_reads_a_file_of_exactly_the_limit(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_bytes(b"\xef\xbb\xbfgraph: []")
    assert read_text(tmp_path / "g.yaml", 12, "cannot read spec", "") == "graph: []"


def test_load_refuses_a_nul_in_the_spec_path() -> None:
    with pytest.raises(BadInput, match="the path holds a NUL character"):
        load("g\0.yaml")


def test_aliases_are_counted_in_full_and_refused_past_the_limit() -> None:
    text = "a: &a [1, 2, 3]\nb: [*a, *a]\n"  # each *a repeats 4 nodes (the list and 3 numbers)
    assert parse(text, "x.yaml", AliasLimit(8, "")).data == {"a": [1, 2, 3], "b": [[1, 2, 3]] * 2}
    with pytest.raises(BadInput) as info:
        parse(text, "x.yaml", AliasLimit(7, "ask for more"))
    assert str(info.value) == (
        "x.yaml:1:4: the aliases of the anchor here take what YAML aliases repeat past 7 nodes "
        "(an alias bomb?); write the data out, or ask for more"
    )


def test_a_billion_laughs_is_refused_without_being_built() -> None:
    levels = "".join(
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" for i in range(1, 30)
    )
    start = time.perf_counter()
    with pytest.raises(BadInput, match="YAML aliases repeat past 20,000,000 nodes"):
        parse("l0: &l0 [1]\n" + levels, "bomb.yaml")
    assert time.perf_counter() - start < 30  # a hang, not a speed: 10^29 nodes never built


def test_merge_keys_may_override_what_they_merge_but_a_key_given_twice_is_refused() -> None:
    spec = "graph:\n- &d {op: constant, value: 1.0, name: a}\n- {<<: *d, name: b, value: 2.0}\n"
    assert [(op.name, op.attrs["value"]) for op in loads(spec).ops] == [("a", 1.0), ("b", 2.0)]
    with pytest.raises(BadInput) as info:
        loads(spec + "- {<<: *d, name: c, name: e}\n")
    assert str(info.value) == (
        "<spec>:4:21: duplicate key 'name' (first at 4:12); a key may appear once in a mapping: "
        "merge the two or rename one"
    )


def test_a_key_given_twice_in_json_text_is_found_in_any_file() -> None:
    text = '{"graph": [],\n "graph": []}'
    with pytest.raises(BadInput, match=r"^g\.yaml:2: duplicate key 'graph' \(first at line 1\)"):
        parse(text, "g.yaml")


def count(text: str, num_gpus: int | None = None, limit: int = 1000) -> int:
    data = parse(text, "g.yaml").data
    return count_ops(data["graph"], num_gpus, limit)


def test_the_count_before_expansion_is_what_the_walk_builds() -> None:
    towers = (
        "graph:\n- towers: [/gpu:0, /gpu:1, /gpu:2]\n  graph:\n  - {name: a, op: zeros, shape: [4]}\n"
        "  - {name: s, op: split, inputs: [a], num_split: 2}\n- {op: add_n, inputs: [a]}\n"
    )
    assert count(towers) == len(loads(towers).ops) + 3 == 3 * (1 + 2) + 1
    replicate = (
        "graph:\n- {name: x, op: placeholder, shape: [8, 2]}\n"
        "- replicate: {gpus: 2, split: [x]}\n  graph: [{name: y, op: relu, inputs: [x]}]\n"
    )
    built = len(loads(replicate, gpus=lambda config: 2).ops)  # x, 2 slices, 2 relus, 1 merge
    assert count(replicate, 2) == built == 6


def test_the_count_names_the_innermost_block_past_the_limit_and_shares_aliased_lists() -> None:
    text = "graph:\n- towers: &t [/cpu:0, /cpu:0, /cpu:0]\n  graph:\n" + "".join(
        "  " * i + "  - towers: *t\n" + "  " * i + "    graph:\n" for i in range(1, 30)
    )
    text += "  " * 30 + "  - {op: zeros, shape: [1]}\n"
    with pytest.raises(SpecError) as info:
        count(text)
    assert str(info.value) == (
        "towers: this block repeats 729 ops 3 times: 2,187 ops, more than the 1,000 a graph may "
        "have; check the spec (nested towers, replicate blocks and YAML aliases repeat their "
        "bodies), or raise the limit with GPUPLACE_MAX_OPS (e.g. GPUPLACE_MAX_OPS=2000)"
    )  # the innermost block past the limit: 3^7 ops, 23 levels below the top


def test_limits_come_from_the_environment_given() -> None:
    assert read_limits({}) == Limits() == Limits(1 << 30, 2_000_000)
    given = {"GPUPLACE_MAX_SPEC_SIZE": "2GiB", "GPUPLACE_MAX_OPS": "5_000_000"}
    assert read_limits(given) == Limits(2 << 30, 5_000_000)
    for bad in ("0", "-1", "1e6", "٣", "9" * 40):
        with pytest.raises(BadInput, match="GPUPLACE_MAX_OPS="):
            read_limits({"GPUPLACE_MAX_OPS": bad})
    with pytest.raises(BadInput, match="GPUPLACE_MAX_SPEC_SIZE"):
        read_limits({"GPUPLACE_MAX_SPEC_SIZE": "0B"})
    assert gpuplace.Limits is Limits


def test_load_takes_limits_and_prepare_reads_them_from_its_env(tmp_path: Path) -> None:
    spec = tmp_path / "g.yaml"
    spec.write_text("graph:\n- {name: a, op: constant, value: 1.0}\n- {op: neg, inputs: [a]}\n")
    with pytest.raises(BadInput, match="the graph has 2 ops, more than the 1 a graph may have"):
        load(spec, limits=Limits(ops=1))
    seen = gpuplace.view(gpuplace.discover("1xK520"), {})
    with pytest.raises(BadInput, match="it holds 70 bytes, more than 9 bytes"):
        gpuplace.prepare(spec, seen, gpuplace.Options(), {"GPUPLACE_MAX_SPEC_SIZE": "9"})


def test_npy_headers_are_read_alone_and_checked_against_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.asfortranarray(np.ones((3, 2), dtype=">f8")))
    header = read_header(str(path))
    assert (header.shape, header.dtype.name, header.nbytes) == ((3, 2), "float64", 48)
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(NpyError, match=r"holds 47$"):
        read_header(str(path))
    with pytest.raises(NpyError, match="it is not a regular file"):
        read_header("/dev/zero")


def test_show_makes_only_what_it_shows() -> None:
    shared: list[object] = [1.5]
    for _ in range(100):
        shared = [shared] * 10  # 10^100 elements, as YAML aliases share them
    start = time.perf_counter()
    assert show(shared) == "[" * 57 + "..."
    assert time.perf_counter() - start < 5  # a hang, not a speed
    assert show({"a": "x" * 500}) == "{'a': '" + "x" * 50 + "..."
    assert show(10**5000).startswith("<an integer of 16,610 bits>")
    assert clip("a" * 100) == "a" * 38 + "..." + "a" * 38 and clip("short") == "short"


def test_api_feeds_refuse_booleans_among_numbers_and_keep_booleans_for_bool(tmp_path: Path) -> None:
    spec = tmp_path / "g.yaml"
    spec.write_text(
        "graph:\n- {name: x, op: placeholder, shape: [2, 2]}\n"
        "- {name: b, op: placeholder, shape: [2], dtype: bool}\n"
    )
    seen = gpuplace.view(gpuplace.discover("1xK520"), {})
    feeds = {"x": [[1.0, 2.0], [3.0, False]], "b": [True, False]}
    with pytest.raises(BadInput) as info:
        gpuplace.prepare(spec, seen, gpuplace.Options(feeds=feeds), {})
    assert str(info.value) == (
        "Options.feeds['x']: element [1][1] is false, a boolean, which does not fit a "
        "placeholder of dtype float32; give numbers (1 for true)"
    )
    feeds["x"] = [[1.0, 2.0], [3.0, 0.0]]
    prepared = gpuplace.prepare(spec, seen, gpuplace.Options(feeds=feeds), {})
    fed = prepared.graph.by_name()
    assert fed["b"].attrs["value"].tolist() == [True, False]


def test_a_fifo_is_read_as_cat_reads_it(tmp_path: Path) -> None:
    fifo = tmp_path / "g.yaml"
    os.mkfifo(fifo)
    text = "graph:\n- {name: a, op: constant, value: 1.0}\n"
    writer = threading.Thread(target=fifo.write_text, args=(text,), daemon=True)
    writer.start()
    try:
        assert [op.name for op in load(fifo).ops] == ["a"]
    finally:
        writer.join(timeout=60)


def _count_item_by_item(items: list[Any], limit: int) -> int:
    """count_ops' rule written out plainly for a list without blocks: one op per item, a
    split as many as its outputs (num_split, else its sizes' length, else one)."""
    total = 0
    for item in items:
        if type(item) is dict and item.get("op") in ("split", "Split"):
            pieces = item.get("num_split", item.get("num_outputs"))
            if type(pieces) is not int:
                sizes = item.get("sizes", item.get("split"))
                pieces = len(sizes) if type(sizes) is list else 1
            total += max(pieces, 1)
        else:
            total += 1
    return total


_ITEMS = st.one_of(
    st.none(),
    st.integers(),
    st.lists(st.integers(), max_size=2),
    st.fixed_dictionaries(
        {"op": st.sampled_from(["relu", "split", "Split", "spl", 3, ["split"]])},
        optional={
            "num_split": st.integers(-2, 5),
            "num_outputs": st.integers(-2, 5),
            "sizes": st.lists(st.integers(1, 3), max_size=4),
            "split": st.one_of(st.lists(st.integers(1, 3), max_size=4), st.none()),
        },
    ),
)


@given(st.lists(_ITEMS, max_size=12))
def test_the_count_of_a_flat_list_is_the_count_item_by_item(items: list[Any]) -> None:
    assert count_ops(items, None, 1000) == _count_item_by_item(items, 1000)
