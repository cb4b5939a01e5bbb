"""The spec's JSON Schema, built from the op registry so that the two cannot drift apart.

Shipped as `gpuplace/schemas/graph.schema.json` for editors (YAML language servers read it);
`python -m gpuplace.graph.schema` rewrites that file and a test checks it is current. The loader
does not use it: it checks more (shapes, names, cycles) and says more when something is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .attrs import VALUE_SCHEMA
from .model import LOG_FORMATS, STRATEGIES, TRAINING_DTYPES, TRAINING_OPTIMIZERS
from .ops import REQUIRED, OpDef, list_ops

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "graph.schema.json"
NAME = r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$"
REF = r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*(:[0-9]+)?$"


def _op_schema(opdef: OpDef) -> dict[str, Any]:
    required = ["op", *(a for a, (_, default) in opdef.attrs.items() if default is REQUIRED)]
    properties: dict[str, Any] = {
        "op": {"const": opdef.name},
        "name": {"$ref": "#/$defs/name"},
        "inputs": {"type": "array", "items": {"$ref": "#/$defs/ref"}},
        "device": {"$ref": "#/$defs/device"},
        "colocate_with": {"$ref": "#/$defs/name"},
    }
    properties.update((a, dict(kind.schema)) for a, (kind, _) in opdef.attrs.items())
    return {
        "if": {"properties": {"op": {"const": opdef.name}}},
        "then": {"properties": properties, "required": required, "additionalProperties": False},
    }


def _config_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "log_device_placement": {"type": "boolean"},
            "allow_soft_placement": {"type": "boolean"},
            "gpu_options": {
                "type": "object",
                "properties": {
                    "allow_growth": {"type": "boolean"},
                    "per_process_gpu_memory_fraction": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": 1,
                    },
                    "experimental": {
                        "type": "object",
                        "properties": {
                            "virtual_devices": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "memory_limit_mb": {
                                            "type": "array",
                                            "items": {"type": "number", "exclusiveMinimum": 0},
                                        }
                                    },
                                },
                            }
                        },
                    },
                },
            },
            "placement": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"strategy": {"enum": list(STRATEGIES)}},
            },
            "log_format": {"enum": list(LOG_FORMATS)},
            "training": {
                "oneOf": [
                    {"enum": list(TRAINING_OPTIMIZERS)},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["optimizer"],
                        "properties": {
                            "optimizer": {"enum": list(TRAINING_OPTIMIZERS)},
                            "dtype": {"enum": list(TRAINING_DTYPES)},
                        },
                    },
                ]
            },
        },
    }


def build_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a graph spec."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gpuplace graph spec",
        "description": "Ops in order; a nested block opens a device scope (see gpuplace.graph).",
        "type": "object",
        "required": ["graph"],
        "additionalProperties": False,
        "properties": {
            "config": {"$ref": "#/$defs/config"},
            "cluster": {
                "type": "object",
                "description": "tf.train.ClusterSpec's jobs plus scheduler, master, network",
            },
            "graph": {**_GRAPH, "minItems": 1},
            "fetch": {
                "anyOf": [
                    {"$ref": "#/$defs/ref"},
                    {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/ref"}},
                ]
            },
        },
        "$defs": _defs(list_ops()),
    }


_GRAPH = {"type": "array", "items": {"$ref": "#/$defs/entry"}}


def _defs(ops: list[OpDef]) -> dict[str, Any]:
    entry = ("op", "block", "towers", "replicate")
    return {
        "name": {"type": "string", "pattern": NAME},
        "ref": {"type": "string", "pattern": REF},
        "device": {"type": ["string", "null"]},
        "value": VALUE_SCHEMA,
        "config": _config_schema(),
        "entry": {"anyOf": [{"$ref": f"#/$defs/{kind}"} for kind in entry]},
        "op": {
            "type": "object",
            "required": ["op"],
            "properties": {"op": {"enum": [d.name for d in ops]}},
            "allOf": [_op_schema(d) for d in ops],
        },
        "block": {
            "type": "object",
            "required": ["graph"],
            "additionalProperties": False,
            "properties": {"device": {"$ref": "#/$defs/device"}, "graph": _GRAPH},
        },
        "towers": {
            "type": "object",
            "required": ["towers", "graph"],
            "additionalProperties": False,
            "properties": {
                "towers": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "graph": _GRAPH,
            },
        },
        "replicate": {
            "type": "object",
            "required": ["replicate", "graph"],
            "additionalProperties": False,
            "properties": {
                "replicate": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "gpus": {
                            "anyOf": [
                                {"type": "integer", "minimum": 2},
                                {"const": "all"},
                                {
                                    "type": "array",
                                    "minItems": 2,
                                    "items": {"type": "integer", "minimum": 0},
                                },
                            ]
                        },
                        "split": {"type": "array", "items": {"$ref": "#/$defs/name"}},
                        "merge": {"enum": ["concat", "add_n", "mean"]},
                        "merge_device": {"$ref": "#/$defs/device"},
                    },
                },
                "graph": _GRAPH,
            },
        },
    }


def schema_text() -> str:
    return json.dumps(build_schema(), indent=2) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> None:
    path.write_text(schema_text())


if __name__ == "__main__":
    write_schema()
