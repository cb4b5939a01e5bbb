"""CupyBackend over the fake cupy: the shared contract, then what only the fake can show."""

from __future__ import annotations

import numpy as np
import pytest

from gpuplace.execute.cupy_backend import CupyBackend
from gpuplace.execute.executor import execute
from tests.execute.cupy_contract import CupyContract, MiB, backends
from tests.execute.helpers import CPU, gpu, graph, kernel_table, op
from tests.fakes.fake_cupy import CUDARuntimeError, FakeCupy, make_fake_cupy


@pytest.fixture
def cupy() -> FakeCupy:
    return make_fake_cupy(device_count=2, memory=64 * MiB)


class TestCupyBackendOnFake(CupyContract):
    """The contract that tests/gpu/ runs against real cupy."""


def test_arrays_on_another_device_raise_like_cupy_without_peer_access(cupy: FakeCupy) -> None:
    a = CupyBackend(gpu(0), 0, cupy).put(np.ones(2, np.float32))
    with (
        cupy.cuda.Device(1),
        pytest.raises(ValueError, match=r"resides \(0\).*current device \(1\)"),
    ):
        cupy.add(a, a)


def test_numpy_arrays_are_refused_and_implicit_conversion_raises(cupy: FakeCupy) -> None:
    a = cupy.asarray(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="Unsupported type"):
        cupy.add(a, np.ones(2, np.float32))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)


def test_entering_a_missing_device_fails_as_cuda_set_device(cupy: FakeCupy) -> None:
    with pytest.raises(CUDARuntimeError, match="invalid device ordinal"), cupy.cuda.Device(2):
        pass
    assert cupy.cuda.Device().id == 0
    with pytest.raises(CUDARuntimeError, match="cudaErrorNoDevice"):
        make_fake_cupy(device_count=0).cuda.runtime.getDeviceCount()


def test_synchronize_targets_the_backends_gpu(cupy: FakeCupy) -> None:
    CupyBackend(gpu(1), 1, cupy).synchronize()
    assert cupy.synchronized == {1: 1}


def test_pool_rounds_caches_and_frees_blocks_per_device(cupy: FakeCupy) -> None:
    pool = cupy.get_default_memory_pool()
    a = cupy.asarray(np.ones(100, np.uint8))  # 100 B: one 512 B block
    view = a[10:]
    assert (pool.used_bytes(), pool.total_bytes()) == (512, 512)
    del a
    assert pool.used_bytes() == 512  # the view still holds the block
    del view
    assert (pool.used_bytes(), pool.free_bytes(), pool.n_free_blocks()) == (0, 512, 1)
    with cupy.cuda.Device(1):
        assert pool.total_bytes() == 0
    pool.free_all_blocks()
    assert pool.total_bytes() == 0


def test_pool_limits_follow_cupy_rules(cupy: FakeCupy) -> None:
    pool = cupy.get_default_memory_pool()
    with pytest.raises(ValueError, match="size and fraction cannot be specified at one time"):
        pool.set_limit(size=1, fraction=0.5)
    with pytest.raises(ValueError, match="fraction out of range"):
        pool.set_limit(fraction=2)
    pool.set_limit(fraction=0.5)
    assert pool.get_limit() == 32 * MiB
    with cupy.cuda.Device(1):
        assert pool.get_limit() == 0
    pool.set_limit(size=1024)
    with pytest.raises(cupy.cuda.memory.OutOfMemoryError, match="limit set to: 1,024 bytes"):
        cupy.zeros(2048, np.uint8)
    pool.set_limit(size=0)
    assert cupy.zeros(2048, np.uint8).nbytes == 2048


def test_device_memory_is_a_hard_limit(cupy: FakeCupy) -> None:
    with pytest.raises(cupy.cuda.memory.OutOfMemoryError, match=r"allocated so far: 0 bytes\)\.$"):
        cupy.zeros(65 * MiB, np.uint8)


def test_executor_copies_gpu_to_gpu_directly_on_the_fake(cupy: FakeCupy) -> None:
    g = graph(
        op("a", "constant", value=[[1.0, 0.0], [0.0, 1.0]]), op("b", "negative", "a"), fetch=("b",)
    )
    result = execute(
        g, {"a": gpu(0), "b": gpu(1)}, backends(cupy, 0, 1), kernel_table().__getitem__
    )
    assert [(c.src, c.dst, c.nbytes) for c in result.copies] == [(gpu(0), gpu(1), 16)]
    assert result.peak_bytes == {CPU: 0, gpu(0): 256, gpu(1): 512}
    assert cupy.synchronized == {0: 1, 1: 1}  # each side of the copy, so it is timed alone
