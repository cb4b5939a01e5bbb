"""CUDA's GPU order (CUDA_DEVICE_ORDER): the emulated FASTEST_FIRST rule, PCI_BUS_ID, the driver's
own answer when there is one, and the warning for users who rely on the default."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from gpuplace.devices import discover, view
from gpuplace.devices.model import CudaOrder, Gpu, Machine, ProbedOrder
from gpuplace.devices.order import (
    cuda_order,
    emulated_fastest_first,
    fastest_first_key,
    order_kind,
    order_warning,
    pci_order,
)
from gpuplace.devices.pci import bus_key
from gpuplace.devices.presets import PRESETS

EMULATED = CudaOrder("FASTEST_FIRST", "emulated", "emulated")


def nvml(machine: Machine, cuda_device_order: str | None) -> list[int]:
    return [g.nvml_index for g in cuda_order(machine, cuda_device_order)[0]]


def test_fastest_first_puts_the_a100s_before_the_t4_in_bus_order() -> None:
    machine = discover("1xT4,2xA100-80GB")
    assert nvml(machine, None) == [1, 2, 0]
    assert nvml(machine, "FASTEST_FIRST") == [1, 2, 0]
    assert nvml(machine, "") == [1, 2, 0]  # set but empty: CUDA's default
    assert nvml(machine, "bogus") == [1, 2, 0]  # an undocumented value: CUDA's default
    assert nvml(machine, "PCI_BUS_ID") == [0, 1, 2]
    assert nvml(machine, "pci_bus_id") == [1, 2, 0]  # CUDA reads the value as written


def test_compute_capability_first_then_multiprocessors_times_clock() -> None:
    # K40c (3.5, 15 x 745) > K20m (3.5, 13 x 706) > K520 (3.0); H100 (9.0) > A100 (8.0) > T4 (7.5)
    machine = discover("1xK520,1xK20m,1xK40c,1xT4,1xA100-40GB,1xH100-80GB")
    products = [g.product for g in cuda_order(machine, None)[0]]
    assert products == [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA A100-SXM4-40GB",
        "Tesla T4",
        "Tesla K40c",
        "Tesla K20m",
        "GRID K520",
    ]


def test_identical_cards_keep_bus_order_and_lost_gpus_go_last() -> None:
    machine = discover("4xK20m")
    assert nvml(machine, None) == [0, 1, 2, 3]  # seed buses 02, 03, 83, 84
    lost = machine.gpus[0]._replace(error="GPU is lost", pci_bus_id="N/A")
    gpus = (lost, *machine.gpus[1:])
    assert [g.nvml_index for g in emulated_fastest_first(gpus)] == [1, 2, 3, 0]
    assert [g.nvml_index for g in pci_order(gpus)] == [0, 1, 2, 3]  # NVML's, bus unknown


def test_a_machine_file_card_without_a_preset_ranks_by_its_own_fields() -> None:
    slow = Gpu(0, "Card A", "GPU-a", "00000000:01:00.0", compute_capability="8.6", sm_count=10, clock_mhz=1000)  # fmt: skip
    fast = Gpu(1, "Card B", "GPU-b", "00000000:02:00.0", compute_capability="8.6", sm_count=20, clock_mhz=1000)  # fmt: skip
    unknown = Gpu(2, "Card C", "GPU-c", "00000000:03:00.0", compute_capability="8.6")
    old = Gpu(3, "Card D", "GPU-d", "00000000:04:00.0")  # no compute capability: last
    assert [g.nvml_index for g in emulated_fastest_first([old, unknown, slow, fast])] == [
        1,
        0,
        2,
        3,
    ]


def test_the_drivers_answer_wins_over_the_rule() -> None:
    machine = discover("1xT4,2xA100-80GB")._replace(
        probed_order=ProbedOrder((2, 1, 0), "asked the driver")
    )
    ordered, order = cuda_order(machine, None)
    assert [g.nvml_index for g in ordered] == [2, 1, 0]
    assert order == CudaOrder("FASTEST_FIRST", "libcuda", "asked the driver")
    assert cuda_order(machine, "PCI_BUS_ID")[1].source == "pci-bus-id"
    failed = machine._replace(probed_order=ProbedOrder(None, "no libcuda"))
    ordered, order = cuda_order(failed, None)
    assert [g.nvml_index for g in ordered] == [1, 2, 0]
    assert order.source == "emulated" and order.detail.endswith("(no libcuda)")
    for wrong in [(1, 0), (0, 1, 1), (0, 1, 7)]:  # an API caller's probe that misses or invents
        bad = machine._replace(probed_order=ProbedOrder(wrong, "asked"))
        ordered, order = cuda_order(bad, None)
        assert [g.nvml_index for g in ordered] == [1, 2, 0]
        assert order.unasked == "the driver's answer does not list each GPU once"


def test_view_counts_cuda_visible_devices_in_the_order_in_effect() -> None:
    machine = discover("1xT4,2xA100-80GB")
    for env, expected in [
        ({}, [1, 2, 0]),
        ({"CUDA_VISIBLE_DEVICES": "0"}, [1]),
        ({"CUDA_VISIBLE_DEVICES": "1,0"}, [2, 1]),
        ({"CUDA_VISIBLE_DEVICES": "2"}, [0]),
        ({"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, [0]),
        ({"CUDA_VISIBLE_DEVICES": "2,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, [2, 0]),
        ({"CUDA_VISIBLE_DEVICES": machine.gpus[0].uuid}, [0]),  # a UUID names one GPU in any order
    ]:
        seen = view(machine, env, host_available=None)
        assert [v.gpu.nvml_index for v in seen.gpus] == expected, env
        assert [v.cuda_index for v in seen.gpus] == list(range(len(expected)))


def test_warning_when_mixed_models_rely_on_the_default_order() -> None:
    machine = discover("1xT4,2xA100-80GB")
    ordered, order = cuda_order(machine, None)
    assert order_warning(ordered, order, None) == (
        "the GPUs differ in model and CUDA_DEVICE_ORDER is unset, so CUDA numbers them fastest "
        "first (by gpuplace's emulation): CUDA's GPU 0 is nvml 1 (NVIDIA A100-SXM4-80GB), not "
        "nvidia-smi's GPU 0 (Tesla T4), and CUDA_VISIBLE_DEVICES counts in CUDA's order; export "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID to number them as nvidia-smi does"
    )
    assert order_warning(ordered, order, "") == order_warning(ordered, order, None)
    assert order_warning(ordered, order, "FASTEST_FIRST") is None  # asked for by name
    assert order_warning(*cuda_order(machine, "PCI_BUS_ID"), "PCI_BUS_ID") is None
    same = discover("2xA100-80GB,1xT4")  # fastest first is nvidia-smi's order here
    assert order_warning(*cuda_order(same, None), None) == (
        "the GPUs differ in model and CUDA_DEVICE_ORDER is unset, so CUDA numbers them fastest "
        "first (by gpuplace's emulation): here that is nvidia-smi's numbering too, but CUDA's "
        "indices follow speed, not slots; export CUDA_DEVICE_ORDER=PCI_BUS_ID to keep them "
        "numbered as nvidia-smi does"
    )
    assert order_warning(*cuda_order(discover("4xK520"), None), None) is None


def test_the_warning_says_when_the_driver_gave_the_order() -> None:
    machine = discover("1xT4,2xA100-80GB")._replace(probed_order=ProbedOrder((1, 0, 2), "asked"))
    warning = order_warning(*cuda_order(machine, None), None) or ""
    assert "fastest first (as the CUDA driver reports): CUDA's GPU 0 is nvml 1" in warning


def test_an_undocumented_value_is_named() -> None:
    same = cuda_order(discover("2xT4"), "bogus")
    mixed = cuda_order(discover("1xT4,1xA100-80GB"), "pci_bus_id")
    assert order_warning(*same, "bogus") == (
        "CUDA_DEVICE_ORDER='bogus' is not a value CUDA documents (FASTEST_FIRST, the default, or "
        "PCI_BUS_ID); gpuplace assumes CUDA's default order, FASTEST_FIRST; export "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID (or unset it)"
    )
    assert order_warning(*mixed, "pci_bus_id") == (
        "CUDA_DEVICE_ORDER='pci_bus_id' is not a value CUDA documents (FASTEST_FIRST, the default, "
        "or PCI_BUS_ID); gpuplace assumes CUDA's default order, FASTEST_FIRST, and the GPUs differ "
        "in model, so CUDA numbers them fastest first, as shown; export "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID (or unset it)"
    )
    long = order_warning(*same, "A" * 100_000)
    assert long is not None and len(long) < 600
    assert long.startswith(f"CUDA_DEVICE_ORDER='{'A' * 196}... is not a value CUDA documents")


def test_order_kind() -> None:
    assert [order_kind(v) for v in (None, "", "FASTEST_FIRST", "PCI_BUS_ID", " PCI_BUS_ID")] == [
        "FASTEST_FIRST", "FASTEST_FIRST", "FASTEST_FIRST", "PCI_BUS_ID", "FASTEST_FIRST",
    ]  # fmt: skip


specs = st.lists(
    st.tuples(st.sampled_from(sorted(p.key for p in PRESETS.values())), st.integers(1, 3)),
    min_size=1,
    max_size=5,
)


def _cc(gpu: Gpu) -> tuple[int, int]:
    major, minor = (gpu.compute_capability or "0.0").split(".")
    return int(major), int(minor)


@given(specs)
def test_emulated_order_is_a_permutation_consistent_with_the_rule(
    spec: list[tuple[str, int]],
) -> None:
    machine = discover(",".join(f"{n}x{key}" for key, n in spec))
    ordered, order = cuda_order(machine, None)
    assert order.kind == "FASTEST_FIRST" and order.source == "emulated"
    assert sorted(g.nvml_index for g in ordered) == list(range(len(machine.gpus)))
    for a, b in itertools.pairwise(ordered):
        assert _cc(a) >= _cc(b)  # compute capability first
        if _cc(a) == _cc(b):
            speed_a = (a.sm_count or 0) * (a.clock_mhz or 0)
            speed_b = (b.sm_count or 0) * (b.clock_mhz or 0)
            assert speed_a >= speed_b  # then multiprocessors x clock
            if speed_a == speed_b:
                assert (bus_key(a.pci_bus_id) or 0) < (bus_key(b.pci_bus_id) or 0)  # then bus id
        assert fastest_first_key(a) < fastest_first_key(b)
    pci, _ = cuda_order(machine, "PCI_BUS_ID")
    assert [g.nvml_index for g in pci] == list(range(len(machine.gpus)))


def test_visible_counts_in_the_order_of_the_gpus_it_is_given() -> None:
    """The API's pure function: `machine.gpus` is nvidia-smi's order, cuda_order's is CUDA's."""
    import gpuplace

    machine = discover("1xT4,2xA100-80GB")
    in_cuda_order = gpuplace.visible(cuda_order(machine, None)[0], "0")
    assert in_cuda_order == list(view(machine, {"CUDA_VISIBLE_DEVICES": "0"}, None).gpus)
    assert [v.gpu.nvml_index for v in in_cuda_order] == [1]
    assert [v.gpu.nvml_index for v in gpuplace.visible(machine.gpus, "0")] == [0]
