"""`plan` predicts what `run` holds: per-device peaks (and reservations, and the OOM) from shapes
and the execution order, equal to what a simulated run reports; `run` refuses a predicted OOM."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuplace.cli import AppContext
from gpuplace.errors import RuntimeFailure
from gpuplace.memory.ledger import OutOfMemory
from gpuplace.options import Options
from gpuplace.pipeline import execute_prepared, predict_memory, prepare
from tests.conftest import Run
from tests.fakes.fake_pynvml import MiB
from tests.memory.helpers import PREDICTED, matmul_graph, oom_10mib, spec

GUIDE = Path(__file__).resolve().parent.parent.parent / "examples" / "guide"


@pytest.mark.parametrize(
    ("machine", "example"),
    [
        ("1xK40c", "01_log_placement.yaml"),
        ("1xK40c", "02_manual_placement.yaml"),
        ("4xK20m", "04_multi_tower.yaml"),
    ],
)
def test_plan_predicts_the_peaks_run_reports(run: Run, machine: str, example: str) -> None:
    path = str(GUIDE / example)
    plan = json.loads(run("--machine", machine, "plan", path, "--json").out)
    done = json.loads(run("--machine", machine, "run", path, "--json").out)
    predicted = {d["device"]: d["peak_predicted"] for d in plan["devices"]}
    assert predicted == done["memory_peak"]
    assert {m["device"]: m["peak"] for m in done["memory"]} == done["memory_peak"]
    assert any(peak > 0 for peak in predicted.values())


def _graph(draw: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """A random small DAG: chains and diamonds of [n, n] tensors on random devices."""
    n = draw(st.sampled_from([1, 3, 16, 64, 100]))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    devices = st.sampled_from([None, "/cpu:0", "/gpu:0", "/gpu:1"])
    ops: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 9))):
        name = f"op{i}"
        kind = "gen" if i == 0 else draw(st.sampled_from(["gen", "unary", "binary", "binary"]))
        earlier = st.sampled_from([o["name"] for o in ops]) if ops else None
        if kind == "gen":
            op = draw(st.sampled_from(["ones", "zeros", "random_uniform", "variable"]))
            entry: dict[str, Any] = {"name": name, "op": op, "shape": [n, n]}
            if op != "variable":
                entry["dtype"] = dtype
            else:
                entry["initializer"] = "ones"
        elif kind == "unary":
            op = draw(st.sampled_from(["tanh", "relu", "neg", "identity"]))
            entry = {"name": name, "op": op, "inputs": [draw(earlier)]}
        else:
            op = draw(st.sampled_from(["add", "mul", "matmul"]))
            entry = {"name": name, "op": op, "inputs": [draw(earlier), draw(earlier)]}
        device = draw(devices)
        if device:
            entry["device"] = device
        ops.append(entry)
    # variables are float32; keep one dtype per graph so every op type-checks
    if any(o["op"] == "variable" for o in ops):
        for o in ops:
            if "dtype" in o:
                o["dtype"] = "float32"
    names = [o["name"] for o in ops]
    fetch = sorted(set(draw(st.lists(st.sampled_from(names), max_size=2))) | {names[-1]})
    return ops, fetch


graphs = st.composite(_graph)


def _prepared(ops: list[dict[str, Any]], fetch: list[str], **options: Any) -> tuple[Any, Any]:
    app = AppContext(env={}, machine_spec="2xK520")
    view = app.view()
    with tempfile.TemporaryDirectory() as folder:
        path = spec(
            Path(folder) / "g.yaml", ops, fetch=fetch, config={"allow_soft_placement": True}
        )
        return prepare(path, view, Options(**options), {}), view


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), growth=st.booleans())
def test_prediction_equals_a_simulated_run(
    graph: tuple[list[dict[str, Any]], list[str]], growth: bool
) -> None:
    prepared, view = _prepared(*graph, allow_growth=growth)
    predicted, oom = predict_memory(prepared, view)
    assert oom is None
    outcome = execute_prepared(prepared, view)
    assert predicted == outcome.memory  # device, reserved, peak, limit: all equal
    assert {m.device: m.peak for m in outcome.memory} == outcome.result.peak_bytes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), limit_kib=st.integers(1, 64))
def test_predicted_oom_is_the_oom_a_run_hits(
    graph: tuple[list[dict[str, Any]], list[str]], limit_kib: int
) -> None:
    try:
        prepared, view = _prepared(*graph, memory_limit=f"{limit_kib}KiB")
    except RuntimeFailure as err:  # a single tensor larger than a whole device: refused earlier
        assert "larger than all" in str(err) and "nothing was allocated" in str(err)
        event("refused: a tensor larger than its device")
        return
    predicted, oom = predict_memory(prepared, view)
    try:
        execute_prepared(prepared, view)
    except OutOfMemory as real:
        assert oom is not None
        assert (oom.op, oom.device, oom.requested, oom.in_use, oom.limit, oom.reserved) == (
            real.op, real.device, real.requested, real.in_use, real.limit, real.reserved,
        )  # fmt: skip
        assert "Predicted before running (plan)" in str(oom)
        assert "The run stopped and freed everything" in str(real)
        event("out of memory")
    else:
        assert oom is None
        assert all(m.limit is None or m.peak <= m.limit for m in predicted)


def test_run_plans_its_layout_once_for_the_prediction_and_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`run` predicts, then runs the layout it predicted from; a second run plans again."""
    import gpuplace.execute.predict as predict

    planned: list[int] = []
    original = predict.placed_layout

    def counted(*args: Any) -> Any:
        planned.append(len(args[0].ops))
        return original(*args)

    monkeypatch.setattr(predict, "placed_layout", counted)
    prepared, view = _prepared([{"name": "a", "op": "ones", "shape": [2, 2]},
                                {"name": "b", "op": "add", "inputs": ["a", "a"]}], ["b"])  # fmt: skip
    predict_memory(prepared, view)
    first = execute_prepared(prepared, view)
    assert planned == [2]
    again = execute_prepared(prepared, view)
    assert planned == [2, 2]
    assert first.result.values["b"].tolist() == again.result.values["b"].tolist() == [[2.0] * 2] * 2


def test_run_refuses_a_predicted_oom(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("--machine", "1xK520", "run", graph, "--memory-limit", "10MiB")
    assert (result.code, result.out) == (1, "")
    assert result.err == oom_10mib(PREDICTED)


def test_run_with_force_runs_until_the_real_oom(run: Run, tmp_path: Path) -> None:
    graph = spec(
        tmp_path / "g.yaml",
        [
            {"name": "a", "op": "ones", "shape": [1024, 1024]},
            {"name": "b", "op": "ones", "shape": [1024, 1024]},
            {"name": "c", "op": "add", "inputs": ["a", "b"]},
            {"name": "d", "op": "add", "inputs": ["c", "c"]},
        ],
        fetch=["d"],
    )
    limit = ("--memory-limit", "10MiB")
    refused = run("--machine", "1xK520", "run", graph, *limit)
    assert refused.code == 1 and "Predicted before running" in refused.err
    assert "for op 'c'" in refused.err
    forced = run("--machine", "1xK520", "run", graph, *limit, "--force")
    assert (forced.code, forced.out) == (1, "")
    # it ran (a and b were allocated) and hit the OOM the plan predicted, on the same op
    assert forced.err.startswith("error: OOM when allocating 4.0 MiB (4194304 B) for op 'c'")
    assert "8.0 MiB (8388608 B) in use" in forced.err
    assert "The run stopped and freed everything it had allocated" in forced.err


def test_run_with_force_when_the_plan_fits(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml", 512)  # three 1 MiB tensors
    for extra in ((), ("--force",)):
        result = run(
            "--machine", "1xK520", "run", graph, "--memory-limit", "3MiB", "--json", *extra
        )
        assert result.code == 0
        [gpu] = [m for m in json.loads(result.out)["memory"] if m["device"].endswith("GPU:0")]
        assert (gpu["peak"], gpu["reserved"], gpu["limit"]) == (3 * MiB, 3 * MiB, 3 * MiB)


def test_plan_exits_1_and_marks_the_device_that_does_not_fit(run: Run, tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml")
    result = run("--machine", "1xK520", "plan", graph, "--memory-limit", "10MiB", "--allow-growth")
    assert result.code == 1
    gpu0 = next(line for line in result.out.splitlines() if line.startswith("GPU:0 "))
    assert gpu0.split()[:6] == ["GPU:0", "3", "12.0", "MiB", "0", "0"]
    assert gpu0.split()[-3:] == ["12MiB", "10MiB", "NO"]  # device memory in MiB, as nvidia-smi
    # with growth the reservation is the regions grown so far (4 + 4 MiB), not the limit
    assert "8.0 MiB (8388608 B) in use, 8.0 MiB (8388608 B) reserved, limit 10.0 MiB" in result.err
