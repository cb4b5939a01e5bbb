"""placement/arrays.py: lists of numbers as numpy arrays, the same as numpy's own conversion."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.memory.ledger import _int64
from gpuplace.placement.arrays import float_array, int_array

INTS = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50)


@given(INTS)
def test_int_array_is_numpys_array_of_the_ints(values: list[int]) -> None:
    got = int_array(values)
    assert got.dtype == np.intp and got.tolist() == values
    assert int_array(tuple(values)).tolist() == values
    assert int_array([v % 2 == 0 for v in values]).tolist() == [int(v % 2 == 0) for v in values]


@given(st.lists(st.floats(allow_nan=False), max_size=50))
def test_float_array_is_numpys_array_of_the_floats(values: list[float]) -> None:
    got = float_array(values)
    assert got.dtype == np.float64 and got.tolist() == values


@given(INTS)
def test_a_ledgers_int64_columns_are_what_fromiter_gave(values: list[int]) -> None:
    """`_int64` of a list, a tuple, any iterable or an array: numpy's `fromiter`, as before."""
    want = np.fromiter(values, np.int64, len(values))
    for given_ in (values, tuple(values), iter(values), np.asarray(want)):
        got = _int64(given_)
        assert got.dtype == np.int64 and np.array_equal(got, want)
