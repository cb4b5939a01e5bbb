"""The one module that uses cupy, imported lazily: real GPUs, each under its cupy.cuda.Device."""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import MissingDependency


def load_cupy() -> ModuleType:
    """Import cupy, turning its absence into an install hint naming the extras."""
    try:
        import cupy
    except ImportError as exc:
        raise MissingDependency(
            "running on a real GPU needs cupy: pip install 'gpuplace[cuda12]' (CUDA 12) or "
            "'gpuplace[cuda13]' (CUDA 13); or plan on a simulated machine with --machine"
        ) from exc
    module: ModuleType = cupy
    return module


class CupyBackend:
    """cupy on one real GPU; `cuda_index` is the CUDA ordinal after CUDA_VISIBLE_DEVICES."""

    simulated = False

    def __init__(self, label: str, cuda_index: int, cupy: ModuleType) -> None:
        self.label = label
        self.cuda_index = cuda_index
        self._cupy = cupy

    @property
    def xp(self) -> ModuleType:
        return self._cupy

    def device(self) -> AbstractContextManager[Any]:
        ctx: AbstractContextManager[Any] = self.xp.cuda.Device(self.cuda_index)
        return ctx

    def put(self, host: np.ndarray) -> Any:
        with self.device():
            return self.xp.asarray(host)

    def get(self, array: Any) -> np.ndarray:
        with self.device():
            out: np.ndarray = self.xp.asnumpy(array)
            return out

    def synchronize(self) -> None:
        with self.device():
            self.xp.cuda.Device(self.cuda_index).synchronize()

    def copy_from(self, array: Any) -> Any:
        """Copy an array from another GPU onto this one directly (cupy's cross-device copy)."""
        with self.device():
            return array.copy()

    def set_memory_limit(self, nbytes: int | None) -> None:
        """Cap this GPU's cupy memory pool (`set_limit`), like TF's memory_limit.

        None lifts the cap (so does 0: cupy reads a zero limit as none).
        """
        with self.device():
            self.xp.get_default_memory_pool().set_limit(size=nbytes or 0)

    def preallocate(self, nbytes: int) -> None:
        """Hold `nbytes` in this GPU's pool (TF's up-front reservation): allocate, then return
        the block to the pool, which keeps it for later allocations."""
        with self.device():
            block = self.xp.empty((nbytes,), dtype=self.xp.uint8)
            del block

    def pool_bytes(self) -> int:
        """Bytes this GPU's pool holds from the device (used or cached)."""
        with self.device():
            return int(self.xp.get_default_memory_pool().total_bytes())

    def release_pool(self) -> None:
        """Give every cached block back to the device and lift the limit."""
        with self.device():
            pool = self.xp.get_default_memory_pool()
            pool.free_all_blocks()
            pool.set_limit(size=0)

    @property
    def out_of_memory(self) -> type[BaseException]:
        """The exception cupy raises when this GPU or its pool limit is out of memory."""
        error: type[BaseException] = self.xp.cuda.memory.OutOfMemoryError
        return error
