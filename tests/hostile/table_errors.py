"""Hostile inputs, classes 3, 4 and 6: tracebacks, wrong exit codes or silent acceptance, and
results that are silently wrong; with what held (YAML's python tags, pickled and evil .npy)."""

from __future__ import annotations

from tests.hostile.cases import MATMUL, SIM, Case, Link, npy, q, spec

DIGITS = "9" * 400
ONE = spec("{name: a, op: ones, shape: [2]}")
LOAD = spec("{name: x, op: load, path: x.npy}", "{name: y, op: neg, inputs: [x]}")
FEED = spec("{name: x, op: placeholder, shape: [2]}", "{name: y, op: neg, inputs: [x]}")
DEEP_MACHINE = "gpus: " + "[" * 10_000 + "]" * 10_000 + "\n"
# minutes of matmuls on the CPU, interrupted long before the end
LONG_RUN = spec(
    "{name: a, op: random_normal, shape: [1500, 1500], seed: 1, device: /cpu:0}",
    *(
        f"{{name: m{i}, op: matmul, inputs: [{'a' if i == 0 else f'm{i - 1}'}, a], device: /cpu:0}}"
        for i in range(400)
    ),
)

# across hosts (#15): repeat counts, task counts, lengths and nesting are bounded before use
CLUSTERS = [
    Case("cluster-machine-repeat-400-digits", "traceback",
         ("--machine", DIGITS + "x(4xK520)", "plan", "g.yaml"), 2, "--machine", {"g.yaml": ONE}),
    Case("cluster-machine-5000-hosts", "flood",
         ("--machine", "+".join(["1xT4"] * 5000), "devices"), 2, "at most 4096"),
    Case("cluster-block-billion-tasks", "traceback", (*SIM, "plan", "g.yaml"), 2,
         "job worker has 1000000000 tasks",
         {"g.yaml": "cluster: {worker: 1000000000}\n" + ONE}),
    Case("cluster-file-10000-deep", "traceback", ("--cluster", "c.yaml", "devices"), 2,
         r"c\.yaml", {"c.yaml": "cluster: " + "[" * 10_000 + "]" * 10_000 + "\n"}),
    Case("cluster-scheduler-json-100000-deep", "traceback", ("--cluster", "s.json", "devices"), 2,
         r"s\.json: the JSON is nested too deeply", {"s.json": "[" * 100_000 + "]" * 100_000}),
    Case("device-map-100000-deep", "traceback", (*SIM, "plan", "g.yaml", "--device-map", "m.json"),
         2, r"m\.json: the JSON is nested too deeply",
         {"g.yaml": ONE, "m.json": "[" * 100_000 + "]" * 100_000}),
    Case("cluster-env-5000-chars", "traceback", ("devices",), 2, "GPUPLACE_CLUSTER",
         env={"GPUPLACE_CLUSTER": "c" * 5000}),
    Case("cluster-master-400-digits", "traceback", (*SIM, "plan", "g.yaml"), 2, "master",
         {"g.yaml": f"cluster: {{worker: 2, master: /job:worker/task:{DIGITS}}}\n" + ONE}),
]  # fmt: skip

TRACEBACKS = [
    Case("memory-limit-400-digits", "traceback",
         (*SIM, "run", "g.yaml", "--memory-limit", DIGITS + "GiB"), 2, "--memory-limit",
         {"g.yaml": ONE}),
    Case("memory-limit-1e400B", "held", (*SIM, "run", "g.yaml", "--memory-limit", "1e400B"), 2,
         "--memory-limit", {"g.yaml": ONE}),
    Case("min-memory-400-digits", "traceback",
         (*SIM, "devices", "--min-memory", DIGITS + "B"), 2, "--min-memory"),
    Case("machine-5000-chars", "traceback", ("--machine", "a" * 5000, "devices"), 2, "--machine"),
    Case("machine-env-5000-chars", "traceback", ("devices",), 2, "GPUPLACE_MACHINE",
         env={"GPUPLACE_MACHINE": "b" * 5000}),
    Case("machine-file-not-utf8", "traceback", ("--machine", "m.yaml", "devices"), 2, r"m\.yaml",
         {"m.yaml": b"gpus:\n  - name: K520\n\xff\xfe\n"}),
    Case("machine-file-control-chars", "traceback", ("--machine", "m.yaml", "devices"), 2,
         r"m\.yaml", {"m.yaml": b'gpus:\n  - name: "K5\x01 20"\n'}),
    Case("machine-file-10000-deep", "traceback", ("--machine", "m.yaml", "devices"), 2,
         r"m\.yaml", {"m.yaml": DEEP_MACHINE}),
    Case("machine-file-memory-400-digits", "traceback", ("--machine", "m.yaml", "devices"), 2,
         r"m\.yaml|memory", {"m.yaml": f"gpus:\n  - {{name: Big, memory: {DIGITS}GiB}}\n"}),
    Case("machine-file-is-folder", "held", ("--machine", "m.yaml", "devices"), 2, r"m\.yaml",
         {"m.yaml/x": "gpus: []\n"}),
    Case("replicate-merge-a-list", "traceback", (*SIM, "plan", "g.yaml"), 2, "merge",
         {"g.yaml": spec("{name: x, op: placeholder, shape: [64, 8]}",
                         "{replicate: {gpus: 4, split: [x], merge: [concat]}, "
                         "graph: [{name: y, op: relu, inputs: [x]}]}")}),
    Case("feed-30000-deep", "traceback",
         (*SIM, "run", "g.yaml", "--feed", "x=" + "[" * 30_000 + "]" * 30_000), 2, "--feed x",
         {"g.yaml": FEED}),
    Case("spec-not-utf8", "held", (*SIM, "run", "g.yaml"), 2, r"g\.yaml",
         {"g.yaml": b"graph:\n  - {name: \xff, op: ones, shape: [2]}\n"}),
    Case("spec-control-chars", "held", (*SIM, "run", "g.yaml"), 2, r"g\.yaml",
         {"g.yaml": b"graph:\n  - {name: a\x07, op: ones, shape: [2]}\n"}),
    Case("spec-100000-deep", "held", (*SIM, "plan", "g.yaml"), 2, r"g\.yaml",
         {"g.yaml": "graph: " + "[" * 100_000 + "]" * 100_000 + "\n"}),
    Case("spec-json-100000-deep", "held", (*SIM, "plan", "g.json"), 2, r"g\.json",
         {"g.json": '{"graph": ' + "[" * 100_000 + "]" * 100_000 + "}"}),
    Case("spec-is-folder", "held", (*SIM, "run", "g.yaml"), 2, r"g\.yaml", {"g.yaml/x": ONE}),
    Case("spec-name-too-long", "flood", (*SIM, "run", "g" * 5000 + ".yaml"), 2, r"cannot read"),
    Case("sigint-at-50ms", "traceback", (*SIM, "run", "g.yaml"), 130, "",
         {"g.yaml": LONG_RUN}, fresh=True, interrupt_after=0.05),
    *CLUSTERS,
]  # fmt: skip

EXIT_CODES = [
    Case("shape-65-dims", "exit", (*SIM, "run", "g.yaml"), 2, r"64|dimensions",
         {"g.yaml": spec("{name: z, op: zeros, shape: [" + ", ".join(["1"] * 65) + "]}")}),
    Case("value-int-beyond-float", "exit", (*SIM, "run", "g.yaml"), 2, r"value",
         {"g.yaml": spec(f"{{name: c, op: constant, value: [1{'0' * 400}], dtype: float32}}")}),
    Case("value-int-beyond-int64", "held", (*SIM, "run", "g.yaml"), 2, r"value",
         {"g.yaml": spec("{name: c, op: constant, value: [99999999999999999999], dtype: int64}")}),
    Case("duplicate-axis", "exit", (*SIM, "run", "g.yaml"), 2, r"axis",
         {"g.yaml": spec("{name: a, op: ones, shape: [2, 2]}",
                         "{name: s, op: reduce_sum, inputs: [a], axis: [0, 0]}")}),
    Case("npy-truncated-load", "exit", (*SIM, "run", "g.yaml"), 2, r"x\.npy",
         {"g.yaml": LOAD, "x.npy": npy("(100,)", data=b"\0" * 16)}),
    Case("npy-truncated-plan", "exit", (*SIM, "plan", "g.yaml"), 2, r"x\.npy",
         {"g.yaml": LOAD, "x.npy": npy("(100,)", data=b"\0" * 16)}),
    Case("npy-negative-shape-load", "exit", (*SIM, "run", "g.yaml"), 2, r"x\.npy",
         {"g.yaml": LOAD, "x.npy": npy("(-4, -4)", data=b"")}),
    Case("npy-negative-shape-plan", "silent", (*SIM, "plan", "g.yaml"), 2, r"x\.npy",
         {"g.yaml": LOAD, "x.npy": npy("(-4, -4)", data=b"")}),
    Case("npy-truncated-feed", "held", (*SIM, "run", "g.yaml", "--feed", "x=x.npy"), 2,
         r"x\.npy", {"g.yaml": FEED, "x.npy": npy("(2,)", data=b"\0" * 3)}),
    Case("load-path-nul", "held", (*SIM, "run", "g.yaml"), 2, r"NUL|null",
         {"g.yaml": spec("{name: x, op: load, path: " + q("x\0.npy") + "}")}),
    Case("yaml-duplicate-key", "exit", (*SIM, "run", "g.yaml"), 2, r"g\.yaml:3:.*duplicate.*first at 2:",
         {"g.yaml": "graph:\n  - name: a\n    name: b\n    op: ones\n    shape: [2]\n"}),
    Case("yaml-duplicate-top-key", "exit", (*SIM, "run", "g.yaml"), 2, r"duplicate",
         {"g.yaml": ONE + ONE}),
    Case("json-duplicate-key", "exit", (*SIM, "run", "g.json"), 2, r"duplicate",
         {"g.json": '{"graph": [{"name": "a",\n "name": "b", "op": "ones", "shape": [2]}]}'}),
    Case("json-holding-yaml", "exit", (*SIM, "run", "g.json"), 2, r"JSON",
         {"g.json": ONE}),
    Case("feed-bool-in-floats", "exit", (*SIM, "run", "g.yaml", "--feed", "x=[1, true]"), 2,
         r"bool|true", {"g.yaml": FEED}),
    Case("sigint-mid-run", "exit", (*SIM, "run", "g.yaml"), 130, "", {"g.yaml": LONG_RUN},
         fresh=True, interrupt_after=1.5),
    Case("stdout-closed", "held", (*SIM, "run", "g.yaml"), 1, "cannot write output",
         {"g.yaml": MATMUL}, fresh=True, stdout="closed"),
    Case("stdout-dev-full", "held", (*SIM, "run", "g.yaml"), 1, "cannot write output",
         {"g.yaml": MATMUL}, fresh=True, stdout="full"),
    Case("stdout-broken-pipe", "held", (*SIM, "devices"), (1, 141), "", fresh=True,
         stdout="broken", error_line=False),
    Case("cuda-visible-fullwidth", "exit", (*SIM, "devices"), 0, r"shows none of the 4",
         env={"CUDA_VISIBLE_DEVICES": "\uff10,\uff11"}),
    Case("cuda-visible-arabic-indic", "exit", (*SIM, "devices"), 0, r"shows none of the 4",
         env={"CUDA_VISIBLE_DEVICES": "\u0660"}),
    Case("cuda-visible-superscript", "exit", (*SIM, "devices"), 0, r"shows none of the 4",
         env={"CUDA_VISIBLE_DEVICES": "\u00b2"}),
    Case("negative-dims", "held", (*SIM, "run", "g.yaml"), 2, r"shape",
         {"g.yaml": spec("{name: z, op: zeros, shape: [-3, 2]}")}),
    Case("split-zero-pieces", "held", (*SIM, "run", "g.yaml"), 2, r"num_split",
         {"g.yaml": spec("{name: a, op: ones, shape: [4]}",
                         "{name: s, op: split, inputs: [a], num_split: 0}")}),
    Case("replicate-huge", "held", (*SIM, "plan", "g.yaml", "--replicate", DIGITS), 2,
         "--replicate.*more GPUs than any machine has", {"g.yaml": FEED}),
    Case("memory-fraction-nan", "held", (*SIM, "plan", "g.yaml", "--memory-fraction", "nan"), 2,
         "--memory-fraction", {"g.yaml": ONE}),
]  # fmt: skip

# held: hostile values that today's checks already refuse when the spec loads
HELD = [
    Case("constant-nan-as-int", "held", (*SIM, "run", "g.yaml"), 2, r"nan.*int32",
         {"g.yaml": spec("{name: c, op: constant, value: [.nan, 1.0], dtype: int32}")}),
    Case("spec-empty", "held", (*SIM, "run", "g.yaml"), 2, r"empty", {"g.yaml": ""}),
    Case("load-link-to-dev-zero", "held", (*SIM, "run", "g.yaml"), 2, r"z\.npy",
         {"g.yaml": spec("{name: x, op: load, path: z.npy}"), "z.npy": Link("/dev/zero")}),
    Case("feed-link-to-dev-zero", "held", (*SIM, "run", "g.yaml", "--feed", "x=z.npy"), 2,
         r"z\.npy", {"g.yaml": FEED, "z.npy": Link("/dev/zero")}),
    Case("replicate-0", "held", (*SIM, "plan", "g.yaml", "--replicate", "0"), 2, "--replicate",
         {"g.yaml": FEED}),
    Case("random-seed-huge", "held", (*SIM, "run", "g.yaml"), 2, r"seed",
         {"g.yaml": spec(f"{{name: a, op: random_normal, shape: [2], seed: {DIGITS}}}")}),
]  # fmt: skip

SILENT = [
    Case("print-message", "silent", (*SIM, "run", "g.yaml"), 0, r"hostile-marker-42",
         {"g.yaml": spec("{name: a, op: ones, shape: [2]}",
                         "{name: p, op: print, inputs: [a], message: hostile-marker-42}")}),
    Case("yaml-python-tag", "held", (*SIM, "run", "g.yaml"), 2, r"g\.yaml",
         {"g.yaml": "graph: !!python/object/apply:os.system ['touch pwned']\n"}),
    Case("npy-pickled", "held", (*SIM, "run", "g.yaml"), 2, r"x\.npy",
         {"g.yaml": LOAD, "x.npy": npy("(2,)", descr="|O", data=b"\x80\x04N.")}),
    Case("npy-evil-header", "held", (*SIM, "run", "g.yaml"), 2, r"x\.npy",
         {"g.yaml": LOAD, "x.npy": npy(header="__import__('os').system('touch pwned')")}),
    Case("npy-header-200KB", "held", (*SIM, "plan", "g.yaml"), 2, r"x\.npy",
         {"g.yaml": LOAD, "x.npy": npy(version=(2, 0), header="{" + " " * 200_000 + "}")}),
]  # fmt: skip

CASES = [*TRACEBACKS, *EXIT_CODES, *HELD, *SILENT]
