"""The worked examples of TensorFlow's "Using GPUs" guide, placed as TF's graph placer does."""

from __future__ import annotations

import pytest

from gpuplace.cli.words import CLI
from gpuplace.placement import PlacementError

from .helpers import CPU0, devices, gpu, graph, matmul_graph, op, run

MISSING_GPU2 = (
    "Cannot assign a device for operation MatMul: {{node MatMul}} was explicitly assigned to "
    "/device:GPU:2 but available devices are [ /job:localhost/replica:0/task:0/device:CPU:0, "
    "/job:localhost/replica:0/task:0/device:GPU:0 ]. Make sure the device specification "
    "refers to a valid device."
)


def test_no_scopes_one_gpu_puts_everything_on_gpu0() -> None:
    p = run(matmul_graph(), gpus=1)
    assert devices(p) == {"a": "GPU:0", "b": "GPU:0", "MatMul": "GPU:0"}
    mm, a = p.decisions["MatMul"], p.decisions["a"]
    assert (mm.kind, mm.reason) == (
        "default",
        "no device requested: GPU:0 is the highest-priority device with a MatMul kernel",
    )
    assert (a.kind, a.reason) == (
        "follows-consumer",
        "generator follows its consumer MatMul on GPU:0",
    )
    assert p.devices == (gpu(0), CPU0)
    assert list(p.decisions) == ["a", "b", "MatMul"]  # graph order
    assert p.log_order() == ("MatMul", "a", "b")  # TF's passes: consumers before constants


def test_constants_under_cpu_stay_there_and_matmul_takes_gpu0() -> None:
    p = run(matmul_graph(ab="/device:CPU:0"), gpus=1)
    assert devices(p) == {"a": "CPU:0", "b": "CPU:0", "MatMul": "GPU:0"}
    a = p.decisions["a"]
    assert (a.kind, a.reason) == ("explicit", "requested /device:CPU:0")


def test_missing_gpu2_fails_on_the_first_op_of_the_first_pass() -> None:
    g = matmul_graph(ab="/device:GPU:2", mm="/device:GPU:2")
    with pytest.raises(PlacementError) as caught:
        run(g, gpus=1)
    error = caught.value
    assert error.tf_message == MISSING_GPU2
    assert error.render(CLI) == (
        MISSING_GPU2 + " gpuplace: this machine has 1 GPU (GPU:0); request one of its devices, "
        "or pass --allow-soft-placement."
    )
    assert (error.op, error.exit_code) == ("MatMul", 1)


def test_missing_gpu2_with_soft_placement_runs_everything_on_gpu0() -> None:
    g = matmul_graph(ab="/device:GPU:2", mm="/device:GPU:2")
    p = run(g, gpus=1, soft=True)
    assert devices(p) == {"a": "GPU:0", "b": "GPU:0", "MatMul": "GPU:0"}
    assert {d.kind for d in p.decisions.values()} == {"soft-fallback"}
    assert p.decisions["MatMul"].reason == (
        "soft placement: /device:GPU:2 does not exist here; best supported device GPU:0"
    )
    assert p.decisions["b"].reason == (
        "soft placement: /device:GPU:2 does not exist here; follows its consumer MatMul on GPU:0"
    )


def test_multi_tower_with_add_n_on_cpu() -> None:
    g = graph(
        op("Const", "constant", device="/device:GPU:2"),
        op("Const_1", "constant", device="/device:GPU:2"),
        op("MatMul", "matmul", "Const", "Const_1", device="/device:GPU:2"),
        op("Const_2", "constant", device="/device:GPU:3"),
        op("Const_3", "constant", device="/device:GPU:3"),
        op("MatMul_1", "matmul", "Const_2", "Const_3", device="/device:GPU:3"),
        op("AddN", "add_n", "MatMul", "MatMul_1", device="/device:CPU:0"),
    )
    p = run(g, gpus=4)
    assert devices(p) == {
        "Const": "GPU:2",
        "Const_1": "GPU:2",
        "MatMul": "GPU:2",
        "Const_2": "GPU:3",
        "Const_3": "GPU:3",
        "MatMul_1": "GPU:3",
        "AddN": "CPU:0",
    }
    assert {d.kind for d in p.decisions.values()} == {"explicit"}
    assert p.decisions["Const_3"].reason == "requested /device:GPU:3"
    assert p.log_order() == ("MatMul", "MatMul_1", "AddN", "Const", "Const_1", "Const_2", "Const_3")


def test_no_gpu_places_everything_on_cpu0() -> None:
    p = run(matmul_graph(), gpus=0)
    assert devices(p) == {"a": "CPU:0", "b": "CPU:0", "MatMul": "CPU:0"}
    assert p.devices == (CPU0,)
    assert p.decisions["a"].reason == (
        "no device requested: CPU:0 is the highest-priority device with a Const kernel"
    )


def test_no_gpu_request_for_gpu0_fails_without_soft_placement() -> None:
    with pytest.raises(PlacementError) as caught:
        run(matmul_graph(mm="/device:GPU:0"), gpus=0)
    assert caught.value.render(CLI) == (
        "Cannot assign a device for operation MatMul: {{node MatMul}} was explicitly assigned "
        "to /device:GPU:0 but available devices are [ /job:localhost/replica:0/task:0/device:CPU:0 "
        "]. Make sure the device specification refers to a valid device. gpuplace: this machine "
        "has no GPU; request one of its devices, or pass --allow-soft-placement."
    )


def test_no_gpu_request_for_gpu0_goes_to_cpu0_with_soft_placement() -> None:
    p = run(matmul_graph(mm="/device:GPU:0"), gpus=0, soft=True)
    assert devices(p) == {"a": "CPU:0", "b": "CPU:0", "MatMul": "CPU:0"}
    mm = p.decisions["MatMul"]
    assert (mm.kind, mm.reason) == (
        "soft-fallback",
        "soft placement: /device:GPU:0 does not exist here; best supported device CPU:0",
    )
