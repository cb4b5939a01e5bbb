"""`fetch:` prunes the graph as TensorFlow's session.run(fetches) does: only the ops the fetched
tensors need run (no allocation, no print, no file), in run, plan and mem alike; each says so in
one line (text) or a `pruned` list (JSON). Without `fetch:` everything runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpuplace.graph import loads
from gpuplace.graph.prune import needed, prune
from tests.conftest import Run
from tests.conftest import on_k520 as k520
from tests.conftest import write_spec as write

GPU = "/job:localhost/replica:0/task:0/device:GPU:"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
SPEC = (
    "graph:\n"
    "  - {name: a, op: constant, value: [1.0, 2.0]}\n"
    "  - {name: p, op: print, inputs: [a]}\n"
    "  - {name: q, op: neg, inputs: [p]}\n"
    "  - {name: big, op: zeros, shape: [100000, 10000]}\n"
    "  - {name: bigr, op: reduce_sum, inputs: [big]}\n"
    "  - {name: b, op: mul, inputs: [a, a]}\n"  # exact: exp's last digit depends on the CPU
    "fetch: [b]\n"
)
LINE = "fetch [b] needs 2 of 6 ops; not run (as TensorFlow's session.run): p, q, big, bigr"
SIM = "Run on the simulated machine 4xK520 (strategy tensorflow)"
RESULT = "b:\n[1. 4.]\n"


def test_run_runs_only_what_the_fetch_needs(run: Run, tmp_path: Path) -> None:
    """`big` (3.7 GiB, more than a K520 has) is not allocated and `p` prints nothing."""
    assert k520(run, "run", write(tmp_path, SPEC)) == (0, f"{SIM}\n{LINE}\n{RESULT}", "")


def test_the_placement_log_lists_every_op_tensorflow_placed(run: Run, tmp_path: Path) -> None:
    """TF (place_pruned_graph: false, its default) places the whole graph, then runs what the
    fetches need: its log names every op; the next line says which did not run."""
    code, out, err = k520(run, "run", write(tmp_path, SPEC), "--log-placement")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[5:] == [
        f"a: {GPU}0", f"p: {CPU0}", f"q: {GPU}0", f"big: {GPU}0", f"bigr: {GPU}0", f"b: {GPU}0",
        LINE, "b:", "[1. 4.]",
    ]  # fmt: skip


def test_run_json_carries_the_pruned_ops(run: Run, tmp_path: Path) -> None:
    code, out, _ = k520(run, "run", write(tmp_path, SPEC), "--json", "--explain")
    doc = json.loads(out)
    assert code == 0 and doc["pruned"] == ["p", "q", "big", "bigr"]
    assert [p["op"] for p in doc["placement"]] == ["a", "p", "q", "big", "bigr", "b"]
    assert list(doc["results"]) == ["b"] and doc["printed"] == []


def test_plan_and_mem_prune_alike(run: Run, tmp_path: Path) -> None:
    spec = write(tmp_path, SPEC)
    code, out, err = k520(run, "plan", spec)
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[:2] == ["Plan on the simulated machine 4xK520 (strategy tensorflow)", LINE]
    assert [row.split()[0] for row in lines[3:5]] == ["a", "b"] and lines[5] == ""
    assert lines[7].split()[:2] == ["GPU:0", "2"]  # ops on GPU:0: the two that run
    doc = json.loads(k520(run, "plan", spec, "--json")[1])
    assert doc["pruned"] == ["p", "q", "big", "bigr"]
    assert sum(d["ops"] for d in doc["devices"]) == 2
    assert k520(run, "plan", spec, "--format", "dot")[1].startswith(f"// {LINE}\ndigraph ")
    code, out, err = k520(run, "mem", spec)
    assert (code, err) == (0, "")
    assert out.splitlines()[:3] == [
        "Simulated machine 4xK520 (every device below is simulated)",
        LINE,
        "DEVICE  CARD                POLICY   RESERVED  PEAK IN USE  LIMIT",
    ]
    assert json.loads(k520(run, "mem", spec, "--json")[1])["pruned"] == ["p", "q", "big", "bigr"]


def test_without_fetch_everything_runs(run: Run, tmp_path: Path) -> None:
    """The default fetch is every output nobody consumes: the whole graph, saves included."""
    spec = write(
        tmp_path,
        "graph:\n"
        "  - {name: a, op: constant, value: [1.0, 2.0]}\n"
        "  - {name: p, op: print, inputs: [a]}\n"
        "  - {name: s, op: save, inputs: [a], path: a.npy}\n"
        "  - {name: b, op: exp, inputs: [a]}\n",
    )
    code, out, err = k520(run, "run", spec, "--json")
    doc = json.loads(out)
    assert (code, err, doc["pruned"], doc["printed"]) == (0, "", [], ["p: [1. 2.]"])
    assert list(doc["results"]) == ["p", "b"]
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), [1.0, 2.0])
    assert "needs" not in k520(run, "plan", spec)[1]


def test_a_long_list_of_pruned_ops_shows_its_ends_and_the_count(run: Run, tmp_path: Path) -> None:
    side = "".join(f"  - {{name: n{i}, op: neg, inputs: [a]}}\n" for i in range(11))
    spec = write(
        tmp_path,
        "graph:\n  - {name: a, op: constant, value: [1.0]}\n" + side + "fetch: [a]\n",
    )
    code, out, _ = k520(run, "run", spec)
    assert code == 0 and out.splitlines()[1] == (
        "fetch [a] needs 1 of 12 ops; not run (as TensorFlow's session.run): "
        "n0, n1, n2, n3, ... (3 more) ..., n7, n8, n9, n10"
    )


PLACEHOLDERS = (
    "graph:\n"
    "  - {name: x, op: placeholder, shape: [2]}\n"
    "  - {name: y, op: placeholder, shape: [2]}\n"
    "  - {name: a, op: exp, inputs: [x]}\n"
    "  - {name: b, op: neg, inputs: [y]}\n"
    "fetch: [b]\n"
)


def test_only_the_placeholders_the_fetch_needs_must_be_fed(run: Run, tmp_path: Path) -> None:
    spec = write(tmp_path, PLACEHOLDERS)
    code, out, err = k520(run, "run", spec, "--feed", "y=[1, 2]", "--no-log-placement")
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        "fetch [b] needs 2 of 4 ops; not run (as TensorFlow's session.run): x, a",
        "b:",
        "[-1. -2.]",
    ]
    code, _, err = k520(run, "run", spec, "--feed", "x=[1, 2]")
    assert code == 2 and err.startswith("error: You must feed a value for placeholder tensor 'y'")
    code, _, err = k520(run, "run", spec, "--feed", "y=[1, 2]", "--feed", "x=[1]")
    assert code == 2 and "Tensor 'x:0', which has shape '(2,)'" in err  # still checked


UNPLACEABLE = (
    "graph:\n"
    "  - {name: a, op: constant, value: [1.0]}\n"
    "  - {name: c, op: neg, inputs: [a], device: /gpu:9}\n"
    "  - {name: b, op: exp, inputs: [a]}\n"
    "fetch: [b]\n"
)


@pytest.mark.parametrize(("strategy", "code"), [("tensorflow", 1), ("balanced", 0)])
def test_tensorflow_places_the_whole_graph_balanced_only_what_runs(
    run: Run, tmp_path: Path, strategy: str, code: int
) -> None:
    """TensorFlow's placer sees every op (a device no machine has fails, fetched or not);
    balanced and round-robin spread work, so they place only the ops that run."""
    result = k520(run, "run", write(tmp_path, UNPLACEABLE), "--strategy", strategy)
    assert result[0] == code
    if code:
        assert result[2].startswith("error: Cannot assign a device for operation c:")


def test_prune_keeps_run_order_and_leaves_default_fetches_whole() -> None:
    graph = loads(SPEC)
    kept = prune(graph)
    assert [op.name for op in kept.graph.ops] == ["a", "b"]
    assert kept.dropped == ("p", "q", "big", "bigr")
    whole = loads(SPEC.replace("fetch: [b]\n", ""))
    assert needed(whole) is None and prune(whole).graph is whole
    listed = loads(SPEC.replace("fetch: [b]", "fetch: [q, bigr, b]"))
    assert needed(listed) is None  # the default fetch written out: the same graph


def test_a_save_named_in_fetch_runs_as_a_target(run: Run, tmp_path: Path) -> None:
    """`fetch: [b, s]` runs the save (and what it needs) as `session.run([b, save_op])` does;
    with `fetch: [b]` alone the save is pruned, and the line says so."""
    out = tmp_path / "out.npy"
    spec = SPEC.replace("fetch: [b]\n", "  - {name: s, op: save, inputs: [q], path: out.npy}\n")
    code, stdout, _ = k520(run, "run", write(tmp_path, spec + "fetch: [b, s]\n"))
    assert code == 0
    assert (
        "fetch [b, s] needs 5 of 7 ops; not run (as TensorFlow's session.run): big, bigr" in stdout
    )
    np.testing.assert_array_equal(np.load(out), [-1.0, -2.0])
    out.unlink()
    code, stdout, _ = k520(run, "run", write(tmp_path, spec + "fetch: [b]\n"))
    assert code == 0 and "not run (as TensorFlow's session.run): p, q, big, bigr, s" in stdout
    assert not out.exists()


def test_an_explicit_fetch_of_every_unconsumed_output_still_prunes_a_save(
    run: Run, tmp_path: Path
) -> None:
    """`fetch: [b]` is explicit even when b is the only unconsumed output: the save (no output)
    and the 6 GiB tensor it would write are not needed, so they do not run; without `fetch:`
    everything runs (and the tensor does not fit a K520)."""
    spec = (
        "graph:\n"
        "  - {name: a, op: constant, value: [1.0, 2.0], shape: [2]}\n"
        "  - {name: b, op: neg, inputs: [a]}\n"
        "  - {name: big, op: random_normal, shape: [40000, 40000]}\n"
        "  - {name: sv, op: save, inputs: [big], path: big.npy}\n"
    )
    code, out, err = k520(run, "run", write(tmp_path, spec + "fetch: [b]\n"))
    assert (code, err) == (0, "")
    assert "fetch [b] needs 2 of 4 ops; not run (as TensorFlow's session.run): big, sv\n" in out
    assert not (tmp_path / "big.npy").exists()
    code, _, err = k520(run, "run", write(tmp_path, spec))
    assert code == 1 and "op 'big' (random_normal) outputs a [40000, 40000] float32" in err


@pytest.mark.parametrize("strategy", ["tensorflow", "balanced", "round-robin"])
def test_a_kept_op_keeps_the_device_of_a_pruned_colocation_target(
    run: Run, tmp_path: Path, strategy: str
) -> None:
    """c carries x's device (TF1 copies it at colocate_with), so pruning x changes nothing."""
    spec = (
        "graph:\n"
        "  - {name: a, op: constant, value: 1.0, shape: [2, 2]}\n"
        "  - {name: x, op: relu, inputs: [a], device: /gpu:2}\n"
        "  - {name: c, op: neg, inputs: [a], colocate_with: x}\n"
        "fetch: [c]\n"
    )
    code, out, _ = k520(
        run, "run", write(tmp_path, spec), "--log-placement", "--strategy", strategy
    )
    assert code == 0 and f"c: {GPU}2\n" in out


def test_a_fetch_of_only_a_save_says_what_ran(run: Run, tmp_path: Path) -> None:
    out = tmp_path / "a.npy"
    spec = (
        "graph:\n"
        "  - {name: a, op: constant, value: [1.0, 2.0]}\n"
        "  - {name: sv, op: save, inputs: [a], path: a.npy}\n"
        "fetch: [sv]\n"
    )
    code, stdout, err = k520(run, "run", write(tmp_path, spec), "--verify")
    assert (code, err) == (0, "")
    assert stdout == f"{SIM}\nran sv; nothing fetched to show or verify\n"
    np.testing.assert_array_equal(np.load(out), [1.0, 2.0])


def test_print_says_its_message_then_the_value_on_stderr(run: Run, tmp_path: Path) -> None:
    spec = write(tmp_path, (
        "graph:\n"
        "  - {name: a, op: constant, value: [1.0, 2.0]}\n"
        "  - {name: p, op: print, inputs: [a], message: 'a is '}\n"
        "  - {name: b, op: neg, inputs: [p]}\n"
    ))  # fmt: skip
    code, out, err = k520(run, "run", spec)
    assert (code, err) == (0, "a is [1. 2.]\n") and out.endswith("b:\n[-1. -2.]\n")
