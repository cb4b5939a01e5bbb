"""CupyBackend and the executor on GPUs, written once for any `cupy` module.

Subclass `CupyContract` in a test module that provides a `cupy` fixture: the fake
(`tests/execute/test_cupy_backend.py`) or real cupy (`tests/gpu/test_cupy_backend_gpu.py`). The
tests use only what both share, measure pool bytes relative to where they started, and lift any
pool limit they set. Tests needing two GPUs skip, saying so, where there is one.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from gpuplace.execute.backends import Backend, NumpyBackend
from gpuplace.execute.cupy_backend import CupyBackend
from gpuplace.execute.executor import execute
from gpuplace.memory.ledger import OutOfMemory
from tests.execute.helpers import CPU, gpu, graph, kernel_table, op

MiB = 1024**2


def device_count(cupy: ModuleType) -> int:
    count: int = cupy.cuda.runtime.getDeviceCount()
    return count


def two_gpus(cupy: ModuleType) -> tuple[int, int]:
    """Two distinct CUDA ordinals, or a skip."""
    if device_count(cupy) < 2:
        pytest.skip("needs 2 GPUs: this machine has 1")
    return 0, 1


def backends(cupy: ModuleType, *indices: int) -> dict[str, Backend]:
    table: dict[str, Backend] = {CPU: NumpyBackend(CPU)}
    table.update({gpu(i): CupyBackend(gpu(i), i, cupy) for i in indices})
    return table


def used_bytes(cupy: ModuleType, index: int) -> int:
    with cupy.cuda.Device(index):
        used: int = cupy.get_default_memory_pool().used_bytes()
        return used


class CupyContract:
    @pytest.fixture
    def limited(self, cupy: ModuleType) -> Iterator[CupyBackend]:
        """GPU 0's backend; any pool limit a test sets on it is lifted afterwards."""
        backend = CupyBackend(gpu(0), 0, cupy)
        with backend.device():
            cupy.get_default_memory_pool().free_all_blocks()
        yield backend
        backend.set_memory_limit(None)

    def test_put_and_get_round_trip_through_the_gpu(self, cupy: ModuleType) -> None:
        backend = CupyBackend(gpu(0), 0, cupy)
        host = np.arange(6, dtype=np.float32).reshape(2, 3)
        array = backend.put(host)
        assert isinstance(array, cupy.ndarray) and array.device.id == 0
        back = backend.get(array)
        assert isinstance(back, np.ndarray)
        np.testing.assert_array_equal(back, host)

    def test_device_context_selects_the_gpu_and_restores_the_previous(
        self, cupy: ModuleType
    ) -> None:
        last = device_count(cupy) - 1
        backend = CupyBackend(gpu(last), last, cupy)
        before = cupy.cuda.Device().id
        with backend.device():
            assert cupy.cuda.Device().id == last
            assert backend.put(np.zeros(3, np.float32)).device.id == last
        assert cupy.cuda.Device().id == before

    def test_copy_between_gpus_lands_on_the_destination(self, cupy: ModuleType) -> None:
        first, second = two_gpus(cupy)
        source = CupyBackend(gpu(first), first, cupy)
        target = CupyBackend(gpu(second), second, cupy)
        array = source.put(np.arange(4, dtype=np.float32))
        copied = target.copy_from(array)
        assert copied.device.id == second
        np.testing.assert_array_equal(target.get(copied), np.arange(4, dtype=np.float32))

    def test_pool_limit_raises_cupy_oom_until_lifted(
        self, cupy: ModuleType, limited: CupyBackend
    ) -> None:
        limited.set_memory_limit(used_bytes(cupy, 0) + MiB)
        big = np.zeros(2 * MiB, np.uint8)
        with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
            limited.put(big)
        assert limited.out_of_memory is cupy.cuda.memory.OutOfMemoryError
        limited.set_memory_limit(None)
        assert limited.get(limited.put(big)).nbytes == 2 * MiB

    def test_pool_limit_counts_cached_blocks_and_keeps_them(
        self, cupy: ModuleType, limited: CupyBackend
    ) -> None:
        """cupy checks the limit against every byte the pool holds, cached blocks included, and
        raises without dropping them (only a failing cudaMalloc drops the cache)."""
        pool = cupy.get_default_memory_pool()
        with limited.device():
            start = pool.total_bytes()
            a = limited.put(np.zeros(MiB, np.uint8))
            del a  # back in the pool's cache: held, not in use
            limited.set_memory_limit(start + MiB + MiB // 2)
            with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
                limited.put(np.zeros(MiB, np.uint16))  # 2 MiB: no cached block fits it
            assert pool.total_bytes() == start + MiB  # the cached block is still held
            assert limited.get(limited.put(np.ones(MiB, np.uint8))).sum() == MiB  # reuses it

    def test_executor_runs_each_op_on_its_gpu_and_matches_numpy(self, cupy: ModuleType) -> None:
        first, second = (0, 1) if device_count(cupy) > 1 else (0, 0)
        kernels: dict[str, Any] = kernel_table()
        a = np.arange(4.0, dtype=np.float32).reshape(2, 2)
        g = graph(
            op("a", "constant", value=a),
            op("b", "matmul", "a", "a"),
            op("c", "add", "b", "a"),
            op("d", "negative", "c"),
            fetch=("d", "b"),
        )
        devices = {"a": CPU, "b": gpu(first), "c": gpu(second), "d": CPU}
        result = execute(g, devices, backends(cupy, first, second), kernels.__getitem__)
        np.testing.assert_allclose(result.values["d"], -(a @ a + a))
        np.testing.assert_allclose(result.values["b"], a @ a)
        assert kernels["matmul"].seen == [("b", first)]
        assert kernels["add"].seen == [("c", second)]
        assert kernels["negative"].seen == [("d", None)]  # numpy on the CPU
        expected = [("b", "a", CPU, gpu(first))]
        if first != second:
            expected += [("c", "b", gpu(first), gpu(second)), ("c", "a", CPU, gpu(second))]
        expected += [("d", "c", gpu(second), CPU)]
        assert [(c.op, c.tensor, c.src, c.dst) for c in result.copies] == expected

    def test_host_value_kernels_build_on_the_host_and_land_on_the_gpu(
        self, cupy: ModuleType
    ) -> None:
        kernels: dict[str, Any] = kernel_table()
        g = graph(op("a", "constant", value=[[1.0, 2.0], [3.0, 4.0]]), fetch=("a",))
        result = execute(g, {"a": gpu(0)}, backends(cupy, 0), kernels.__getitem__)
        assert kernels["constant"].seen == [("a", np)]
        assert result.copies == []  # creation on the device, not a copy
        assert result.peak_bytes == {CPU: 0, gpu(0): 256}
        np.testing.assert_array_equal(result.values["a"], [[1.0, 2.0], [3.0, 4.0]])

    def test_cupy_oom_becomes_out_of_memory_and_frees_the_gpu(
        self, cupy: ModuleType, limited: CupyBackend
    ) -> None:
        start = used_bytes(cupy, 0)
        limited.set_memory_limit(start + 3 * MiB // 4)
        g = graph(
            op("a", "constant", shape=(128, 1024), value=np.ones((128, 1024))),  # 512 KiB
            op("b", "negative", "a", shape=(128, 1024)),  # 1 MiB with a: past the pool limit
            fetch=("b",),
        )
        devices = {"a": gpu(0), "b": gpu(0)}
        table = {gpu(0): limited}
        with pytest.raises(OutOfMemory) as caught:
            execute(g, devices, table, kernel_table().__getitem__)
        message = str(caught.value)
        assert message.startswith(
            f"OOM when allocating 512.0 KiB (524288 B) for op 'b' on {gpu(0)}"
        )
        assert (
            "(cupy: Out of memory allocating" in message and "nothing is left allocated" in message
        )
        assert used_bytes(cupy, 0) == start
