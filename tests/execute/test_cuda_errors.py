"""CUDA's own failures on a "real" GPU (fake NVML + fake cupy raising cupy's exception classes):
an old driver, no device in the container, a busy exclusive-mode GPU, a fault in the middle of a
run, a missing CUDA library, a broken cupy install. Each is one `error:` line naming the device
(and the op) with cupy's words and what to do, exit 1, no traceback; what was reserved is given
back and a second failure while giving it back does not hide the first."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuplace.errors import MissingDependency
from gpuplace.execute.cupy_backend import HINTS, cuda_failure, cuda_hint, load_cupy
from tests.conftest import SMALL_CHECK, Run
from tests.fakes.fake_cupy import CUDARuntimeError, FakeCupy, make_fake_cupy
from tests.memory.helpers import GPU0, LinkedNvml, matmul_graph, small_gpus

ROOT = Path(__file__).resolve().parents[2]
GUIDE1 = str(ROOT / "examples" / "guide" / "01_log_placement.yaml")
OLD_DRIVER = (
    "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
)
ILLEGAL = "cudaErrorIllegalAddress: an illegal memory access was encountered"
NO_CUBLAS = (
    'Failure finding "libcublasLt.so.13 or libcublasLt.so.12": No such file: libcublasLt.so.13 '
    "or libcublasLt.so.12"
)


def on_card(run: Run, cupy: FakeCupy, *args: str) -> tuple[int, str, str]:
    result = run(*args, nvml=LinkedNvml(small_gpus(len(cupy._state.pools)), cupy),
                 cupy_loader=lambda: cupy, env=SMALL_CHECK)  # fmt: skip
    return result.code, result.out, result.err


def pools(cupy: FakeCupy) -> list[tuple[int, int]]:
    """Each fake card's (pool limit, bytes the pool holds), read with the failure lifted."""
    cupy._state.failures.clear()
    pool = cupy.get_default_memory_pool()
    out = []
    for i in range(len(cupy._state.pools)):
        with cupy.cuda.Device(i):
            out.append((pool.get_limit(), pool.total_bytes()))
    return out


def test_an_old_driver_names_both_cuda_versions_and_the_extra_to_install(run: Run) -> None:
    cupy = make_fake_cupy(1)
    cupy.runtime_version, cupy.driver_version = 13020, 12040
    cupy.fail(35, OLD_DRIVER)
    code, out, err = on_card(run, cupy, "run", GUIDE1)
    assert (code, out) == (1, "")
    assert err == (
        f"error: cannot use /device:GPU:0: CUDARuntimeError: {OLD_DRIVER}. Fix: this cupy uses "
        "CUDA 13.2 but the NVIDIA driver supports CUDA 12.4 at most (nvidia-smi's 'CUDA "
        "Version'): update the driver, or install the cupy for CUDA 12: "
        "pip install 'gpuplace[cuda12]'.\n"
    )


def test_without_the_versions_the_driver_hint_names_both_extras() -> None:
    hint = cuda_hint(CUDARuntimeError(35, OLD_DRIVER))
    assert "update the driver" in hint and "gpuplace[cuda12]" in hint and "[cuda13]" in hint


def test_mem_with_a_graph_reports_the_cuda_failure_and_no_traceback(run: Run) -> None:
    cupy = make_fake_cupy(1)
    cupy.fail(100, "cudaErrorNoDevice: no CUDA-capable device is detected")
    code, out, err = on_card(run, cupy, "mem", GUIDE1)
    assert (code, out) == (1, "") and "Traceback" not in err
    assert err.startswith("error: cannot use /device:GPU:0: CUDARuntimeError: cudaErrorNoDevice")
    assert "Fix: CUDA sees fewer GPUs in this process than NVML lists" in err
    assert "docker run --gpus all" in err and err.count("\n") == 1


def test_a_fault_mid_run_names_the_op_once_and_gives_the_other_cards_back(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cupy = make_fake_cupy(2)
    matmul = cupy.matmul

    def faulting(*args: Any, **kwargs: Any) -> Any:
        cupy.fail(700, ILLEGAL, device=0)  # sticky: releasing GPU:0's pool fails the same way
        return matmul(*args, **kwargs)

    monkeypatch.setattr(cupy, "matmul", faulting)
    graph = matmul_graph(tmp_path / "g.yaml", 64)
    code, out, err = on_card(run, cupy, "run", graph, "--memory-limit", "64MiB")
    assert (code, out) == (1, "")
    assert err == (
        f"error: op 'c' failed on {GPU0}: CUDARuntimeError: {ILLEGAL}. Fix: the GPU faulted and "
        "this process's CUDA context is lost: run again; if it repeats, check the card "
        "(nvidia-smi -q -d ECC, and Xid errors in dmesg).\n"
    )
    assert pools(cupy)[1] == (0, 0)  # the card that did not fault was released


def test_a_card_failing_at_setup_releases_the_cards_prepared_before_it(run: Run) -> None:
    cupy = make_fake_cupy(2)
    set_device = cupy._state.set_device

    def second_is_busy(device_id: int) -> None:
        if device_id == 1:
            raise CUDARuntimeError(
                46, "cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable"
            )
        set_device(device_id)

    cupy._state.set_device = second_is_busy  # type: ignore[method-assign]
    code, _, err = on_card(run, cupy, "run", GUIDE1, "--strategy", "round-robin")
    assert code == 1
    assert err.startswith(
        "error: cannot use /device:GPU:1: CUDARuntimeError: cudaErrorDevicesUnavailable"
    )
    assert "Exclusive_Process" in err and "nvidia-smi -i N -c DEFAULT" in err
    cupy._state.set_device = set_device  # type: ignore[method-assign]
    assert pools(cupy)[0] == (0, 0)  # GPU:0 had its whole preallocation: given back


def test_a_missing_cuda_library_points_at_the_ctk_extra(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cupy = make_fake_cupy(1)

    def no_cublas(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(NO_CUBLAS)  # what cupy raises when cuda-pathfinder finds no cuBLAS

    monkeypatch.setattr(cupy, "matmul", no_cublas)
    code, _, err = on_card(run, cupy, "run", matmul_graph(tmp_path / "g.yaml", 8))
    assert code == 1
    assert err.startswith(f"error: op 'c' failed on {GPU0}: ImportError: {NO_CUBLAS}. Fix: cupy")
    assert "cupy's [ctk] extra" in err and "or install the CUDA Toolkit.\n" in err


def test_devices_check_says_what_to_do_in_its_error_line_and_json(run: Run) -> None:
    cupy = make_fake_cupy(1)
    cupy.fail(
        209,
        "cudaErrorNoKernelImageForDevice: no kernel image is available for execution on the device",
    )
    code, out, err = on_card(run, cupy, "devices", "--check")
    assert code == 1 and "FAIL" in out
    assert err.endswith(
        "on the device. Fix: this cupy has no kernels for this GPU's architecture: install a cupy "
        "build that supports it (https://docs.cupy.dev/en/stable/install.html).\n"
    )
    code, out, _ = on_card(run, cupy, "devices", "--check", "--json")
    gpu = json.loads(out)["checks"][1]
    assert (
        code == 1 and gpu["passed"] is False and gpu["fix"].startswith("this cupy has no kernels")
    )
    assert json.loads(out)["checks"][0]["fix"] is None


@pytest.mark.parametrize("name", sorted(HINTS))
def test_every_named_cuda_error_has_a_fix(name: str) -> None:
    failure = cuda_failure(CUDARuntimeError(1, f"{name}: what CUDA says"), "cannot use GPU:0")
    assert str(failure).startswith(
        f"cannot use GPU:0: CUDARuntimeError: {name}: what CUDA says. Fix: "
    )
    assert str(failure).endswith(f"{HINTS[name]}.")


def test_an_error_gpuplace_cannot_explain_keeps_its_own_words() -> None:
    failure = cuda_failure(
        ValueError("shapes (2,3) and (2,3) not aligned."), "op 'c' failed on GPU:0"
    )
    assert str(failure) == "op 'c' failed on GPU:0: ValueError: shapes (2,3) and (2,3) not aligned."
    assert cuda_hint(CUDARuntimeError(999, "cudaErrorUnknown: unknown error")) == ""


def test_cupy_missing_and_cupy_broken_are_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # not installed
    with pytest.raises(MissingDependency, match=r"^running on a real GPU needs cupy: pip install"):
        load_cupy()
    broken = tmp_path / "cupy"
    broken.mkdir()
    (broken / "__init__.py").write_text(  # what cupy's __init__ raises when its core fails to load
        'raise ImportError("\\nCuPy is not correctly installed.\\n\\nOriginal error:\\n  libcudart")\n'
    )
    monkeypatch.delitem(sys.modules, "cupy")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingDependency) as info:
        load_cupy()
    assert str(info.value).startswith(
        "cupy is installed but does not import (CuPy is not correctly installed.). Fix: keep one "
        "cupy package (pip list | grep cupy) and reinstall it: pip install 'gpuplace[cuda12]'"
    )


class CUBLASError(RuntimeError):
    """cupy_backends.cuda.libs.cublas.CUBLASError: its text is the status name alone."""


def test_a_cublas_handle_failure_says_to_leave_part_of_the_card_free(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cupy = make_fake_cupy(1)

    def no_handle(*args: Any, **kwargs: Any) -> Any:
        raise CUBLASError("CUBLAS_STATUS_NOT_INITIALIZED")

    monkeypatch.setattr(cupy, "matmul", no_handle)
    code, _, err = on_card(run, cupy, "run", matmul_graph(tmp_path / "g.yaml", 8))
    assert code == 1
    assert err == (
        f"error: op 'c' failed on {GPU0}: CUBLASError: CUBLAS_STATUS_NOT_INITIALIZED. Fix: cuBLAS "
        "could not allocate its handle or workspace, which live outside gpuplace's memory pool: "
        "leave part of the card free (a smaller memory fraction or limit, or allow growth), as "
        "TensorFlow's 'failed to create cublas handle' advice goes.\n"
    )
