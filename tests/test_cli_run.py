"""`gpuplace run` and `plan` end to end: the seed guide's four programs, errors, JSON, verify."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Run
from tests.conftest import write_spec as write
from tests.fakes.fake_pynvml import FakeNvml, four_gpus

GUIDE = Path(__file__).resolve().parent.parent / "examples" / "guide"
K40C_MAPPING = (
    "Device mapping:\n"
    "/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: Tesla K40c, "
    "pci bus id: 0000:05:00.0, compute capability: 3.5 [simulated]\n"
)
RESULT = "[[22. 28.]\n [49. 64.]]\n"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def test_guide_log_placement(run: Run) -> None:
    result = run("--machine", "1xK40c", "run", str(GUIDE / "01_log_placement.yaml"))
    assert (result.code, result.err) == (0, "")
    assert result.out == K40C_MAPPING + f"a: {GPU0}\nb: {GPU0}\nMatMul: {GPU0}\nMatMul:\n" + RESULT


def test_guide_manual_placement(run: Run) -> None:
    result = run("--machine", "1xK40c", "run", str(GUIDE / "02_manual_placement.yaml"))
    assert result.code == 0
    assert result.out == K40C_MAPPING + f"a: {CPU0}\nb: {CPU0}\nMatMul: {GPU0}\nMatMul:\n" + RESULT


def test_guide_gpu2_fails_on_one_gpu_with_tf_message(run: Run) -> None:
    result = run("--machine", "1xK40c", "run", str(GUIDE / "03_gpu2.yaml"))
    assert result.code == 1
    assert result.out == ""
    assert result.err == (
        "error: Cannot assign a device for operation c: {{node c}} was explicitly assigned to "
        "/device:GPU:2 but available devices are [ /job:localhost/replica:0/task:0/device:CPU:0, "
        "/job:localhost/replica:0/task:0/device:GPU:0 ]. Make sure the device specification refers "
        "to a valid device. gpuplace: this machine has 1 GPU (GPU:0); request one of its devices, "
        "or pass --allow-soft-placement.\n"
    )


def test_guide_gpu2_runs_with_soft_placement(run: Run) -> None:
    result = run(
        "--machine", "1xK40c", "run", str(GUIDE / "03_gpu2.yaml"), "--allow-soft-placement"
    )
    assert result.code == 0
    assert result.out == K40C_MAPPING + f"a: {GPU0}\nb: {GPU0}\nc: {GPU0}\nc:\n" + RESULT


def test_guide_multi_tower(run: Run) -> None:
    result = run("--machine", "4xK20m", "run", str(GUIDE / "04_multi_tower.yaml"))
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[1].endswith(
        "-> device: 0, name: Tesla K20m, pci bus id: 0000:02:00.0, compute capability: 3.5 [simulated]"
    )
    assert lines[4].endswith(
        "-> device: 3, name: Tesla K20m, pci bus id: 0000:84:00.0, compute capability: 3.5 [simulated]"
    )
    gpu = "/job:localhost/replica:0/task:0/device:GPU:"
    assert lines[5:12] == [
        f"Const: {gpu}2", f"Const_1: {gpu}2", f"MatMul: {gpu}2",
        f"Const_2: {gpu}3", f"Const_3: {gpu}3", f"MatMul_1: {gpu}3", f"AddN: {CPU0}",
    ]  # fmt: skip
    assert "\n".join(lines[12:]) + "\n" == "AddN:\n[[ 44.  56.]\n [ 98. 128.]]\n"


def test_no_gpu_machine_runs_everything_on_cpu(run: Run) -> None:
    result = run("run", str(GUIDE / "01_log_placement.yaml"))
    assert result.code == 0
    assert result.out.startswith(f"Device mapping: no known devices.\na: {CPU0}\n")


def test_explain_and_copies(run: Run) -> None:
    result = run(
        "--machine",
        "1xK40c",
        "run",
        str(GUIDE / "02_manual_placement.yaml"),
        "--explain",
        "--no-log-placement",
    )
    title, *rows = result.out.splitlines()
    assert title == "Run on the simulated machine 1xK40c (strategy tensorflow)"
    assert rows[0].split() == [
        "OP",
        "TYPE",
        "DEVICE",
        "REASON",
        "SHAPE",
        "DTYPE",
        "BYTES",
        "COPIES",
        "IN",
    ]
    matmul = next(r for r in rows if r.startswith("MatMul "))
    assert "GPU:0" in matmul and "a CPU:0->GPU:0 24 B; b CPU:0->GPU:0 24 B" in matmul
    assert "no device requested" in matmul


def test_json_document(run: Run, tmp_path: Path) -> None:
    out = tmp_path / "values.npz"
    result = run(
        "--machine",
        "4xK20m",
        "run",
        str(GUIDE / "04_multi_tower.yaml"),
        "--json",
        "--save",
        str(out),
    )
    doc = json.loads(result.out)
    assert doc["results"]["AddN"] == {
        "shape": [2, 2],
        "dtype": "float32",
        "value": [[44.0, 56.0], [98.0, 128.0]],
    }
    assert {p["op"]: p["device"][-5:] for p in doc["placement"]}["MatMul_1"] == "GPU:3"
    assert sorted((c["tensor"], c["dst"][-5:]) for c in doc["copies"]) == [
        ("MatMul", "CPU:0"),
        ("MatMul_1", "CPU:0"),
    ]
    assert doc["memory_peak"][CPU0] > 0 and doc["machine"]["simulated"] is True
    np.testing.assert_array_equal(np.load(out)["AddN"], [[44, 56], [98, 128]])


def test_verify_and_feeds(run: Run, tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        "graph:\n"
        "  - {name: x, op: placeholder, shape: [2, 2]}\n"
        "  - {name: w, op: variable, shape: [2, 2], initializer: random_normal, seed: 3}\n"
        "  - {name: m, op: matmul, inputs: [x, w]}\n"
        "  - {name: y, op: softmax, inputs: [m]}\n",
    )
    result = run("--machine", "2xT4", "run", spec, "--feed", "x=[[1, 2], [3, 4]]", "--verify")
    assert result.code == 0, result.err
    assert "verify y: max relative error" in result.out and ": ok" in result.out
    missing = run("--machine", "2xT4", "run", spec)
    assert missing.code == 2 and "x" in missing.err


def test_plan_does_everything_but_execute(run: Run) -> None:
    result = run("--machine", "4xK20m", "plan", str(GUIDE / "04_multi_tower.yaml"))
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "Plan on the simulated machine 4xK20m (strategy tensorflow)"
    loads = lines[lines.index("") + 1 :]
    assert loads[0].split()[:4] == ["DEVICE", "OPS", "OUTPUT", "BYTES"]
    assert loads[0].split()[-4:] == ["PEAK", "(PREDICTED)", "LIMIT", "FITS"]
    cpu = next(r for r in loads if r.startswith("CPU:0"))
    assert cpu.split()[:7] == ["CPU:0", "1", "16", "B", "2", "32", "B"]
    assert cpu.split()[-3:] == ["768B", "-", "-"]
    assert lines[-1].startswith("Estimated makespan ") and "critical path" in lines[-1]
    gpu2 = next(r for r in loads if r.startswith("GPU:2"))
    assert gpu2.split()[-3:] == ["768B", "4620MiB", "yes"]  # K20m: 5 GiB - 500 MiB
    doc = json.loads(
        run("--machine", "4xK20m", "plan", str(GUIDE / "04_multi_tower.yaml"), "--json").out
    )
    assert (
        len(doc["copies"]) == 2
        and {d["device"][-5:]: d["ops"] for d in doc["devices"]}["GPU:3"] == 3
    )


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        ("graph:\n  - {name: c, op: matmull}\n", 2, "did you mean 'matmul'"),
        ("graph: [\n", 2, "g.yaml:"),
        (
            "graph:\n  - {name: a, op: constant, value: 1.0, shape: [65536, 65536, 8], device: /gpu:0}\n",
            1,
            "larger than all",
        ),
    ],
)
def test_errors_are_one_line_with_exit_code(
    run: Run, tmp_path: Path, text: str, code: int, words: str
) -> None:
    result = run("--machine", "1xT4", "run", write(tmp_path, text))
    assert result.code == code
    assert (
        words in result.err and result.err.startswith("error: ") and "Traceback" not in result.err
    )


def test_verify_counts_equal_infinities_and_nans_as_equal(run: Run, tmp_path: Path) -> None:
    """log(0) and log(-1) give -inf and nan on both runs: a match, and no numpy warning."""
    spec = write(
        tmp_path,
        "graph:\n"
        "  - {name: z, op: constant, value: [0.0, 1.0, -1.0]}\n"
        "  - {name: l, op: log, inputs: [z]}\n",
    )
    result = run("--machine", "1xK40c", "run", spec, "--verify")
    assert (result.code, result.err) == (0, "")
    assert "[-inf   0.  nan]" in result.out
    assert "verify l: max relative error 0.0e+00" in result.out and ": ok" in result.out


def test_verify_reference_run_writes_no_file_and_prints_nothing(run: Run, tmp_path: Path) -> None:
    """The float64 reference run skips `save` (it rewrote out.npy as float64) and its prints
    forward their input silently: the run being checked wrote and printed once."""
    np.save(tmp_path / "in.npy", np.array([0.0, 1.0], dtype=np.float32))
    spec = write(
        tmp_path,
        "graph:\n"
        "  - {name: l, op: load, path: in.npy}\n"
        "  - {name: p, op: print, inputs: [l]}\n"
        "  - {name: e, op: exp, inputs: [p]}\n"
        "  - {name: sv, op: save, inputs: [e], path: out.npy}\n",
    )
    result = run("--machine", "4xK520", "run", spec, "--verify")
    assert (result.code, result.err) == (0, "p: [0. 1.]\n")
    saved = np.load(tmp_path / "out.npy")
    assert saved.dtype == np.float32
    np.testing.assert_allclose(saved, np.exp([0.0, 1.0]), rtol=1e-6)


def strict_json(text: str) -> object:
    """json.loads refusing NaN and Infinity (Python accepts them; jq and RFC 8259 do not)."""

    def refuse(name: str) -> object:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_json_writes_non_finite_values_as_strings(run: Run, tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        "graph:\n"
        "  - {name: z, op: constant, value: [0.0, 1.0, -1.0]}\n"
        "  - {name: l, op: log, inputs: [z]}\n"
        "  - {name: d, op: div, inputs: [z, z]}\n"
        "  - {name: i, op: neg, inputs: [l]}\n",
    )
    result = run("--machine", "4xK520", "run", spec, "--json", "--verify")
    assert result.code == 0, result.err
    doc = strict_json(result.out)
    assert isinstance(doc, dict)
    assert doc["results"]["d"]["value"] == ["nan", 1.0, 1.0]
    assert doc["results"]["i"]["value"] == ["inf", -0.0, "nan"]
    assert [v["max_rel_error"] for v in doc["verify"]] == [0.0, 0.0]


OVERFLOW = (
    "graph:\n"
    "  - {{name: a, op: constant, value: [{v}], dtype: {t}}}\n"
    "  - {{name: s, op: {op}, inputs: [a, a]}}\n"
)


@pytest.mark.parametrize(
    ("dtype", "value", "op", "limit"),
    [("float16", "60000.0", "add", "65504"), ("float32", "3.0e38", "mul", "3.4e38")],
)
def test_verify_names_the_overflow_behind_an_infinite_mismatch(
    run: Run, tmp_path: Path, dtype: str, value: str, op: str, limit: str
) -> None:
    spec = write(tmp_path, OVERFLOW.format(v=value, t=dtype, op=op))
    result = run("--machine", "4xK520", "run", spec, "--verify")
    assert result.code == 1
    assert result.out.splitlines()[-1] == (
        f"verify s: max relative error inf vs float64 CPU ({dtype}, tolerance "
        f"{'1e-02' if dtype == 'float16' else '1e-04'}): MISMATCH ({dtype} overflows above {limit})"
    )
    assert result.err == (
        f"error: --verify: s differs from the float64 CPU run by inf (relative; tolerance for "
        f"{dtype} is {'1e-02' if dtype == 'float16' else '1e-04'}); {dtype} overflows above {limit}\n"
    )
    doc = strict_json(run("--machine", "4xK520", "run", spec, "--verify", "--json").out)
    assert isinstance(doc, dict)
    assert doc["verify"] == [
        {"fetch": "s", "dtype": dtype, "max_rel_error": "inf", "ok": False,
         "tolerance": 1e-2 if dtype == "float16" else 1e-4,
         "hint": f"{dtype} overflows above {limit}", "against": "float64 CPU"}
    ]  # fmt: skip


NO_GPU = (
    "warning: no GPU visible (no NVIDIA driver: the NVML library (libnvidia-ml.so.1) was not "
    "found): every op runs on CPU:0; --machine 4xK520 simulates GPUs\n"
)


def test_no_gpu_run_warns_once_that_everything_runs_on_the_cpu(run: Run) -> None:
    result = run("run", str(GUIDE / "01_log_placement.yaml"), "--no-log-placement")
    assert (result.code, result.err) == (0, NO_GPU)
    assert result.out == "MatMul:\n" + RESULT  # no header line on a real machine
    doc = run("run", str(GUIDE / "01_log_placement.yaml"), "--json")
    assert doc.err == NO_GPU and json.loads(doc.out)["rates"] == []


def test_no_visible_gpu_says_which_rule_hides_them(run: Run) -> None:
    result = run(
        "run",
        str(GUIDE / "01_log_placement.yaml"),
        "--no-log-placement",
        env={"CUDA_VISIBLE_DEVICES": ""},
        nvml=FakeNvml(four_gpus()),
    )
    assert result.code == 0
    assert result.err == (
        "warning: no GPU visible (CUDA_VISIBLE_DEVICES='' shows none of the 4 GPUs of this "
        "machine): every op runs on CPU:0; unset CUDA_VISIBLE_DEVICES to see them\n"
    )
