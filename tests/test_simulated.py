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
        load_machine(spec)
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
        load_machine(write(tmp_path, text))
    assert message in str(err.value)
    assert str(tmp_path / "node.yaml") in str(err.value)


def test_yaml_error_has_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"node\.yaml:3:1: YAML syntax error: expected .,. or .}."):
        load_machine(write(tmp_path, "gpus:\n  - {name: T4\n"))


def test_bad_machine_is_exit_2_with_one_line(run: Run) -> None:
    result = run("--machine", "3xH300", "devices")
    assert result.code == 2
    assert result.out == ""
    assert result.err.count("\n") == 1 and result.err.startswith(
        "error: --machine: unknown GPU preset 'H300'"
    )


def test_env_var_selects_the_machine(monkeypatch: pytest.MonkeyPatch, run: Run) -> None:
    monkeypatch.setenv("GPUPLACE_MACHINE", "1xK40c")
    result = run("devices")
    assert "Tesla K40c [simulated]" in result.out
