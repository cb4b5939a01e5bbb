"""kernels.last_max: the last axis's maximum, as numpy's max gives it, for any width."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.graph.kernels import last_max


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 5), max_size=2),
    st.integers(1, 300),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_last_max_is_numpy_s_max(lead: list[int], width: int, seed: int, nan: bool) -> None:
    x = np.random.default_rng(seed).standard_normal((*lead, width)).astype(np.float32)
    if nan:
        x.flat[seed % x.size] = np.nan  # a NaN in a row makes that row's maximum NaN
    got = last_max(np, x)
    assert got.shape == (*lead, 1)
    np.testing.assert_array_equal(got, x.max(axis=-1, keepdims=True))


def test_last_max_of_a_strided_view() -> None:
    x = np.arange(6 * 80, dtype=np.float32).reshape(6, 80)[::2, ::-1]
    np.testing.assert_array_equal(last_max(np, x), x.max(axis=-1, keepdims=True))
