"""Real GPU: copies and a large matmul through gpuplace vs raw cupy on the same arrays.

Prints ratios (gpuplace / raw cupy, best of several runs measured in the same process); goals:
copies within 1.10, the 8192x8192 float32 matmul within 1.05. The matmul goes through what
`gpuplace run` does after start-up (`prepare` once, then `execute_prepared`: feeds in, matmul,
result out, pools released), in-process: a CLI run's start-up (imports, NVML, the CUDA context)
costs seconds against ~70 ms of work and would measure the start-up. Its raw side frees cupy's
pool after each run too, as every gpuplace run does, so both allocate afresh; with 512 MiB in
and 256 MiB out through pageable memory the row is transfer-dominated. A copy on one card
takes tens of microseconds, so that row times batches of 50. Needs cupy and a GPU; run by
`make gpu-check`. Never asserted in tests: timings are reported.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REPEAT = 7


def best(fn: Callable[[], object], sync: Callable[[], None], inner: int = 1) -> float:
    """Best seconds per call over REPEAT samples of `inner` calls each (after a warm-up)."""
    fn()
    sync()
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        times.append((time.perf_counter() - start) / inner)
    return min(times)


def main() -> int:
    import shutil

    try:
        import cupy
    except ImportError:
        print("bench_gpu: cupy is not installed; skipped")
        return 0
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver or device for cupy
        if shutil.which("nvidia-smi") is None:
            print(f"bench_gpu: no NVIDIA driver here ({type(exc).__name__}); skipped")
            return 0
        print(f"bench_gpu: nvidia-smi is here but cupy is unusable: {type(exc).__name__}: {exc}")
        return 1
    from gpuplace.devices import discover, view
    from gpuplace.execute.cupy_backend import CupyBackend
    from gpuplace.options import Options
    from gpuplace.pipeline import execute_prepared, prepare

    sync = cupy.cuda.Device(0).synchronize
    backend = CupyBackend("/device:GPU:0", 0, cupy)
    host = np.random.default_rng(0).standard_normal((64 * 2**20 // 4,), dtype=np.float32)  # 64 MiB
    on_gpu = cupy.asarray(host)
    rows = [
        (
            "host->GPU 64 MiB",
            best(lambda: backend.put(host), sync),
            best(lambda: cupy.asarray(host), sync),
        ),
        (
            "GPU->host 64 MiB",
            best(lambda: backend.get(on_gpu), sync),
            best(lambda: cupy.asnumpy(on_gpu), sync),
        ),
        (
            "GPU->GPU 64 MiB (same card)",
            best(lambda: backend.copy_from(on_gpu), sync, inner=50),
            best(lambda: on_gpu.copy(), sync, inner=50),
        ),
    ]
    n = 8192
    a = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(2).standard_normal((n, n), dtype=np.float32)
    spec = Path("/tmp/gpuplace_bench_matmul.yaml")
    spec.write_text(
        f"graph:\n  - {{name: a, op: placeholder, shape: [{n}, {n}]}}\n"
        f"  - {{name: b, op: placeholder, shape: [{n}, {n}]}}\n"
        "  - {name: c, op: matmul, inputs: [a, b], device: /gpu:0}\n"
    )
    np.save("/tmp/gpuplace_a.npy", a)
    np.save("/tmp/gpuplace_b.npy", b)
    env = dict(os.environ)  # CUDA_VISIBLE_DEVICES as cupy sees it
    v = view(discover(), env)
    options = Options(
        feeds={"a": "/tmp/gpuplace_a.npy", "b": "/tmp/gpuplace_b.npy"}, allow_growth=True
    )
    prepared = prepare(spec, v, options, env)

    def through_gpuplace() -> None:
        execute_prepared(prepared, v)

    def raw() -> None:
        da, db = cupy.asarray(a), cupy.asarray(b)
        cupy.asnumpy(da @ db)
        del da, db
        cupy.get_default_memory_pool().free_all_blocks()  # as each gpuplace run releases its pool

    rows.append(
        (f"{n}x{n} matmul (in+out, transfers)", best(through_gpuplace, sync), best(raw, sync))
    )
    print(f"{'WHAT':<34}{'GPUPLACE':>12}{'RAW CUPY':>12}{'RATIO':>8}  GOAL")
    for what, ours, theirs in rows:
        goal = 1.05 if "matmul" in what else 1.10
        verdict = "ok" if ours / theirs <= goal else "over"
        print(
            f"{what:<34}{ours * 1000:>10.2f}ms{theirs * 1000:>10.2f}ms{ours / theirs:>8.3f}  <= {goal} {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
