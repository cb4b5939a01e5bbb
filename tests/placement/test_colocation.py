"""Colocation groups: shared devices, merged requests, TF's conflict messages, soft placement."""

from __future__ import annotations

import pytest

from gpuplace.cli.words import CLI
from gpuplace.devices.names import parse_device
from gpuplace.placement import PlacementError
from gpuplace.placement.colocation import MergeConflict, merge_dev_names

from .helpers import devices, graph, op, run


def merged(a: str, b: str, soft: bool = False) -> str:
    return merge_dev_names(parse_device(a), parse_device(b), soft).to_string()


def test_merge_dev_names_matches_tf_tests() -> None:
    assert merged("/job:foo", "/device:GPU:1") == "/job:foo/device:GPU:1"
    assert merged("/device:GPU:1", "/gpu:*") == "/device:GPU:1"
    assert merged("/gpu:*", "/cpu:1", soft=True) == ""
    assert merged("/device:GPU:1", "/device:GPU:2", soft=True) == "/device:GPU:*"
    with pytest.raises(MergeConflict, match="incompatible jobs: '/job:a' and '/job:b'"):
        merged("/job:a", "/job:b", soft=True)
    with pytest.raises(MergeConflict) as caught:
        merged("/device:GPU:0", "/job:localhost/device:CPU:0")
    assert str(caught.value) == (
        "Cannot merge devices with incompatible types: '/job:localhost/device:GPU:0' and "
        "'/job:localhost/device:CPU:0'"
    )


def test_colocated_op_shares_the_device_of_its_group() -> None:
    g = graph(
        op("c", "constant"),
        op("x", "matmul", "c", "c", device="/device:GPU:1"),
        op("y", "add_n", "x", colocate_with="x"),
    )
    p = run(g, gpus=2)
    assert devices(p) == {"c": "GPU:1", "x": "GPU:1", "y": "GPU:1"}
    assert (p.decisions["y"].kind, p.decisions["y"].reason) == ("colocated", "colocated with x")


def test_op_placed_before_the_requester_uses_the_group_request() -> None:
    g = graph(
        op("c", "constant"),
        op("p", "matmul", "c", "c", colocate_with="q"),
        op("q", "add_n", "p", device="/device:CPU:0"),
    )
    p = run(g, gpus=1)
    assert devices(p) == {"c": "CPU:0", "p": "CPU:0", "q": "CPU:0"}
    assert p.decisions["p"].reason == "colocated with q; the group requests /device:CPU:0"
    assert p.decisions["q"].reason == "requested /device:CPU:0 (colocated with p)"


def test_conflicting_types_fail_with_tf_message() -> None:
    g = graph(
        op("c", "constant"),
        op("a", "matmul", "c", "c", device="/device:GPU:0"),
        op("b", "add_n", "a", device="/device:CPU:0", colocate_with="a"),
    )
    with pytest.raises(PlacementError) as caught:
        run(g, gpus=1)
    assert caught.value.tf_message == (
        "Cannot colocate nodes {{colocation_node b}} and {{colocation_node a}}: Cannot merge "
        "devices with incompatible types: '/device:CPU:0' and '/device:GPU:0'"
    )
    assert CLI.say(caught.value.fix).startswith("gpuplace: give the colocated ops")


def test_conflicting_types_with_soft_placement_clear_the_type() -> None:
    g = graph(
        op("c", "constant"),
        op("a", "matmul", "c", "c", device="/device:GPU:0"),
        op("b", "add_n", "a", device="/device:CPU:0", colocate_with="a"),
    )
    p = run(g, gpus=1, soft=True)
    assert devices(p) == {"c": "GPU:0", "a": "GPU:0", "b": "GPU:0"}
    assert p.decisions["a"].kind == "explicit"
    b = p.decisions["b"]
    assert (b.kind, b.reason) == (
        "soft-fallback",
        "soft placement: requested /device:CPU:0 not honoured; colocated with a",
    )


def test_merge_order_follows_union_by_rank() -> None:
    # b joins a first (equal ranks: b's root wins), so c meets the group's merged request.
    g = graph(
        op("k", "constant"),
        op("a", "matmul", "k", "k", device="/device:GPU:0"),
        op("b", "add_n", "a", colocate_with="a"),
        op("c", "add_n", "b", device="/device:CPU:0", colocate_with="a"),
    )
    with pytest.raises(PlacementError) as caught:
        run(g, gpus=1)
    assert caught.value.tf_message == (
        "Cannot colocate nodes {{colocation_node c}} and {{colocation_node a}}: Cannot merge "
        "devices with incompatible types: '/device:GPU:0' and '/device:CPU:0'"
    )


def test_no_common_kernel_type_fails_or_is_ignored_with_soft_placement() -> None:
    g = graph(
        op("k", "constant"),
        op("p", "print", "k"),
        op("r", "nccl", "k", colocate_with="p"),
    )
    with pytest.raises(PlacementError) as caught:
        run(g, gpus=1)
    # TF appends both groups' Colocation Debug Info (ColocationGraph::ColocateNodes)
    assert caught.value.tf_message == (
        "Cannot colocate nodes {{colocation_node r}} and {{colocation_node p}} because no "
        "device type supports both of those nodes and the other nodes colocated with them."
        "\nColocation Debug Info:"
        "\nColocation group had the following types and supported devices: "
        "\nRoot Member(assigned_device_name_index_=-1 requested_device_name_='' "
        "assigned_device_name_='' resource_device_name_='' supported_device_types_=[GPU] "
        "possible_devices_=[]"
        "\nNcclAllReduce: GPU "
        "\n\nColocation members, user-requested devices, and framework assigned devices, if any:"
        "\n  r (NcclAllReduce) "
        "\n"
        "\nColocation Debug Info:"
        "\nColocation group had the following types and supported devices: "
        "\nRoot Member(assigned_device_name_index_=-1 requested_device_name_='' "
        "assigned_device_name_='' resource_device_name_='' supported_device_types_=[CPU] "
        "possible_devices_=[]"
        "\nPrint: CPU "
        "\n\nColocation members, user-requested devices, and framework assigned devices, if any:"
        "\n  p (Print) "
        "\n"
    )
    p = run(g, gpus=1, soft=True)
    assert devices(p) == {"k": "GPU:0", "p": "CPU:0", "r": "GPU:0"}
    assert p.decisions["r"].reason == (
        "soft placement: colocation with p ignored (no device type supports both); "
        "no device requested: GPU:0 is the highest-priority device with a NcclAllReduce kernel"
    )


def test_group_requiring_a_missing_device_names_the_colocation() -> None:
    g = graph(
        op("k", "constant"),
        op("p", "matmul", "k", "k", colocate_with="q"),
        op("q", "add_n", "p", device="/device:GPU:3"),
    )
    with pytest.raises(PlacementError) as caught:
        run(g, gpus=1)
    assert caught.value.tf_message == (
        "Cannot assign a device for operation p: Could not satisfy explicit device "
        "specification '' because the node {{colocation_node p}} was colocated with a group "
        "of nodes that required incompatible device '/device:GPU:3'. All available devices "
        "[/job:localhost/replica:0/task:0/device:CPU:0, "
        "/job:localhost/replica:0/task:0/device:GPU:0]. "
        "\nColocation Debug Info:"
        "\nColocation group had the following types and supported devices: "
        "\nRoot Member(assigned_device_name_index_=-1 requested_device_name_='/device:GPU:3' "
        "assigned_device_name_='' resource_device_name_='' supported_device_types_=[GPU, CPU] "
        "possible_devices_=[]"
        "\nAddN: GPU CPU "
        "\nMatMul: GPU CPU "
        "\n\nColocation members, user-requested devices, and framework assigned devices, if any:"
        "\n  p (MatMul) "
        "\n  q (AddN) /device:GPU:3"
        "\n"
    )
    assert CLI.say(caught.value.fix) == (
        "gpuplace: change the device of p or of the ops colocated with it, or pass "
        "--allow-soft-placement."
    )
    assert devices(run(g, gpus=1, soft=True)) == {"k": "GPU:0", "p": "GPU:0", "q": "GPU:0"}


def test_long_colocation_chain_places_without_recursion() -> None:
    n = 5000
    ops = [op("k", "constant"), op("m0", "matmul", "k", "k", device="/device:GPU:1")]
    ops += [op(f"m{i}", "add_n", f"m{i - 1}", colocate_with=f"m{i - 1}") for i in range(1, n)]
    p = run(graph(*ops), gpus=2)
    assert set(devices(p).values()) == {"GPU:1"}
