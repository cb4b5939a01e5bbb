"""The NVML probe against a fake pynvml raising the real NVMLError_* classes."""

from __future__ import annotations

import pynvml
import pytest

from gpuplace.devices.nvml import probe
from tests.fakes.fake_pynvml import FakeGpu, FakeMig, FakeNvml, MiB, four_gpus


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (pynvml.NVMLError_LibraryNotFound, "NVML library (libnvidia-ml.so.1) was not found"),
        (pynvml.NVMLError_DriverNotLoaded, "kernel driver is not loaded"),
        (pynvml.NVMLError_LibRmVersionMismatch, "versions differ"),
        (pynvml.NVMLError_Unknown, "NVML failed to initialise: Unknown Error"),
    ],
)
def test_init_errors_give_a_reason_not_a_crash(error: type[Exception], words: str) -> None:
    machine = probe(lambda: FakeNvml(four_gpus(), init_error=error))
    assert machine.gpus == ()
    assert machine.no_gpu_reason is not None and words in machine.no_gpu_reason
    assert machine.host.cores >= 1


def test_four_gpus_in_nvml_order_with_v2_memory() -> None:
    fake = FakeNvml(four_gpus())
    machine = probe(lambda: fake)
    assert [g.product for g in machine.gpus] == ["NVIDIA A100-SXM4-80GB"] * 2 + ["Tesla T4"] * 2
    first = machine.gpus[0]
    assert first.memory_total == 81920 * MiB
    assert first.memory_used == 4 * MiB  # v2: excludes the 500 MiB the driver reserves
    assert first.memory_free == (81920 - 4 - 500) * MiB
    assert first.compute_capability == "8.0"
    assert (first.power_draw_watts, first.power_limit_watts) == (61.0, 400.0)
    assert (machine.driver_version, machine.cuda_version) == ("550.54.15", "12.4")
    assert fake.init_calls == 1 and fake.shutdown_calls == 1


def test_v1_memory_when_driver_lacks_v2() -> None:
    machine = probe(lambda: FakeNvml([FakeGpu()], memory_v2=False))
    assert machine.gpus[0].memory_used == (4 + 500) * MiB  # v1 counts reserved as used


def test_lost_gpu_is_a_row_marked_unavailable() -> None:
    gpus = four_gpus()
    gpus[1].lost = True
    gpus[2].fail["nvmlDeviceGetHandleByIndex"] = pynvml.NVMLError_Unknown
    machine = probe(lambda: FakeNvml(gpus))
    assert [g.available for g in machine.gpus] == [True, False, False, True]
    assert machine.gpus[1].error == "GPU is lost"
    assert machine.gpus[2].error == "Unknown Error"
    assert machine.gpus[3].product == "Tesla T4"


@pytest.mark.parametrize("error", [pynvml.NVMLError_NotSupported, pynvml.NVMLError_NoPermission])
def test_unsupported_fields_are_na(error: type[Exception]) -> None:
    gpu = FakeGpu(
        fail={
            "nvmlDeviceGetPowerUsage": error,
            "nvmlDeviceGetTemperature": error,
            "nvmlDeviceGetMemoryInfo": error,
        }
    )
    (row,) = probe(lambda: FakeNvml([gpu])).gpus
    assert row.available
    assert (row.power_draw_watts, row.temperature_celsius, row.memory_total) == (None, None, None)
    assert row.power_limit_watts == 400.0


def test_mig_parent_lists_its_instances() -> None:
    gpu = FakeGpu(
        migs=[
            FakeMig("MIG-aaaa1111-0000-4000-8000-000000000000", "A100 MIG 3g.40gb", 1, 0, 40 * 1024 * MiB, 7 * MiB),
            FakeMig("MIG-bbbb2222-0000-4000-8000-000000000000", "A100 MIG 3g.40gb", 2, 0, 40 * 1024 * MiB, 0),
        ]
    )  # fmt: skip
    (row,) = probe(lambda: FakeNvml([gpu])).gpus
    assert row.mig_enabled
    assert [(m.gpu_instance_id, m.memory_used) for m in row.mig_instances] == [(1, 7 * MiB), (2, 0)]


def test_processes_keep_their_memory_and_na() -> None:
    gpu = FakeGpu(processes=[(1, 100 * MiB), (2, None)])
    (row,) = probe(lambda: FakeNvml([gpu])).gpus
    assert [(p.pid, p.memory, p.type) for p in row.processes] == [
        (1, 100 * MiB, "C"),
        (2, None, "C"),
    ]


def test_mig_capable_card_with_mig_off_is_disabled_not_na() -> None:
    capable, plain = probe(lambda: FakeNvml([FakeGpu(mig_capable=True), FakeGpu()])).gpus
    assert (capable.mig_capable, capable.mig_enabled) == (True, False)
    assert (plain.mig_capable, plain.mig_enabled) == (False, False)
