"""`gpuplace mem` end to end: simulated machines, a fake "real" machine (fake NVML + fake cupy),
JSON in integer bytes, --compare, and machines without a driver."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run
from tests.fakes.fake_cupy import make_fake_cupy
from tests.fakes.fake_pynvml import FakeNvml, MiB, four_gpus
from tests.memory.helpers import RAN, LinkedNvml, matmul_graph, oom_10mib, pool_state, small_gpus

K520_ROWS = [
    "|   {i}  GRID K520                      Off |   00000000:0{bus}:00.0 Off |                  N/A |",
    "| N/A   N/A    P0            N/A  /  125W |       0MiB /   4096MiB |      0%      Default |",
    "|                                         |                        |                  N/A |",
    "+-----------------------------------------+------------------------+----------------------+",
]
PCI_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}  # mixed models: CUDA numbers them as NVML does
NO_PROCESSES = (
    "|  No running processes found                                                             |"
)


def test_simulated_4xk520(run: Run) -> None:
    result = run("--machine", "4xK520", "mem")
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert lines[0] == "Simulated machine 4xK520 (every device below is simulated)"
    assert lines[3] == (
        "| NVIDIA-SMI N/A                    Driver Version: N/A            CUDA Version: N/A      |"
    )
    rows = lines[9:25]
    expected = [r.format(i=i, bus=3 + i) for i in range(4) for r in K520_ROWS]
    assert rows == expected
    assert lines[25] == "" and lines[-2] == NO_PROCESSES


def machine_file(tmp_path: Path, **extra: Any) -> str:
    """A V100-32GB that another process uses 475 MiB of (32035 MiB free), and a T4."""
    import yaml

    doc = {
        "name": "lab",
        "driver_version": "570.195.03",
        "cuda_version": "12.8",
        "gpus": [
            {
                "name": "V100-32GB",
                "processes": [
                    {"pid": 4242, "name": "/usr/bin/python3 train.py", "memory": "475MiB"}
                ],
            },
            {"name": "T4"},
        ],
        **extra,
    }
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


OTHER = (
    "|    0   N/A  N/A            4242      C   /usr/bin/python3 train.py               475MiB |"
)


def test_machine_file_with_other_processes(run: Run, tmp_path: Path) -> None:
    result = run("--machine", machine_file(tmp_path), "mem")
    assert result.code == 0
    lines = result.out.splitlines()
    assert "Driver Version: 570.195.03     CUDA Version: 12.8" in lines[3]
    assert lines[10] == (
        "| N/A   N/A    P0            N/A  /  300W |     475MiB /  32510MiB |      0%      Default |"
    )
    assert lines[-2] == OTHER


def test_graph_under_default_policy_shows_this_process(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("--machine", machine_file(tmp_path), "mem", graph, env=PCI_ORDER)
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert lines[:4] == [
        "Simulated machine lab (every device below is simulated)",  # above everything it shows
        "DEVICE  CARD                           POLICY   RESERVED  PEAK IN USE  LIMIT",
        "GPU:0   Tesla V100-SXM2-32GB (CUDA 0)  default  30985MiB  12MiB        30985MiB",
        "GPU:1   Tesla T4 (CUDA 1)              default  14310MiB  0MiB         14310MiB",
    ]  # the default policy reserves every visible GPU, used or not (T4: 15360 - 1050 MiB)
    assert "|   31460MiB /  32510MiB |" in lines[14]
    assert (
        result.out.lower().count("simulated") == 2
    )  # the title, once  # 475 MiB of pid 4242 + 30985 MiB
    pid = os.getpid()
    assert lines[-4:-1] == [
        OTHER,
        f"|    0   N/A  N/A {pid:>15}      C   gpuplace                              30985MiB |",
        f"|    1   N/A  N/A {pid:>15}      C   gpuplace                              14310MiB |",
    ]


def test_json_has_integer_bytes(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("--machine", machine_file(tmp_path), "mem", graph, "--json", env=PCI_ORDER)
    assert result.code == 0
    doc = json.loads(result.out)
    machine = {k: doc["machine"][k] for k in ("source", "description", "simulated",
               "visible_gpus", "driver_version", "cuda_version", "no_gpu_reason")}  # fmt: skip
    assert machine == {
        "source": "simulated", "description": "lab", "simulated": True,
        "visible_gpus": ["/device:GPU:0", "/device:GPU:1"], "driver_version": "570.195.03",
        "cuda_version": "12.8", "no_gpu_reason": None,
    }  # fmt: skip
    [policy] = doc["policies"]
    assert policy["policy"] == "default"
    assert (doc["strategy"], doc["pruned"]) == ("tensorflow", [])
    assert [r["gpus"] for r in doc["rates"]] == ["GPU:0", "GPU:1"]  # one source per product
    v100, t4 = policy["devices"]
    assert v100 == {
        "device": "/device:GPU:0", "cuda_index": 0, "product": "Tesla V100-SXM2-32GB",
        "reserved": 30985 * MiB, "peak": 3 * 4 * MiB, "limit": 30985 * MiB,
    }  # fmt: skip
    assert (t4["reserved"], t4["peak"]) == (14310 * MiB, 0)
    card = doc["gpus"][0]
    assert (card["memory_total"], card["memory_used"]) == (32510 * MiB, (475 + 30985) * MiB)
    assert card["memory_free"] == card["memory_total"] - card["memory_used"]
    assert card["processes"] == [
        {"pid": 4242, "type": "C", "name": "/usr/bin/python3 train.py", "memory": 475 * MiB},
        {"pid": os.getpid(), "type": "C", "name": "gpuplace", "memory": 30985 * MiB},
    ]
    for record in [*policy["devices"], *doc["gpus"]]:
        for key, value in record.items():
            if key.startswith(("memory", "reserved", "peak", "limit")) and value is not None:
                assert type(value) is int, key


def test_json_without_graph_lists_mig_devices(run: Run, tmp_path: Path) -> None:
    mig = [{"profile": "3g.40gb", "memory": "40192MiB", "gi": 1, "memory_used": "107MiB"}]
    path = tmp_path / "mig.yaml"
    path.write_text(f"gpus:\n  - {{name: A100-80GB, mig: {json.dumps(mig)}}}\n", encoding="utf-8")
    doc = json.loads(run("--machine", str(path), "mem", "--json").out)
    [card] = doc["gpus"]
    assert card["mig_enabled"] is True
    assert [
        (m["gpu_instance_id"], m["memory_total"], m["memory_used"]) for m in card["mig_devices"]
    ] == [(1, 40192 * MiB, 107 * MiB)]
    text = run("--machine", str(path), "mem").out
    assert "|  0    1   0   0  |             107MiB / 40192MiB    | N/A   N/A |" in text


def test_compare_runs_the_policies_side_by_side(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run(
        "--machine",
        machine_file(tmp_path),
        "mem",
        graph,
        "--compare",
        "--memory-fraction",
        "0.5",
        env=PCI_ORDER,
    )
    assert result.code == 0
    title, *table = result.out.split("\n\n")[0].splitlines()
    assert title == "Simulated machine lab (every device below is simulated)"
    assert table == [
        "DEVICE  CARD                           POLICY        RESERVED  PEAK IN USE  LIMIT",
        "GPU:0   Tesla V100-SXM2-32GB (CUDA 0)  default       30985MiB  12MiB        30985MiB",
        "GPU:1   Tesla T4 (CUDA 1)              default       14310MiB  0MiB         14310MiB",
        # 4 MiB tensors: regions of 4 MiB (the first request doubles 2 MiB), 4, then 8 MiB
        "GPU:0   Tesla V100-SXM2-32GB (CUDA 0)  allow_growth  16MiB     12MiB        30985MiB",
        "GPU:1   Tesla T4 (CUDA 1)              allow_growth  0MiB      0MiB         14310MiB",
        "GPU:0   Tesla V100-SXM2-32GB (CUDA 0)  fraction 0.5  16255MiB  12MiB        16255MiB",
        "GPU:1   Tesla T4 (CUDA 1)              fraction 0.5  7680MiB   0MiB         7680MiB",
    ]
    doc = json.loads(
        run(
            "--machine", machine_file(tmp_path), "mem", graph, "--compare", "--json", env=PCI_ORDER
        ).out
    )
    assert [p["policy"] for p in doc["policies"]] == ["default", "allow_growth"]
    assert [d["reserved"] for d in doc["policies"][1]["devices"]] == [16 * MiB, 0]


def test_no_driver_is_one_line_and_exit_0(run: Run) -> None:
    result = run("mem")
    assert result.code == 0
    assert result.out.count("\n") == 1
    assert result.out.startswith("No GPU listed: no NVIDIA driver: the NVML library")
    doc = json.loads(run("mem", "--json").out)
    assert doc["gpus"] == [] and "no NVIDIA driver" in doc["machine"]["no_gpu_reason"]


def test_no_driver_with_require_gpus_exits_1(run: Run) -> None:
    result = run("mem", "--require-gpus", "1")
    assert result.code == 1
    assert result.out.startswith("No GPU listed:")
    assert result.err == "error: 1 GPU required, 0 visible\n"


def test_cuda_visible_devices_empty_says_why(run: Run) -> None:
    result = run("--machine", "2xK520", "mem", env={"CUDA_VISIBLE_DEVICES": ""})
    assert result.code == 0
    assert result.out == (
        "Simulated machine 2xK520 (every device below is simulated)\n"
        "CUDA_VISIBLE_DEVICES='' shows none of the 2 GPUs of this machine (unset it to see all).\n"
    )


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2", "nan", "abc"])
def test_bad_fraction_is_a_usage_error(run: Run, tmp_path: Path, value: str) -> None:
    result = run(
        "--machine", "1xK520", "mem", matmul_graph(tmp_path / "g.yaml"), "--memory-fraction", value
    )
    assert result.code == 2
    assert result.out == ""


def test_growth_with_virtual_gpus_is_rejected(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run(
        "--machine", "1xK520", "mem", graph, "--allow-growth", "--virtual-gpus", "GPU:0=1GiB"
    )
    assert result.code == 2
    assert result.err.startswith(
        "error: Memory growth cannot be configured on a PhysicalDevice with virtual devices configured"
    )


def test_env_growth_warning_and_override(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run(
        "--machine", "1xK520", "mem", graph, "--json", env={"TF_FORCE_GPU_ALLOW_GROWTH": "yes"}
    )
    assert result.err == (
        'warning: The TF_FORCE_GPU_ALLOW_GROWTH environment variable is set but could not be parsed: "yes". '
        'Valid values are "true" or "false". Using original config value of false.\n'
    )
    assert json.loads(result.out)["policies"][0]["policy"] == "default"
    forced = run(
        "--machine", "1xK520", "mem", graph, "--json", env={"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    )
    assert json.loads(forced.out)["policies"][0]["devices"][0]["reserved"] == 16 * MiB
    assert "Overriding allow_growth setting" in forced.err


def test_out_of_memory_message(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("--machine", "1xK520", "mem", graph, "--memory-limit", "10MiB")
    assert (result.code, result.out) == (1, "")
    assert result.err == oom_10mib(RAN)


def test_out_of_memory_suggests_another_gpu_that_could_hold_it(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("--machine", "1xK520", "mem", graph, "--virtual-gpus", "GPU:0=10MiB,1GiB")
    assert result.code == 1
    assert "for op 'c' on /job:localhost/replica:0/task:0/device:GPU:0" in result.err
    assert "Fix: /device:GPU:1 could hold it (limit 1.0 GiB): place ops there; spread" in result.err


# --- the fake "real" machine: fake NVML whose GPUs see what the fake cupy's pools hold ---


def real_machine(total: int = 1024 * MiB, cc: tuple[int, int] = (7, 5)) -> tuple[Any, LinkedNvml]:
    cupy = make_fake_cupy(2, total)
    return cupy, LinkedNvml(small_gpus(2, total, cc), cupy)


def test_real_machine_without_graph(run: Run) -> None:
    nvml = FakeNvml(four_gpus(), driver="570.195.03", cuda=12080)
    nvml.gpus[0].processes = [(4242, 1000 * MiB)]
    result = run("mem", nvml=nvml, env=PCI_ORDER)
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert lines[2] == (
        "| NVIDIA-SMI 570.195.03             Driver Version: 570.195.03     CUDA Version: 12.8     |"
    )
    assert lines[8] == (
        "|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |                    0 |"
    )
    assert lines[9] == (
        "| N/A   34C    P0             61W /  400W |       4MiB /  81920MiB |      3%      Default |"
    )
    assert "|    0   N/A  N/A            4242      C   " in lines[-2]


def test_real_machine_graph_holds_its_reservation_in_the_pools(run: Run, tmp_path: Path) -> None:
    cupy, nvml = real_machine()
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("mem", graph, "--json", nvml=nvml, cupy_loader=lambda: cupy)
    assert (result.code, result.err) == (0, "")
    doc = json.loads(result.out)
    limit = (1020 - 225) * MiB  # 1 GiB cards, 4 MiB used: under 2 GiB free, 225 MiB margin
    devices = doc["policies"][0]["devices"]
    assert [(d["reserved"], d["limit"]) for d in devices] == [(limit, limit)] * 2
    assert devices[0]["peak"] == 12 * MiB
    for card in doc["gpus"]:  # NVML probed again while the pools held the reservation
        assert card["memory_used"] == 4 * MiB + limit
        assert card["processes"][-1]["pid"] == os.getpid()
        assert card["processes"][-1]["memory"] == limit
    assert pool_state(cupy) == [(0, 0), (0, 0)]  # released afterwards, limits lifted


def test_real_machine_allow_growth_holds_only_what_it_used(run: Run, tmp_path: Path) -> None:
    cupy, nvml = real_machine()
    graph = matmul_graph(tmp_path / "g.yaml")
    doc = json.loads(
        run("mem", graph, "--allow-growth", "--json", nvml=nvml, cupy_loader=lambda: cupy).out
    )
    gpu0, gpu1 = doc["policies"][0]["devices"]
    assert gpu0["reserved"] == 12 * MiB  # cupy's pool: the three 4 MiB arrays it allocated
    assert gpu1["reserved"] == 0
    assert [p["pid"] for p in doc["gpus"][1]["processes"]] == []
    assert pool_state(cupy) == [(0, 0), (0, 0)]


def test_real_machine_out_of_memory_leaves_nothing_allocated(run: Run, tmp_path: Path) -> None:
    cupy, nvml = real_machine()
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("mem", graph, "--memory-limit", "10MiB", nvml=nvml, cupy_loader=lambda: cupy)
    assert result.code == 1
    assert "error: OOM when allocating 4.0 MiB (4194304 B) for op 'c'" in result.err
    assert pool_state(cupy) == [(0, 0), (0, 0)]


def test_real_machine_cupy_running_out_mid_run(run: Run, tmp_path: Path) -> None:
    cupy = make_fake_cupy(2, 10 * MiB)  # the card holds less than NVML's free memory says
    nvml = LinkedNvml(small_gpus(2), cupy)
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("mem", graph, "--allow-growth", nvml=nvml, cupy_loader=lambda: cupy)
    assert (result.code, result.out) == (1, "")
    assert result.err.startswith(
        "error: OOM when allocating 4.0 MiB (4194304 B) for op 'c' on "
        "/job:localhost/replica:0/task:0/device:GPU:0: 8.0 MiB (8388608 B) in use, "
        "limit 795.0 MiB (833617920 B) (cupy: Out of memory allocating 4,194,304 bytes"
    )
    assert pool_state(cupy) == [(0, 0), (0, 0)]


def test_real_machine_reservation_the_card_cannot_give(run: Run, tmp_path: Path) -> None:
    cupy = make_fake_cupy(2, [1024 * MiB, 700 * MiB])  # GPU 1: the CUDA context took the rest
    nvml = LinkedNvml(small_gpus(2), cupy)
    result = run("mem", matmul_graph(tmp_path / "g.yaml"), nvml=nvml, cupy_loader=lambda: cupy)
    assert (result.code, result.out) == (1, "")
    assert result.err.startswith(
        "error: cannot reserve 795.0 MiB for /device:GPU:1 on Tesla T4 (CUDA GPU 1): cupy: Out of memory"
    )
    assert "Nothing is left allocated." in result.err
    assert pool_state(cupy) == [(0, 0), (0, 0)]


def test_fake_real_gpus_are_not_simulated(run: Run) -> None:
    cupy, nvml = real_machine()
    doc = json.loads(run("mem", "--json", nvml=nvml, cupy_loader=lambda: cupy).out)
    assert [g["simulated"] for g in doc["gpus"]] == [False, False]
    assert doc["machine"]["source"] == "nvml"


def test_real_machine_compare_gives_each_policy_fresh_pools(run: Run, tmp_path: Path) -> None:
    cupy, nvml = real_machine()
    graph = matmul_graph(tmp_path / "g.yaml")
    args = ("mem", graph, "--compare", "--memory-fraction", "0.25", "--json")
    doc = json.loads(run(*args, nvml=nvml, cupy_loader=lambda: cupy).out)
    reserved = {p["policy"]: [d["reserved"] for d in p["devices"]] for p in doc["policies"]}
    limit = (1020 - 225) * MiB
    assert reserved == {
        "default": [limit, limit],
        "allow_growth": [12 * MiB, 0],
        "fraction 0.25": [256 * MiB, 256 * MiB],
    }
    # the view shown is NVML's while the last policy held its memory
    assert [g["memory_used"] for g in doc["gpus"]] == [4 * MiB + 256 * MiB] * 2
    assert pool_state(cupy) == [(0, 0), (0, 0)]


def test_mig_mode_column_says_disabled_on_capable_cards(run: Run) -> None:
    result = run("--machine", "1xH200,1xT4", "mem", env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    third_rows = [line for line in result.out.splitlines() if line.startswith("|" + " " * 41 + "|")]
    mig_cells = [line.rsplit("|", 2)[1].strip() for line in third_rows]
    assert mig_cells == ["MIG M.", "Disabled", "N/A"]  # the header, then one cell per GPU
    doc = json.loads(run("--machine", "1xH200,1xT4", "mem", "--json").out)
    assert [g["mig_mode"] for g in doc["gpus"]] == ["Disabled", None]


NO_GPU = (
    "warning: no GPU visible (no NVIDIA driver: the NVML library (libnvidia-ml.so.1) was not "
    "found): every op runs on CPU:0; --machine 4xK520 simulates GPUs\n"
)


def test_no_driver_with_a_graph_warns_and_shows_no_empty_table(run: Run, tmp_path: Path) -> None:
    spec = matmul_graph(tmp_path / "g.yaml", n=4)
    result = run("mem", spec)
    assert (result.code, result.err) == (0, NO_GPU)
    assert result.out.count("\n") == 1  # nvidia-smi's view only: no policy table header
    assert result.out.startswith("No GPU listed: no NVIDIA driver: the NVML library")
    compared = run("mem", spec, "--compare")
    assert (compared.err, compared.out) == (NO_GPU, result.out)  # one warning for both policies
    doc = json.loads(run("mem", spec, "--json").out)
    assert [p["devices"] for p in doc["policies"]] == [[]] and doc["pruned"] == []
