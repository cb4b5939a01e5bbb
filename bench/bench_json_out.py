"""Writing `plan --json`'s document: `report/records.py: json_text` (orjson, the same document)
against `json.dumps(doc, indent=2)` (what gpuplace used before, and the standard library's only
way to indent: its C writer cannot; given the placement list as plain records, where
`json_text` is given it as the `JsonText` that `plan_json` makes), on the document of an N-op
chain planned on 4xK520, in one process: `python bench/bench_json_out.py [N] [--smoke]`.

Also times building the document (`report/plan.py: plan_json`, the records) beside the
pipeline's stages, to show where a whole `plan --json` goes. Best of RUNS, the two writers in
turn. `--smoke`: 1,000 ops, one run.
"""

from __future__ import annotations

import gc
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from procs import size, smoke, write_shape

from gpuplace import pipeline
from gpuplace.cli.context import AppContext
from gpuplace.options import Options
from gpuplace.report import plan as report
from gpuplace.report.records import json_text


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    n = size(100_000, 1_000)
    runs = 1 if smoke() else 3
    app = AppContext(machine_spec="4xK520")
    view = app.view()
    with tempfile.TemporaryDirectory() as tmp:
        _, spec = write_shape("chain", n, Path(tmp))
        gc.disable()  # as the command runs (the loader, placer and executor pause it too)
        stages: dict[str, float] = {}
        start = time.perf_counter()
        prepared = pipeline.prepare(spec, view, Options(), os.environ, feeds=False)
        stages["prepare (load + place)"] = time.perf_counter() - start
        start = time.perf_counter()
        memory, _ = pipeline.predict_memory(prepared, view)
        stages["predict_memory"] = time.perf_counter() - start
        start = time.perf_counter()
        est = pipeline.estimate_plan(prepared, view)
        stages["estimate_plan"] = time.perf_counter() - start
        start = time.perf_counter()
        doc = report.plan_json(view, prepared, memory, est)
        stages["plan_json (the records)"] = time.perf_counter() - start
        plain = {**doc, "placement": orjson.loads(doc["placement"].data)}  # its JsonText
        ours, base = [], []
        for _ in range(runs):
            ours.append(seconds(lambda: json_text(doc)))
            base.append(seconds(lambda: json.dumps(plain, indent=2, allow_nan=False)))
        gc.enable()
    assert json.loads(json_text(doc)) == json.loads(json.dumps(plain, indent=2, allow_nan=False))
    print(
        f"plan --json of a {n:,}-op chain on 4xK520, in process; stages once, writers best of {runs}"
    )
    for name, spent in stages.items():
        print(f"  {name}: {spent:.3f} s")
    print(f"json_text {min(ours):.3f} s, json.dumps(indent=2) {min(base):.3f} s, "
          f"ratio {min(ours) / min(base):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
