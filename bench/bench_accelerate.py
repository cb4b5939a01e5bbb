"""gpuplace's `balanced` beside Hugging Face Accelerate's `infer_auto_device_map` on the example
ONNX models (gpuplace/examples/onnx/, made by tools/make_onnx_examples.py), under one
`max_memory` for both, on the simulated machine 4xK520.

For each model and setting: Accelerate's map is computed on the PyTorch model the example was
exported from (Accelerate fills GPU 0, then GPU 1, ... in module order, sizing modules by their
weights), then judged inside gpuplace: every op is pinned to the device of its module
(`Options.device_map`, the longest module prefix; ops outside any module follow TensorFlow's
rules) and placed, its memory predicted and its step estimated by the same model as `balanced`'s
(`gpuplace plan`). Printed per placement: the predicted peak per device, whether it fits every
device's cap, the estimated step time, and `ratio` = balanced / Accelerate (below 1: balanced is
faster). TensorFlow's own placement (everything on GPU:0) is the baseline when Accelerate is not
importable (the Accelerate rows then say they were skipped).

Goal (issue 14): balanced fits wherever Accelerate fits, its estimated step is no worse on every
example and better on at least one.

Settings: "roomy" gives each GPU 3 GiB (large batches: activations dominate, which Accelerate does
not size); "tight" gives each GPU 60% of what the whole model needs on one GPU (gpuplace's
predicted peak of TensorFlow's placement, weights and activations, at a small batch), so that
no placement fits on one GPU.

Run: python bench/bench_accelerate.py [--smoke] under a Python that has gpuplace and, for the
Accelerate rows, torch and accelerate (e.g. a venv with `pip install -e . torch accelerate`).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SMOKE = "--smoke" in sys.argv
MiB = 1024**2
GPUS = 4

# model, its dims in the roomy setting, in the tight one
MODELS: list[tuple[str, dict[str, int], dict[str, int]]] = [
    ("mlp", {"batch": 1024 if SMOKE else 262144}, {"batch": 16}),
    ("cnn", {"batch": 64 if SMOKE else 2048}, {"batch": 4}),
    ("branches", {"batch": 4096 if SMOKE else 262144}, {"batch": 16}),
    ("gpt2_tiny", {"batch": 4 if SMOKE else 64, "seq": 128}, {"batch": 1, "seq": 16}),
]
if SMOKE:
    MODELS = MODELS[:3:2]  # mlp and branches


def accelerate_map(name: str, max_memory: Mapping[int | str, int]) -> dict[str, int | str] | str:
    """Accelerate's device map for the PyTorch model `name` was exported from, or why not."""
    try:
        from accelerate import infer_auto_device_map
    except ImportError as exc:
        return f"skipped: accelerate/torch not importable ({exc})"
    sys.path.insert(0, str(ROOT / "tools"))
    import logging
    import warnings

    import make_onnx_examples

    model = make_onnx_examples._models()[name][0]
    logging.getLogger("accelerate").setLevel(logging.ERROR)  # "Device 0 is not available"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dict(infer_auto_device_map(model, max_memory=dict(max_memory)))


def one_gpu_peak(path: Path, dims: dict[str, int]) -> int | str:
    """The predicted peak of the whole model on one GPU (TensorFlow's placement, no cap), or
    why gpuplace cannot plan it."""
    found = judge(path, dims, "CPU=1TiB", strategy="tensorflow")
    return str(found["error"]) if "error" in found else int(found["peaks"][0])


def judge(path: Path, dims: dict[str, int], max_memory: str, **how: Any) -> dict[str, Any]:
    """Place `path` (strategy, or a pinned device map), predict its memory, estimate its step."""
    import gpuplace
    from gpuplace.errors import GpuplaceError
    from gpuplace.pipeline import estimate_plan, predict_memory, prepare

    view = gpuplace.view(gpuplace.discover(f"{GPUS}xK520"), {})
    options = gpuplace.Options(dims=dims, max_memory=max_memory, **how)
    try:
        prepared = prepare(str(path), view, options, {}, feeds=False)
    except GpuplaceError as exc:
        return {"error": str(exc).split(". ")[0]}
    memory, oom = predict_memory(prepared, view)
    est = estimate_plan(prepared, view)
    return {
        "peaks": [m.peak for m in memory if "GPU" in m.device],
        "fits": oom is None,
        "step": est.estimate.makespan,
    }


def row(label: str, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"  {label:<12} {r['error']}"
    peaks = " ".join(f"{p / MiB:8.1f}" for p in r["peaks"])
    return f"  {label:<12} {peaks}   {'yes' if r['fits'] else 'NO ':<4} {r['step'] * 1e3:10.3f}"


def main() -> int:
    examples = ROOT / "gpuplace" / "examples" / "onnx"
    verdicts: list[tuple[str, bool, bool, float]] = []
    for setting in ("roomy", "tight"):
        for name, roomy, tight in MODELS:
            path = examples / f"{name}.onnx"
            dims = roomy if setting == "roomy" else tight
            peak = 0 if setting == "roomy" else one_gpu_peak(path, dims)
            if isinstance(peak, str):
                print(f"{name} ({setting}): skipped: {peak}\n")
                continue
            cap = 3 * 1024 * MiB if setting == "roomy" else math.ceil(0.6 * peak)
            caps: dict[int | str, int] = {i: cap for i in range(GPUS)}
            caps["cpu"] = 30 * 1024 * MiB
            text = ",".join(f"GPU:{i}={cap}B" for i in range(GPUS)) + f",CPU={caps['cpu']}B"
            shown = ", ".join(f"{k}={v}" for k, v in dims.items())
            print(f"{name} ({shown}), max_memory {cap / MiB:.3f} MiB per GPU ({setting})")
            print(f"  {'placement':<12} {'peak MiB per GPU:0..3':>35}   fits {'step ms':>10}")
            balanced = judge(path, dims, text, strategy="balanced")
            tf = judge(path, dims, text, strategy="tensorflow")
            print(row("balanced", balanced))
            print(row("tensorflow", tf))
            found = accelerate_map(name, caps)
            if isinstance(found, str):
                print(f"  {'accelerate':<12} {found}")
                base, against = tf, "tensorflow"
            else:
                base, against = judge(path, dims, text, device_map=found), "accelerate"
                print(row("accelerate", base))
                print(f"  accelerate's map: {found}")
            if against == "accelerate":
                fit = (base.get("fits", False), balanced.get("fits", False))
                both = "error" not in balanced and "error" not in base
                ratio = balanced["step"] / base["step"] if both else math.nan
                verdicts.append((f"{name} {setting}", *fit, ratio))
            if "error" in balanced or "error" in base:
                print("  ratio n/a (a placement failed)\n")
                continue
            ratio = balanced["step"] / base["step"]
            print(f"  balanced / {against} step: ratio {ratio:.3f}")
            print()
    if verdicts:
        fits = all(b or not a for _, a, b, _ in verdicts)
        # where both fit: the step of a map that runs out of memory is not a step
        compared = [(n, r) for n, a, b, r in verdicts if a and b and r == r]
        no_worse = all(r <= 1.0 + 1e-9 for _, r in compared)
        better = [n for n, a, b, r in verdicts if b and (not a or r < 0.99)]
        print(f"balanced fits wherever Accelerate fits: {'yes' if fits else 'NO'}")
        print(
            f"estimated step no worse where both fit: {'yes' if no_worse else 'NO'} "
            f"({', '.join(f'{n} {r:.3f}' for n, r in compared) or 'none compared'})"
        )
        print(
            f"better (faster, or fits where Accelerate does not) on: {', '.join(better) or 'none'}"
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
