"""The CUDA driver's own GPU order (`devices/libcuda.py`, `_libcuda_child.py`) through fakes:
a ctypes-level fake libcuda for the child's calls, fake children for the subprocess (hung,
crashed, garbage), and fake answers for the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from gpuplace.devices import _libcuda_child as child
from gpuplace.devices.libcuda import CHILD, child_env, match, probe_order, run_child
from gpuplace.devices.model import Gpu
from gpuplace.devices.nvml import probe
from tests.conftest import Run
from tests.fakes.fake_libcuda import FakeLibcuda, driver_order, no_libcuda, uuid_bytes
from tests.fakes.fake_pynvml import FakeNvml, four_gpus

UUIDS = [f"GPU-{i}{i}{i}{i}aaaa-0000-4000-8000-00000000000{i}" for i in range(4)]
BUSES = [f"00000000:{0x07 + 0x10 * i:02X}:00.0" for i in range(4)]  # four_gpus()'s


def gpus() -> list[Gpu]:
    return [Gpu(i, "A100" if i < 2 else "T4", UUIDS[i], BUSES[i], compute_capability="8.0" if i < 2 else "7.5") for i in range(4)]  # fmt: skip


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


# the child's calls, against a fake driver library


def test_child_lists_the_drivers_devices_in_its_order() -> None:
    lib = FakeLibcuda(
        [("0000:27:00.0", uuid_bytes(UUIDS[2])), ("0000:07:00.0", uuid_bytes(UUIDS[0]))]
    )
    assert child.answer(lambda: lib) == {
        "devices": [
            {"bus": "0000:27:00.0", "uuid": UUIDS[2]},
            {"bus": "0000:07:00.0", "uuid": UUIDS[0]},
        ]
    }
    lib.has_v2 = False  # an old driver: cuDeviceGetUuid
    assert child.answer(lambda: lib)["devices"][1]["uuid"] == UUIDS[0]


@pytest.mark.parametrize(
    ("lib", "error"),
    [
        (FakeLibcuda([], init_result=100), "cuInit returned 100 (CUDA_ERROR_NO_DEVICE)"),
        (FakeLibcuda([], init_result=35), "cuInit returned 35 (CUDA_ERROR_INSUFFICIENT_DRIVER)"),
        (
            FakeLibcuda([("0000:07:00.0", bytes(16))], fail={"cuDeviceGetPCIBusId": 101}),
            "cuDeviceGetPCIBusId returned 101 (CUDA_ERROR_INVALID_DEVICE)",
        ),
        (FakeLibcuda([], init_result=12345), "cuInit returned 12345 (see cuGetErrorName)"),
    ],
)
def test_child_reports_a_failing_call(lib: FakeLibcuda, error: str) -> None:
    assert child.answer(lambda: lib) == {"error": error}


def test_child_without_the_library() -> None:
    assert child.answer(lambda: child.load(("/nonexistent/libcuda.so.1",))) == {
        "error": "libcuda.so.1 (the CUDA driver library) was not found"
    }


def test_the_real_child_prints_one_json_answer() -> None:
    """Whatever this machine has (CI: no driver), the child prints one JSON document."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(CHILD)], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) in ({"devices"}, {"error"})


# the subprocess: bounded, and a crash or garbage is a reason, never an exception


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("import time; time.sleep(30)", "the libcuda probe did not answer within 0.5 s"),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
            "the libcuda probe was killed by SIGSEGV",
        ),
        (
            "import sys; sys.stderr.write('boom\\nlast words\\n'); sys.exit(3)",
            "the libcuda probe exited with status 3: last words",
        ),
        ("print('not json')", "the libcuda probe did not print its JSON answer"),
        ("print('[1, 2]')", "the libcuda probe did not print its JSON answer"),
        ("pass", "the libcuda probe did not print its JSON answer"),
    ],
)
def test_a_failing_child_is_one_reason(code: str, reason: str) -> None:
    assert run_child(python(code), {}, timeout=0.5 if "sleep" in code else 30) == reason
    order = probe_order(gpus(), {}, python(code), timeout=0.5 if "sleep" in code else 30)
    assert (order.nvml_indices, order.detail) == (None, reason)


def test_a_child_that_cannot_start() -> None:
    assert run_child(["/nonexistent/python"], {}, 5).startswith(  # type: ignore[union-attr]
        "the libcuda probe could not start: "
    )


def test_the_child_sees_neither_cuda_visible_devices_nor_the_callers_order() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PATH": "/bin"}
    assert child_env(env) == {"PATH": "/bin", "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    code = (
        "import json, os; print(json.dumps({'error': repr((os.environ.get('CUDA_VISIBLE_DEVICES'),"
        " os.environ['CUDA_DEVICE_ORDER']))}))"
    )
    order = probe_order(gpus(), env, python(code))
    assert order.detail == "libcuda: (None, 'FASTEST_FIRST')"


def test_a_childs_answer_becomes_nvml_indices() -> None:
    answer = {"devices": [{"bus": "0000:27:00.0", "uuid": UUIDS[2]}, {"bus": "0000:07:00.0", "uuid": UUIDS[0]}, {"bus": "0000:17:00.0", "uuid": UUIDS[1]}, {"bus": "0000:37:00.0", "uuid": UUIDS[3]}]}  # fmt: skip
    order = probe_order(gpus(), {}, python(f"print({json.dumps(json.dumps(answer))})"))
    assert order.nvml_indices == (2, 0, 1, 3)
    assert order.detail == "asked the CUDA driver (libcuda.so.1, CUDA_DEVICE_ORDER=FASTEST_FIRST)"


# matching the driver's devices to NVML's


def _device(i: int, uuid: str | None = None) -> dict[str, Any]:
    return {"bus": BUSES[i].removeprefix("0000"), "uuid": uuid or UUIDS[i]}


def test_match_by_uuid_and_by_bus_for_a_mig_device() -> None:
    mig = "GPU-0123abcd-0000-4000-8000-0000000000ff"  # cuDeviceGetUuid_v2's MIG UUID, as printed
    doc = {"devices": [_device(1, mig)]}  # MIG: the driver enumerates one device
    order = match(gpus(), doc)
    assert order.nvml_indices == (1, 0, 2, 3)  # the rest: the emulated order, after it
    assert order.detail.endswith(
        "; nvml 0, 2, 3: not enumerated by CUDA (lost, or hidden by MIG), listed last"
    )
    assert match(gpus(), {"devices": [_device(3), _device(2), _device(0), _device(1)]}).nvml_indices == (3, 2, 0, 1)  # fmt: skip


@pytest.mark.parametrize(
    ("doc", "detail"),
    [
        ({"error": "cuInit returned 100 (CUDA_ERROR_NO_DEVICE)"}, "libcuda: cuInit returned 100 (CUDA_ERROR_NO_DEVICE)"),
        ({"devices": []}, "libcuda enumerates no device"),
        ({"devices": "many"}, "libcuda enumerates no device"),
        ({"devices": [{"bus": "0000:99:00.0", "uuid": "GPU-x"}]}, "libcuda lists a device NVML does not match once (bus 0000:99:00.0)"),
        ({"devices": [_device(0), _device(0)]}, f"libcuda lists a device NVML does not match once (bus {BUSES[0][4:]})"),
        ({"devices": ["junk"]}, "libcuda lists a device NVML does not match once (bus ?)"),
    ],
)  # fmt: skip
def test_an_answer_that_does_not_fit_nvml_is_not_used(doc: dict[str, Any], detail: str) -> None:
    order = match(gpus(), doc)
    assert (order.nvml_indices, order.detail) == (None, detail)


# when the probe runs


def test_the_probe_runs_only_with_two_gpus_or_more() -> None:
    calls: list[int] = []

    def counting(found: Any) -> Any:
        calls.append(len(found))
        return no_libcuda(found)

    assert probe(lambda: FakeNvml(four_gpus()), counting).probed_order is not None
    assert probe(lambda: FakeNvml(four_gpus()[:1]), counting).probed_order is None
    no_driver = FakeNvml(init_error=__import__("pynvml").NVMLError_LibraryNotFound)
    assert probe(lambda: no_driver, counting).probed_order is None
    assert calls == [4]


# the CLI on a (fake) real machine


def _cuda_nvml(result_out: str) -> list[tuple[str, str]]:
    return [(row.split()[1], row.split()[2]) for row in result_out.splitlines()[3:]]


def test_devices_follows_the_drivers_order_and_says_so(run: Run) -> None:
    fake = FakeNvml(four_gpus())  # A100, A100, T4, T4 in PCI order
    result = run("devices", nvml=fake, order_probe=driver_order([3, 2, 1, 0]))
    assert _cuda_nvml(result.out) == [("0", "3"), ("1", "2"), ("2", "1"), ("3", "0")]
    assert result.err == (
        "warning: the GPUs differ in model and CUDA_DEVICE_ORDER is unset, so CUDA numbers them "
        "fastest first (as the CUDA driver reports): CUDA's GPU 0 is nvml 3 (Tesla T4), not "
        "nvidia-smi's GPU 0 (NVIDIA A100-SXM4-80GB), and CUDA_VISIBLE_DEVICES counts in CUDA's "
        "order; export CUDA_DEVICE_ORDER=PCI_BUS_ID to number them as nvidia-smi does\n"
    )
    doc = json.loads(
        run("devices", "--json", nvml=fake, order_probe=driver_order([3, 2, 1, 0])).out
    )
    assert doc["machine"]["order"] == {
        "kind": "FASTEST_FIRST", "source": "libcuda", "detail": "asked the CUDA driver (fake)",
    }  # fmt: skip
    picked = run("devices", env={"CUDA_VISIBLE_DEVICES": "1"}, nvml=fake, order_probe=driver_order([3, 2, 1, 0]))  # fmt: skip
    assert _cuda_nvml(picked.out)[:1] == [("0", "2")]
    pci = run("devices", "--json", env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, nvml=fake, order_probe=driver_order([3, 2, 1, 0]))  # fmt: skip
    assert [d["nvml_index"] for d in json.loads(pci.out)["devices"][1:]] == [0, 1, 2, 3]


def test_without_libcuda_the_order_is_emulated_and_the_reason_kept(run: Run) -> None:
    doc = json.loads(run("devices", "--json", nvml=FakeNvml(four_gpus())).out)
    assert doc["machine"]["order"] == {
        "kind": "FASTEST_FIRST",
        "source": "emulated",
        "detail": "emulated: compute capability, then multiprocessors x clock, ties by PCI bus id "
        "(libcuda.so.1 (the CUDA driver library) was not found)",
    }
    assert [d["nvml_index"] for d in doc["devices"][1:]] == [0, 1, 2, 3]  # A100s, then T4s


def test_the_warning_says_why_the_driver_was_not_asked(run: Run) -> None:
    gpus = four_gpus()  # A100, A100, T4, T4: make it T4, T4, A100, A100
    for i, (name, cc) in enumerate([("Tesla T4", (7, 5))] * 2 + [("NVIDIA A100-SXM4-80GB", (8, 0))] * 2):  # fmt: skip
        gpus[i].name, gpus[i].cc = name, cc
    result = run("devices", nvml=FakeNvml(gpus))
    assert result.err == (
        "warning: the GPUs differ in model and CUDA_DEVICE_ORDER is unset, so CUDA numbers them "
        "fastest first (by gpuplace's emulation, as the CUDA driver could not be asked: "
        "libcuda.so.1 (the CUDA driver library) was not found): CUDA's GPU 0 is nvml 2 (NVIDIA "
        "A100-SXM4-80GB), not nvidia-smi's GPU 0 (Tesla T4), and CUDA_VISIBLE_DEVICES counts in CUDA's "
        "order; export CUDA_DEVICE_ORDER=PCI_BUS_ID to number them as nvidia-smi does\n"
    )


def test_one_command_asks_the_driver_once() -> None:
    from gpuplace.cli import AppContext

    calls: list[int] = []

    def counting(found: Any) -> Any:
        calls.append(len(found))
        return no_libcuda(found)

    fake = FakeNvml(four_gpus())
    app = AppContext(env={}, nvml_loader=lambda: fake, order_probe=counting)
    first, second = app.view(), app.view()
    assert calls == [4]
    assert first.order == second.order and first.order is not None
