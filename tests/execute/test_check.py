"""`devices --check`'s rate sizes: the defaults, GPUPLACE_CHECK_SIZES's grammar, and that the
timed arrays are the sizes asked for."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuplace.errors import BadInput
from gpuplace.execute.backends import NumpyBackend
from gpuplace.execute.device_check import RateSizes, measure_rates, rate_sizes

MiB = 2**20


@pytest.mark.parametrize(
    ("value", "sizes"),
    [
        (None, RateSizes(2048, 64 * MiB)),
        ("", RateSizes(2048, 64 * MiB)),
        ("matmul=128", RateSizes(128, 64 * MiB)),
        ("stream=1.5MiB", RateSizes(2048, 1536 * 1024)),
        (" matmul = 8 , stream=4B ,", RateSizes(8, 4)),
        ("stream=1KB,matmul=3,matmul=5", RateSizes(5, 1000)),
    ],
)
def test_sizes_read_from_the_variable(value: str | None, sizes: RateSizes) -> None:
    assert rate_sizes(value) == sizes


@pytest.mark.parametrize(
    ("value", "part"),
    [
        ("matmul=0", "matmul=0"),
        ("matmul=-1", "matmul=-1"),
        ("matmul=1.5", "matmul=1.5"),
        ("small", "small"),
        ("stream=1MiB,rate=3", "rate=3"),
        ("stream=3B", "stream=3B"),
        ("matmul=999999999999", "matmul=999999999999"),  # 4 TB per operand: refused, not tried
        ("matmul=\uff13", "matmul=\uff13"),  # a full-width digit is not a number here
        ("stream=2GiB", "stream=2GiB"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_form(value: str, part: str) -> None:
    with pytest.raises(BadInput) as info:
        rate_sizes(value)
    assert str(info.value) == (
        f"GPUPLACE_CHECK_SIZES: cannot read {part!r}; expected matmul=N,stream=SIZE with N up "
        "to 16384 and SIZE from 4B to 1GiB (e.g. matmul=256,stream=1MiB), or unset it"
    )


def test_a_huge_value_is_one_short_line() -> None:
    with pytest.raises(BadInput) as info:
        rate_sizes("matmul=" + "9" * 5000)  # int() refuses past 4,300 digits
    assert len(str(info.value)) < 400


def test_a_stream_size_without_a_unit_lists_the_units() -> None:
    with pytest.raises(BadInput, match=r"^GPUPLACE_CHECK_SIZES: stream: cannot read '64' as a"):
        rate_sizes("stream=64")


class Recording(NumpyBackend):
    """The CPU backend, noting the shape of every array put on it."""

    def __init__(self) -> None:
        super().__init__("/device:CPU:0")
        self.shapes: list[tuple[int, ...]] = []

    def put(self, host: np.ndarray) -> Any:
        self.shapes.append(host.shape)
        return super().put(host)


def test_the_rates_time_the_sizes_asked_for() -> None:
    backend = Recording()
    tflops, bandwidth = measure_rates(backend, RateSizes(matmul=48, stream=4096))
    assert backend.shapes == [(48, 48), (1024,), (1024,)]
    assert tflops > 0 and bandwidth > 0
