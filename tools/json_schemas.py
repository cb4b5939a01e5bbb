"""Write the JSON Schemas of `run --json`, `plan --json`, `mem --json` and `devices --presets
--json` (gpuplace/schemas/*.schema.json) from what those commands print on a set of cases.

The structure is inferred by genson (`pip install genson`; a tool, not a dependency of gpuplace)
from every sample of a command, so a key is required when every sample has it. Two parts are not
inferred: `schema_version` is the constant of gpuplace/report/schema.py, and `machine` is the one
hand-written object of devices.schema.json, so every document's machine is the same object.
devices-cluster.schema.json (`devices --json` across hosts) is hand-written too and refers to
devices.schema.json for the machine and device objects.
tests/test_json_contract.py validates the commands' output against these files on other cases;
rerun this (with the venv's python, from the repository root) when a document gains a field.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from genson import SchemaBuilder

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "gpuplace" / "schemas"
G = "examples/guide/"
SAMPLES: dict[str, list[list[str]]] = {
    "run": [
        ["--machine", "1xK40c", "run", G + "01_log_placement.yaml", "--json"],
        ["--machine", "4xK20m", "run", G + "04_multi_tower.yaml", "--json", "--verify"],
        ["--machine", "4xK520", "run", "examples/small_model.yaml", "--json", "--strategy",
         "balanced", "--memory-limit", "64MiB"],
        ["run", G + "01_log_placement.yaml", "--json"],
    ],
    "plan": [
        ["--machine", "4xK20m", "plan", G + "04_multi_tower.yaml", "--json"],
        ["--machine", "4xK520", "plan", "examples/big_model.yaml", "--json"],
        ["--machine", "4xK520", "plan", "examples/big_model.yaml", "--json", "--strategy",
         "balanced"],
        ["plan", G + "02_manual_placement.yaml", "--json"],
        ["--machine", "2x(1xK20m)", "plan", "examples/cluster/multi_tower.yaml", "--json"],
        ["--machine", "4xK520", "plan", "examples/small_model.yaml", "--json", "--training",
         "adam", "--strategy", "balanced", "--memory-limit", "256MiB"],
    ],
    "mem": [
        ["--machine", "2xK520", "mem", "--json"],
        ["--machine", "2xK520", "mem", "--json", "--compare", "--memory-fraction", "0.4"],
        ["--machine", "4xK520", "mem", G + "04_multi_tower.yaml", "--json", "--compare"],
        ["--machine", "2xK520", "mem", "examples/small_model.yaml", "--json", "--training",
         "momentum", "--dtype", "float16"],
        ["mem", "--json"],
        ["--machine", "1xK520", "mem", "--json", "--watch", "0.1", "--count", "1"],
    ],
    "presets": [["devices", "--presets", "--json"]],
}  # fmt: skip
TITLES = {
    "run": "gpuplace run --json",
    "plan": "gpuplace plan --json (--format json)",
    "mem": "gpuplace mem --json",
    "presets": "gpuplace devices --presets --json",
}


def sample(argv: list[str]) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "GPUPLACE_"))}
    done = subprocess.run([sys.executable, "-m", "gpuplace", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    return json.loads(done.stdout)


def main() -> None:
    devices = json.loads((SCHEMAS / "devices.schema.json").read_text())
    for name, cases in SAMPLES.items():
        builder = SchemaBuilder(schema_uri="https://json-schema.org/draft/2020-12/schema")
        for argv in cases:
            builder.add_object(sample(argv))
        schema = builder.to_schema()
        schema["$id"] = f"https://gpuplace.dev/schemas/{name}.schema.json"
        schema["title"] = TITLES[name]
        schema["description"] = f"Inferred by tools/json_schemas.py from {len(cases)} samples."
        props = schema["properties"]
        props["schema_version"] = devices["properties"]["schema_version"]
        if "machine" in props:
            props["machine"] = devices["properties"]["machine"]
        path = SCHEMAS / f"{name}.schema.json"
        path.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
