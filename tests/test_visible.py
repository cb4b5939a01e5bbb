"""CUDA_VISIBLE_DEVICES rules, one table row per rule (CUDA guide §5.2.1.1, nvitop's parser)."""

from __future__ import annotations

import pytest

from gpuplace.devices import Gpu, MigInstance, visible
from gpuplace.devices.visible import visibility

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
    ("full-width digit is no index", "\uff10", []),  # ０
    ("arabic-indic digit stops the list", "1,\u0660,2", [1]),  # ٠
    ("ascii digits before other digits count", "1\u0660,2", [1, 2]),
    ("superscript digit is no index", "\u00b2", []),  # ²
    ("an index of 5,000 digits names no gpu", "9" * 5000 + ",1", []),
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


REASONS = [
    ("all listed", "2,0", []),
    ("empty hides all without a reason", "", []),
    (
        "invalid index ends the list",
        "0,7,1",
        [
            "Entry '7' is not a GPU index of this machine (indices: 0-3): CUDA stops at the first "
            "invalid entry, so '1' after it is ignored."
        ],
    ),
    (
        "invalid entry with nothing after it",
        "abc",
        [
            "Entry 'abc' is not a GPU index, a GPU- UUID or a MIG- UUID: CUDA stops at the first "
            "invalid entry."
        ],
    ),
    (
        "empty entry",
        "0,,1,2",
        [
            "An empty entry names no GPU: CUDA stops at the first invalid entry, so '1', '2' after "
            "it are ignored."
        ],
    ),
    (
        "duplicate",
        "1,1",
        [
            "Entry '1' is listed twice (nvml 1): CUDA makes no GPU visible when a device is listed "
            "twice."
        ],
    ),
    (
        "same gpu by two uuid prefixes",
        f"{U[0]},GPU-18ef",
        [
            f"Entry 'GPU-18ef' names the same GPU as '{U[0]}' (nvml 0): CUDA makes no GPU visible "
            "when a device is listed twice."
        ],
    ),
    (
        "ambiguous prefix",
        "GPU-849d",
        [
            "Entry 'GPU-849d' matches 2 GPU UUIDs; an abbreviated UUID must match one: CUDA stops "
            "at the first invalid entry."
        ],
    ),
    (
        "indices then a uuid",
        f"1,{U[0]},2",
        [
            f"Entry '{U[0]}' is a UUID after a GPU index, and CUDA never mixes them: CUDA stops at "
            "the first invalid entry, so '2' after it is ignored."
        ],
    ),
    (
        "invalid entry after all gpus",
        "0,1,2,3,9",
        ["Entry '9' is not a GPU index of this machine (indices: 0-3): CUDA stops at the first "
         "invalid entry."],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "cvd", "reasons"), REASONS, ids=[c[0] for c in REASONS])
def test_reasons_name_the_entry_and_the_rule(rule: str, cvd: str, reasons: list[str]) -> None:
    assert list(visibility(machine(), cvd).reasons) == reasons


def test_mig_hides_the_other_gpus_and_says_how_to_see_them() -> None:
    seen = visibility(machine(mig_on=2), None)
    assert [(v.gpu.nvml_index, v.mig and v.mig.index) for v in seen.gpus] == [(2, 0)]
    assert seen.reasons == (
        "MIG is enabled on nvml 2 (A100) and CUDA enumerates a single MIG device, so it uses MIG "
        "device 0 of nvml 2 and hides nvml 0, 1, 3 and MIG device 1 of nvml 2. To use the GPUs "
        "without MIG, set CUDA_VISIBLE_DEVICES=0,1,3. To use another MIG device, set "
        f"CUDA_VISIBLE_DEVICES to its UUID, e.g. {MIG[1].uuid} for MIG device 1 of nvml 2.",
    )
    named = visibility(machine(mig_on=2), "3,2")
    assert [v.gpu.nvml_index for v in named.gpus] == [2]
    assert "hides nvml 3 and MIG device 1 of nvml 2" in named.reasons[0]
    assert "set CUDA_VISIBLE_DEVICES=3." in named.reasons[0]


def test_the_advised_cuda_visible_devices_shows_the_hidden_gpus() -> None:
    assert [v.gpu.nvml_index for v in visible(machine(mig_on=2), "0,1,3")] == [0, 1, 3]
    only = visible(machine(mig_on=2), MIG[1].uuid)
    assert [(v.gpu.nvml_index, v.mig and v.mig.index) for v in only] == [(2, 1)]


def test_only_the_first_named_mig_device_counts() -> None:
    seen = visibility(machine(mig_on=2), "MIG-aaaa1111,MIG-bbbb2222")
    assert seen.reasons == (
        "With a MIG device in CUDA_VISIBLE_DEVICES, CUDA enumerates that one MIG device only "
        "(the first named, 'MIG-aaaa1111'), so 'MIG-bbbb2222' is ignored.",
    )
    assert visibility(machine(mig_on=2), "MIG-bbbb2222").reasons == ()


def test_mig_gpu_without_instances_says_why_it_is_skipped() -> None:
    gpus = machine()
    gpus[1] = Gpu(1, "A100", U[1], "x", mig_enabled=True)
    assert visibility(gpus, None).reasons == (
        "nvml 1 (A100) has MIG enabled but no MIG device, so CUDA cannot use it: create MIG "
        "devices (nvidia-smi mig) or disable MIG.",
    )


def test_a_single_mig_gpu_with_one_instance_needs_no_reason() -> None:
    gpu = Gpu(0, "A100", U[0], "x", mig_enabled=True, mig_instances=(MIG[0],))
    assert visibility([gpu], None).reasons == ()


def test_other_digits_say_cuda_reads_ascii_only() -> None:
    assert visibility(machine(), "1,\u0660,2").reasons == (
        "Entry '\u0660' is not a GPU index (CUDA reads only the ASCII digits 0-9): CUDA stops at "
        "the first invalid entry, so '2' after it is ignored.",
    )


def test_entries_after_an_invalid_one_are_sampled_with_their_count() -> None:
    (reason,) = visibility(machine(), "1,x," + ",".join(map(str, range(10_000)))).reasons
    assert reason == (
        "Entry 'x' is not a GPU index, a GPU- UUID or a MIG- UUID: CUDA stops at the first "
        "invalid entry, so '0', '1', '2', '3', ... (9,992 more) ..., '9996', '9997', '9998', "
        "'9999' after it are ignored."
    )


def test_a_long_entry_and_a_long_order_are_cut() -> None:
    (reason,) = visibility(machine(), "x" * 100_000).reasons
    assert reason == f"Entry '{'x' * 196}... is not a GPU index, a GPU- UUID or a MIG- UUID: " + (
        "CUDA stops at the first invalid entry."
    )
