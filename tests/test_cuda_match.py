"""`devices` warns when the installed cupy needs a newer CUDA than the driver offers (what `run`
would then fail with), from NVML's CUDA version and the installed wheels' names; never for a
simulated machine, a cupy that fits, or no cupy at all."""

from __future__ import annotations

import pytest

from gpuplace.devices.cuda_match import cupy_driver_warning, installed_version
from tests.conftest import Run
from tests.fakes.fake_pynvml import FakeNvml
from tests.memory.helpers import small_gpus

MISMATCH = (
    "warning: cupy-cuda13x 14.2.0 needs a driver for CUDA 13, but this driver supports CUDA 12.4 "
    "at most (nvidia-smi's 'CUDA Version'): run and devices --check will fail on these GPUs; "
    "install the cupy for CUDA 12: pip install 'gpuplace[cuda12]' (and uninstall cupy-cuda13x), "
    "or update the driver\n"
)


def only(**wheels: str) -> object:
    return lambda name: wheels.get(name.replace("-", "_"))


def test_devices_warns_on_stderr_and_keeps_stdout(run: Run) -> None:
    nvml = FakeNvml(small_gpus(1), cuda=12040)
    result = run("devices", "--json", nvml=nvml, installed=only(cupy_cuda13x="14.2.0"))
    assert (result.code, result.err) == (0, MISMATCH)
    assert result.out.startswith("{")


@pytest.mark.parametrize(
    ("cuda", "wheels"),
    [(13000, {"cupy_cuda13x": "14.2.0"}), (12040, {"cupy_cuda12x": "14.2.0"}), (12040, {})],
)
def test_no_warning_when_cupy_fits_or_is_absent(
    run: Run, cuda: int, wheels: dict[str, str]
) -> None:
    nvml = FakeNvml(small_gpus(1), cuda=cuda)
    assert run("devices", nvml=nvml, installed=only(**wheels)).err == ""


def test_no_warning_on_a_simulated_machine(run: Run) -> None:
    result = run("--machine", "2xT4", "devices", installed=only(cupy_cuda13x="14.2.0"))
    assert (result.code, result.err) == (0, "")


def test_the_rule_by_major_version() -> None:
    wheel = only(cupy_cuda13x="14.2.0")
    assert cupy_driver_warning("13.0", wheel) is None  # minor version compatibility
    assert cupy_driver_warning(None, wheel) is None  # NVML did not say
    assert "CUDA 12.9 at most" in (cupy_driver_warning("12.9", wheel) or "")
    assert cupy_driver_warning("12.9", only(cupy_cuda11x="13.6.0")) is None


def test_installed_version_reads_metadata_without_importing() -> None:
    assert installed_version("numpy") is not None
    assert installed_version("cupy-cuda99x") is None
