"""One training step's memory (`--training`): hand-counted bytes on a 2-layer MLP, properties
over random MLPs, balanced placing for the training footprint, and what plan and mem print."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuplace
from gpuplace.graph import load
from gpuplace.memory.training import Training, TrainingMemory, training_memory
from gpuplace.placement.flat import flatten
from tests.conftest import Run
from tests.memory.helpers import CPU0, GPU0, GPU1, spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def mlp(path: Path, second: str | None = None) -> str:
    """x [4, 8] -> matmul w1 [8, 16] -> relu -> matmul w2 [16, 4] -> y (fetched): every tensor
    is 256 B once rounded, but w1 (512 B). `second`: the device of w2 and y."""
    where = {"device": second} if second else {}
    return spec(
        path,
        [
            {"name": "x", "op": "placeholder", "shape": [4, 8]},
            {"name": "w1", "op": "variable", "shape": [8, 16]},
            {"name": "mm1", "op": "matmul", "inputs": ["x", "w1"]},
            {"name": "h", "op": "relu", "inputs": ["mm1"]},
            {"name": "w2", "op": "variable", "shape": [16, 4], **where},
            {"name": "y", "op": "matmul", "inputs": ["h", "w2"], **where},
        ],
        fetch=["y"],
    )


def one_device(path: str, training: Training) -> TrainingMemory:
    flat = flatten(load(path))
    return training_memory(flat, [0] * len(flat.names), ["GPU:0"], training)[0]


# Steps 0-5 run x, w1, mm1, h, w2, y; step 11 - i is op i's gradient. Held throughout: w1 512 +
# w2 256 (weights) and per slot 768 more (optimizer). The peak falls at y's gradient (step 6):
# x (kept for mm1's gradient) and h (kept for y's: matmul needs its inputs) = 512 activations,
# w2's gradient 256, y's seeded gradient 256 + h's gradient 256 = 512 transient. Step 9 (mm1's
# gradient) holds as much: x 256, both gradients 768, mm1's gradient 256.
@pytest.mark.parametrize(
    ("optimizer", "optimizer_bytes"),
    [("sgd", 0), ("momentum", 768), ("adam", 1536), ("adamw", 1536)],
)
def test_mlp_on_one_device_counted_by_hand(
    tmp_path: Path, optimizer: str, optimizer_bytes: int
) -> None:
    step = one_device(mlp(tmp_path / "mlp.yaml"), Training(optimizer))
    assert step.parts() == {
        "weights": 768, "gradients": 256, "optimizer": optimizer_bytes, "activations": 512,
        "transient": 512,
    }  # fmt: skip
    assert step.peak == 2048 + optimizer_bytes
    assert (step.phase, step.op) == ("backward", "y")


def test_mixed_precision_halves_weights_and_keeps_float32_master_and_slots(tmp_path: Path) -> None:
    # every float32 tensor here is 256 B or less at 2 bytes per element, so rounds to 256 B: the
    # weights (w1 256 + w2 256) shrink; the optimizer holds 2 slots + the master copy, float32.
    step = one_device(mlp(tmp_path / "mlp.yaml"), Training("adam", "float16"))
    assert step.weights == 512
    assert step.optimizer == 3 * 512 + 3 * 256
    assert Training("adam", "bfloat16").label() == "adam, bfloat16 with float32 master weights"


def test_two_devices_counted_by_hand(tmp_path: Path) -> None:
    # GPU:0 holds x, w1, mm1, h; GPU:1 w2, y and the copy of h. GPU:0 peaks at mm1's gradient
    # (step 9): x 256, w1's gradient 512, mm1's gradient 256. GPU:1 at y's (step 6): w2's
    # gradient 256, y's seed 256 and h's gradient made there before it goes to GPU:0 256.
    path = mlp(tmp_path / "mlp.yaml", second="/device:GPU:1")
    view = gpuplace.view(gpuplace.discover("2xK520"), {})
    prepared = gpuplace.prepare(path, view, gpuplace.Options(training="adam"), {}, feeds=False)
    steps = gpuplace.predict_training(prepared)
    assert steps is not None
    assert [(t.device, t.parts(), t.peak, t.op) for t in steps] == [
        (CPU0, dict.fromkeys(("weights", "gradients", "optimizer", "activations", "transient"), 0), 0, ""),
        (GPU0, {"weights": 512, "gradients": 512, "optimizer": 1024, "activations": 256, "transient": 256}, 2560, "mm1"),
        (GPU1, {"weights": 256, "gradients": 256, "optimizer": 512, "activations": 0, "transient": 512}, 1536, "y"),
    ]  # fmt: skip


def test_no_training_asked_predicts_none(tmp_path: Path) -> None:
    view = gpuplace.view(gpuplace.discover("1xK520"), {})
    prepared = gpuplace.prepare(mlp(tmp_path / "m.yaml"), view, gpuplace.Options(), {}, feeds=False)
    assert gpuplace.predict_training(prepared) is None


def mlp_spec(path: Path, widths: list[int], batch: int, weights: bool = True) -> str:
    """A chain of dense layers (matmul, then relu or tanh or softmax), widths in units of 64
    float32 elements so that every half-precision tensor rounds as its float32 one does."""
    ops: list[dict[str, Any]] = [{"name": "x", "op": "placeholder", "shape": [batch, widths[0]]}]
    last = "x"
    acts = ("relu", "tanh", "softmax", "sigmoid")
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        w = {"name": f"w{i}", "op": "variable" if weights else "ones", "shape": [a, b]}
        ops += [w, {"name": f"m{i}", "op": "matmul", "inputs": [last, f"w{i}"]},
                {"name": f"a{i}", "op": acts[i % len(acts)], "inputs": [f"m{i}"]}]  # fmt: skip
        last = f"a{i}"
    return spec(path, ops, fetch=[last])


layers = st.lists(st.sampled_from([64, 128, 256, 512]), min_size=2, max_size=5)
batches = st.sampled_from([64, 128])
PROPERTY = settings(  # each example writes its spec under the test's tmp_path
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(widths=layers, batch=batches, spread=st.booleans())
def test_training_needs_at_least_inference_and_more_slots_need_more(
    tmp_path: Path, widths: list[int], batch: int, spread: bool
) -> None:
    path = mlp_spec(tmp_path / "g.yaml", widths, batch)
    view = gpuplace.view(gpuplace.discover("2xK520"), {})
    peaks: dict[str, list[int]] = {}
    for optimizer in ("sgd", "momentum", "adam"):
        options = gpuplace.Options(training=optimizer, strategy="round-robin" if spread else None)
        prepared = gpuplace.prepare(path, view, options, {}, feeds=False)
        memory, _ = gpuplace.predict_memory(prepared, view)
        steps = gpuplace.predict_training(prepared)
        assert steps is not None
        inference = {m.device: m.peak for m in memory}
        for t in steps:
            assert t.peak >= inference[t.device], (optimizer, t)
            peaks.setdefault(t.device, []).append(t.peak)
    for device, (sgd, momentum, adam) in peaks.items():
        assert adam >= momentum >= sgd, device


@PROPERTY
@given(widths=layers, batch=batches, weights=st.booleans())
def test_half_precision_never_holds_more_than_float32_beyond_the_master_copy(
    tmp_path: Path, widths: list[int], batch: int, weights: bool
) -> None:
    # Without weights there is no backward pass: the step is the forward activations alone,
    # which float16 halves. With weights, float16 adds the float32 master copy (4 B a weight)
    # and halves the weights (4 -> 2 B): at most 2 B a weight more than float32, at any step.
    flat = flatten(load(mlp_spec(tmp_path / "g.yaml", widths, batch, weights)))
    where = [0] * len(flat.names)
    for optimizer in ("sgd", "adam"):
        full = training_memory(flat, where, ["GPU:0"], Training(optimizer))[0]
        half = training_memory(flat, where, ["GPU:0"], Training(optimizer, "float16"))[0]
        if not weights:
            assert (half.weights, half.gradients, half.optimizer, full.optimizer) == (0, 0, 0, 0)
            assert half.activations <= full.activations
        assert half.peak <= full.peak + full.weights // 2


def test_balanced_spreads_for_the_training_step_what_fits_one_gpu_for_inference(run: Run) -> None:
    small = str(EXAMPLES / "small_model.yaml")
    base = ("--machine", "4xK520", "plan", small, "--memory-limit", "256MiB", "--json")

    def devices(*extra: str) -> tuple[int, list[dict[str, Any]]]:
        done = run(*base, *extra)
        doc = json.loads(done.out)
        return done.code, [d for d in doc["devices"] if d["device"] != CPU0]

    code, alone = devices()
    assert code == 0 and alone[0]["ops"] == 31 and all(d["fits"] for d in alone)
    code, tf = devices("--training", "adam")  # TensorFlow's placement: GPU:0 alone, too small
    assert code == 1 and tf[0]["fits"] is False and tf[0]["peak_predicted"] > 256 * 2**20
    assert tf[0]["peak_inference"] == alone[0]["peak_predicted"]
    code, spread = devices("--training", "adam", "--strategy", "balanced")
    assert code == 0
    assert sum(d["ops"] > 0 for d in spread) >= 3
    assert all(d["fits"] and d["peak_predicted"] <= 256 * 2**20 for d in spread)
    assert all(sum(d["training"][p] for p in ("weights", "gradients", "optimizer",
               "activations", "transient")) == d["training"]["peak"] for d in spread)  # fmt: skip


# The busy column is the cost model's (the K520 preset's rates): fixed, not this machine's.
TABLE = """\
DEVICE  OPS  OUTPUT BYTES  COPIES IN  COPY BYTES IN  COPIES OUT  BUSY (EST)  PEAK (INFER)  PEAK (TRAIN)  LIMIT    FITS
GPU:0   4    1.1 KiB       0          0 B            1 (256 B)   0.020 ms    1024B         2560B         3596MiB  yes
GPU:1   2    320 B         1          256 B          0 (0 B)     0.010 ms    768B          1536B         3596MiB  yes
CPU:0   0    0 B           0          0 B            0 (0 B)     0.000 ms    0MiB          0MiB          -        -

Training step (adam), predicted: each part at the device's peak
DEVICE  WEIGHTS  GRADIENTS  OPTIMIZER  ACTIVATIONS  TRANSIENT  PEAK (TRAIN)  AT
GPU:0   512B     512B       1024B      256B         256B       2560B         backward mm1
GPU:1   256B     256B       512B       0MiB         512B       1536B         backward y
rates: GPU:0,1 from the preset GRID K520"""


def test_plan_table_golden(run: Run, tmp_path: Path) -> None:
    # inference: GPU:0 holds w1 512 + x (or h) 256 + mm1 256; GPU:1 w2, the copy of h and y
    path = mlp(tmp_path / "mlp.yaml", second="/device:GPU:1")
    done = run("--machine", "2xK520", "plan", path, "--training", "adam")
    assert done.code == 0, done.err
    table = done.out[done.out.index("DEVICE  OPS") :].rsplit("\nEstimated makespan", 1)[0]
    assert table == TABLE


def test_mem_shows_the_run_and_the_training_step(run: Run, tmp_path: Path) -> None:
    path = mlp(tmp_path / "mlp.yaml", second="/device:GPU:1")
    feed = tmp_path / "x.npy"
    import numpy as np

    np.save(feed, np.ones((4, 8), np.float32))
    done = run("--machine", "2xK520", "mem", path, "--training", "adam", "--feed", f"x={feed}",
               "--memory-limit", "64MiB")  # fmt: skip
    assert done.code == 0, done.err
    assert done.out.splitlines()[1:5] == [
        "PEAK (TRAIN): one training step (adam), predicted; the run held PEAK IN USE",
        "DEVICE  CARD                POLICY        RESERVED  PEAK IN USE  PEAK (TRAIN)  LIMIT",
        "GPU:0   GRID K520 (CUDA 0)  limit 64 MiB  64MiB     1024B        2560B         64MiB",
        "GPU:1   GRID K520 (CUDA 1)  limit 64 MiB  64MiB     768B         1536B         64MiB",
    ]
    assert "forward graph only" not in done.err
    ran = run("--machine", "2xK520", "run", path, "--training", "adam", "--feed", f"x={feed}")
    assert ran.code == 0
    assert ran.err.startswith(
        "warning: training (--training or config training): run executes the forward graph only"
    )


def test_config_training_and_bad_settings(run: Run, tmp_path: Path) -> None:
    ops: list[dict[str, Any]] = [{"name": "w", "op": "variable", "shape": [64, 64]},
           {"name": "y", "op": "tanh", "inputs": ["w"]}]  # fmt: skip
    good = spec(
        tmp_path / "g.yaml",
        ops,
        config={"training": {"optimizer": "momentum", "dtype": "bfloat16"}},
    )
    doc = json.loads(run("plan", good, "--json").out)
    assert doc["training"] == {"optimizer": "momentum", "dtype": "bfloat16", "slots": 1}
    cpu = doc["devices"][0]["training"]
    # w: 16 KiB float32, 8 KiB in bfloat16; its gradient 8 KiB; velocity + master 16 KiB each
    assert (cpu["weights"], cpu["gradients"], cpu["optimizer"]) == (8192, 8192, 32768)
    bad = spec(tmp_path / "b.yaml", ops, config={"training": "adagrad"})
    done = run("plan", bad)
    assert done.code == 2
    assert (
        "config.training.optimizer: 'adagrad' is not an optimizer; use one of sgd, momentum, adam, adamw"
        in done.err
    )
    done = run("plan", good, "--dtype", "float16", "--training", "sgd", "--json")
    assert json.loads(done.out)["training"]["dtype"] == "float16"  # the flags win
    plain = spec(tmp_path / "p.yaml", ops)
    done = run("plan", plain, "--dtype", "float16")
    assert (done.code, done.err) == (
        2,
        "error: --dtype float16 sizes a training step in mixed precision: give the optimizer too (e.g. --training adam)\n",
    )
    done = run("mem", "--training", "adam")
    assert done.code == 2 and done.err.startswith("error: --training needs a GRAPH")
    with pytest.raises(gpuplace.BadInput, match=r"Options.training='adagrad': not an optimizer"):
        view = gpuplace.view(gpuplace.discover("1xK520"), {})
        gpuplace.prepare(plain, view, gpuplace.Options(training="adagrad"), {}, feeds=False)


def test_keras_seed_example_does_not_fit_one_k520_for_adam_and_fits_spread(run: Run) -> None:
    path = str(EXAMPLES / "keras_seed.yaml")
    tf = run("--machine", "4xK520", "plan", path, "--training", "adam", "--json")
    assert tf.code == 1
    assert "error: a training step (adam) would need 4.9 GiB" in tf.err
    spread = run(
        "--machine",
        "4xK520",
        "plan",
        path,
        "--training",
        "adam",
        "--strategy",
        "balanced",
        "--json",
    )
    assert spread.code == 0
    assert all(d["fits"] is not False for d in json.loads(spread.out)["devices"])
    assert os.path.getsize(path) < 4096


def test_an_imported_models_onnx_ops_keep_what_their_tf_twins_keep(tmp_path: Path) -> None:
    """ONNX MatMul and Relu (an imported model's ops) follow the same gradient rules as matmul
    and relu: the same bytes, not the everything-kept default of an unknown op."""
    text = Path(mlp(tmp_path / "tf.yaml")).read_text()
    onnx_path = tmp_path / "onnx.yaml"
    onnx_path.write_text(text.replace("matmul", "MatMul").replace("relu", "Relu"))
    assert "MatMul" in onnx_path.read_text()
    adam = Training("adam")
    assert one_device(str(onnx_path), adam) == one_device(str(tmp_path / "tf.yaml"), adam)
