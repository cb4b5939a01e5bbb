"""Measured rates: `devices --check` measures and saves them for real GPUs, `plan` uses them."""

from __future__ import annotations

import datetime
import json
import math
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpuplace.devices import load_machine, view
from gpuplace.devices.rates import MeasuredRate, load_rates, rates_path, read_rates, save_rates
from gpuplace.memory.policy import Policy, logical_gpus, parse_virtual
from gpuplace.placement.cost import device_models, rate_sources
from tests.conftest import SMALL_CHECK, Run
from tests.fakes.fake_cupy import make_fake_cupy
from tests.fakes.fake_pynvml import MiB
from tests.memory.helpers import LinkedNvml, matmul_graph, small_gpus

SCHEMA = json.loads(resources.files("gpuplace").joinpath("schemas/devices.schema.json").read_text())
UUIDS = [g.uuid for g in small_gpus(2)]


def real_machine() -> dict[str, Any]:
    """run() keywords for a fake "real" machine: two 1 GiB T4s under NVML, with a fake cupy."""
    cupy = make_fake_cupy(2, 1024 * MiB)
    return {"nvml": LinkedNvml(small_gpus(2), cupy), "cupy_loader": lambda: cupy}


def positive(x: Any) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_rates_path_follows_the_env_mapping_given() -> None:
    assert rates_path({"GPUPLACE_RATES": "/r.json", "XDG_CACHE_HOME": "/c"}) == Path("/r.json")
    assert rates_path({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/gpuplace/rates.json")
    assert rates_path({"HOME": "/h"}) == Path("/h/.cache/gpuplace/rates.json")
    assert rates_path({}) is None


def test_save_merges_and_a_missing_file_has_no_rates(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "rates.json"
    assert read_rates(path).by_uuid == {} and read_rates(path).warnings == ()
    save_rates(path, {"GPU-a": MeasuredRate("Tesla T4", 7.0, 250.0, "2026-11-29")})
    save_rates(path, {"GPU-b": MeasuredRate("Tesla T4", 8.0, 260.0, "2026-11-30")})
    rates = load_rates({"GPUPLACE_RATES": str(path)})
    assert sorted(rates.by_uuid) == ["GPU-a", "GPU-b"] and rates.path == path
    assert rates.by_uuid["GPU-a"] == MeasuredRate("Tesla T4", 7.0, 250.0, "2026-11-29")


def test_check_on_a_real_machine_measures_saves_and_plan_uses_them(
    run: Run, tmp_path: Path
) -> None:
    env = {"GPUPLACE_RATES": str(tmp_path / "rates.json"), **SMALL_CHECK}
    machine = real_machine()
    result = run("devices", "--check", env=env, **machine)
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    header = next(line for line in lines if line.startswith("DEVICE ") and "TFLOP/S" in line)
    assert header.split()[-2:] == ["TFLOP/S", "GB/S"]
    assert lines[-1] == f"Saved the measured rates of 2 GPU(s) to {tmp_path / 'rates.json'}"
    saved = json.loads((tmp_path / "rates.json").read_text())
    today = datetime.date.today().isoformat()
    assert sorted(saved) == sorted(UUIDS)
    for entry in saved.values():
        assert entry["product"] == "Tesla T4" and entry["measured"] == today
        assert positive(entry["tflops"]) and positive(entry["bandwidth_gbs"])

    plan = run("plan", matmul_graph(tmp_path / "g.yaml", 64), "--strategy", "balanced",
               env=env, **machine)  # fmt: skip
    assert plan.code == 0, plan.err
    rates_line = plan.out.splitlines()[-2]
    assert rates_line == f"rates: GPU:0,1 measured by devices --check on {today}"


def test_device_models_use_measured_rates_split_among_logical_gpus() -> None:
    v = view(load_machine("2xT4"), {})
    uuid = v.gpus[1].uuid
    rates = {uuid: MeasuredRate("Tesla T4", 6.0, 240.0, "2026-11-29")}
    whole = device_models(logical_gpus(v.gpus, Policy()), v.machine.host, rates)
    assert (whole[0].flops, whole[0].bandwidth) == (8.1e12, 320e9)  # the preset
    assert (whole[1].flops, whole[1].bandwidth) == (6.0e12, 240e9)  # measured
    policy = Policy(virtual=parse_virtual("GPU:1=1GiB,1GiB"))
    logical = logical_gpus(v.gpus, policy)
    split = device_models(logical, v.machine.host, rates)
    assert [m.flops for m in split[1:3]] == [3.0e12, 3.0e12]
    assert rate_sources(logical, rates) == [
        ("GPU:0", "from the preset Tesla T4"),
        ("GPU:1,2", "measured by devices --check on 2026-11-29"),
    ]


def test_plan_names_measured_and_preset_sources(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "rates.json"
    save_rates(path, {UUIDS[1]: MeasuredRate("Tesla T4", 6.0, 240.0, "2026-11-29")})
    graph = matmul_graph(tmp_path / "g.yaml", 64)
    result = run("plan", graph, env={"GPUPLACE_RATES": str(path)}, **real_machine())
    assert result.code == 0, result.err
    assert result.out.splitlines()[-2] == (
        "rates: GPU:0 from the preset Tesla T4; GPU:1 measured by devices --check on 2026-11-29"
    )


def test_json_check_records_rates_and_keeps_stdout_one_document(run: Run, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), **SMALL_CHECK}
    result = run("devices", "--check", "--json", env=env, **real_machine())
    assert result.code == 0
    doc = json.loads(result.out)
    jsonschema.validate(doc, SCHEMA)
    assert all(positive(c["tflops"]) and positive(c["bandwidth_gbs"]) for c in doc["checks"])
    path = tmp_path / "gpuplace" / "rates.json"
    assert result.err == f"Saved the measured rates of 2 GPU(s) to {path}\n"
    assert sorted(json.loads(path.read_text())) == sorted(UUIDS)


def test_simulated_machines_never_write_rates(run: Run, tmp_path: Path) -> None:
    env = {"GPUPLACE_RATES": str(tmp_path / "rates.json"), **SMALL_CHECK}
    result = run("--machine", "1xT4", "devices", "--check", env=env)
    assert result.code == 0 and "Saved" not in result.out + result.err
    row = result.out.splitlines()[-2].split()  # the last line says the rates are the host's
    assert row[0] == "/device:GPU:0" and positive(float(row[-2])) and positive(float(row[-1]))
    assert not (tmp_path / "rates.json").exists()


def test_a_corrupt_rates_file_warns_and_falls_back_to_the_presets(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "rates.json"
    path.write_text("{not json", encoding="utf-8")
    graph = matmul_graph(tmp_path / "g.yaml", 64)
    env = {"GPUPLACE_RATES": str(path)}
    result = run("--machine", "2xT4", "plan", graph, "--strategy", "balanced", env=env)
    assert result.code == 0
    assert result.err.startswith(f"warning: ignoring the measured rates in {path} (")
    assert result.out.splitlines()[-2] == "rates: GPU:0,1 from the preset Tesla T4"
    path.write_text(json.dumps({"GPU-x": {"product": "T4", "tflops": -1}}), encoding="utf-8")
    assert load_rates(env).warnings and load_rates(env).by_uuid == {}


def _corrupt(tmp_path: Path, kind: str) -> str:
    """A rates cache that is anything but one `devices --check` wrote; its path."""
    path = tmp_path / "rates.json"
    contents = {
        "not json": b"{not json",
        "deep": b"[" * 100_000,
        "huge int": b'{"G": {"product": "T4", "tflops": 1' + b"0" * 5000 + b"}}",
        "huge float": b'{"G": {"product": "T4", "tflops": 1e400, "bandwidth_gbs": 1, '
        b'"measured": "d"}}',
        "a list": b"[1, 2]",
        "wrong entry": b'{"G": [1]}',
        "not utf-8": b"\xff\xfe\x00{",
        "over 1 MiB": b" " * (2 << 20) + b"{}",
    }
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # opened without blocking, refused before a byte is read
    elif kind in ("/dev/zero", "/dev/urandom"):
        return kind
    else:
        path.write_bytes(contents[kind])
    return str(path)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("not json", "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 "
                     "column 2 (char 1)"),
        ("deep", "nested too deeply"),
        ("huge int", "ValueError: Exceeds the limit (4300 digits) for integer string conversion: "
                     "value has 5001 digits; use sys.set_int_max_str_digits() to increase the limit"),
        ("huge float", "rates must be positive numbers"),
        ("a list", "expected an object keyed by GPU UUID"),
        ("wrong entry", "TypeError: list indices must be integers or slices, not str"),
        ("not utf-8", "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: "
                      "invalid start byte"),
        ("over 1 MiB", "larger than 1 MiB"),
        ("folder", "not a regular file"),
        ("fifo", "not a regular file"),
        ("/dev/zero", "not a regular file"),
        ("/dev/urandom", "not a regular file"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["run", "plan", "mem"])
def test_a_rates_cache_that_is_not_rates_is_one_warning_and_ignored(
    run: Run, tmp_path: Path, kind: str, reason: str, command: str
) -> None:
    """Plain commands (tensorflow strategy) too: a cache never breaks a command."""
    if kind == "huge int" and sys.version_info < (3, 11):
        reason = "OverflowError: int too large to convert to float"
    path = _corrupt(tmp_path, kind)
    graph = matmul_graph(tmp_path / "g.yaml", 64)
    result = run("--machine", "2xT4", command, graph, env={"GPUPLACE_RATES": path})
    assert result.code == 0
    assert result.err == (
        f"warning: ignoring the measured rates in {path} ({reason}); the presets are used "
        "instead. Rerun `gpuplace devices --check` to measure again\n"
    )


def test_a_long_rates_path_is_cut_short_in_the_warning(run: Run, tmp_path: Path) -> None:
    path = "r" * 5000
    result = run("--machine", "2xT4", "plan", matmul_graph(tmp_path / "g.yaml", 64),
                 env={"GPUPLACE_RATES": path})  # fmt: skip
    assert result.code == 0
    assert result.err == (
        f"warning: ignoring the measured rates in {'r' * 177}...{'r' * 20} (File name too long); "
        "the presets are used instead. Rerun `gpuplace devices --check` to measure again\n"
    )


def test_check_replaces_a_corrupt_cache(tmp_path: Path) -> None:
    """What `devices --check` does with what it measured: the corrupt file is rebuilt."""
    path = tmp_path / "rates.json"
    path.write_bytes(b"[" * 100_000)
    save_rates(path, {"GPU-a": MeasuredRate("Tesla T4", 7.0, 250.0, "2026-11-29")})
    assert read_rates(path) == load_rates({"GPUPLACE_RATES": str(path)})
    assert list(read_rates(path).by_uuid) == ["GPU-a"] and read_rates(path).warnings == ()
