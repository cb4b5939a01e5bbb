"""`gpuplace devices` through the real entry point: golden text, JSON schema, smoke checks."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pynvml
import pytest

from gpuplace.cli import AppContext, main
from tests.conftest import SMALL_CHECK, Result, Run
from tests.fakes.fake_pynvml import FakeGpu, FakeMig, FakeNvml, MiB, four_gpus

SCHEMA = json.loads(resources.files("gpuplace").joinpath("schemas/devices.schema.json").read_text())

GOLDEN_K20M = """\
Simulated machine 4xK20m (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE     CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -        -    -     -     -
/device:GPU:0  0     2     Tesla K20m [simulated]              GPU-1f49aa16-71c0-5d47-9b63-358c172fbaab  00000000:83:00.0  5120MiB       0MiB  5120MiB  3.5  0%    N/A   N/A / 225W
/device:GPU:1  1     0     Tesla K20m [simulated]              GPU-90f1b18f-f9ff-5a2c-b7b9-979cfb693417  00000000:02:00.0  5120MiB       0MiB  5120MiB  3.5  0%    N/A   N/A / 225W
CUDA_VISIBLE_DEVICES='2,0' shows 2 of the 4 GPUs of this machine (unset it to see all).
"""


def test_golden_simulated_with_cuda_visible_devices(run: Run) -> None:
    result = run("--machine", "4xK20m", "devices", env={"CUDA_VISIBLE_DEVICES": "2,0"})
    assert (result.code, result.err) == (0, "")
    assert result.out == GOLDEN_K20M


def test_no_driver_prints_cpu_and_why_and_exits_0(run: Run) -> None:
    result = run("devices")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "This machine"
    assert lines[2].startswith("/device:CPU:0")
    assert len(lines) == 4
    assert lines[3].startswith("No GPU listed: no NVIDIA driver: the NVML library")


def test_fake_real_machine_path(run: Run) -> None:
    fake = FakeNvml(four_gpus())
    fake.gpus[3].lost = True
    result = run(
        "devices", env={"CUDA_VISIBLE_DEVICES": "3,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, nvml=fake
    )
    assert result.code == 0
    rows = result.out.splitlines()
    assert rows[0] == "This machine (NVML, driver 550.54.15, CUDA 12.4)"
    assert "unavailable: GPU is lost" in rows[3] and "[simulated]" not in result.out
    assert rows[4].split()[:4] == ["/device:GPU:1", "1", "1", "NVIDIA"]
    assert "61W / 400W" in rows[4]


def test_order_warning_goes_to_stderr(run: Run) -> None:
    result = run("devices", env={"CUDA_VISIBLE_DEVICES": "0,2"}, nvml=FakeNvml(four_gpus()))
    assert result.err.startswith("warning: the GPUs differ in model and CUDA_DEVICE_ORDER is unset")
    assert "warning" not in result.out


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--machine", "2xA100-80GB,1xT4", "devices", "--json"], {}),
        (
            ["--machine", "4xK520", "devices", "--json", "--check"],
            {"CUDA_VISIBLE_DEVICES": "1", **SMALL_CHECK},
        ),
        (["devices", "--json"], {}),
    ],
)
def test_json_matches_schema(run: Run, args: list[str], env: dict[str, str]) -> None:
    result = run(*args, env=env)
    assert result.code == 0
    doc = json.loads(result.out)
    jsonschema.validate(doc, SCHEMA)
    gpus = [d for d in doc["devices"] if d["device_type"] == "GPU"]
    assert doc["machine"]["visible_gpu_count"] == len(gpus)
    assert all(isinstance(d["memory_total"], int) for d in doc["devices"] if d["memory_total"])


def test_json_of_fake_real_machine(run: Run) -> None:
    doc = json.loads(
        run("devices", "--json", env={"CUDA_VISIBLE_DEVICES": "2"}, nvml=FakeNvml(four_gpus())).out
    )
    jsonschema.validate(doc, SCHEMA)
    gpu = doc["devices"][1]
    assert (gpu["name"], gpu["cuda_index"], gpu["nvml_index"], gpu["simulated"]) == (
        "/device:GPU:0",
        0,
        2,
        False,
    )
    assert gpu["compute_capability"] == "7.5"
    assert doc["machine"]["source"] == "nvml"


def test_require_gpus(run: Run) -> None:
    ok = run("--machine", "4xK520", "devices", "--require-gpus", "4")
    short = run(
        "--machine", "4xK520", "devices", "--require-gpus", "2", env={"CUDA_VISIBLE_DEVICES": "0"}
    )
    none = run("devices", "--require-gpus", "1")
    assert ok.code == 0
    assert short.code == 1 and short.err == "error: 2 GPUs required, 1 visible\n"
    assert none.code == 1 and none.err == "error: 1 GPU required, 0 visible\n"


def test_min_memory_names_each_small_gpu(run: Run) -> None:
    pci = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    result = run("--machine", "1xA100-80GB,2xT4", "devices", "--min-memory", "16GiB", env=pci)
    assert result.code == 1
    assert result.err == (
        "error: /device:GPU:1 (Tesla T4, nvml 1) has 15.0 GiB total, less than --min-memory 16GiB; "
        "/device:GPU:2 (Tesla T4, nvml 2) has 15.0 GiB total, less than --min-memory 16GiB\n"
    )
    assert (
        run("--machine", "1xA100-80GB,2xT4", "devices", "--min-memory", "15GB", env=pci).code == 0
    )


@pytest.mark.parametrize("size", ["16", "16 GiBs", "-1GB", "lots"])
def test_bad_size_is_usage_error(run: Run, size: str) -> None:
    result = run("--machine", "1xT4", "devices", "--min-memory", size)
    assert result.code == 2
    assert result.err.startswith(f"error: --min-memory: cannot read {size!r} as a size; accepted:")
    assert "KiB, MiB, GiB, TiB" in result.err


@pytest.mark.slow  # the default sizes for a simulated machine: a second or two on a CPU
def test_check_passes_on_simulated_devices(run: Run) -> None:
    result = run("--machine", "2xK520", "devices", "--check")
    assert result.code == 0
    lines = result.out.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("Check: 256x256 float32"))
    assert lines[title].endswith("rates: 1024x1024 float32 matmul, a + b on 16 MiB arrays")
    checks = lines[title + 2 : -1]
    assert [line.split()[0] for line in checks] == [
        "/device:CPU:0",
        "/device:GPU:0",
        "/device:GPU:1",
    ]
    assert all(" pass " in line and " ms " in line for line in checks)
    assert all(float(line.split()[-2]) > 0 and float(line.split()[-1]) > 0 for line in checks)


def test_check_sizes_come_from_the_environment_and_the_title_says_them(run: Run) -> None:
    env = {"GPUPLACE_CHECK_SIZES": "matmul=32,stream=1536KiB"}
    result = run("--machine", "1xK520", "devices", "--check", env=env)
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert lines[-5] == (
        "Check: 256x256 float32 matmul vs a float64 CPU reference; "
        "rates: 32x32 float32 matmul, a + b on 1.5 MiB arrays"
    )
    assert all(float(line.split()[-2]) > 0 and float(line.split()[-1]) > 0 for line in lines[-3:-1])
    bad = {"GPUPLACE_CHECK_SIZES": "matmul=0"}
    result = run("--machine", "1xK520", "devices", "--check", env=bad)
    assert (result.code, result.out) == (2, "")  # refused before anything runs or prints
    assert result.err.startswith("error: GPUPLACE_CHECK_SIZES: cannot read 'matmul=0'; expected")
    assert run("--machine", "1xK520", "devices", env=bad).code == 0  # read by --check alone


def test_check_fails_a_lost_gpu(run: Run) -> None:
    fake = FakeNvml(four_gpus()[:1])
    fake.gpus[0].fail["nvmlDeviceGetUUID"] = pynvml.NVMLError_GpuIsLost
    result = run("devices", "--check", nvml=fake, env=SMALL_CHECK)
    assert result.code == 1
    assert "FAIL" in result.out
    assert result.err == "error: /device:GPU:0 failed the matmul check: unavailable: GPU is lost\n"


def test_presets_listing(run: Run) -> None:
    result = run("devices", "--presets")
    assert result.code == 0
    rows = result.out.splitlines()
    assert rows[0].split() == ["PRESET", "PRODUCT", "MEMORY", "CC", "FP32", "TFLOPS"]
    assert rows[1].split()[:5] == ["K40c", "Tesla", "K40c", "12288MiB", "3.5"]
    assert any(r.startswith("H200 ") for r in rows)


def test_devices_imports_neither_numpy_nor_cupy() -> None:
    code = (
        "import sys\nfrom gpuplace.cli import main\n"
        "rc = main(['--machine', '8xA100-80GB', 'devices', '--json'])\n"
        "bad = [m for m in ('numpy', 'cupy', 'yaml') if m in sys.modules]\n"
        "sys.exit(10 if bad or rc else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_python_dash_m_and_traceback_only_with_debug() -> None:
    cmd = [sys.executable, "-m", "gpuplace", "--machine", "0xK520", "devices"]
    plain = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    debug = subprocess.run(
        [*cmd[:3], "--debug", *cmd[3:]], capture_output=True, text=True, check=False
    )
    assert "Traceback" in debug.stderr
    assert debug.returncode == 2  # --debug adds the traceback, never changes the exit code
    assert debug.stderr.endswith(
        "error: --machine: '0xK520' asks for 0 GPUs; the count must be at least 1 (for a machine "
        "with no GPU, use CUDA_VISIBLE_DEVICES= )\n"
    )


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--require-gpus", "9"], "--require-gpus"),
        (["--check"], "--check"),
        (["--min-memory", "1GiB", "--check"], "--min-memory or --check"),
        (["--require-gpus", "1", "--min-memory", "1GiB", "--check"], "--require-gpus, --min-memory or --check"),
    ],
)  # fmt: skip
def test_presets_cannot_be_combined_with_a_check(run: Run, flags: list[str], named: str) -> None:
    result = run("devices", "--presets", *flags)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"error: --presets lists the presets; it cannot be combined with {named}: run "
        "`gpuplace devices --presets` and the check separately\n"
    )
    assert run("devices", "--presets", "--json").code == 0


GOLDEN_0_7_1 = (
    "CUDA_VISIBLE_DEVICES='0,7,1' shows 1 of the 4 GPUs of this machine (unset it to see all). "
    "Entry '7' is not a GPU index of this machine (indices: 0-3): CUDA stops at the first invalid "
    "entry, so '1' after it is ignored.\n"
)


@pytest.mark.parametrize(
    ("cvd", "note"),
    [
        ("0,7,1", GOLDEN_0_7_1),
        (
            "1,1",
            "CUDA_VISIBLE_DEVICES='1,1' shows none of the 4 GPUs of this machine (unset it to see "
            "all). Entry '1' is listed twice (nvml 1): CUDA makes no GPU visible when a device is "
            "listed twice.\n",
        ),
        (
            "abc",
            "CUDA_VISIBLE_DEVICES='abc' shows none of the 4 GPUs of this machine (unset it to see "
            "all). Entry 'abc' is not a GPU index, a GPU- UUID or a MIG- UUID: CUDA stops at the "
            "first invalid entry.\n",
        ),
    ],
)
def test_cuda_visible_devices_note_names_the_entry_and_rule(run: Run, cvd: str, note: str) -> None:
    result = run("--machine", "4xK520", "devices", env={"CUDA_VISIBLE_DEVICES": cvd})
    assert (result.code, result.err) == (0, "")
    assert result.out.endswith("\n" + note)
    doc = json.loads(
        run("--machine", "4xK520", "devices", "--json", env={"CUDA_VISIBLE_DEVICES": cvd}).out
    )
    assert doc["machine"]["no_gpu_reason"] == note.rstrip("\n")


README_MACHINE = """\
name: lab-node
driver_version: "550.54.15"
cuda_version: "12.4"
host: {cpu_model: Xeon, cores: 32, memory: 256GiB}
gpus:
  - name: V100-32GB
    count: 2
    temperature: 40
    processes:
      - {pid: 4242, name: python, memory: 1GiB}
  - {name: My Card, memory: 8GiB, compute_capability: "8.6", pci_bus_id: "00000000:C1:00.0"}
  - name: A100-80GB
    mig:
      - {profile: 3g.40gb, memory: 40GiB}
      - {profile: 3g.40gb, memory: 40GiB, gi: 2}
"""
MIG_NOTE = (
    "CUDA shows 1 of the 4 GPUs of this machine. MIG is enabled on nvml 3 (NVIDIA A100-SXM4-80GB) "
    "and CUDA enumerates a single MIG device, so it uses MIG device 0 of nvml 3 and hides nvml 0, "
    "1, 2 and MIG device 1 of nvml 3. To use the GPUs without MIG, set CUDA_VISIBLE_DEVICES=0,2,3. "
    "To use another MIG device, set CUDA_VISIBLE_DEVICES to its UUID, e.g. "
    "MIG-43b408de-4629-5a02-9870-03bbed2e7c10 for MIG device 1 of nvml 3."
)
GOLDEN_MIG = f"""\
Simulated machine lab-node (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                                        UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Xeon, 32 cores [simulated]                     -                                         -                 262144MiB     -     -         -    -     -     -
/device:GPU:0  0     3     NVIDIA A100-SXM4-80GB MIG 3g.40gb [simulated]  MIG-f6d4b49b-32ec-558d-aced-6300ebd411ed  00000000:D1:00.0  40960MiB      0MiB  40960MiB  8.0  0%    N/A   N/A / 400W
{MIG_NOTE}
"""


def test_mig_says_which_gpus_it_hides_and_how_to_see_them(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "m1.yaml"
    path.write_text(README_MACHINE)
    result = run("--machine", str(path), "devices")
    assert result.code == 0
    assert result.err == (  # CUDA's FASTEST_FIRST order: My Card (8.6), the A100 (8.0), V100s
        "warning: the GPUs differ in model and CUDA_DEVICE_ORDER is unset, so CUDA numbers them "
        "fastest first (by gpuplace's emulation): CUDA's GPU 0 is nvml 2 (My Card), not "
        "nvidia-smi's GPU 0 (Tesla V100-SXM2-32GB), and CUDA_VISIBLE_DEVICES counts in CUDA's "
        "order; export CUDA_DEVICE_ORDER=PCI_BUS_ID to number them as nvidia-smi does\n"
    )
    assert result.out == GOLDEN_MIG
    doc = json.loads(run("--machine", str(path), "devices", "--json").out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["machine"]["no_gpu_reason"] == MIG_NOTE
    advised = run("--machine", str(path), "devices", env={"CUDA_VISIBLE_DEVICES": "0,2,3"})
    *rows, note = advised.out.splitlines()[3:]
    assert [row.split()[:3] + row.split()[3:4] for row in rows] == [
        ["/device:GPU:0", "0", "2", "My"],
        ["/device:GPU:1", "1", "0", "Tesla"],
        ["/device:GPU:2", "2", "1", "Tesla"],
    ]
    # no "(unset it to see all)": unset, MIG hides them again
    assert note == "CUDA_VISIBLE_DEVICES='0,2,3' shows 3 of the 4 GPUs of this machine."
    pci = {"CUDA_VISIBLE_DEVICES": "0,1,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    in_pci_order = run("--machine", str(path), "devices", env=pci)
    assert in_pci_order.err == ""
    assert [row.split()[2] for row in in_pci_order.out.splitlines()[3:-1]] == ["0", "1", "2"]


def test_mig_note_on_a_real_machine(run: Run) -> None:  # the T4 is CUDA's GPU 1: FASTEST_FIRST
    mig = FakeMig("MIG-aaaa1111-0000-4000-8000-000000000000", "A100 MIG 7g.80gb", 1, 0, 80 * 1024 * MiB, 0)  # fmt: skip
    gpus = [FakeGpu(name="Tesla T4", uuid="GPU-t4"), FakeGpu(migs=[mig])]
    result = run("devices", nvml=FakeNvml(gpus))
    assert result.out.splitlines()[-1] == (
        "CUDA shows 1 of the 2 GPUs of this machine. MIG is enabled on nvml 1 (NVIDIA "
        "A100-SXM4-80GB) and CUDA enumerates a single MIG device, so it uses MIG device 0 of nvml 1 "
        "and hides nvml 0. To use the GPUs without MIG, set CUDA_VISIBLE_DEVICES=1."
    )


def test_invalid_cuda_device_order_is_a_warning(run: Run) -> None:
    result = run("--machine", "2xT4", "devices", env={"CUDA_DEVICE_ORDER": "bogus"})
    assert result.code == 0
    assert result.err == (
        "warning: CUDA_DEVICE_ORDER='bogus' is not a value CUDA documents (FASTEST_FIRST, the "
        "default, or PCI_BUS_ID); gpuplace assumes CUDA's default order, FASTEST_FIRST; export "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID (or unset it)\n"
    )


def tty(capsys: pytest.CaptureFixture[str], *args: str, env: dict[str, str]) -> Result:
    """Run the CLI as if stdout were a terminal (rich tables)."""
    fake = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound)
    app = AppContext(env=env, nvml_loader=lambda: fake, is_terminal=True)
    code = main(list(args), app)
    out, err = capsys.readouterr()
    return Result(code, out, err)


GOLDEN_80 = """\
Simulated machine 1xK520 (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             MEMORY    FREE
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  65536MiB  -
/device:GPU:0  0     0     GRID K520 [simulated]               4096MiB   4096MiB
(POWER, TEMP, UTIL, UUID, USED, BUS-ID, CC left out to fit 80 columns; --wide
shows all)
"""


def test_an_80_column_terminal_gets_the_columns_that_fit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = tty(capsys, "--machine", "1xK520", "devices", env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert (result.code, result.err, result.out) == (0, "", GOLDEN_80)


@pytest.mark.parametrize("width", [40, 80, 100, 120, 160, 240])
def test_the_table_fits_the_terminal_and_shortens_ids_first(
    capsys: pytest.CaptureFixture[str], width: int
) -> None:
    env = {"COLUMNS": str(width), "NO_COLOR": "1", "CUDA_VISIBLE_DEVICES": "1,0,7"}
    result = tty(capsys, "--machine", "2xK520,1xT4", "devices", env=env)
    lines = result.out.splitlines()
    end = next(i for i, x in enumerate(lines) if x.startswith("CUDA_VISIBLE_DEVICES"))
    assert all(len(line) <= max(width, 80) for line in lines[1:end])
    assert "GPU-d8bb39cc-5a42" not in result.out  # UUIDs as nvitop shows them, `GPU-d8bb39cc`
    assert "00000000:" not in result.out  # bus ids without their zero domain
    assert ("left out to fit" in result.out) == (width < 160)
    assert "…" not in result.out and "\x1b" not in result.out


def test_wide_shows_what_a_pipe_gets(capsys: pytest.CaptureFixture[str], run: Run) -> None:
    env = {"COLUMNS": "80", "CUDA_VISIBLE_DEVICES": "0,7,1"}
    wide = tty(capsys, "--machine", "4xK520", "devices", "--wide", env=env)
    assert wide.out == run("--machine", "4xK520", "devices", env=env).out


def test_terminal_prints_the_notice_after_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"COLUMNS": "240", "CUDA_VISIBLE_DEVICES": "0,7,1", "NO_COLOR": "1"}
    result = tty(capsys, "--machine", "4xK520", "devices", env=env)
    assert result.out.endswith(GOLDEN_0_7_1)


def test_no_color_means_no_styling_at_all(capsys: pytest.CaptureFixture[str]) -> None:
    styled = tty(capsys, "--machine", "1xK520", "devices", env={"COLUMNS": "200"})
    assert styled.out.splitlines()[1].startswith("\x1b[1mDEVICE")  # a bold header on a terminal
    plain = tty(capsys, "--machine", "1xK520", "devices", env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert "\x1b" not in plain.out
    empty = tty(capsys, "--machine", "1xK520", "devices", env={"COLUMNS": "200", "NO_COLOR": ""})
    assert "\x1b[1m" in empty.out  # no-color.org: an empty NO_COLOR does not count


def test_devices_watch_appends_each_refresh_in_a_pipe(run: Run) -> None:
    result = run("--machine", "1xK520", "devices", "--watch", "0.1", "--count", "3")
    assert result.code == 0
    once = run("--machine", "1xK520", "devices").out
    assert result.out == (once + "\n") * 3


def test_devices_watch_as_json_lines(run: Run) -> None:
    result = run("--machine", "2xK520", "devices", "--watch", "0.1", "--count", "2", "--json")
    docs = [json.loads(line) for line in result.out.splitlines()]
    assert len(docs) == 2 and all(d["machine"]["visible_gpu_count"] == 2 for d in docs)
    jsonschema.validate(docs[0], SCHEMA)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--watch", "--check"), "--watch shows the devices over time; the smoke checks"),
        (("--watch", "1", "--require-gpus", "2"), "--watch shows the devices over time"),
        (("--count", "2"), "--count needs --watch"),
    ],
)
def test_devices_watch_refusals(run: Run, args: tuple[str, ...], message: str) -> None:
    result = run("--machine", "1xK520", "devices", *args)
    assert result.code == 2 and result.err.startswith(f"error: {message}")


def test_check_progress_goes_to_a_terminal_stderr_only(capsys: pytest.CaptureFixture[str]) -> None:
    def check(stderr_tty: bool, *flags: str) -> Result:
        fake = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound)
        app = AppContext(env=dict(SMALL_CHECK), nvml_loader=lambda: fake, is_terminal=False,
                         stderr_is_terminal=stderr_tty)  # fmt: skip
        code = main(["--machine", "2xK520", "devices", "--check", *flags], app)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    shown = check(True)
    assert shown.code == 0 and "checking" in shown.err  # rich's bar, drawn then cleared
    piped = check(False)
    assert (piped.code, piped.err) == (0, "")
    assert shown.out == piped.out.replace(piped.out, shown.out)  # stdout is not touched
    assert check(True, "--json").err == ""  # never with JSON


def test_a_simulated_check_measures_the_host_once_and_says_so(run: Run) -> None:
    result = run("--machine", "4xK20m", "devices", "--check")  # default sizes: the quick ones
    assert result.code == 0
    table = result.out[result.out.index("Check: ") :].splitlines()
    assert table[0].endswith("rates: 1024x1024 float32 matmul, a + b on 16 MiB arrays")
    rates = {tuple(line.split()[-2:]) for line in table[2:7]}
    assert len(rates) == 1  # CPU:0 and the four GPUs: one measurement of the host
    assert table[7] == (
        "Simulated devices compute on this host with numpy: their TFLOP/S and GB/S are the "
        "host's, measured once, not the card's (plans use the card's preset rates)"
    )
