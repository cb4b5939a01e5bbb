"""The shipped JSON Schema is current, accepts the examples and rejects what the loader does."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpuplace.graph.schema import SCHEMA_PATH, schema_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def test_shipped_schema_is_current() -> None:
    # if this fails: python -m gpuplace.graph.schema
    assert SCHEMA_PATH.read_text() == schema_text()
    jsonschema.Draft202012Validator.check_schema(json.loads(schema_text()))


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.yaml")), ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    VALIDATOR.validate(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize(
    "spec",
    [
        {"graph": []},
        {"graph": [{"name": "a", "op": "matmull"}]},
        {"graph": [{"name": "a", "op": "zeros"}]},
        {"graph": [{"name": "a", "op": "zeros", "shape": [-1]}]},
        {"graph": [{"name": "a", "op": "zeros", "shape": [1], "dtpye": "float32"}]},
        {"graph": [{"devcie": "/cpu:0", "graph": []}]},
        {"graph": [{"name": "a:1", "op": "ones", "shape": [1]}]},
        {"config": {"allow_growth": True}, "graph": [{"op": "ones", "shape": [1]}]},
        {"config": {"placement": {"strategy": "greedy"}}, "graph": [{"op": "ones", "shape": [1]}]},
        {"config": {"placement": {"stratgy": "balanced"}}, "graph": [{"op": "ones", "shape": [1]}]},
        {
            "config": {"gpu_options": {"per_process_gpu_memory_fraction": 2}},
            "graph": [{"op": "ones", "shape": [1]}],
        },
        {
            "config": {
                "gpu_options": {"experimental": {"virtual_devices": [{"memory_limit_mb": [0]}]}}
            },
            "graph": [{"op": "ones", "shape": [1]}],
        },
    ],
)
def test_invalid_specs(spec: object) -> None:
    assert not VALIDATOR.is_valid(spec)
