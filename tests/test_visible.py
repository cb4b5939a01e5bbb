"""CUDA_VISIBLE_DEVICES rules, one table row per rule (CUDA guide §5.2.1.1, nvitop's parser)."""

from __future__ import annotations

import pytest

from gpuplace.devices import Gpu, MigInstance, visible
from gpuplace.devices.visible import order_warning

U = [
    "GPU-18ef14e9-0000-4000-8000-000000000000",
    "GPU-849d5a8d-0000-4000-8000-000000000001",
    "GPU-849d1111-0000-4000-8000-000000000002",
    "GPU-3eb79704-0000-4000-8000-000000000003",
]
MIG = [
    MigInstance(0, "MIG-aaaa1111-0000-4000-8000-000000000000", "A100 MIG 3g.40gb", 1, 0, 40, 0),
    MigInstance(1, "MIG-bbbb2222-0000-4000-8000-000000000000", "A100 MIG 3g.40gb", 2, 0, 40, 0),
]


def machine(mig_on: int | None = None) -> list[Gpu]:
    return [
        Gpu(
            nvml_index=i,
            product="T4" if i < 2 else "A100",
            uuid=U[i],
            pci_bus_id=f"0000000{i}:00:00.0",
            mig_enabled=i == mig_on,
            mig_instances=tuple(MIG) if i == mig_on else (),
        )
        for i in range(4)
    ]


CASES = [
    ("unset means all", None, [0, 1, 2, 3]),
    ("empty means none", "", []),
    ("indices reorder", "2,0", [2, 0]),
    ("stop at first invalid index", "0,7,1", [0]),
    ("-1 means none", "-1", []),
    ("stop at -1 mid-list", "0,2,-1,1", [0, 2]),
    ("whitespace trimmed", " 1 , 3 ", [1, 3]),
    ("leading digits count", "1abc,2", [1, 2]),
    ("empty entry stops", "0,,1", [0]),
    ("duplicate empties", "0,1,0", []),
    ("duplicate after invalid is never seen", "0,9,0", [0]),
    ("full uuid", U[3], [3]),
    ("abbreviated uuid", "GPU-18ef14e9,GPU-849d5a8d", [0, 1]),
    ("ambiguous prefix stops", "GPU-849d", []),
    ("unknown uuid stops", f"{U[1]},GPU-ffffffff,{U[0]}", [1]),
    ("index then uuid cannot mix", f"1,{U[0]}", [1]),
    ("uuid then index cannot mix", f"{U[2]},0", [2]),
    ("uuid and index naming one gpu twice", f"{U[0]},GPU-18ef", []),
    ("garbage stops", "gpu0", []),
]


@pytest.mark.parametrize(("rule", "cvd", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rules(rule: str, cvd: str | None, expected: list[int]) -> None:
    result = visible(machine(), cvd)
    assert [v.gpu.nvml_index for v in result] == expected
    assert [v.cuda_index for v in result] == list(range(len(expected)))
    assert [v.name for v in result] == [f"/device:GPU:{i}" for i in range(len(expected))]


MIG_CASES = [
    ("mig uuid", "MIG-bbbb2222", (2, 1)),
    ("mig triple", f"MIG-{U[2]}/1/0", (2, 0)),
    ("abbreviated mig triple", "MIG-GPU-849d1111/2/0", (2, 1)),
    ("only one mig device enumerated", "MIG-aaaa1111,MIG-bbbb2222", (2, 0)),
    ("unset: first mig device of the mig gpu only", None, (2, 0)),
]


@pytest.mark.parametrize(("rule", "cvd", "expected"), MIG_CASES, ids=[c[0] for c in MIG_CASES])
def test_mig(rule: str, cvd: str | None, expected: tuple[int, int]) -> None:
    result = visible(machine(mig_on=2), cvd)
    assert len(result) == 1
    only = result[0]
    assert only.mig is not None
    assert (only.gpu.nvml_index, only.mig.index) == expected
    assert only.uuid == MIG[expected[1]].uuid
    assert only.memory_total == 40


def test_mig_gpu_without_instances_is_skipped() -> None:
    gpus = machine()
    gpus[1] = Gpu(1, "A100", U[1], "x", mig_enabled=True)
    assert [v.gpu.nvml_index for v in visible(gpus, None)] == [0, 2, 3]


def test_order_warning_only_for_mixed_models_without_pci_order() -> None:
    mixed = visible(machine(), "0,2")
    same = visible(machine(), "0,1")
    assert order_warning(mixed, None) is not None
    assert "FASTEST_FIRST" in (order_warning(mixed, "FASTEST_FIRST") or "")
    assert order_warning(mixed, "PCI_BUS_ID") is None
    assert order_warning(same, None) is None
