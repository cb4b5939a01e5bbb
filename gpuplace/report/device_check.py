"""Rendering of `gpuplace devices --check` results."""

from __future__ import annotations

from typing import Any

from ..execute.device_check import DEFAULT_SIZES, SIZE, CheckResult, RateSizes
from ..units import human
from .text import NA, columns


def check_records(results: list[CheckResult]) -> list[dict[str, Any]]:
    return [
        {
            "device": r.device,
            "product": r.product,
            "simulated": r.simulated,
            "passed": r.passed,
            "max_rel_error": r.max_rel_error,
            "seconds": r.seconds,
            "detail": r.detail or None,
            "fix": r.fix or None,
            "tflops": r.tflops,
            "bandwidth_gbs": r.bandwidth_gbs,
        }
        for r in results
    ]


def checks_plain(results: list[CheckResult], sizes: RateSizes = DEFAULT_SIZES) -> str:
    rows = [
        (
            r.device,
            r.product + (" [simulated]" if r.simulated else ""),
            "pass" if r.passed else "FAIL",
            NA if r.max_rel_error is None else f"{r.max_rel_error:.1e}",
            NA if r.seconds is None else f"{r.seconds * 1000:.3f} ms",
            NA if r.tflops is None else f"{r.tflops:.2f}",
            NA if r.bandwidth_gbs is None else f"{r.bandwidth_gbs:.1f}",
            r.detail,
        )
        for r in results
    ]
    title = (
        f"Check: {SIZE}x{SIZE} float32 matmul vs a float64 CPU reference; rates: "
        f"{sizes.matmul}x{sizes.matmul} float32 matmul, a + b on "
        f"{human(sizes.stream).replace('.0 ', ' ')} arrays"
    )
    header = ("DEVICE", "PRODUCT", "RESULT", "MAX REL ERR", "TIME", "TFLOP/S", "GB/S", "")
    text = title + "\n" + columns(header, rows)
    if any(r.simulated and r.tflops is not None for r in results):
        text += (
            "\nSimulated devices compute on this host with numpy: their TFLOP/S and GB/S are the "
            "host's, measured once, not the card's (plans use the card's preset rates)"
        )
    return text
