"""A fake `cupy` on numpy: the subset gpuplace uses, with cupy's device and memory-pool rules.

`make_fake_cupy(device_count=4, memory=16 * GiB)` returns a fresh module-like object:
- `cuda.Device(i)` is a context manager over a current-device stack (`.id`, `.synchronize()`);
  entering a device that does not exist raises CUDARuntimeError as cudaSetDevice does.
- `cuda.runtime.getDeviceCount()`, `getDevice()`, `setDevice()`; with no devices getDeviceCount
  raises cudaErrorNoDevice.
- `get_default_memory_pool()` is one object acting on the current device's pool, as cupy's
  MemoryPool is: `set_limit(size=..., fraction=...)`, `get_limit()`, `used_bytes()`, `free_bytes()`,
  `total_bytes()`, `n_free_blocks()`, `free_all_blocks()`. Blocks are rounded up to 512 B and cached
  once freed; a request no cached block matches splits the smallest larger one (cupy's best fit;
  the pieces are not merged back); past the limit or the device's memory the pool drops its
  cached blocks, then raises `cuda.memory.OutOfMemoryError` with cupy's arguments and message.
- `ndarray`s remember their device and hold a block of its pool until their last reference (views
  included) goes. Functions and operators need every array on the current device and raise cupy's
  ValueError otherwise (the case of GPUs without peer access); numpy arrays are refused with cupy's
  TypeError, and `numpy.asarray(fake)` raises as cupy's implicit conversion does.
- `asarray`, `array`, `asnumpy`, `ndarray.get()`, `ndarray.copy()` (onto the current device:
  cupy's cross-device copy), and the FUNCTIONS, METHODS and operators below, delegated to numpy.
`fake.synchronized` counts `Device(i).synchronize()` calls per device. `fake.fail(status, text)`
makes every later CUDA call raise that CUDARuntimeError, as every call does without a driver;
`fail(..., device=i)` only those on device i, as a sticky error loses that device's context; `runtime.runtimeGetVersion()` / `driverGetVersion()` return
`fake.runtime_version` / `fake.driver_version` (CUDA's 13020 for 13.2).
"""

from __future__ import annotations

import operator
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

GiB = 1024**3
UNIT = 512  # cupy's allocation unit (`cupy/cuda/memory.pyx`, _round_size)

FUNCTIONS = (  # what gpuplace's kernels call through `xp` (graph/kernels.py), and creation
    *("add", "subtract", "multiply", "divide", "negative", "exp", "log", "tanh", "maximum"),
    *("matmul", "sum", "mean", "max", "transpose", "reshape", "concatenate", "split"),
    *("zeros", "ones", "full", "empty"),
)
NUMPY_NAMES = ("float16", "float32", "float64", "int32", "int64", "uint8", "bool_", "dtype")
METHODS = ("astype", "reshape", "transpose", "sum", "mean", "max")
BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "truediv": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.mod,
    "pow": np.power,
    "matmul": np.matmul,
}
COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}
COMPARE |= {"eq": np.equal, "ne": np.not_equal}
UNARY = {"neg": np.negative, "pos": np.positive, "abs": np.absolute}


class CUDARuntimeError(RuntimeError):
    """cupy_backends.cuda.api.runtime.CUDARuntimeError; `status` is the cudaError_t value."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


class OutOfMemoryError(MemoryError):
    """cupy.cuda.memory.OutOfMemoryError, with cupy's arguments and messages."""

    def __init__(self, size: int, total: int, limit: int = 0) -> None:
        self._size, self._total, self._limit = size, total, limit
        if limit == 0:
            msg = f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes)."
        else:
            msg = (
                f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes, "
                f"limit set to: {limit:,} bytes)."
            )
        super().__init__(msg)


class _Block:
    """A pool block held by arrays; it goes back to the pool's cache with its last holder."""

    __slots__ = ("pool", "size")

    def __init__(self, pool: _DevicePool, size: int) -> None:
        self.pool, self.size = pool, size

    def __del__(self) -> None:
        self.pool.release(self.size)


class _DevicePool:
    """One device's SingleDeviceMemoryPool: `reserved` is total_bytes(), `used` used_bytes()."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.limit = 0  # cupy: 0 means no limit
        self.used = 0
        self.reserved = 0
        self.free_blocks: Counter[int] = Counter()

    def malloc(self, nbytes: int) -> _Block:
        size = -(-nbytes // UNIT) * UNIT
        if size and self.free_blocks[size]:
            self.free_blocks[size] -= 1
        elif size and (larger := [b for b, n in self.free_blocks.items() if n and b > size]):
            cached = min(larger)  # cupy's best fit: split the smallest larger cached block
            self.free_blocks[cached] -= 1
            self.free_blocks[cached - size] += 1
        elif size:
            self._reserve(size)
        self.used += size
        return _Block(self, size)

    def _reserve(self, size: int) -> None:
        """Acquire a new block, as cupy's `SingleDeviceMemoryPool._try_malloc`: past the pool's
        limit it raises at once, cached blocks kept; only a failing cudaMalloc (the device is
        full) drops the cache and retries."""
        if self.limit and self.reserved + size > self.limit:
            raise OutOfMemoryError(size, self.reserved, self.limit)
        if self.reserved + size > self.capacity:
            self.free_all_blocks()
        if self.reserved + size > self.capacity:
            raise OutOfMemoryError(size, self.reserved)
        self.reserved += size

    def release(self, size: int) -> None:
        if size:
            self.used -= size
            self.free_blocks[size] += 1

    def free_all_blocks(self) -> None:
        self.reserved -= sum(size * count for size, count in self.free_blocks.items())
        self.free_blocks.clear()


class _State:
    """The fake's world: devices, the current-device stack, pools, and numpy delegation."""

    def __init__(self, memory: Sequence[int]) -> None:
        self.pools = [_DevicePool(m) for m in memory]
        self.failures: dict[int | None, CUDARuntimeError] = {}  # None: every device
        self.current = 0
        self.stack: list[int] = []
        self.synchronized: Counter[int] = Counter()
        self.Device: type[_Device] = type("Device", (_Device,), {"_state": self})

    def device_count(self) -> int:
        if None in self.failures:
            raise self.failures[None]
        if not self.pools:
            raise CUDARuntimeError(100, "cudaErrorNoDevice: no CUDA-capable device is detected")
        return len(self.pools)

    def check(self, device_id: int) -> None:
        if failure := self.failures.get(device_id, self.failures.get(None)):
            raise failure
        if not 0 <= device_id < len(self.pools):
            raise CUDARuntimeError(101, "cudaErrorInvalidDevice: invalid device ordinal")

    def set_device(self, device_id: int) -> None:
        self.check(device_id)
        self.current = device_id

    def pool(self) -> _DevicePool:
        self.device_count()
        self.check(self.current)
        return self.pools[self.current]

    def adopt(self, data: np.ndarray, sources: Sequence[Any] = ()) -> FakeArray:
        """Wrap a numpy result on the current device; a view shares the block of its source."""
        for source in _arrays(sources):
            if np.may_share_memory(data, source._data):
                return FakeArray(self, data, self.current, source._block)
        return FakeArray(self, data, self.current, self.pool().malloc(data.nbytes))

    def call(self, func: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Run a numpy function on fake arrays, as the cupy function of the same name would."""
        raw = [self.unwrap(a) for a in args]
        raw_kwargs = {k: self.unwrap(v) for k, v in kwargs.items()}
        return self.wrap(func(*raw, **raw_kwargs), [*args, *kwargs.values()])

    def unwrap(self, value: Any) -> Any:
        if isinstance(value, FakeArray):
            if value._device_id != self.current:
                raise ValueError(
                    f"The device where the array resides ({value._device_id}) is different "
                    f"from the current device ({self.current}). Peer access is unavailable "
                    "between these devices."
                )
            return value._data
        if isinstance(value, np.ndarray):
            raise TypeError(f"Unsupported type {type(value)}")
        if isinstance(value, list | tuple):
            return type(value)(self.unwrap(v) for v in value)
        return value

    def wrap(self, result: Any, sources: Sequence[Any]) -> Any:
        if isinstance(result, np.generic):
            result = np.asarray(result)
        if isinstance(result, np.ndarray):
            return self.adopt(result, sources)
        if isinstance(result, list | tuple):
            return type(result)(self.wrap(r, sources) for r in result)
        return result


def _arrays(values: Sequence[Any]) -> Iterator[FakeArray]:
    for value in values:
        if isinstance(value, FakeArray):
            yield value
        elif isinstance(value, list | tuple):
            yield from _arrays(value)


class FakeArray:
    """cupy.ndarray: a numpy array on one fake device, holding a block of that device's pool."""

    __array_priority__ = 100  # numpy scalars defer to our reflected operators, as with cupy
    __hash__ = None  # type: ignore[assignment]  # elementwise __eq__, as numpy and cupy

    def __init__(self, state: _State, data: np.ndarray, device_id: int, block: _Block) -> None:
        self._state, self._data, self._device_id, self._block = state, data, device_id, block

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    nbytes = property(lambda self: self._data.nbytes)
    T = property(lambda self: self.transpose())

    @property
    def device(self) -> _Device:
        return self._state.Device(self._device_id)

    def get(self, stream: Any = None) -> np.ndarray:
        """Copy to the host; like cupy, it works whatever the current device is."""
        return self._data.copy()

    def copy(self, order: str = "C") -> FakeArray:
        """A copy on the current device, even from another device (cupy's peer copy)."""
        return self._state.adopt(np.array(self._data, order=order, copy=True))

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly."
        )

    def __getitem__(self, key: Any) -> Any:
        return self._state.call(operator.getitem, (self, key), {})

    def __setitem__(self, key: Any, value: Any) -> None:
        self._state.unwrap(self)[self._state.unwrap(key)] = self._state.unwrap(value)

    def __repr__(self) -> str:
        return repr(self._data)

    def __str__(self) -> str:
        return str(self._data)


def _method(name: str) -> Callable[..., Any]:
    def method(self: FakeArray, *args: Any, **kwargs: Any) -> Any:
        return self._state.call(getattr(np.ndarray, name), (self, *args), kwargs)

    method.__name__ = name
    return method


def _operator(func: Callable[..., Any], reflected: bool = False) -> Callable[..., Any]:
    def op(self: FakeArray, *other: Any) -> Any:
        args = (*other, self) if reflected else (self, *other)
        return self._state.call(func, args, {})

    return op


for _name in METHODS:
    setattr(FakeArray, _name, _method(_name))
for _name, _func in BINARY.items():
    setattr(FakeArray, f"__{_name}__", _operator(_func))
    setattr(FakeArray, f"__r{_name}__", _operator(_func, reflected=True))
for _name, _func in {**COMPARE, **UNARY}.items():
    setattr(FakeArray, f"__{_name}__", _operator(_func))


class _Device:
    """cupy.cuda.Device: entering makes it current; leaving restores the previous device."""

    _state: ClassVar[_State]

    def __init__(self, device: int | None = None) -> None:
        self.id = self._state.current if device is None else int(device)

    def __enter__(self) -> _Device:
        previous = self._state.current
        self._state.set_device(self.id)
        self._state.stack.append(previous)
        return self

    def __exit__(self, *exc: object) -> None:
        self._state.current = self._state.stack.pop()

    def synchronize(self) -> None:
        self._state.check(self.id)
        self._state.synchronized[self.id] += 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id}>"


class _MemoryPool:
    """cupy.cuda.MemoryPool: every method acts on the current device's pool."""

    def __init__(self, state: _State) -> None:
        self._state = state

    def used_bytes(self) -> int:
        return self._state.pool().used

    def total_bytes(self) -> int:
        return self._state.pool().reserved

    def free_bytes(self) -> int:
        pool = self._state.pool()
        return pool.reserved - pool.used

    def n_free_blocks(self) -> int:
        return sum(self._state.pool().free_blocks.values())

    def free_all_blocks(self, stream: Any = None) -> None:
        self._state.pool().free_all_blocks()

    def get_limit(self) -> int:
        return self._state.pool().limit

    def set_limit(self, size: int | None = None, fraction: float | None = None) -> None:
        """cupy's rules: size or fraction (of the device's total memory), not both; 0 lifts it."""
        pool = self._state.pool()
        if size is None:
            if fraction is not None and not 0 <= fraction <= 1:
                raise ValueError(f"memory limit fraction out of range: {fraction}")
            size = int((fraction or 0) * pool.capacity)
        elif fraction is not None:
            raise ValueError("size and fraction cannot be specified at one time")
        if size < 0:
            raise ValueError(f"memory limit size out of range: {size}")
        pool.limit = size


class FakeCupy(types.ModuleType):
    """Module-like object: `CupyBackend(name, i, make_fake_cupy())` stands in for `import cupy`."""

    def __init__(self, device_count: int = 4, memory: int | Sequence[int] = 16 * GiB) -> None:
        super().__init__("cupy")
        sizes = [memory] * device_count if isinstance(memory, int) else list(memory)
        state = self._state = _State(sizes)
        self.synchronized = state.synchronized
        self.ndarray = FakeArray
        self.cuda = types.ModuleType("cupy.cuda")
        self.cuda.Device = state.Device
        self.cuda.runtime = types.SimpleNamespace(
            CUDARuntimeError=CUDARuntimeError,
            getDeviceCount=state.device_count,
            getDevice=lambda: state.current,
            setDevice=state.set_device,
            runtimeGetVersion=lambda: self.runtime_version,
            driverGetVersion=lambda: self.driver_version,
        )
        self.runtime_version, self.driver_version = 13020, 13000
        self.cuda.memory = types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError)
        pool = _MemoryPool(state)
        self.get_default_memory_pool = lambda: pool
        for name in NUMPY_NAMES:
            setattr(self, name, getattr(np, name))
        for name in FUNCTIONS:
            setattr(self, name, _function(state, name))

    def fail(self, status: int, message: str, device: int | None = None) -> None:
        """Every CUDA call from now on (on `device`, or any) raises CUDARuntimeError."""
        self._state.failures[device] = CUDARuntimeError(status, message)

    def asarray(self, a: Any, dtype: Any = None) -> FakeArray:
        """An array on the current device; a cupy array is returned as it is (no device check)."""
        if isinstance(a, FakeArray):
            return a if dtype is None or a.dtype == dtype else a.astype(dtype)
        return self._state.adopt(np.array(a, dtype=dtype, copy=True))

    def array(self, obj: Any, dtype: Any = None, copy: bool = True) -> FakeArray:
        if isinstance(obj, FakeArray):
            out = obj.copy() if copy else obj
            return out if dtype is None else out.astype(dtype)
        return self._state.adopt(np.array(obj, dtype=dtype, copy=True))

    def asnumpy(self, a: Any, stream: Any = None) -> np.ndarray:
        return a.get() if isinstance(a, FakeArray) else np.asarray(a)


def _function(state: _State, name: str) -> Callable[..., Any]:
    func = getattr(np, name)

    def function(*args: Any, **kwargs: Any) -> Any:
        return state.call(func, args, kwargs)

    function.__name__ = name
    return function


def make_fake_cupy(device_count: int = 4, memory: int | Sequence[int] = 16 * GiB) -> FakeCupy:
    """A fresh fake cupy with `device_count` GPUs of `memory` bytes each (or one size per GPU)."""
    return FakeCupy(device_count, memory)
