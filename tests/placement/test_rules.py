"""Kernels, partial specs, device priority, the generator heuristic and soft placement."""

from __future__ import annotations

import pytest

from gpuplace.cli.words import CLI
from gpuplace.errors import BadInput
from gpuplace.graph.model import Graph
from gpuplace.placement import KINDS, PlacementError, place

from .helpers import CPU0, devices, gpu, graph, matmul_graph, meta, op, run

NO_GPU_KERNEL = (
    "Cannot assign a device for operation p: Could not satisfy explicit device specification "
    "'/device:GPU:0' because no supported kernel for GPU devices is available."
)


def printed(device: str = "") -> Graph:
    return graph(op("c", "constant"), op("p", "print", "c", device=device))


def test_cpu_only_op_on_a_gpu_fails_with_tf_message() -> None:
    with pytest.raises(PlacementError) as caught:
        run(printed("/device:GPU:0"), gpus=1)
    assert caught.value.tf_message == NO_GPU_KERNEL
    assert CLI.say(caught.value.fix) == (
        "gpuplace: it has kernels for CPU only; request such a device, or pass "
        "--allow-soft-placement."
    )


def test_cpu_only_op_on_a_gpu_falls_back_to_cpu0_with_soft_placement() -> None:
    p = run(printed("/device:GPU:0"), gpus=1, soft=True)
    assert devices(p) == {"c": "CPU:0", "p": "CPU:0"}
    assert p.decisions["p"].reason == (
        "soft placement: no supported kernel for GPU devices (/device:GPU:0); "
        "best supported device CPU:0"
    )
    assert p.decisions["c"].reason == "generator follows its consumer p on CPU:0"


def test_unscoped_cpu_only_op_goes_to_cpu0() -> None:
    p = run(printed(), gpus=2)
    assert p.decisions["p"].reason == (
        "no device requested: CPU:0 is the highest-priority device with a Print kernel"
    )


def test_partial_spec_takes_the_lowest_gpu() -> None:
    p = run(matmul_graph(mm="/device:GPU:*"), gpus=3)
    assert devices(p)["MatMul"] == "GPU:0"
    assert p.decisions["MatMul"].reason == (
        "requested /device:GPU:*: GPU:0 is the highest-priority matching device with a "
        "MatMul kernel"
    )


def test_full_local_name_is_honoured() -> None:
    p = run(matmul_graph(mm="/job:localhost/replica:0/task:0/device:GPU:1"), gpus=2)
    assert devices(p) == {"a": "GPU:1", "b": "GPU:1", "MatMul": "GPU:1"}
    assert p.decisions["MatMul"].kind == "explicit"


@pytest.mark.parametrize("spec", ["/job:worker/device:GPU:0", "/replica:1/device:CPU:0"])
def test_other_jobs_and_replicas_do_not_exist_even_with_soft_placement(spec: str) -> None:
    with pytest.raises(PlacementError) as caught:
        run(matmul_graph(mm=spec), gpus=1, soft=True)
    assert caught.value.tf_message.startswith(
        f"Cannot assign a device for operation MatMul: {{{{node MatMul}}}} was explicitly "
        f"assigned to {spec} but available devices are [ "
    )
    assert str(caught.value.fix) == (
        "gpuplace: only /job:localhost/replica:0/task:0 exists on this machine, and soft "
        "placement keeps the job, replica and task; to place ops on other tasks, describe the "
        "cluster (a cluster: block in the spec)."
    )


def test_gpu_only_op_without_gpus_has_no_kernel() -> None:
    g = graph(op("c", "constant"), op("r", "nccl", "c"))
    with pytest.raises(PlacementError) as caught:
        run(g, gpus=0, soft=True)
    assert caught.value.tf_message == (
        "No OpKernel was registered to support Op 'NcclAllReduce' used by {{node r}} with these "
        "attrs: []\nRegistered devices: [CPU]\nRegistered kernels:\n  device='GPU'"
    )
    assert caught.value.fix == (
        "gpuplace: NcclAllReduce has kernels for GPU only; this machine has no GPU."
    )


def test_devices_follow_tf_priority_order_names_compared_as_strings() -> None:
    p = run(matmul_graph(mm="/device:GPU:11"), gpus=12)
    order = [d.rsplit(":", 1)[1] for d in p.devices[:4]]
    assert order == ["0", "1", "10", "11"]
    assert p.devices[-1] == CPU0
    assert devices(p)["MatMul"] == "GPU:11"
    with pytest.raises(PlacementError) as caught:
        run(matmul_graph(mm="/device:GPU:12"), gpus=12)
    listed = caught.value.tf_message.split("[ ")[1].split(" ]")[0].split(", ")
    assert listed == sorted(listed) and listed[0] == CPU0 and listed[3] == gpu(10)


def test_generator_with_consumers_on_two_devices_takes_its_first_candidate() -> None:
    g = graph(
        op("c", "constant"),
        op("m", "matmul", "c", "c", device="/device:GPU:1"),
        op("p", "print", "c"),
    )
    p = run(g, gpus=2)
    assert devices(p) == {"c": "GPU:0", "m": "GPU:1", "p": "CPU:0"}
    assert p.decisions["c"].reason == (
        "no device requested: GPU:0 is the highest-priority device with a Const kernel; "
        "its consumers sit on several devices"
    )


def test_generator_follows_all_consumers_on_one_device() -> None:
    g = graph(
        op("c", "constant"),
        op("m", "matmul", "c", "c", device="/device:GPU:1"),
        op("n", "add_n", "c", device="/device:GPU:1"),
    )
    p = run(g, gpus=2)
    assert devices(p)["c"] == "GPU:1"
    assert p.decisions["c"].reason == "generator follows its consumers m and 1 more on GPU:1"


def test_generator_does_not_follow_to_a_device_without_its_kernel() -> None:
    g = graph(op("l", "load"), op("m", "matmul", "l", "l"))
    p = run(g, gpus=1)
    assert devices(p) == {"l": "CPU:0", "m": "GPU:0"}
    assert p.decisions["l"].reason == (
        "no device requested: CPU:0 is the highest-priority device with a RestoreV2 kernel; "
        "its consumers' device GPU:0 has no kernel for it"
    )


def test_generator_failing_is_reported_in_the_second_pass() -> None:
    g = graph(op("c", "constant", device="/device:GPU:5"), op("m", "matmul", "c", "c"))
    with pytest.raises(PlacementError) as caught:
        run(g, gpus=1)
    assert caught.value.op == "c"


def test_every_decision_has_a_known_kind_and_a_reason() -> None:
    p = run(printed(), gpus=1)
    assert all(d.kind in KINDS and d.reason for d in p.decisions.values())


def test_negative_gpu_count_is_bad_input() -> None:
    with pytest.raises(BadInput):
        place(matmul_graph(), -1, op_meta=meta)


def test_variable_is_placed_in_the_first_pass_not_with_its_consumer() -> None:
    # TF 1's VariableV2 has a ref output, so IsGeneratorNode is false: default device GPU:0.
    g = graph(op("v", "variable"), op("m", "matmul", "v", "v", device="/device:GPU:1"))
    p = run(g, gpus=2)
    assert devices(p) == {"v": "GPU:0", "m": "GPU:1"}
    assert p.log_order() == ("v", "m")
    assert p.decisions["v"].kind == "default"


def test_default_registry_is_used_when_no_table_is_given() -> None:
    g = graph(
        op("a", "constant"), op("b", "constant"), op("m", "matmul", "a", "b"), op("p", "print", "m")
    )
    assert devices(place(g, 1)) == {"a": "GPU:0", "b": "GPU:0", "m": "GPU:0", "p": "CPU:0"}
