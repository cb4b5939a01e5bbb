"""One JSON contract: every `--json` document starts with `schema_version`, carries the one
`machine` object of devices.schema.json, and validates against its command's shipped schema
(gpuplace/schemas/; run, plan, mem and presets inferred by tools/json_schemas.py from other
cases than these)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from gpuplace.report.schema import SCHEMA_VERSION
from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[1]
G = str(ROOT / "examples/guide")


def schema(name: str) -> dict[str, object]:
    text = resources.files("gpuplace").joinpath(f"schemas/{name}.schema.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


CASES = [
    ("devices", ("--machine", "2xK520,1xT4", "devices", "--json")),
    ("devices", ("devices", "--json")),
    ("presets", ("devices", "--presets", "--json")),
    ("run", ("--machine", "1xK40c", "run", f"{G}/02_manual_placement.yaml", "--json")),
    ("run", ("--machine", "1xK40c", "run", f"{G}/03_gpu2.yaml", "--json", "--allow-soft-placement")),
    ("run", ("--machine", "4xK20m", "run", f"{G}/04_multi_tower.yaml", "--json", "--strategy", "round-robin")),
    ("plan", ("--machine", "2xK520", "plan", f"{G}/04_multi_tower.yaml", "--json", "--allow-soft-placement")),
    ("plan", ("--machine", "1xT4", "plan", f"{G}/01_log_placement.yaml", "--format", "json")),
    ("mem", ("--machine", "1xT4", "mem", "--json", "--memory-limit", "1GiB")),
    ("mem", ("--machine", "2xK520", "mem", f"{G}/01_log_placement.yaml", "--json", "--allow-growth")),
    ("plan", ("--machine", "4xK20m", "plan", f"{G}/04_multi_tower.yaml", "--json", "--training", "sgd")),
    ("mem", ("--machine", "1xT4", "mem", f"{G}/01_log_placement.yaml", "--json", "--training", "adamw")),
]  # fmt: skip


@pytest.mark.parametrize(("name", "argv"), CASES, ids=[" ".join(a[-4:]) for _, a in CASES])
def test_every_document_validates_and_shares_the_machine_object(
    run: Run, name: str, argv: tuple[str, ...]
) -> None:
    result = run(*argv)
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert next(iter(doc)) == "schema_version" and doc["schema_version"] == SCHEMA_VERSION
    jsonschema.validate(doc, schema(name))
    if name != "presets":
        machine = schema("devices")["properties"]["machine"]  # type: ignore[index]
        jsonschema.validate(doc["machine"], machine)


def cluster_validator() -> jsonschema.protocols.Validator:
    """devices-cluster.schema.json, its references into devices.schema.json resolved."""
    from referencing import Registry, Resource

    shipped = [Resource.from_contents(schema(n)) for n in ("devices", "devices-cluster")]
    registry: Registry[object] = Registry().with_resources((r.id(), r) for r in shipped)  # type: ignore[misc]
    return jsonschema.Draft202012Validator(schema("devices-cluster"), registry=registry)


@pytest.mark.parametrize("machine", ["2xV100-16GB+1xT4", "3x(2xK520)"])
def test_devices_on_a_simulated_cluster_validates(run: Run, machine: str) -> None:
    result = run("--machine", machine, "devices", "--json", env={"CUDA_VISIBLE_DEVICES": "1"})
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    cluster_validator().validate(doc)
    del doc["tasks"][0]["devices"][0]["name"]
    with pytest.raises(jsonschema.ValidationError, match="'name' is a required property"):
        cluster_validator().validate(doc)


def test_a_removed_field_breaks_the_contract(run: Run) -> None:
    doc = json.loads(run("--machine", "1xK40c", "run", f"{G}/01_log_placement.yaml", "--json").out)
    del doc["placement"]
    with pytest.raises(jsonschema.ValidationError, match="'placement' is a required property"):
        jsonschema.validate(doc, schema("run"))


def test_mem_watch_lines_validate_too(run: Run) -> None:
    out = run("--machine", "2xK520", "mem", "--json", "--watch", "0.1", "--count", "2").out
    for line in out.splitlines():
        jsonschema.validate(json.loads(line), schema("mem"))
