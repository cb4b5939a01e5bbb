"""Flags that used to be dropped, changed or misreported: every combination is applied, or
refused with one message naming both options and the fix (exit 2); simulated machines say so
in every output of run, plan and mem."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Run
from tests.conftest import on_k520 as k520
from tests.conftest import write_spec as write
from tests.memory.helpers import matmul_graph, oom_10mib

GUIDE = Path(__file__).resolve().parent.parent / "examples" / "guide"
OK = (
    "graph:\n"
    "  - {name: a, op: constant, value: [[1.0, 2.0]]}\n"
    "  - {name: b, op: constant, value: [[3.0], [4.0]]}\n"
    "  - {name: m, op: matmul, inputs: [a, b]}\n"
)
PH = "graph:\n  - {name: x, op: placeholder, shape: [1, 3]}\n  - {name: y, op: softmax, inputs: [x]}\n"
EXPLAIN = (
    "OP  TYPE      DEVICE  REASON                                                                "
    "          SHAPE  DTYPE    BYTES  COPIES IN\n"
    "a   constant  GPU:0   generator follows its consumer m on GPU:0                             "
    "          [1,2]  float32  8 B    -\n"
    "b   constant  GPU:0   generator follows its consumer m on GPU:0                             "
    "          [2,1]  float32  8 B    -\n"
    "m   matmul    GPU:0   no device requested: GPU:0 is the highest-priority device with a MatMul "
    "kernel  [1,1]  float32  4 B    -\n"
)
SIM_K520 = "Simulated machine 4xK520 (every device below is simulated)"


# --- 1. simulated machines say so in every output ---


@pytest.mark.parametrize(
    ("flags", "strategy"),
    [((), "tensorflow"), (("--no-log-placement", "--strategy", "balanced"), "balanced")],
)
def test_run_without_the_log_says_the_machine_is_simulated(
    run: Run, tmp_path: Path, flags: tuple[str, ...], strategy: str
) -> None:
    code, out, err = k520(run, "run", write(tmp_path, OK), *flags)
    assert (code, err) == (0, "")
    assert out == f"Run on the simulated machine 4xK520 (strategy {strategy})\nm:\n[[11.]]\n"


def test_run_explain_and_verify_say_the_machine_is_simulated(run: Run, tmp_path: Path) -> None:
    code, out, _ = k520(run, "run", write(tmp_path, OK), "--explain", "--verify")
    assert code == 0
    assert out == (
        "Run on the simulated machine 4xK520 (strategy tensorflow)\n" + EXPLAIN + "m:\n[[11.]]\n"
        "verify m: max relative error 0.0e+00 vs float64 CPU (float32, tolerance 1e-04): ok\n"
    )


def test_run_with_the_log_keeps_tensorflows_text(run: Run) -> None:
    # the device mapping marks every simulated GPU: the guide's output, line for line
    result = run("--machine", "1xK40c", "run", str(GUIDE / "01_log_placement.yaml"))
    assert result.code == 0
    assert result.out.startswith("Device mapping:\n") and "[simulated]" in result.out


def test_mem_with_a_graph_says_simulated_first_and_in_json(run: Run, tmp_path: Path) -> None:
    graph = write(tmp_path, OK)
    code, out, _ = k520(run, "mem", graph)
    lines = out.splitlines()
    assert code == 0
    assert lines[:2] == [
        SIM_K520,
        "DEVICE  CARD                POLICY   RESERVED  PEAK IN USE  LIMIT",
    ]
    assert lines.count(SIM_K520) == 1
    doc = json.loads(k520(run, "mem", graph, "--json")[1])
    assert doc["machine"]["simulated"] is True and doc["machine"]["description"] == "4xK520"
    assert json.loads(k520(run, "mem", "--json")[1])["machine"]["simulated"] is True


# --- 2. options that conflict, or need a graph ---


@pytest.mark.parametrize(
    ("flags", "value"),
    [
        (("--memory-fraction", "0.5", "--memory-limit", "64MiB"), "0.5"),
        (("--memory-limit", "64MiB", "--memory-fraction", "0.25"), "0.25"),
    ],
)
def test_fraction_with_limit_is_refused(
    run: Run, tmp_path: Path, flags: tuple[str, ...], value: str
) -> None:
    for command in ("plan", "run"):
        assert k520(run, command, write(tmp_path, OK), *flags) == (
            2,
            "",
            f"error: --memory-fraction {value} conflicts with --memory-limit 64MiB: a per-GPU "
            "memory limit overrides the fraction (in TensorFlow a logical device's memory_limit "
            "wins over per_process_gpu_memory_fraction); give one of them\n",
        )


def test_virtual_gpus_naming_a_gpu_twice_is_refused(run: Run, tmp_path: Path) -> None:
    assert k520(
        run, "plan", write(tmp_path, OK), "--virtual-gpus", "GPU:0=1GiB;GPU:0=2GiB,2GiB"
    ) == (
        2,
        "",
        "error: --virtual-gpus: GPU:0 is given twice ('GPU:0=1GiB' and 'GPU:0=2GiB,2GiB'); give "
        "each GPU once, with all its logical GPUs' sizes after one '=' (e.g. "
        "GPU:0=1GiB,2GiB,2GiB)\n",
    )


@pytest.mark.parametrize("flag", ["--allow-growth", "--no-allow-growth"])
def test_compare_with_a_growth_flag_is_refused(run: Run, flag: str) -> None:
    tower = str(GUIDE / "04_multi_tower.yaml")
    assert k520(run, "mem", tower, "--compare", flag, "--memory-fraction", "0.3") == (
        2,
        "",
        f"error: {flag} conflicts with --compare: --compare runs the default policy and "
        f"allow_growth side by side (and the given --memory-fraction); drop {flag}\n",
    )


def test_compare_with_virtual_gpus_is_refused(run: Run) -> None:
    tower = str(GUIDE / "04_multi_tower.yaml")
    assert k520(run, "mem", tower, "--compare", "--virtual-gpus", "GPU:0=1GiB,1GiB") == (
        2,
        "",
        "error: --compare conflicts with --virtual-gpus: --compare runs allow_growth, which "
        "TensorFlow does not allow on a GPU with virtual devices; drop one of them\n",
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--strategy", "balanced"), "--strategy needs a GRAPH"),
        (("--replicate", "2"), "--replicate needs a GRAPH"),
        (
            ("--allow-growth", "--strategy", "balanced", "--feed", "x=1"),
            "--strategy and --feed need a GRAPH",
        ),
    ],
)
def test_mem_flags_that_need_a_graph(run: Run, flags: tuple[str, ...], message: str) -> None:
    first = message.split(" ")[0].rstrip(",")
    them = "it" if " and " not in message else "them"
    assert k520(run, "mem", *flags) == (
        2,
        "",
        f"error: {message}: without one, mem shows nvidia-smi's view and what a memory policy "
        f"reserves, and runs nothing; name a graph (gpuplace mem GRAPH.yaml {first} ...) or "
        f"drop {them}\n",
    )


RESERVED = """\
Simulated machine 2xK520 (every device below is simulated)
DEVICE  CARD                POLICY        RESERVED AT START  LIMIT    LEFT ON CARD
GPU:0   GRID K520 (CUDA 0)  default       3596MiB            3596MiB  500MiB
GPU:1   GRID K520 (CUDA 1)  default       3596MiB            3596MiB  500MiB
GPU:0   GRID K520 (CUDA 0)  allow_growth  0MiB               3596MiB  4096MiB
GPU:1   GRID K520 (CUDA 1)  allow_growth  0MiB               3596MiB  4096MiB
GPU:0   GRID K520 (CUDA 0)  fraction 0.4  1638MiB            1638MiB  2457MiB
GPU:1   GRID K520 (CUDA 1)  fraction 0.4  1638MiB            1638MiB  2457MiB

"""


def test_mem_without_a_graph_shows_what_each_policy_reserves(run: Run) -> None:
    result = run("--machine", "2xK520", "mem", "--compare", "--memory-fraction", "0.4")
    assert result.code == 0, result.err
    assert result.out.startswith(RESERVED)
    assert "NVIDIA-SMI" in result.out.removeprefix(RESERVED)  # nvidia-smi's view follows


def test_mem_without_a_graph_one_policy_as_json(run: Run) -> None:
    result = run("--machine", "2xK520", "mem", "--virtual-gpus", "GPU:1=1GiB,512MiB", "--json")
    assert result.code == 0, result.err
    (held,) = json.loads(result.out)["reservations"]
    assert held["policy"] == "virtual GPUs"
    gib, mib = 1024**3, 1024**2
    free = 4096 * mib
    assert [(d["device"], d["cuda_index"], d["reserved"], d["limit"], d["left_on_card"])
            for d in held["devices"]] == [
        ("/device:GPU:0", 0, 3596 * mib, 3596 * mib, 500 * mib),
        ("/device:GPU:1", 1, gib, gib, free - gib - 512 * mib),
        ("/device:GPU:2", 1, 512 * mib, 512 * mib, free - gib - 512 * mib),
    ]  # fmt: skip


def test_mem_without_a_graph_compare_with_virtual_gpus_is_refused(run: Run) -> None:
    result = run("--machine", "2xK520", "mem", "--compare", "--virtual-gpus", "GPU:0=1GiB")
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "error: --compare conflicts with --virtual-gpus: --compare shows allow_growth, which "
        "TensorFlow does not allow on a GPU with virtual devices; drop one of them\n"
    )


def test_plain_mem_without_a_graph_is_nvidia_smi_only(run: Run) -> None:
    result = run("--machine", "2xK520", "mem")
    assert result.code == 0 and "RESERVED AT START" not in result.out
    assert "reservations" not in json.loads(run("--machine", "2xK520", "mem", "--json").out)


@pytest.mark.parametrize("fmt", ["dot", "text"])
def test_plan_json_with_another_format_is_refused(run: Run, tmp_path: Path, fmt: str) -> None:
    code, out, err = k520(run, "plan", write(tmp_path, OK), "--json", "--format", fmt)
    message = (
        f"--json conflicts with --format {fmt}: --json is short for --format json; give one of them"
    )
    assert (code, err) == (2, f"error: {message}\n")
    assert json.loads(out)["error"]["message"] == message  # --json was asked: a document too
    same = k520(run, "plan", write(tmp_path, OK), "--json", "--format", "json")
    assert same[0] == 0 and json.loads(same[1])["machine"]["simulated"] is True


def test_a_placeholder_fed_twice_is_refused(run: Run, tmp_path: Path) -> None:
    npy = tmp_path / "x.npy"
    np.save(npy, np.ones((1, 3), dtype=np.float32))
    args = ("run", write(tmp_path, PH), "--feed", f"x={npy}", "--feed", "x=[[2,2,2]]")
    assert k520(run, *args) == (
        2,
        "",
        f"error: --feed x is given twice (x={npy} and x=[[2,2,2]]); feed each placeholder once\n",
    )


def test_run_json_carries_the_explanation_and_the_device_mapping(run: Run, tmp_path: Path) -> None:
    graph = write(tmp_path, OK)
    plain = json.loads(k520(run, "run", graph, "--json")[1])
    for flag in ("--explain", "--log-placement"):
        code, out, err = k520(run, "run", graph, "--json", flag)
        assert (code, err) == (0, "")
        doc = json.loads(out)  # one document, nothing printed beside it
        assert doc["placement"] == plain["placement"]
    [m] = [p for p in plain["placement"] if p["op"] == "m"]
    assert m["reason"] == (
        "no device requested: GPU:0 is the highest-priority device with a MatMul kernel"
    )
    assert plain["device_mapping"][0] == {
        "device": "/job:localhost/replica:0/task:0/device:GPU:0", "cuda_index": 0,
        "product": "GRID K520", "pci_bus_id": "00000000:03:00.0", "compute_capability": "3.0",
        "simulated": True,
    }  # fmt: skip
    assert len(plain["device_mapping"]) == 4


# --- 3. logical GPUs larger than their card ---


def test_virtual_gpus_larger_than_the_card_are_refused_by_plan_and_run(
    run: Run, tmp_path: Path
) -> None:
    message = (
        "error: --virtual-gpus asks 10.0 GiB in all for the 2 logical GPUs of GPU:0 (GRID K520), "
        "which has 4.0 GiB free; give sizes that add up to at most 4.0 GiB (e.g. --virtual-gpus "
        "GPU:0=2GiB,2GiB)\n"
    )
    for command in ("plan", "run"):
        got = k520(run, command, write(tmp_path, OK), "--virtual-gpus", "GPU:0=5GiB,5GiB")
        assert got == (2, "", message)


def test_virtual_devices_of_the_config_larger_than_the_card(run: Run, tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        "config: {gpu_options: {experimental: {virtual_devices: [{memory_limit_mb: [3000, 3000]}]}}}\n"
        + OK,
    )
    assert run("--machine", "1xK520", "plan", spec).err == (
        "error: config.gpu_options.experimental.virtual_devices asks 5.9 GiB in all for the 2 "
        "logical GPUs of GPU:0 (GRID K520), which has 4.0 GiB free; give sizes that add up to at "
        "most 4.0 GiB (e.g. memory_limit_mb: [2048, 2048])\n"
    )


def test_plan_refuses_a_limit_the_card_cannot_reserve_as_run_does(run: Run, tmp_path: Path) -> None:
    graph = write(tmp_path, OK)
    planned = run("--machine", "1xK520", "plan", graph, "--memory-limit", "5GiB")
    ran = run("--machine", "1xK520", "run", graph, "--memory-limit", "5GiB")
    assert planned.code == ran.code == 1
    assert (
        planned.err
        == ran.err
        == (
            "error: cannot reserve 5.0 GiB for /device:GPU:0 on GRID K520 (CUDA GPU 0): only 4.0 GiB "
            "is free (other processes use 0 B). Fix: a smaller --memory-fraction / --memory-limit, or "
            "--allow-growth\n"
        )
    )


# --- 4. --save writes exactly the path given ---


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("out.txt", "the file is an .npz archive (one array per fetch); give a file name "
                    "ending in .npz (e.g. --save values.npz)"),
        ("adir", "is a directory; give a file name ending in .npz (e.g. --save {p}/values.npz)"),
        ("none/v.npz", "the directory {d} does not exist; create it first, or save somewhere "
                       "that exists"),
    ],
)  # fmt: skip
def test_save_refuses_a_path_that_is_not_an_npz_file(
    run: Run, tmp_path: Path, name: str, message: str
) -> None:
    (tmp_path / "adir").mkdir()
    path = tmp_path / name
    text = message.format(p=path, d=path.parent)
    assert k520(run, "run", write(tmp_path, OK), "--save", str(path)) == (
        2,
        "",
        f"error: --save {path}: {text}\n",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "g.yaml"]  # nothing ran


def test_an_empty_save_path_is_refused_not_dropped(run: Run, tmp_path: Path) -> None:
    assert k520(run, "run", write(tmp_path, OK), "--save", "") == (
        2,
        "",
        "error: --save '': no file name; give a file name ending in .npz (e.g. --save values.npz)\n",
    )


def test_save_writes_the_npz_named(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "values.npz"
    assert k520(run, "run", write(tmp_path, OK), "--save", str(path))[0] == 0
    np.testing.assert_array_equal(np.load(path)["m"], [[11.0]])


# --- 5. plan's out-of-memory names the command that runs anyway ---


def test_plan_oom_points_at_run_force(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("--machine", "1xK520", "plan", graph, "--memory-limit", "10MiB")
    assert result.code == 1
    assert result.err == oom_10mib(
        "Predicted before running (plan): nothing was run or allocated; "
        f"`gpuplace run {graph} --force` (with the same options) runs it anyway."
    )


# --- 6. --replicate's messages name the flag ---


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "--replicate 'abc': expected a number of GPUs (2 or more) or 'all' (e.g. "
                "--replicate 2)"),
        ("1", "--replicate 1: data parallelism needs at least 2 GPUs (as Keras' multi_gpu_model: "
              "gpus >= 2); give --replicate 2 or more, or --replicate all"),
    ],
)  # fmt: skip
def test_replicate_messages_name_the_flag(
    run: Run, tmp_path: Path, value: str, message: str
) -> None:
    args = ("run", write(tmp_path, PH), "--replicate", value, "--feed", "x=[[1,2,3]]")
    assert k520(run, *args) == (2, "", f"error: {message}\n")


# --- 7. small ones ---


def test_feed_for_a_graph_without_placeholders(run: Run, tmp_path: Path) -> None:
    spec = write(tmp_path, OK)
    assert k520(run, "run", spec, "--feed", "x=1") == (
        2,
        "",
        f"error: --feed x: no op named 'x' in {spec}, and the graph has no placeholders: there is "
        "nothing to feed; drop --feed\n",
    )


def test_plan_json_says_whether_each_device_fits(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    fits = json.loads(run("--machine", "1xK520", "plan", graph, "--json").out)["devices"]
    assert [(d["device"][-5:], d["fits"]) for d in fits] == [("GPU:0", True), ("CPU:0", None)]
    over = run("--machine", "1xK520", "plan", graph, "--memory-limit", "10MiB", "--json")
    assert over.code == 1
    assert [d["fits"] for d in json.loads(over.out)["devices"]] == [False, None]


def test_compare_under_forced_growth_runs_each_policy_once(run: Run) -> None:
    tower = str(GUIDE / "04_multi_tower.yaml")
    env = {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    result = run(
        "--machine", "4xK520", "mem", tower, "--compare", "--memory-fraction", "0.3", env=env
    )
    assert result.code == 0
    assert result.err == (
        "warning: Overriding allow_growth setting because the TF_FORCE_GPU_ALLOW_GROWTH "
        "environment variable is set. Original config value was false.\n"
        "warning: --compare: the allow_growth run would repeat the default run (both are "
        "allow_growth here); shown once\n"
    )
    table = result.out.split("\n\n")[0].splitlines()
    assert table[0] == SIM_K520
    assert [re.split(r"\s{2,}", row)[2] for row in table[2:]] == (
        ["allow_growth"] * 4 + ["fraction 0.3 + allow_growth"] * 4
    )


SOFT_IN_CONFIG = (
    "config: {allow_soft_placement: true}\n"
    "graph:\n"
    "  - {name: a, op: constant, value: [1.0, 2.0, 3.0, 4.0], shape: [2, 2], device: /gpu:7}\n"
    "  - {name: p, op: print, inputs: [a], device: /gpu:0}\n"
    "  - {name: m, op: matmul, inputs: [p, a], device: /gpu:9}\n"
)


def test_plan_honours_soft_placement_from_the_config_as_run_does(run: Run, tmp_path: Path) -> None:
    spec = write(tmp_path, SOFT_IN_CONFIG)
    ran = k520(run, "run", spec)
    assert ran[0] == 0
    code, out, err = k520(run, "plan", spec)
    assert (code, err) == (0, "")
    assert out.splitlines()[-1].startswith("Estimated makespan ")
    code, out, err = k520(run, "plan", spec, "--no-allow-soft-placement")  # the flag still wins
    assert code == 1 and err.startswith("error: Cannot assign a device for operation")


def test_mem_watch_in_a_pipe_appends_each_refresh(run: Run) -> None:
    result = run(
        "--machine", "1xK520", "mem", "--watch", "0.1", "--count", "3", "--memory-limit", "1GiB"
    )
    assert result.code == 0, result.err
    screens = result.out.split("Simulated machine 1xK520 (every device below is simulated)\n")
    assert screens[0] == "" and len(screens) == 4
    for screen in screens[1:]:
        assert screen.startswith("DEVICE  CARD                POLICY          RESERVED AT START")
        assert "NVIDIA-SMI" in screen and screen.endswith("+\n\n")


def test_mem_watch_as_json_is_one_line_per_refresh(run: Run) -> None:
    result = run(
        "--machine", "2xK520", "mem", "--watch", "0.1", "--count", "2", "--json", "--compare"
    )
    assert result.code == 0, result.err
    docs = [json.loads(line) for line in result.out.splitlines()]
    assert len(docs) == 2
    assert [r["policy"] for r in docs[1]["reservations"]] == ["default", "allow_growth"]
    assert [g["product"] for g in docs[0]["gpus"]] == ["GRID K520", "GRID K520"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--watch", "1", "g.yaml"), "error: --watch refreshes nvidia-smi's view and the policies' "
         "reservations and runs nothing; drop the GRAPH to watch, or drop --watch to run it\n"),
        (("--count", "3"), "error: --count needs --watch: it stops a watch after N refreshes; add "
         "--watch\n"),
    ],
)  # fmt: skip
def test_mem_watch_refusals(run: Run, flags: tuple[str, ...], message: str) -> None:
    assert k520(run, "mem", *flags) == (2, "", message)


@pytest.mark.slow
def test_mem_watch_ends_with_exit_0_on_ctrl_c() -> None:
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuplace", "--machine", "1xK520", "mem", "--watch", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while "NVIDIA-SMI" not in proc.stdout.readline():  # the first refresh is out: watching
        assert time.monotonic() < deadline
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (0, "")


@pytest.mark.parametrize("command", ["mem", "devices"])
def test_watch_refuses_what_is_not_a_number_of_seconds(run: Run, command: str) -> None:
    result = run("--machine", "1xK520", command, "--watch", "nan", "--count", "1")
    assert (result.code, result.out) == (2, "")
    assert result.err.splitlines()[-1] == (
        "error: Invalid value for '--watch': nan is not a number of seconds; give e.g. 2"
    )
