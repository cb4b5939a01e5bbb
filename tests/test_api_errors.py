"""Errors through the Python API: one gpuplace error (never an AttributeError or TypeError from
deep inside) naming each setting as Python wrote it (`Options.memory_fraction`), while the CLI
keeps naming its flags (`--memory-fraction`) for the very same check."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpuplace
from gpuplace.cli.words import CLI
from gpuplace.errors import BadInput, GpuplaceError, Message, RuntimeFailure, Setting, Term
from tests.conftest import Run, write_spec

ROOT = Path(__file__).resolve().parent.parent
TOWERS = str(ROOT / "examples" / "guide" / "04_multi_tower.yaml")
SEEN = gpuplace.view(gpuplace.discover("4xK520"), {})
FRACTION_RANGE = (
    "per_process_gpu_memory_fraction must be in (0, 1], got {} (e.g. 0.4 lets the process use "
    "40% of each GPU's total memory)"
)
OVERRIDES = (
    "a per-GPU memory limit overrides the fraction (in TensorFlow a logical device's memory_limit "
    "wins over per_process_gpu_memory_fraction); give one of them"
)
VIRTUAL_SYNTAX = (
    "cannot read 'GPU0'; expected GPU:N=SIZE[,SIZE...] (e.g. GPU:0=2GiB,2GiB), several "
    "separated by ';'"
)
VIRTUAL_TOO_BIG = (
    "asks 8.0 GiB in all for the 2 logical GPUs of GPU:0 (GRID K520), which has 4.0 GiB free; give "
    "sizes that add up to at most 4.0 GiB (e.g. {})"
)
GROWTH = (
    "Memory growth cannot be configured on a PhysicalDevice with virtual devices configured "
    "(TensorFlow's rule): drop {} or {}"
)
EVERY_GPU_SPLIT = (
    "{} conflicts with {}: every visible GPU is split into logical GPUs with their own sizes, so "
    "the limit would apply to none; drop {}"
)
ALL_FOUR = "GPU:0=1GiB;GPU:1=1GiB;GPU:2=1GiB;GPU:3=1GiB"
REPLICAS = (
    "data parallelism needs at least 2 GPUs (as Keras' multi_gpu_model: gpus >= 2); give {} or "
    "more, or {}"
)

# (Options fields, the API's message, the CLI's flags, the CLI's message): the same check
SAME_CHECK = [
    (
        {"memory_fraction": 1.5},
        "Options.memory_fraction: " + FRACTION_RANGE.format("1.5"),
        ["--memory-fraction", "1.5"],
        "--memory-fraction: " + FRACTION_RANGE.format("1.5"),
    ),
    (
        {"memory_fraction": -0.5},
        "Options.memory_fraction: " + FRACTION_RANGE.format("-0.5"),
        ["--memory-fraction", "-0.5"],
        "--memory-fraction: " + FRACTION_RANGE.format("-0.5"),
    ),
    (
        {"memory_fraction": 0.5, "memory_limit": "1GiB"},
        f"Options.memory_fraction=0.5 conflicts with Options.memory_limit='1GiB': {OVERRIDES}",
        ["--memory-fraction", "0.5", "--memory-limit", "1GiB"],
        f"--memory-fraction 0.5 conflicts with --memory-limit 1GiB: {OVERRIDES}",
    ),
    (
        {"memory_limit": "64 parsecs"},
        "Options.memory_limit: cannot read '64 parsecs' as a size; accepted: a number and a unit: "
        "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 16GiB, 500MB, 1.5GiB)",
        ["--memory-limit", "64 parsecs"],
        "--memory-limit: cannot read '64 parsecs' as a size; accepted: a number and a unit: "
        "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 16GiB, 500MB, 1.5GiB)",
    ),
    (
        {"virtual_gpus": "GPU0"},
        f"Options.virtual_gpus: {VIRTUAL_SYNTAX}",
        ["--virtual-gpus", "GPU0"],
        f"--virtual-gpus: {VIRTUAL_SYNTAX}",
    ),
    (
        {"virtual_gpus": "GPU:0=4GiB,4GiB"},
        "Options.virtual_gpus " + VIRTUAL_TOO_BIG.format("Options.virtual_gpus='GPU:0=2GiB,2GiB'"),
        ["--virtual-gpus", "GPU:0=4GiB,4GiB"],
        "--virtual-gpus " + VIRTUAL_TOO_BIG.format("--virtual-gpus GPU:0=2GiB,2GiB"),
    ),
    (
        {"virtual_gpus": "GPU:0=1GiB,1GiB", "allow_growth": True},
        GROWTH.format("Options.allow_growth", "Options.virtual_gpus"),
        ["--virtual-gpus", "GPU:0=1GiB,1GiB", "--allow-growth"],
        GROWTH.format("--allow-growth", "--virtual-gpus"),
    ),
    (
        {"virtual_gpus": "GPU:7=1GiB"},
        "Options.virtual_gpus names GPU:7, but this process sees 4 GPUs (GPU:0..GPU:3)",
        ["--virtual-gpus", "GPU:7=1GiB"],
        "--virtual-gpus names GPU:7, but this process sees 4 GPUs (GPU:0..GPU:3)",
    ),
    (
        {"virtual_gpus": ALL_FOUR, "memory_limit": "1GiB"},
        EVERY_GPU_SPLIT.format(
            "Options.memory_limit='1.0 GiB'", "Options.virtual_gpus", "Options.memory_limit"
        ),
        ["--virtual-gpus", ALL_FOUR, "--memory-limit", "1GiB"],
        EVERY_GPU_SPLIT.format("--memory-limit 1.0 GiB", "--virtual-gpus", "--memory-limit"),
    ),
    (
        {"replicate": "abc"},
        "Options.replicate='abc': expected a number of GPUs (2 or more) or 'all' "
        "(e.g. Options.replicate=2)",
        ["--replicate", "abc"],
        "--replicate 'abc': expected a number of GPUs (2 or more) or 'all' (e.g. --replicate 2)",
    ),
    (
        {"replicate": 1},
        "Options.replicate=1: " + REPLICAS.format("Options.replicate=2", "Options.replicate='all'"),
        ["--replicate", "1"],
        "--replicate 1: " + REPLICAS.format("--replicate 2", "--replicate all"),
    ),
    (
        {"feeds": {"x": "[1]"}},
        f"Options.feeds['x']: no op named 'x' in {TOWERS}, and the graph has no placeholders: "
        "there is nothing to feed; drop Options.feeds",
        ["--feed", "x=[1]"],
        f"--feed x: no op named 'x' in {TOWERS}, and the graph has no placeholders: there is "
        "nothing to feed; drop --feed",
    ),
]


@pytest.mark.parametrize(("fields", "api", "flags", "cli"), SAME_CHECK)
def test_api_names_the_field_and_the_cli_its_flag(
    run: Run, fields: dict[str, Any], api: str, flags: list[str], cli: str
) -> None:
    with pytest.raises(BadInput) as info:
        gpuplace.prepare(TOWERS, SEEN, gpuplace.Options(**fields), {})
    assert str(info.value) == api
    result = run("--machine", "4xK520", "run", TOWERS, *flags)
    assert (result.code, result.out, result.err) == (2, "", f"error: {cli}\n")


def test_too_many_replicas_is_a_runtime_failure_naming_the_field(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        "graph:\n  - {name: x, op: placeholder, shape: [8, 2]}\n"
        "  - {name: y, op: relu, inputs: [x]}\n",
    )
    for fields, message in [
        ({"replicate": 8}, "give Options.replicate=4 or fewer, or Options.replicate='all'"),
        ({"replicate": "8"}, "give Options.replicate=4 or fewer, or Options.replicate='all'"),
    ]:
        with pytest.raises(RuntimeFailure) as info:
            gpuplace.prepare(spec, SEEN, gpuplace.Options(**fields), {})
        assert str(info.value) == (
            f"Options.replicate=8: this process sees 4 GPUs (GPU:0..GPU:3); {message}"
        )
    one = gpuplace.view(gpuplace.discover("1xK520"), {})
    with pytest.raises(RuntimeFailure) as info:
        gpuplace.prepare(spec, one, gpuplace.Options(replicate="all"), {})
    assert str(info.value) == (
        "Options.replicate='all': this process sees 1 GPU, and data parallelism needs 2 or more; "
        "split its card into logical GPUs with Options.virtual_gpus (e.g. GPU:0=1GiB,1GiB)"
    )
    options = gpuplace.Options(replicate=2, feeds={"x": np.ones((8, 2))})
    outcome = gpuplace.execute_prepared(gpuplace.prepare(spec, SEEN, options, {}), SEEN)
    assert outcome.result.values["y"].tolist() == [[1.0, 1.0]] * 8


@pytest.fixture
def fed(tmp_path: Path) -> str:
    return write_spec(
        tmp_path,
        "graph:\n  - {name: x, op: placeholder, shape: [2], dtype: float32}\n"
        "  - {name: k, op: placeholder, shape: [], dtype: int32}\n"
        "  - {name: y, op: mul, inputs: [x, x]}\n  - {name: c, op: constant, value: 1.0}\n"
        "fetch: [y, k]\n",
    )


@pytest.mark.parametrize(
    ("feeds", "message"),
    [
        ({"k": "1"}, "You must feed a value for placeholder tensor 'x' with dtype float32 and shape "
                     "[2]; give each a value in Options.feeds: a .npy path, JSON text or an array "
                     "(e.g. Options.feeds['x']='[1.0,2.0]')"),
        ({"x": "[1, 2", "k": "1"}, "Options.feeds['x']='[1, 2': neither JSON (Expecting ',' "
                                   "delimiter) nor a .npy path; write e.g. Options.feeds['x']="
                                   "'[1.0,2.0]' or Options.feeds['x']='x.npy'"),
        ({"x": [1.0, 2.0], "k": 1.5}, "Options.feeds['k']: cannot feed float64 values to "
                                      "placeholder 'k' of dtype int32 without changing them; give "
                                      "int32 values"),
        ({"x": [[1.0], [2.0, 3.0]], "k": 1}, "Options.feeds['x']: lists of different lengths; give "
                                             "a rectangular list"),
        ({"x": ["a", "b"], "k": 1}, "Options.feeds['x']: expected numbers, got <U1 values"),
        ({"x": "nope.npy", "k": 1}, "Options.feeds['x']='nope.npy': cannot read it as a .npy "
                                    "file: No such file or directory"),
        ({"z": "1"}, "Options.feeds['z']: no op named 'z' in {spec}; placeholders: k, x"),
        ({"c": "1"}, "Options.feeds['c']: op 'c' is a constant, not a placeholder; only "
                     "placeholders are fed (placeholders in {spec}: x, k)"),
    ],
)  # fmt: skip
def test_feed_errors_name_the_entry_of_options_feeds(
    fed: str, feeds: dict[str, Any], message: str
) -> None:
    with pytest.raises(BadInput) as info:
        gpuplace.prepare(fed, SEEN, gpuplace.Options(feeds=feeds), {})
    assert str(info.value) == message.format(spec=fed)


def test_feeds_take_arrays_lists_and_text(fed: str) -> None:
    for x in (np.array([1.0, 3.0], dtype=np.float32), [1, 3], "[1, 3]"):
        prepared = gpuplace.prepare(fed, SEEN, gpuplace.Options(feeds={"x": x, "k": 7}), {})
        values = gpuplace.execute_prepared(prepared, SEEN).result.values
        assert values["y"].tolist() == [1.0, 9.0] and values["y"].dtype == np.float32
        assert values["k"].tolist() == 7


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"strategy": "fast"}, "Options.strategy='fast': not a placement strategy; expected one "
                               "of 'tensorflow', 'balanced', 'round-robin'"),
        ({"allow_soft_placement": "no"}, "Options.allow_soft_placement='no': expected True, False "
                                         "or None"),
        ({"allow_growth": 1}, "Options.allow_growth=1: expected True, False or None"),
        ({"memory_fraction": "0.5"}, "Options.memory_fraction='0.5': expected a number in (0, 1], "
                                     "e.g. 0.4"),
        ({"memory_fraction": True}, "Options.memory_fraction=True: expected a number in (0, 1], "
                                    "e.g. 0.4"),
        ({"memory_limit": 1.5}, "Options.memory_limit=1.5: expected a size per GPU, e.g. '64MiB' "
                                "(or int bytes)"),
        ({"virtual_gpus": {0: [1]}}, "Options.virtual_gpus={0: [1]}: expected text such as "
                                     "'GPU:0=2GiB,2GiB'"),
        ({"replicate": 2.0}, "Options.replicate=2.0: expected a number of GPUs (2 or more) or "
                             "'all'"),
        ({"feeds": [("x", "1")]}, "Options.feeds=[('x', '1')]: expected a mapping of placeholder "
                                  "names to values, e.g. {'x': '[[1.0, 2.0]]'}"),
    ],
)  # fmt: skip
def test_options_refuses_a_wrong_type_where_it_is_written(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(BadInput) as info:
        gpuplace.Options(**fields)
    assert str(info.value) == message


def test_the_cli_naming_of_options_reads_as_flags() -> None:
    with pytest.raises(BadInput) as info:
        gpuplace.Options(replicate=2.0)  # type: ignore[arg-type]
    assert re.match(r"^--replicate 2\.0: expected", info.value.render(CLI))


def _prepared() -> Any:
    return gpuplace.prepare(TOWERS, SEEN, gpuplace.Options(), {})


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: gpuplace.prepare(TOWERS, "4xK520", gpuplace.Options(), {}),
         "prepare: view must be a View (gpuplace.view(machine, os.environ)), got str '4xK520'"),
        (lambda: gpuplace.prepare(TOWERS, gpuplace.discover("4xK520"), gpuplace.Options(), {}),
         "prepare: view must be a View (gpuplace.view(machine, os.environ)), got Machine"),
        (lambda: gpuplace.prepare(TOWERS, SEEN, {"strategy": "balanced"}, {}),
         "prepare: options must be an Options (e.g. gpuplace.Options(strategy='balanced')), got "
         "dict {'strategy': 'balanced'}"),
        (lambda: gpuplace.prepare(TOWERS, SEEN, gpuplace.Options(), None),
         "prepare: env must be a mapping (os.environ, or a dict such as {}), got None"),
        (lambda: gpuplace.prepare(3, SEEN, gpuplace.Options(), {}),
         "prepare: path must be a file name (the spec's path), got int 3"),
        (lambda: gpuplace.prepare("nope.yaml", SEEN, gpuplace.Options(), {}),
         "cannot read spec 'nope.yaml': No such file or directory"),
        (lambda: gpuplace.execute_prepared("g.yaml", SEEN),
         "execute_prepared: prepared must be a Prepared (what gpuplace.prepare(...) returns), got "
         "str 'g.yaml'"),
        (lambda: gpuplace.execute_prepared(_prepared(), {}),
         "execute_prepared: view must be a View (gpuplace.view(machine, os.environ)), got dict {}"),
        (lambda: gpuplace.predict_memory(None, SEEN),
         "predict_memory: prepared must be a Prepared (what gpuplace.prepare(...) returns), got "
         "None"),
        (lambda: gpuplace.estimate_plan(_prepared(), SEEN.machine),
         "estimate_plan: view must be a View (gpuplace.view(machine, os.environ)), got Machine"),
        (lambda: gpuplace.verify(_prepared(), {"AddN": 1}, SEEN),
         "verify: result must be a RunResult (what gpuplace.execute_prepared(...) returns, or its "
         ".result), got dict {'AddN': 1}"),
    ],
)  # fmt: skip
def test_a_wrong_argument_is_bad_input_not_a_crash_inside(call: Any, message: str) -> None:
    with pytest.raises(BadInput) as info:
        call()
    assert str(info.value) == message


def test_verify_takes_the_outcome_or_its_result() -> None:
    prepared = _prepared()
    outcome = gpuplace.execute_prepared(prepared, SEEN)
    checks = gpuplace.verify(prepared, outcome, SEEN)
    assert checks == gpuplace.verify(prepared, outcome.result, SEEN)
    assert [(c.fetch, c.ok, c.max_rel_error) for c in checks] == [("AddN", True, 0.0)]


def test_a_predicted_oom_says_how_to_run_it_anyway_from_python(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        "graph:\n  - {name: a, op: ones, shape: [1024, 1024]}\n"
        "  - {name: b, op: ones, shape: [1024, 1024]}\n  - {name: c, op: matmul, inputs: [a, b]}\n",
    )
    one = gpuplace.view(gpuplace.discover("1xK520"), {})
    prepared = gpuplace.prepare(spec, one, gpuplace.Options(memory_limit="10MiB"), {})
    _, oom = gpuplace.predict_memory(prepared, one)
    assert oom is not None and isinstance(oom, RuntimeFailure)
    assert str(oom).split(" Fix: ")[0] == (
        "OOM when allocating 4.0 MiB (4194304 B) for op 'c' on "
        "/job:localhost/replica:0/task:0/device:GPU:0: 8.0 MiB (8388608 B) in use, 10.0 MiB "
        "(10485760 B) reserved, limit 10.0 MiB (10485760 B). Predicted before running (plan): "
        "nothing was run or allocated; gpuplace.execute_prepared(prepared, view) runs it anyway."
    )
    with pytest.raises(RuntimeFailure, match=r"^OOM when allocating 4\.0 MiB .* The run stopped"):
        gpuplace.execute_prepared(prepared, one)


def test_every_exported_name_is_documented_and_every_error_is_a_gpuplace_error() -> None:
    for name in gpuplace.__all__:
        doc = getattr(gpuplace, name).__doc__
        assert doc and len(doc.split()) >= 8, name
    assert set(gpuplace.__all__) <= set(dir(gpuplace))
    assert issubclass(gpuplace.BadInput, gpuplace.GpuplaceError) and gpuplace.BadInput is BadInput
    assert gpuplace.RuntimeFailure is RuntimeFailure and gpuplace.GpuplaceError is GpuplaceError
    assert "Command-line" not in (gpuplace.Options.__doc__ or "")


@pytest.mark.slow  # a fresh interpreter runs examples/small_model.yaml (160 MiB of weights)
def test_the_python_api_example_prints_what_the_docs_show() -> None:
    section = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shown = re.search(r"Run from the repository root, it prints:\n\n```\n(.*?)```", section, re.S)
    assert code is not None and shown is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "GPUPLACE_"))}
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)], cwd=ROOT, env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == shown.group(1)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: gpuplace.view(m, "0,1"), "view: env must be a mapping (os.environ, or a dict such as {'CUDA_VISIBLE_DEVICES': '0'}), got str '0,1'"),
        (lambda m: gpuplace.view("4xK520", {}), "view: machine must be a Machine (what gpuplace.discover() returns), got str"),
        (lambda m: gpuplace.visible(m, "0"), "visible: gpus must be a machine's GPUs (machine.gpus), got a Machine: pass machine.gpus"),
        (lambda m: gpuplace.visible(m.gpus, 0), "visible: cuda_visible_devices must be the variable's text (e.g. '1,0') or None, got int 0"),
        (lambda m: gpuplace.discover("9xFoo"), "discover(machine_spec): unknown GPU preset 'Foo'; presets: K40c, K20m, K520, T4, V100-16GB, V100-32GB, A100-40GB, A100-80GB, H100-80GB, H200; run `gpuplace devices --presets` to list them"),
    ],
)  # fmt: skip
def test_device_functions_refuse_wrong_arguments_by_name(call: Any, message: str) -> None:
    with pytest.raises(BadInput) as info:
        call(gpuplace.discover("2xK520"))
    assert str(info.value) == message


def test_an_empty_machine_spec_from_python_says_how_to_use_the_real_machine() -> None:
    with pytest.raises(
        BadInput,
        match=r"^discover\(machine_spec\): empty spec; .* call gpuplace\.discover\(\) without a spec$",
    ):
        gpuplace.discover("")


def test_a_placement_error_from_python_names_the_options_field(tmp_path: Path, run: Run) -> None:
    spec = write_spec(
        tmp_path, "graph:\n  - {name: a, op: constant, value: [1.0], device: /gpu:7}\n"
    )
    with pytest.raises(RuntimeFailure) as info:
        gpuplace.prepare(spec, SEEN, gpuplace.Options(), {})
    tail = "request one of its devices, or pass {}."
    assert str(info.value).endswith(tail.format("Options(allow_soft_placement=True)"))
    assert run("--machine", "4xK520", "run", spec).err.endswith(
        tail.format("--allow-soft-placement") + "\n"
    )


def test_fix_sentences_say_their_references_and_leave_the_text_alone() -> None:
    text = Message(
        "add GPUs (", Term.MACHINE, "), give each more (", Setting("memory_limit"), ", ",
        Setting("memory_fraction"), "); --machines stays",
    )  # fmt: skip
    assert str(text) == (
        "add GPUs (gpuplace.discover(machine_spec)), give each more (Options.memory_limit, "
        "Options.memory_fraction); --machines stays"
    )
    assert CLI.say(text) == (
        "add GPUs (--machine), give each more (--memory-limit, --memory-fraction); --machines stays"
    )


@pytest.mark.parametrize(
    ("given", "api", "cli"),
    [
        (0, "Options.memory_limit=0: each GPU needs a limit above 0 (e.g. Options.memory_limit='64MiB')", None),
        ("0B", "Options.memory_limit='0B': each GPU needs a limit above 0 (e.g. Options.memory_limit='64MiB')",
         "--memory-limit '0B': each GPU needs a limit above 0 (e.g. --memory-limit 64MiB)"),
        ("", "Options.memory_limit: cannot read '' as a size; accepted: a number and a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 16GiB, 500MB, 1.5GiB)",
         "--memory-limit: cannot read '' as a size; accepted: a number and a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 16GiB, 500MB, 1.5GiB)"),
    ],
)  # fmt: skip
def test_a_zero_or_empty_memory_limit_is_refused_not_dropped(
    run: Run, given: int | str, api: str, cli: str | None
) -> None:
    with pytest.raises(BadInput) as info:
        gpuplace.prepare(TOWERS, SEEN, gpuplace.Options(memory_limit=given), {})
    assert str(info.value) == api
    if cli is not None:
        result = run("--machine", "4xK520", "run", TOWERS, "--memory-limit", str(given))
        assert (result.code, result.out, result.err) == (2, "", f"error: {cli}\n")


def test_empty_virtual_gpus_are_refused_not_dropped(run: Run) -> None:
    syntax = "cannot read ''; expected GPU:N=SIZE[,SIZE...] (e.g. GPU:0=2GiB,2GiB), several separated by ';'"
    with pytest.raises(BadInput, match=re.escape(f"Options.virtual_gpus: {syntax}")):
        gpuplace.prepare(TOWERS, SEEN, gpuplace.Options(virtual_gpus=""), {})
    result = run("--machine", "4xK520", "run", TOWERS, "--virtual-gpus", "")
    assert (result.code, result.err) == (2, f"error: --virtual-gpus: {syntax}\n")


def test_load_machine_from_python_names_its_argument() -> None:
    with pytest.raises(BadInput) as info:
        gpuplace.load_machine("4xK502")
    assert str(info.value).startswith(
        "load_machine(spec): unknown GPU preset 'K502' (did you mean 'K520'?); presets: K40c,"
    )
