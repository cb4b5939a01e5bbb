"""Hostile specs, machine files, .npy files and feeds: one line, exit 2, no traceback, no hang.

Each case writes its files into a fresh folder and runs the command line there. Inputs that
would take the machine down if a bound regressed (alias bombs, 2^40 towers, /dev/zero, a header
claiming 10^12 elements) run in a subprocess under an address-space limit and a generous
timeout, so that a regression fails the test instead of the machine; the rest run in-process.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Run
from tests.hostile.cases import npy

Files = dict[str, "str | bytes | Callable[[Path], None]"]
ROOT = Path(__file__).resolve().parent.parent


def f4(shape: str) -> str:
    return f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"


def laughs(levels: int) -> str:
    """A constant whose value is a billion laughs: 10 lists of 10 of ... (aliases)."""

    def nest(i: int) -> str:
        if i == 0:
            return "&a0 [" + ", ".join(["1.0"] * 10) + "]"
        return f"&a{i} [{nest(i - 1)}" + f", *a{i - 1}" * 9 + "]"

    return "graph:\n- {name: c, op: constant, value: " + nest(levels) + "}\n"


def op_laughs(levels: int) -> str:
    """Device blocks that each hold two aliases of the block before: 2^levels ops."""
    text = "graph:\n- graph: &o0 [{op: constant, value: 1.0}, {op: constant, value: 1.0}]\n"
    for i in range(1, levels):
        text += f"- graph: &o{i} [{{graph: *o{i - 1}}}, {{graph: *o{i - 1}}}]\n"
    return text


def nested_towers(levels: int) -> str:
    text, indent = "graph:\n", ""
    for _ in range(levels):
        text += f"{indent}- towers: [/cpu:0, /cpu:0]\n{indent}  graph:\n"
        indent += "  "
    return text + f"{indent}- {{op: constant, value: 1.0}}\n"


PLACEHOLDER = (
    "graph:\n- {name: x, op: placeholder, shape: [4, 4]}\n- {name: y, op: neg, inputs: [x]}\n"
)
VECTOR = "graph:\n- {name: x, op: placeholder, shape: [2]}\n- {name: y, op: neg, inputs: [x]}\n"
LOAD = "graph:\n- {name: l, op: load, path: x.npy}\n- {name: y, op: neg, inputs: [l]}\n"
TRUNCATED = npy(header=f4("(4, 4)"), data=bytes(44))
NEGATIVE = npy(header=f4("(-4, -4)"), data=bytes(64))
HUGE = npy(header=f4("(1000000, 1000000)"), data=bytes(64))
LONG_HEADER = npy(header=f4("(4, 4)")[:-1] + "'x': '" + "A" * 60_000 + "'}", data=bytes(64))


def pickled(folder: Path) -> None:
    np.save(folder / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)


# (id, files, arguments, environment, phrase of the message); every case exits 2
SUBPROCESS = [
    ("spec /dev/zero", {}, ["plan", "/dev/zero"], {}, "cannot read spec '/dev/zero': it is a device, not a file"),
    ("spec /dev/urandom", {}, ["plan", "/dev/urandom"], {}, "it is a device, not a file"),
    ("billion laughs in a value", {"g.yaml": laughs(9)}, ["plan", "g.yaml"], {}, "take what YAML aliases repeat past 20,000,000 nodes (an alias bomb?); write the data out, or raise GPUPLACE_MAX_OPS"),
    ("billion laughs of ops", {"g.yaml": op_laughs(40)}, ["plan", "g.yaml"], {}, "take what YAML aliases repeat past 20,000,000 nodes"),
    ("towers 2^40", {"g.yaml": nested_towers(40)}, ["plan", "g.yaml"], {}, "g.yaml:40: towers: this block repeats 1,048,576 ops 2 times: 2,097,152 ops, more than the 2,000,000 a graph may have"),
    ("split 10^7", {"g.yaml": "graph:\n- {name: x, op: zeros, shape: [10000000]}\n- {name: s, op: split, inputs: [x], num_split: 10000000}\n"}, ["plan", "g.yaml"], {}, "g.yaml:3: op 's' (split): 10,000,000 outputs, more than the 2,000,000"),
    ("replicate 10^9 GPUs", {"g.yaml": "graph:\n- {name: x, op: placeholder, shape: [8]}\n- replicate: {gpus: 1000000000, split: [x]}\n  graph: []\n"}, ["plan", "g.yaml"], {}, "replicate: this block repeats 0 ops for 1,000,000,000 GPUs"),
    ("load a 10^12-element header", {"g.yaml": LOAD, "x.npy": HUGE}, ["run", "g.yaml"], {}, "it is truncated: its header says float32 [1000000,1000000], 4,000,000,000,000 bytes of data, but it holds 64"),
    ("feed a 10^12-element header", {"g.yaml": PLACEHOLDER, "x.npy": HUGE}, ["run", "g.yaml", "--feed", "x=x.npy"], {}, "--feed x=x.npy: cannot read it as a .npy file: it is truncated"),
    ("feed 30,000 nested lists", {"g.yaml": VECTOR}, ["run", "g.yaml", "--feed", "x=" + "[" * 30_000 + "]" * 30_000], {}, "nested too deeply; a value has at most 64 dimensions"),
    ("machine file nested 10,000 deep", {"m.yaml": "gpus: " + "[" * 10_000 + "]" * 10_000}, ["--machine", "m.yaml", "devices"], {}, "m.yaml:1:1006: YAML syntax error: while increasing flow level exceeded maximum nesting depth"),
    ("machine file alias bomb", {"m.yaml": "gpus: " + laughs(7).split("value: ")[1].rstrip("}\n")}, ["--machine", "m.yaml", "devices"], {}, "take what YAML aliases repeat past 100,000 nodes (an alias bomb?); write the data out, or a machine file needs far fewer"),
]  # fmt: skip

IN_PROCESS = [
    ("spec too large", {"g.yaml": VECTOR}, ["plan", "g.yaml"], {"GPUPLACE_MAX_SPEC_SIZE": "10B"}, "cannot read spec 'g.yaml': it holds 82 bytes, more than 10 bytes; set GPUPLACE_MAX_SPEC_SIZE to raise the limit (e.g. GPUPLACE_MAX_SPEC_SIZE=4GiB)"),
    ("more ops than allowed", {"g.yaml": VECTOR}, ["plan", "g.yaml"], {"GPUPLACE_MAX_OPS": "1"}, "g.yaml: the graph has 2 ops, more than the 1 a graph may have"),
    ("GPUPLACE_MAX_OPS not a number", {"g.yaml": VECTOR}, ["plan", "g.yaml"], {"GPUPLACE_MAX_OPS": "lots"}, "GPUPLACE_MAX_OPS='lots': expected a whole number of ops >= 1"),
    ("not UTF-8", {"g.yaml": b"graph:\n- {name: a\xe9, op: constant, value: 1.0}\n"}, ["plan", "g.yaml"], {}, "g.yaml: not UTF-8 text (invalid continuation byte at byte 17, line 2); save it as UTF-8"),
    ("a control character", {"g.yaml": "graph:\n- {name: a\x01b, op: constant, value: 1.0}\n"}, ["plan", "g.yaml"], {}, "g.yaml:2:11: YAML error: control character U+0001 is not allowed in YAML text"),
    ("nested 250 deep", {"g.yaml": "graph: " + "[" * 250 + "]" * 250}, ["plan", "g.yaml"], {}, "g.yaml:1:207: lists and mappings nest more than 200 levels deep here"),
    ("JSON nested 10,000 deep", {"g.json": '{"graph": ' + "[" * 10_000 + "]" * 10_000 + "}"}, ["plan", "g.json"], {}, "g.json: the JSON is nested too deeply to read"),
    ("a YAML key twice", {"g.yaml": "graph:\n- {name: a, op: constant, value: 1.0}\ngraph:\n- {name: b, op: constant, value: 2.0}\n"}, ["plan", "g.yaml"], {}, "g.yaml:3:1: duplicate key 'graph' (first at 1:1); a key may appear once in a mapping"),
    ("a JSON key twice", {"g.json": '{"graph": [{"name": "a", "op": "constant", "value": 1.0}],\n "graph": []}'}, ["plan", "g.json"], {}, "g.json:2: duplicate key 'graph' (first at line 1); a key may appear once in an object"),
    ("YAML in a .json file", {"g.json": "graph:\n- {name: a, op: constant, value: 1.0}\n"}, ["plan", "g.json"], {}, "g.json:1:1: not JSON (Expecting value); a .json file holds JSON: write it as JSON, or name it .yaml if it is YAML"),
    ("a 5,000-character spec path", {}, ["plan", "a" * 5000], {}, "cannot read spec '" + "a" * 38 + "..." + "a" * 38 + "': File name too long"),
    ("65 dimensions", {"g.yaml": "graph:\n- {name: a, op: zeros, shape: [" + ", ".join(["1"] * 65) + "]}\n"}, ["run", "g.yaml"], {}, "expected at most 64 dimensions (numpy's limit; TensorFlow allows 254, but every array here is numpy's), got 65"),
    ("a value nested 65 deep", {"g.yaml": "graph:\n- {name: a, op: constant, value: " + "[" * 65 + "1.0" + "]" * 65 + "}\n"}, ["run", "g.yaml"], {}, "expected a list nested at most 64 deep"),
    ("an integer beyond float64", {"g.yaml": "graph:\n- {name: a, op: constant, value: [1" + "0" * 400 + ", 1.0]}\n"}, ["run", "g.yaml"], {}, "is beyond the range of float64 (about 1.8e+308); give a smaller number"),
    ("a random op's huge minval", {"g.yaml": "graph:\n- {name: r, op: random_uniform, shape: [2], minval: 1" + "0" * 400 + "}\n"}, ["run", "g.yaml"], {}, "expected a number within float64's range"),
    ("an axis twice", {"g.yaml": "graph:\n- {name: a, op: zeros, shape: [2, 3]}\n- {name: r, op: reduce_sum, inputs: [a], axis: [1, -1]}\n"}, ["run", "g.yaml"], {}, "g.yaml:3: Invalid reduction arguments: Axes contains duplicate dimension: 1 for 'r' (op: 'Sum') with input shapes: [2,3]. Fix: give each axis once ([1, -1] names axis 1 twice)"),
    ("a NUL in a load path", {"g.yaml": 'graph:\n- {name: l, op: load, path: "a\\0b.npy"}\n'}, ["run", "g.yaml"], {}, "path: 'a\\x00b.npy' is not accepted; expected a file path without a NUL character"),
    ("a NUL in a save path", {"g.yaml": 'graph:\n- {name: c, op: constant, value: 1.0}\n- {name: s, op: save, inputs: [c], path: "a\\0b.npy"}\n'}, ["run", "g.yaml"], {}, "expected a file path without a NUL character"),
    ("plan: a truncated .npy", {"g.yaml": LOAD, "x.npy": TRUNCATED}, ["plan", "g.yaml"], {}, "op 'l' (load): cannot read '{dir}/x.npy' as a .npy file (it is truncated: its header says float32 [4,4], 64 bytes of data, but it holds 44)"),
    ("run: a truncated .npy", {"g.yaml": LOAD, "x.npy": TRUNCATED}, ["run", "g.yaml"], {}, "it is truncated"),
    ("plan: negative dimensions", {"g.yaml": LOAD, "x.npy": NEGATIVE}, ["plan", "g.yaml"], {}, "(its header gives negative dimensions [-4,-4])"),
    ("load a long header", {"g.yaml": LOAD, "x.npy": LONG_HEADER}, ["plan", "g.yaml"], {}, "(its header is 60,0"),
    ("load an unclosed header", {"g.yaml": LOAD, "x.npy": npy(header="{'descr': '<f4', 'shape': (4, 4", data=bytes(64))}, ["plan", "g.yaml"], {}, "(its header is not the dictionary numpy writes)"),
    ("load a pickle", {"g.yaml": LOAD, "x.npy": pickled}, ["plan", "g.yaml"], {}, "it holds Python objects (a pickle), which gpuplace never loads"),
    ("feed a truncated .npy", {"g.yaml": PLACEHOLDER, "x.npy": TRUNCATED}, ["run", "g.yaml", "--feed", "x=x.npy"], {}, "--feed x=x.npy: cannot read it as a .npy file: it is truncated"),
    ("feed negative dimensions", {"g.yaml": PLACEHOLDER, "x.npy": NEGATIVE}, ["run", "g.yaml", "--feed", "x=x.npy"], {}, "its header gives negative dimensions [-4,-4]"),
    ("feed a long header", {"g.yaml": PLACEHOLDER, "x.npy": LONG_HEADER}, ["run", "g.yaml", "--feed", "x=x.npy"], {}, "its header is 60,0"),
    ("feed a .npy of another shape", {"g.yaml": VECTOR, "x.npy": npy(header=f4("(4, 4)"), data=bytes(64))}, ["run", "g.yaml", "--feed", "x=x.npy"], {}, "Cannot feed value of shape (4, 4) for Tensor 'x:0', which has shape '(2,)'"),
    ("feed a bool among numbers", {"g.yaml": VECTOR}, ["run", "g.yaml", "--feed", "x=[1, true]"], {}, "--feed x=[1, true]: element [1] is true, a boolean, which does not fit a placeholder of dtype float32; give numbers (1 for true)"),
    ("feed booleans to floats", {"g.yaml": VECTOR}, ["run", "g.yaml", "--feed", "x=[false, true]"], {}, "element [0] is false, a boolean"),
    ("feed 65 nested lists", {"g.yaml": VECTOR}, ["run", "g.yaml", "--feed", "x=" + "[" * 65 + "1" + "]" * 65], {}, "nested more than 64 deep"),
    ("feed an integer beyond 64 bits", {"g.yaml": VECTOR}, ["run", "g.yaml", "--feed", f"x=[{10**30}, 1]"], {}, "element [0] is 1000000000000000000000000000000, an integer beyond 64 bits"),
    ("machine file not UTF-8", {"m.yaml": b"gpus:\n- {name: K520\xe9}\n"}, ["--machine", "m.yaml", "devices"], {}, "m.yaml: not UTF-8 text (invalid continuation byte at byte 19, line 2)"),
    ("machine file control character", {"m.yaml": "gpus:\n- {name: K5\x0120}\n"}, ["--machine", "m.yaml", "devices"], {}, "m.yaml:2:12: YAML error: control character U+0001"),
    ("machine file key twice", {"m.yaml": "gpus:\n- {name: K520}\ngpus:\n- {name: T4}\n"}, ["--machine", "m.yaml", "devices"], {}, "m.yaml:3:1: duplicate key 'gpus' (first at 1:1)"),
    ("machine .json holding YAML", {"m.json": "gpus:\n- {name: K520}\n"}, ["--machine", "m.json", "devices"], {}, "m.json:1:1: not JSON (Expecting value)"),
    ("machine file too large", {"m.yaml": "gpus: []\n" + "#" * (5 << 20)}, ["--machine", "m.yaml", "devices"], {}, "--machine: cannot read machine file 'm.yaml': it holds 5.0 MiB (5,242,889 bytes), more than 4.0 MiB (4,194,304 bytes)"),
    ("--machine of 5,000 characters", {}, ["--machine", "K520," * 1000, "devices"], {}, "--machine: cannot read ''"),
    ("--machine naming a 5,000-character file", {}, ["--machine", "a" * 5000 + ".yaml", "devices"], {}, "File name too long"),
    ("--machine of an unknown 5,000-character preset", {}, ["--machine", "a" * 5000, "devices"], {}, "unknown GPU preset '" + "a" * 38 + "..." + "a" * 38 + "'"),
]  # fmt: skip


def _write(folder: Path, files: Files) -> None:
    for name, content in files.items():
        if callable(content):
            content(folder)
        elif isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            (folder / name).write_text(content)


def _limited() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize(("files", "args", "env", "phrase"), [c[1:] for c in SUBPROCESS], ids=[c[0] for c in SUBPROCESS])  # fmt: skip
def test_hostile_input_in_a_bounded_subprocess(
    tmp_path: Path, files: Files, args: list[str], env: dict[str, str], phrase: str
) -> None:
    _write(tmp_path, files)
    child_env = {"PATH": os.environ.get("PATH", ""), "OPENBLAS_NUM_THREADS": "1", **env}
    child_env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "gpuplace", "--machine", "2xK520", *args],
        cwd=tmp_path, env=child_env, capture_output=True, text=True, timeout=120,
        preexec_fn=_limited, check=False,
    )  # fmt: skip
    assert "Traceback" not in result.stdout + result.stderr
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert phrase in result.stderr


@pytest.mark.parametrize(("files", "args", "env", "phrase"), [c[1:] for c in IN_PROCESS], ids=[c[0] for c in IN_PROCESS])  # fmt: skip
def test_hostile_input(
    run: Run,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: Files,
    args: list[str],
    env: dict[str, str],
    phrase: str,
) -> None:
    _write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    machine = [] if "--machine" in args else ["--machine", "2xK520"]
    result = run(*machine, *args, env=env)
    assert "Traceback" not in result.out + result.err
    assert (result.code, result.out) == (2, ""), result.err
    assert result.err.count("\n") == 1 and result.err.startswith("error: ")
    assert phrase.format(dir=tmp_path) in result.err
    assert sorted(os.listdir(tmp_path)) == before  # nothing written beside the inputs
