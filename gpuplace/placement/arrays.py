"""Lists of numbers as numpy arrays, in C loops where compiled (arrays.pxd): the estimate,
the lower bounds, the run's layout and the ledger hand their lists to numpy through these, not
`np.fromiter` or `np.array`, which take each item through numpy's generic conversion (several
times the work). Kept apart from the passes that use them, so that a small `run` loads this
alone, not those passes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def int_array(values: Sequence[int]) -> Any:
    """`values` (a list or tuple of ints or bools) as an intp array, in one C loop where
    compiled (arrays.pxd): `np.fromiter` takes each item through numpy's generic scalar
    conversion, several times the work. An intp array is returned as it is."""
    out = _empty(values, np.intp)
    if out is not values:
        into = out  # a typed view of its memory where compiled
        _fill(values, into)
    return out


def float_array(values: Sequence[float]) -> Any:
    """`values` (a list or tuple of floats) as a float64 array, as `int_array` fills one; a
    float64 array is returned as it is."""
    out = _empty(values, np.float64)
    if out is not values:
        into = out  # a typed view of its memory where compiled
        _fill(values, into)
    return out


def _empty(values: Sequence[Any], dtype: Any) -> Any:
    """`values` itself when it is already an array of `dtype`, else an empty one as long."""
    if isinstance(values, np.ndarray) and values.dtype == dtype:
        return values
    return np.empty(len(values), dtype)


def _fill(values: Sequence[Any], into: Any) -> None:
    """`into[i] = values[i]` for each i: compiled, a C loop over a typed view of `into`, one
    version per element type (intp or float64; arrays.pxd)."""
    n = len(values)
    i = 0
    while i < n:
        into[i] = values[i]
        i += 1
