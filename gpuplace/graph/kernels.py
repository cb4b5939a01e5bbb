"""What each op computes: `(xp, inputs, attrs) -> outputs`, where `xp` is numpy or cupy.

Device kernels use only calls both libraries provide. Host-value ops (generators) ignore `xp`
and build numpy arrays, random ones from `numpy.random.default_rng(seed)`, so a simulated GPU
and a real one start from the same numbers; the executor copies them to the device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from ..echo import show
from ..errors import BadInput, RuntimeFailure
from ..fileio import write_atomic
from .infer import batch_rows, split_sizes
from .npy import read_header
from .writes import check_folder

Array = Any
ComputeFn = Callable[[ModuleType, Sequence[Array], Mapping[str, Any]], list[Array]]


def _np() -> ModuleType:
    import numpy

    return numpy


def constant(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    np = _np()
    value, shape, dtype = attrs["value"], attrs["shape"], attrs["dtype"]
    if isinstance(value, np.ndarray):  # an imported tensor (graph/onnx_import.py): no copy
        return [value]
    if type(value) is list:
        return [np.asarray(value, dtype=dtype).reshape(shape)]
    return [np.full(shape, value, dtype=dtype)]


def zeros(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [_np().zeros(attrs["shape"], dtype=attrs["dtype"])]


def ones(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [_np().ones(attrs["shape"], dtype=attrs["dtype"])]


def random_uniform(
    xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]
) -> list[Array]:
    rng = _np().random.default_rng(attrs["seed"])
    values = rng.uniform(attrs["minval"], attrs["maxval"], size=attrs["shape"])
    return [values.astype(attrs["dtype"])]


def random_normal(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    rng = _np().random.default_rng(attrs["seed"])
    values = rng.normal(attrs["mean"], attrs["stddev"], size=attrs["shape"])
    return [values.astype(attrs["dtype"])]


def opaque(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    """An imported op gpuplace has no kernel for; `run` refuses it before anything runs."""
    raise BadInput(f"op {attrs.get('onnx_type', 'Opaque')} has no kernel in gpuplace")


def placeholder(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    if "value" not in attrs:
        raise BadInput(
            "a placeholder was not fed; pass --feed NAME=FILE.npy or --feed NAME=JSON "
            "(gpuplace.graph.apply_feeds checks every placeholder before a run)"
        )
    return [attrs["value"]]


_INITIALIZERS: dict[str, ComputeFn] = {
    "zeros": zeros,
    "ones": ones,
    "constant": constant,
    "random_normal": random_normal,
    "random_uniform": random_uniform,
}


def variable(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    """The initial value, from the initializer named in attrs (its parameters sit beside it)."""
    return _INITIALIZERS[attrs["initializer"]](xp, inputs, attrs)


def load(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    """The file's array; its header is checked again first (the file may have changed since
    the spec was loaded), so nothing is allocated for a header the file does not back."""
    np = _np()
    path = attrs["path"]
    try:
        read_header(path)
        value = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:  # NpyError too
        raise RuntimeFailure(f"load: cannot read {path!r}: {err}") from None
    if tuple(value.shape) != tuple(attrs["shape"]) or value.dtype.name != attrs["dtype"]:
        raise RuntimeFailure(
            f"load: {path!r} changed since the spec was loaded: it now holds {value.dtype.name} "
            f"{list(value.shape)}, expected {attrs['dtype']} {list(attrs['shape'])}; reload the spec"
        )
    # native byte order, C order; asarray keeps a 0-d array 0-d (ascontiguousarray makes it [1])
    return [np.asarray(value, dtype=value.dtype.newbyteorder("="), order="C")]


def save(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    """CPU-only: the executor hands it a host (numpy) array.

    Writes exactly `path`: numpy.save to an open file adds no `.npy` (to a name it would), so
    a spec that names `result` gets `result`, as TensorFlow's write ops do, and a spec that
    checks for its file finds it. Atomically (`fileio.write_atomic`): a full disk, a read-only
    folder or a kill leaves the previous file whole. The loader checked the path against the
    spec's write rules (`writes.py`); a folder swapped for a symbolic link since is refused.
    A file that cannot be written is a runtime failure (exit 1), as for `run --save`."""
    np = _np()
    path, value = attrs["path"], np.asarray(inputs[0])
    try:
        check_folder(path)
        write_atomic(path, lambda f: np.save(f, value, allow_pickle=False))
    except OSError as err:
        raise RuntimeFailure(
            f"save: cannot write {show(path, 200)}: {err.strerror or err}"
        ) from None
    return []


def passthrough(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    """print: hands its input on unchanged (the report shows the value; the core never prints)."""
    return [inputs[0]]


def identity(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [inputs[0].copy()]


class Elementwise:
    """A kernel calling `xp.<name>` on all inputs (add, subtract, exp, tanh, ...).

    `xp_function` names the call: the executor calls it directly, with no lists in or out."""

    def __init__(self, name: str) -> None:
        self.xp_function = self.__name__ = name

    def __call__(
        self, xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]
    ) -> list[Array]:
        return [getattr(xp, self.xp_function)(*inputs)]


def elementwise(name: str) -> ComputeFn:
    """A kernel calling `xp.<name>` on all inputs (see `Elementwise`)."""
    return Elementwise(name)


def relu(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    """max(x, 0). On the host, a large contiguous x is taken in blocks against a block of
    zeros (`_ZERO_BLOCK`): numpy's maximum against a scalar skips its SIMD loop, and runs
    about 2.5 times as long as against an array (0.166 -> 0.065 ms for 4096x128 float32)."""
    x = inputs[0]
    if xp.__name__ != "numpy":
        return [xp.maximum(x, 0)]
    if x.size < _ZERO_BLOCK or not x.flags.c_contiguous:
        # a 0-d zero of x's dtype: the same result as the Python 0 (whose dtype numpy works
        # out on every call: 1.1 -> 0.5 us for 4x4 float32); a bool x keeps numpy's promotion
        zero = _ZERO.get(x.dtype)
        if zero is None or type(x) is not xp.ndarray:
            zero = _zero_of(x) if not _ZERO else None
        return [xp.maximum(x, 0 if zero is None else zero)]
    zeros, flat, out = _zeros(xp, x.dtype), x.reshape(-1), xp.empty(x.size, dtype=x.dtype)
    for start in range(0, x.size, _ZERO_BLOCK):
        stop = min(start + _ZERO_BLOCK, x.size)
        xp.maximum(flat[start:stop], zeros[: stop - start], out=out[start:stop])
    return [out.reshape(x.shape)]


def _zeros(xp: ModuleType, dtype: Any) -> Array:
    """`_ZERO_BLOCK` zeros of `dtype`, made once, read only."""
    found = _ZEROS.get(dtype)
    if found is None:
        found = xp.zeros(_ZERO_BLOCK, dtype=dtype)
        found.flags.writeable = False
        _ZEROS[dtype] = found
    return found


_ZERO_BLOCK = 1 << 15  # elements: 128 KiB of float32, in the CPU's cache
_ZEROS: dict[Any, Array] = {}  # dtype -> _ZERO_BLOCK zeros of it
_ZERO: dict[Any, Array] = {}  # dtype -> a 0-d zero of it, for the ints and floats


def _zero_of(x: Array) -> Array | None:
    """The 0-d zero of a numpy array's dtype (None: not an int or float), made on first use."""
    np = _np()
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64"):  # fmt: skip
        zero = np.zeros((), dtype=name)
        zero.flags.writeable = False
        _ZERO[zero.dtype] = zero
    return _ZERO.get(x.dtype) if type(x) is np.ndarray else None


def sigmoid(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [1 / (1 + xp.exp(-inputs[0]))]


def softmax(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [softmax_along(xp, inputs[0], -1)]


def softmax_along(xp: ModuleType, x: Array, axis: int, log: bool = False) -> Array:
    """Softmax of `x` along `axis` (TensorFlow's is the last axis), or its log (LogSoftmax)."""
    if x.size == 0:  # nothing to normalise; numpy's max of an empty axis would raise
        return x.copy()
    shifted = x - (last_max(xp, x) if axis in (-1, x.ndim - 1) else xp.max(x, axis, keepdims=True))
    if log:
        shifted -= xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))
        return shifted
    xp.exp(shifted, out=shifted)  # in place: one tensor-sized temporary, not three
    shifted /= xp.sum(shifted, axis=axis, keepdims=True)
    return shifted


def last_max(xp: ModuleType, x: Array) -> Array:
    """x.max(axis=-1, keepdims=True) by halving the last axis with elementwise maxima down to
    `_ACROSS` columns, then one maximum down the columns of their transposed copy: numpy
    reduces a short contiguous axis row by row, about 8 times slower than this. Halving all
    the way down to one column took 0.26 ms on attention's 8x4x128x128 float32, this 0.20 ms
    (its last steps ran 4096 rows of 8, 4, 2 and 1 elements)."""
    rest = None
    while x.shape[-1] > _ACROSS:
        half = x.shape[-1] // 2
        if x.shape[-1] % 2:
            tail = x[..., -1:]
            rest = tail if rest is None else xp.maximum(rest, tail)
        x = xp.maximum(x[..., :half], x[..., half : 2 * half])
    if x.shape[-1] > 1:
        columns = xp.ascontiguousarray(x.reshape(-1, x.shape[-1]).T)
        x = columns.max(axis=0).reshape(*x.shape[:-1], 1)
    return x if rest is None else xp.maximum(x, rest)


_ACROSS = 32  # see last_max


def matmul(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    a, b = inputs
    return [xp.matmul(a.T if attrs["transpose_a"] else a, b.T if attrs["transpose_b"] else b)]


def add_n(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    out = inputs[0].copy()
    for x in inputs[1:]:
        out += x
    return [out]


def reduction(name: str) -> ComputeFn:
    """`xp.sum`, `xp.mean` or `xp.max` over `axis` (None: all); the dtype stays the input's."""

    def compute(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
        x = inputs[0]
        axis = attrs.get("axis")
        if name == "mean" and x.size == 0:  # numpy would warn "Mean of empty slice"
            shape = xp.sum(x, axis=axis, keepdims=attrs["keepdims"]).shape
            # the mean of nothing is nan, as in TensorFlow (the loader refuses it for ints)
            return [xp.full(shape, xp.nan if x.dtype.kind == "f" else 0, dtype=x.dtype)]
        out = getattr(xp, name)(x, axis=axis, keepdims=attrs["keepdims"])
        return [xp.asarray(out).astype(x.dtype, copy=False)]

    compute.__name__ = name
    return compute


def transpose(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [xp.transpose(inputs[0], attrs.get("perm"))]


def reshape(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [xp.reshape(inputs[0], attrs["shape"])]


def concat(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [xp.concatenate(list(inputs), axis=attrs["axis"])]


def split(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    x, axis = inputs[0], attrs["axis"]
    if "num_split" in attrs:
        return list(xp.split(x, attrs["num_split"], axis=axis))
    sizes = split_sizes(attrs["sizes"], x.shape[axis]) or ()
    cuts, at = [], 0
    for size in sizes[:-1]:
        at += size
        cuts.append(at)
    return list(xp.split(x, cuts, axis=axis))


def cast(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    return [inputs[0].astype(attrs["dtype"])]


def batch_slice(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    x = inputs[0]
    start, stop = batch_rows(x.shape[0], attrs["parts"], attrs["index"])
    return [x[start:stop]]


def average_n(xp: ModuleType, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> list[Array]:
    """Keras' Average merge: the sum of the inputs divided by their number, in their dtype."""
    total = add_n(xp, inputs, attrs)[0]
    return [(total / len(inputs)).astype(total.dtype, copy=False)]
