"""Capture TensorFlow's op names and placement log for the conformance tests.

    .venv/bin/python tools/tf_capture/capture.py [--tf /work/tfenv-cpu/bin/python]

Writes tests/conformance/data/names.json and log.json from the real TensorFlow (CPU build):
the cases are the "Using GPUs" guide's examples (examples/guide/*.yaml, with soft placement, so
the CPU build places what it cannot put on a GPU) and specs written here: the issue's
examples, hand-picked name clashes, and seeded random ones (unnamed and named ops, names
that clash with generated ones or differ only in case, names with slashes, device blocks,
towers). `tf_build.py` builds them in a TensorFlow subprocess with TF_CPP_MIN_LOG_LEVEL=0 and
reads what the placer printed at the file descriptors. TensorFlow is not a test dependency:
the tests read the JSON only. Deterministic: the same TensorFlow gives the same files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "conformance" / "data"
M = [[1.0, 2.0], [3.0, 4.0]]  # every tensor is 2x2 float32, so any op takes any input


def const(name: str | None = None, **kw: Any) -> dict[str, Any]:
    return {**({"name": name} if name else {}), "op": "constant", "value": M, **kw}


def op(kind: str, inputs: list[str], name: str | None = None, **kw: Any) -> dict[str, Any]:
    return {**({"name": name} if name else {}), "op": kind, "inputs": inputs, **kw}


def hand_cases() -> list[tuple[str, list[Any]]]:
    """The issue's examples and the clashes TF's rule decides."""
    return [
        ("issue-const-1-1", [const(), const(), const("Const_1"), op("add", ["Const", "Const_1"])]),
        ("issue-a-then-A", [const("a"), const("A"), op("add", ["a", "A"])]),
        ("written-before-generated", [const("Const"), const(), const(), op("add_n", ["Const", "Const_1", "Const_2"])]),
        ("written-suffix-first", [const("Const_1"), const(), const(), const(), op("add", ["Const_1", "Const_2"])]),
        ("case-of-default", [const("const"), const(), const("CONST_1"), op("mul", ["const", "CONST_1"])]),
        ("matmul-vs-written-matmul", [const("matmul"), op("matmul", ["matmul", "matmul"]), op("matmul", ["MatMul_1", "matmul"], name="MatMul")]),
        ("three-way-case", [const("x"), const("X"), const("x_1"), const("X_1"), op("add_n", ["x", "X", "x_1", "X_1"])]),
        ("add-default", [const("a"), op("add", ["a", "a"]), op("add", ["add", "a"]), op("add", ["add", "a"], name="add_1"), op("add", ["add_1", "add"])]),
        ("slash-names", [const("scope/a"), const("scope/A"), const("scope/a_1"), op("add", ["scope/a", "scope/A"], name="scope/add")]),
        ("slash-vs-plain", [const("scope"), const("scope/Const"), const(), op("add", ["scope", "scope/Const"])]),
        ("written-after-tower", [
            {"towers": ["/cpu:0", "/cpu:0"], "graph": [const("w"), op("relu", ["w"], name="r")]},
            const("w_1"), const("r_1"), op("add_n", ["r"]), op("add", ["w_1", "r_1"]),
        ]),
        ("guide-towers-named-after", [
            {"towers": ["/cpu:0", "/cpu:0"], "graph": [const(), const(), op("matmul", ["Const", "Const_1"])]},
            const("Const_3"), const("MatMul_1"), op("add_n", ["MatMul", "Const_3", "MatMul_1"], device="/cpu:0"),
        ]),
        ("device-blocks", [
            {"device": "/cpu:0", "graph": [const(), const("Const_1"), op("neg", ["Const"])]},
            const(), op("sub", ["Const_1", "Neg"]), op("identity", ["sub"]),
        ]),
        ("placeholders-and-consts", [
            {"name": "x", "op": "placeholder", "shape": [2, 2]}, {"op": "placeholder", "shape": [2, 2]},
            const(), op("matmul", ["x", "Placeholder"]), op("add", ["MatMul", "Const"]),
        ]),
        ("identity-chain", [const("v"), op("identity", ["v"]), op("identity", ["Identity"]), op("identity", ["Identity"], name="Identity_1")]),
    ]  # fmt: skip


POOL = ["Const", "Const_1", "Const_2", "Const_1_1", "const", "CONST", "a", "A", "a_1", "A_1",
        "MatMul", "matmul_1", "add", "Add_1", "relu", "Relu_1", "x", "x_1", "s/a", "s/A"]  # fmt: skip
KINDS = ["constant", "constant", "constant", "add", "sub", "mul", "matmul", "relu", "neg",
         "identity", "add_n", "sigmoid", "tanh"]  # fmt: skip


def random_case(rng: random.Random) -> list[Any]:
    """A flat spec (maybe with a device block or towers) whose names often clash."""
    items: list[Any] = []
    written: set[str] = set()
    refs: list[str] = []  # names that reach one op each, known before the next is added
    for _ in range(rng.randint(3, 12)):
        kind = rng.choice(KINDS) if refs else "constant"
        name = None
        if rng.random() < 0.5:
            pick = rng.choice(POOL)
            if pick not in written:
                name = pick
        arity = {"constant": 0, "add_n": rng.randint(2, 3)}.get(
            kind, 2 if kind in ("add", "sub", "mul", "matmul") else 1
        )
        item = (
            const(name)
            if kind == "constant"
            else op(kind, [rng.choice(refs) for _ in range(arity)], name)
        )
        if rng.random() < 0.15:
            item["device"] = "/cpu:0"
        items.append(item)
        if name:
            written.add(name)
            refs.append(name)
    if rng.random() < 0.3:
        # written names no top-level op takes, so the block's names reach its copies; add_n
        # of 2 or more (TF's tf.add_n of one tensor returns it and builds no op)
        body = [const(), op("relu", ["Const"]), const("k"), op("add", ["Relu", "k"], "tsum")]
        items.append({"towers": ["/cpu:0", "/cpu:0", "/cpu:0"][: rng.randint(1, 3)], "graph": body})
        items.append(op("add_n", ["tsum", "k"]))
    if rng.random() < 0.3:
        items = [{"device": "/cpu:0", "graph": items[: len(items) // 2]}, *items[len(items) // 2 :]]
    return items  # fmt: skip


def cases(count: int) -> list[dict[str, Any]]:
    out = []
    for path in sorted((ROOT / "examples" / "guide").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        spec.pop("config", None)
        out.append({"id": f"guide/{path.name}", "spec": spec, "soft": True})
    for name, graph in hand_cases():
        out.append({"id": name, "spec": {"graph": graph}, "soft": False})
    rng = random.Random(13)
    for i in range(count):
        out.append({"id": f"random-{i:03d}", "spec": {"graph": random_case(rng)}, "soft": False})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tf", default="/work/tfenv-cpu/bin/python", help="TensorFlow's python")
    parser.add_argument("--random", type=int, default=60, help="how many random cases")
    args = parser.parse_args()
    todo = cases(args.random)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp, "cases.json"), Path(tmp, "out.json")
        src.write_text(json.dumps(todo))
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "CUDA_VISIBLE_DEVICES": ""}
        script = Path(__file__).with_name("tf_build.py")
        subprocess.run([args.tf, str(script), str(src), str(dst)], env=env, check=True)
        doc = json.loads(dst.read_text())
    version = doc["tensorflow"]
    by_id = {r["id"]: r for r in doc["results"]}
    names, logs = [], []
    for case in todo:
        got = by_id[case["id"]]
        if got["log"] != got["log_stderr"]:
            sys.exit(
                f"{case['id']}: stdout and stderr logs differ: {got['log']} {got['log_stderr']}"
            )
        names.append({"id": case["id"], "spec": case["spec"], "names": got["names"]})
        entry = {"id": case["id"], "spec": case["spec"], "soft": case["soft"],
                 "mapping": got["mapping"], "log": got["log"]}  # fmt: skip
        if "error" in got:
            entry["error"] = got["error"]
        logs.append(entry)
    source = "tools/tf_capture/capture.py"
    DATA.mkdir(parents=True, exist_ok=True)
    for file, rows in (("names.json", names), ("log.json", logs)):
        doc = {"tensorflow": version, "build": "cpu", "source": source, "cases": rows}
        (DATA / file).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"TensorFlow {version}: {len(todo)} cases -> {DATA}/names.json, log.json")


if __name__ == "__main__":
    main()
