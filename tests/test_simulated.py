"""Simulated machines: preset lists, machine files, deterministic defaults, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplace.devices import load_machine
from gpuplace.errors import BadInput
from gpuplace.units import GiB, MiB
from tests.conftest import Run


def test_preset_list_in_order_with_stable_ids() -> None:
    m = load_machine("2xA100-80GB,1xT4")
    assert [g.product for g in m.gpus] == ["NVIDIA A100-SXM4-80GB"] * 2 + ["Tesla T4"]
    assert [g.nvml_index for g in m.gpus] == [0, 1, 2]
    assert all(g.simulated for g in m.gpus) and m.host.simulated
    again = load_machine("2xa100-80gb, 1xt4")
    assert [g.uuid for g in again.gpus] == [g.uuid for g in m.gpus]
    assert len({g.uuid for g in m.gpus}) == len({g.pci_bus_id for g in m.gpus}) == 3


def test_seed_presets_carry_the_seed_bus_ids() -> None:
    assert [g.pci_bus_id[-7:-5] for g in load_machine("4xK20m").gpus] == ["02", "03", "83", "84"]
    assert load_machine("K40c").gpus[0].pci_bus_id == "00000000:05:00.0"
    assert load_machine("1xK520").gpus[0].memory_total == 4 * GiB


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0xK520", "--machine: '0xK520' asks for 0 GPUs; the count must be at least 1"),
        ("4xK502", "--machine: unknown GPU preset 'K502' (did you mean 'K520'?)"),
        ("4xK520,,1xT4", "--machine: cannot read ''; expected a preset list"),
        ("", "--machine: empty spec"),
        ("missing.yaml", "--machine: cannot read machine file 'missing.yaml'"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(BadInput) as err:
        load_machine(spec, "--machine")
    assert str(err.value).startswith(message)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "node.yaml"
    path.write_text(text)
    return str(path)


def test_machine_file_fields_and_defaults(tmp_path: Path) -> None:
    m = load_machine(
        write(
            tmp_path,
            """
name: lab-node
driver_version: "550.54.15"
host: {cores: 32, memory: 256GiB}
gpus:
  - {name: V100-32GB, count: 2, temperature: 40, processes: [{pid: 7, name: python, memory: 1GiB}]}
  - {name: My Card, memory: 8GiB, compute_capability: "8.6", pci_bus_id: "00000000:C1:00.0"}
  - name: A100-80GB
    mig: [{profile: 3g.40gb, memory: 40GiB}, {profile: 3g.40gb, memory: 40GiB, gi: 2}]
""",
        )
    )
    assert m.description == "lab-node" and m.driver_version == "550.54.15"
    assert (m.host.cores, m.host.memory_total) == (32, 256 * GiB)
    v100 = m.gpus[0]
    assert (v100.memory_total, v100.memory_used, v100.temperature_celsius) == (32510 * MiB, GiB, 40)
    assert v100.memory_free == 32510 * MiB - GiB
    assert m.gpus[2].product == "My Card" and m.gpus[2].pci_bus_id == "00000000:C1:00.0"
    assert m.gpus[3].mig_enabled and m.gpus[3].mig_instances[1].gpu_instance_id == 2
    assert m.gpus[3].mig_instances[0].product == "NVIDIA A100-SXM4-80GB MIG 3g.40gb"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "gpus: [{name: T4, memroy: 1GiB}]",
            "gpus[0]: unknown field 'memroy' (did you mean 'memory'?)",
        ),
        ("gpus: [{name: T4, memory: -1GiB}]", "gpus[0].memory: cannot read '-1GiB' as a size"),
        ("gpus: [{name: T4, memory: -5}]", "gpus[0].memory: size must not be negative, got -5"),
        ("gpus: [{name: Mystery}]", "gpus[0]: unknown GPU preset 'Mystery'"),
        ("gpus: [{name: T4, count: 0}]", "gpus[0]: count must be a whole number >= 1, got 0"),
        ("gpu: []", "unknown field 'gpu' (did you mean 'gpus'?)"),
        ("gpus: [{name: T4}\n  - x", "YAML syntax error"),
        ("host: {cores: -2}\ngpus: []", "host.cores: expected a whole number >= 1, got -2"),
        (
            "gpus: [{name: T4, memory_used: 20GiB}]",
            "gpus[0].memory_used: 21474836480 bytes used is more than",
        ),
    ],
)
def test_bad_machine_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(BadInput) as err:
        load_machine(write(tmp_path, text), "--machine")
    assert message in str(err.value)
    assert str(tmp_path / "node.yaml") in str(err.value)


def test_yaml_error_has_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(
        BadInput,
        match=r"node\.yaml:3:1: YAML syntax error: while parsing a flow mapping did not find "
        r"expected .,. or .}.",
    ):
        load_machine(write(tmp_path, "gpus:\n  - {name: T4\n"), "--machine")


def test_bad_machine_is_exit_2_with_one_line(run: Run) -> None:
    result = run("--machine", "3xH300", "devices")
    assert result.code == 2
    assert result.out == ""
    assert result.err.count("\n") == 1 and result.err.startswith(
        "error: --machine: unknown GPU preset 'H300'"
    )


def test_env_var_selects_the_machine(run: Run) -> None:
    # read from the command's environment (AppContext.env), like CUDA_VISIBLE_DEVICES
    result = run("devices", env={"GPUPLACE_MACHINE": "1xK40c"})
    assert "Tesla K40c [simulated]" in result.out


def bus_ids(spec: str) -> list[str]:
    return [g.pci_bus_id for g in load_machine(spec).gpus]


@pytest.mark.parametrize(
    ("spec", "buses"),
    [
        ("1xT4,1xK40c", ["04", "05"]),  # the K40c keeps the seed's bus 05; the T4 goes below it
        ("1xK40c,1xT4", ["05", "15"]),
        ("4xK20m,1xK40c,4xK520", ["02", "03", "83", "84", "94", "A4", "B4", "C4", "D4"]),
        ("2xA100-80GB,1xT4", ["10", "20", "30"]),
        ("6xK20m", ["02", "03", "83", "84", "94", "A4"]),
    ],
)
def test_bus_ids_follow_nvml_order(spec: str, buses: list[str]) -> None:
    ids = bus_ids(spec)
    assert [b[9:11] for b in ids] == buses
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [g.nvml_index for g in load_machine(spec).gpus] == list(range(len(ids)))


def test_large_machines_up_to_one_gpu_per_bus() -> None:
    assert len(set(bus_ids("17xT4"))) == 17
    ids = bus_ids("255xT4")
    assert ids == sorted(ids) and (ids[0], ids[-1]) == ("00000000:01:00.0", "00000000:FF:00.0")
    with pytest.raises(BadInput) as err:
        load_machine("200xT4,56xK520", "--machine")
    assert str(err.value) == (
        "--machine: '200xT4,56xK520' makes 256 GPUs; a simulated machine has at most 255 "
        "(one per PCI bus, 01-FF): ask for fewer"
    )


def test_machine_file_bus_ids_fit_around_the_given_ones(tmp_path: Path) -> None:
    m = load_machine(
        write(
            tmp_path,
            "gpus:\n  - {name: T4, count: 2}\n"
            "  - {name: T4, pci_bus_id: '0000:c1:00.0'}\n  - {name: K40c}\n",
        )
    )
    assert [g.pci_bus_id for g in m.gpus] == [
        "00000000:10:00.0",
        "00000000:20:00.0",
        "00000000:C1:00.0",  # NVML's form of the bus id given
        "00000000:D1:00.0",  # after C1: the K40c's seed bus (05) would break PCI order
    ]


def test_empty_spec_names_the_source_and_the_fix() -> None:
    with pytest.raises(BadInput) as err:
        load_machine(" ", "GPUPLACE_MACHINE")
    assert str(err.value).startswith("GPUPLACE_MACHINE: empty spec; expected a preset list")
    assert str(err.value).endswith("To use this machine's own GPUs, unset GPUPLACE_MACHINE")


MIG_80 = "{name: A100-80GB, mig: [%s]}"
BAD_FILES = [
    (
        "gpus: [{name: T4, uuid: GPU-11111111-2222-3333-4444-555555555555},"
        " {name: T4, uuid: GPU-11111111-2222-3333-4444-555555555555}]",
        "gpus[1].uuid: 'GPU-11111111-2222-3333-4444-555555555555' is also the UUID of gpus[0]; "
        "every GPU has its own UUID",
    ),
    (
        "gpus: [{name: T4, uuid: abc}]",
        "gpus[0].uuid: 'abc' is not a GPU UUID; expected nvidia-smi -L's form, "
        "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hex digits)",
    ),
    (
        "gpus: [{name: T4, count: 2, uuid: GPU-11111111-2222-3333-4444-555555555555}]",
        "gpus[0].uuid: a UUID names one GPU, and this entry has count: 2; write each GPU as its "
        "own entry with its own uuid",
    ),
    (
        'gpus: [{name: T4, pci_bus_id: "zz"}]',
        "gpus[0].pci_bus_id: 'zz' is not a PCI bus id; expected domain:bus:device.function in "
        "hex, e.g. 00000000:C1:00.0 (device 00-1F, function 0-7)",
    ),
    (
        'gpus: [{name: T4, pci_bus_id: "00000000:10:00.0"}, {name: T4, pci_bus_id: "0000:10:00.0"}]',
        "gpus[1].pci_bus_id: '0000:10:00.0' is also the bus id of gpus[0]; every GPU has its own "
        "PCI bus id",
    ),
    (
        'gpus: [{name: T4, pci_bus_id: "00000000:80:00.0"}, {name: T4, pci_bus_id: "00000000:10:00.0"}]',
        "gpus[1].pci_bus_id: '00000000:10:00.0' is below gpus[0]'s '00000000:80:00.0', but GPUs "
        "are listed in NVML order, which is PCI bus order: list this GPU first, or change a bus id",
    ),
    (
        'gpus: [{name: T4, count: 2}, {name: T4, pci_bus_id: "0000:02:00.0"}]',
        "gpus[1].pci_bus_id: '0000:02:00.0' leaves no free bus id below it for the 2 GPUs listed "
        "before it (GPUs are listed in NVML order, which is PCI bus order): give them "
        "pci_bus_ids, or raise this one",
    ),
    (
        "gpus: [{name: T4, mig: [{profile: 1g.5gb, memory: 5GiB}]}]",
        "gpus[0].mig: Tesla T4 (preset T4) does not support MIG; MIG devices need a MIG-capable "
        "GPU (presets: A100-40GB, A100-80GB, H100-80GB, H200); remove mig, or change name",
    ),
    (
        "gpus: [{name: Card, memory: 8GiB, compute_capability: '7.5', mig: [{memory: 1GiB}]}]",
        "gpus[0].mig: 'Card' has compute capability 7.5, and MIG needs 8.0 or newer (A100, H100, "
        "H200); remove mig, or change compute_capability",
    ),
    (
        "gpus: [%s]" % (MIG_80 % "{profile: 7g.80gb, memory: 80GiB}, {profile: 7g.80gb, memory: 80GiB}"),
        "gpus[0].mig: the profiles take 14 compute slices (14g) in all, more than the 7 a MIG GPU "
        "has; shrink or remove MIG devices",
    ),
    (
        "gpus: [%s]" % (MIG_80 % "{profile: 4g.40gb, memory: 50GiB}, {profile: 3g.40gb, memory: 40GiB}"),
        "gpus[0].mig: the GPU instances hold 90.0 GiB in all, more than the card's 80.0 GiB; "
        "shrink or remove MIG devices",
    ),
    (
        "gpus: [%s]" % (MIG_80 % "{memory: 40GiB, gi: 2}, {memory: 40GiB}"),
        "gpus[0].mig[1]: GPU instance 2, compute instance 0 is also mig[0]'s (gi defaults to the "
        "position + 1, ci to 0); give each MIG device its own gi/ci",
    ),
    (
        "gpus: [%s]" % (MIG_80 % "{memory: 10GiB, gi: x}"),
        "gpus[0].mig[0].gi: expected a whole number >= 0, got 'x'",
    ),
    (
        "gpus: [%s]" % (MIG_80 % "{memory: 10GiB, memory_used: 11GiB}"),
        "gpus[0].mig[0].memory_used: 11.0 GiB is more than its 10.0 GiB",
    ),
    (
        "gpus: [{name: T4, utilization: 150}]",
        "gpus[0].utilization: expected a whole number from 0 to 100, got 150",
    ),
    (
        "gpus: [{name: T4, power: 1000, power_limit: 70}]",
        "gpus[0].power: 1000 W is more than power_limit (70 W); a GPU never draws more than its "
        "power limit: lower power, or raise power_limit",
    ),
    (
        "gpus: [{name: T4, power: 1000}]",
        "gpus[0].power: 1000 W is more than the T4 preset's power limit (70 W); a GPU never draws "
        "more than its power limit: lower power, or raise power_limit",
    ),
    ("gpus: [{name: T4, power: abc}]", "gpus[0].power: expected a number >= 0, got 'abc'"),
    (
        "gpus: [{name: T4, compute_capability: x}]",
        "gpus[0].compute_capability: expected major.minor such as \"8.6\", got 'x'",
    ),
    (
        "gpus: [{name: T4, processes: [{pid: abc}]}]",
        "gpus[0].processes[0].pid: expected a whole number >= 0, got 'abc'",
    ),
    (
        "gpus: [{name: T4, memory_used: 0, processes: [{pid: 1, memory: 1GiB}]}]",
        "gpus[0].memory_used: 0 B is less than its processes use (1.0 GiB); raise memory_used, "
        "or leave it out to use their sum",
    ),
    (
        "gpus: [{name: T4, count: 300}]",
        "the machine file has 300 GPUs; a simulated machine has at most 255 (one per PCI bus, "
        "01-FF): list fewer",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_impossible_values_are_rejected(tmp_path: Path, run: Run, text: str, message: str) -> None:
    path = write(tmp_path, text)
    result = run("--machine", path, "devices")
    assert (result.code, result.out) == (2, "")
    assert result.err == f"error: {path}: {message}\n"


def test_readme_machine_file_still_loads(tmp_path: Path) -> None:
    text = """
gpus:
  - {name: V100-32GB, count: 2, temperature: 40, utilization: 12.0, power: 60, power_limit: 300}
  - name: A100-80GB
    mig: [{profile: 3g.40gb, memory: 40GiB}, {profile: 3g.40gb, memory: 40GiB, gi: 2},
          {profile: 1c.3g.40gb, memory: 40GiB, gi: 2, ci: 1}]
"""
    m = load_machine(write(tmp_path, text))
    assert m.gpus[0].utilization_percent == 12
    assert [(i.gpu_instance_id, i.compute_instance_id) for i in m.gpus[2].mig_instances] == [
        (1, 0),
        (2, 0),
        (2, 1),
    ]
