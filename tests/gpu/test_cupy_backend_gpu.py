"""The CupyBackend contract of tests/execute/, against real cupy on a real GPU."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.execute.cupy_contract import CupyContract

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cupy() -> ModuleType:
    try:
        import cupy
    except ImportError as exc:
        pytest.skip(f"cupy is not installed: {exc}")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError where there is no driver or no device
        pytest.skip(f"cupy sees no GPU: {type(exc).__name__}: {exc}")
    if count < 1:
        pytest.skip("cupy sees no GPU")
    module: ModuleType = cupy
    return module


class TestCupyBackendOnGpu(CupyContract):
    """Real cupy: device switching, host and GPU-to-GPU copies, pool limits, OOM."""
