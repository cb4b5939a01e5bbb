"""Many GPUs from the command line: the model that does not fit GPU:0, spread by `balanced`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_tensorflow_strategy_fails_before_running_naming_gpu0(run: Run) -> None:
    result = run("--machine", "4xK520", "plan", str(EXAMPLES / "big_model.yaml"))
    assert result.code == 1
    assert result.err.startswith("error: OOM when allocating ")
    assert "on /job:localhost/replica:0/task:0/device:GPU:0" in result.err
    assert "Predicted before running (plan)" in result.err
    gpu0 = next(line for line in result.out.splitlines() if line.startswith("GPU:0 "))
    assert gpu0.endswith("NO")


def test_balanced_spreads_the_big_model_over_at_least_three_gpus(run: Run) -> None:
    result = run(
        "--machine",
        "4xK520",
        "plan",
        str(EXAMPLES / "big_model.yaml"),
        "--strategy",
        "balanced",
        "--json",
    )
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    used = [d for d in doc["devices"] if "GPU" in d["device"] and d["ops"] > 0]
    assert len(used) >= 3
    assert all(d["peak_predicted"] <= d["limit"] for d in used)
    assert {p["kind"] for p in doc["placement"]} >= {"balanced"}
    est = doc["estimate"]
    assert (
        est["makespan_seconds"]
        >= max(est["critical_path_seconds"], est["work_bound_seconds"], est["stage_bound_seconds"])
        > 0
    )


@pytest.mark.slow  # runs examples/small_model.yaml (160 MiB of weights) for real
def test_small_model_runs_for_real_spread_and_verified(run: Run) -> None:
    args = [
        "--machine",
        "4xK520",
        "run",
        str(EXAMPLES / "small_model.yaml"),
        "--memory-limit",
        "64MiB",
    ]
    refused = run(*args, "--no-log-placement")
    assert refused.code == 1 and "OOM when allocating" in refused.err
    result = run(*args, "--strategy", "balanced", "--verify", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert all(v["ok"] for v in doc["verify"])
    gpus = {p["device"][-5:] for p in doc["placement"] if "GPU" in p["device"]}
    assert len(gpus) >= 3
    assert all(m["peak"] <= 64 * 2**20 for m in doc["memory"] if "GPU" in m["device"])


def test_round_robin_and_dot(run: Run) -> None:
    plan = run(
        "--machine",
        "4xK520",
        "plan",
        str(EXAMPLES / "small_model.yaml"),
        "--strategy",
        "round-robin",
    )
    assert plan.code == 0 and "round-robin: GPU:1 is next in turn" in plan.out
    dot = run(
        "--machine",
        "4xK520",
        "plan",
        str(EXAMPLES / "small_model.yaml"),
        "--strategy",
        "balanced",
        "--memory-limit",
        "64MiB",
        "--format",
        "dot",
    )
    assert dot.out.startswith("digraph gpuplace {") and dot.out.endswith("}\n")
    assert dot.out.count("subgraph cluster_") >= 3
    assert "style=bold" in dot.out


def test_unknown_strategy_in_config_is_bad_input(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "g.yaml"
    spec.write_text(
        "config: {placement: {strategy: fastest}}\ngraph:\n  - {name: a, op: constant, value: 1.0}\n"
    )
    result = run("--machine", "2xT4", "plan", str(spec))
    assert result.code == 2
    assert (
        "placement strategy 'fastest' is not one of tensorflow, balanced, round-robin" in result.err
    )


MLP = """graph:
  - {name: x, op: placeholder, shape: [9, 4]}
  - {name: w, op: variable, shape: [4, 3], initializer: random_normal, seed: 7}
  - {name: h, op: matmul, inputs: [x, w]}
  - {name: y, op: softmax, inputs: [h]}
"""
FEED = "x=" + str([[1, 2, 3, 4]] * 9)


def test_replicate_flag_splits_placeholders_and_matches_the_cpu(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "mlp.yaml"
    spec.write_text(MLP)
    plain = run("--machine", "4xT4", "run", str(spec), "--feed", FEED, "--json")
    result = run(
        "--machine",
        "4xT4",
        "run",
        str(spec),
        "--replicate",
        "all",
        "--feed",
        FEED,
        "--verify",
        "--json",
    )
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert all(v["ok"] for v in doc["verify"])
    devices = {p["op"]: p["device"][-5:] for p in doc["placement"]}
    assert [devices[f"replica_{i}/h"] for i in range(4)] == ["GPU:0", "GPU:1", "GPU:2", "GPU:3"]
    assert devices["y"] == "CPU:0"
    assert doc["results"]["y"]["value"] == json.loads(plain.out)["results"]["y"]["value"]


def test_replicate_asks_for_gpus_the_machine_lacks(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "mlp.yaml"
    spec.write_text(MLP)
    result = run("--machine", "2xT4", "plan", str(spec), "--replicate", "3")
    assert (result.code, result.out) == (1, "")
    assert result.err == (
        "error: --replicate 3: this process sees 2 GPUs (GPU:0..GPU:1); give --replicate 2 or "
        "fewer, or --replicate all\n"
    )
    one = run("--machine", "1xT4", "plan", str(spec), "--replicate", "all")
    assert (one.code, one.out) == (1, "")  # this machine cannot, as --replicate 3 above
    assert one.err == (
        "error: --replicate all: this process sees 1 GPU, and data parallelism needs 2 or more; "
        "split its card into logical GPUs with --virtual-gpus (e.g. GPU:0=1GiB,1GiB)\n"
    )


def test_replicate_all_counts_logical_gpus(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "mlp.yaml"
    spec.write_text(MLP)
    result = run(
        "--machine",
        "1xT4",
        "plan",
        str(spec),
        "--replicate",
        "all",
        "--virtual-gpus",
        "GPU:0=1GiB,1GiB,1GiB",
        "--json",
    )
    assert result.code == 0, result.err
    ops = {p["op"] for p in json.loads(result.out)["placement"]}
    assert {"replica_0/h", "replica_1/h", "replica_2/h"} <= ops and "replica_3/h" not in ops


def test_json_carries_the_strategy_and_where_the_rates_came_from(run: Run) -> None:
    """What plan's text says in its title and `rates:` line, and the makespan / bound ratio."""
    spec = str(EXAMPLES / "small_model.yaml")
    text = run("--machine", "4xK520", "plan", spec, "--strategy", "balanced").out.splitlines()
    assert text[0] == "Plan on the simulated machine 4xK520 (strategy balanced)"
    assert "rates: GPU:0,1,2,3 from the preset GRID K520" in text
    doc = json.loads(
        run("--machine", "4xK520", "plan", spec, "--strategy", "balanced", "--json").out
    )
    rates = [{"gpus": "GPU:0,1,2,3", "source": "from the preset GRID K520"}]
    assert (doc["strategy"], doc["rates"]) == ("balanced", rates)
    ratio = doc["estimate"]["makespan_over_bound"]
    assert ratio >= 1.0 and text[-1].endswith(f"makespan / bound {ratio:.2f}")
    towers = str(EXAMPLES / "guide" / "04_multi_tower.yaml")  # a graph that runs in no time
    ran = json.loads(run("--machine", "4xK520", "run", towers, "--json").out)
    assert (ran["strategy"], ran["rates"]) == ("tensorflow", rates)


def test_run_lets_go_of_what_balanced_kept_for_the_estimate(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan` reuses balanced's own estimate (Placement.judged); `run` estimates nothing and
    drops it before running (about 0.5 KB per op)."""
    import gpuplace.pipeline as pipeline

    seen = []
    real = pipeline.execute_prepared

    def spy(prepared, *args, **kw):  # type: ignore[no-untyped-def]
        seen.append(prepared.placement.judged)
        return real(prepared, *args, **kw)

    monkeypatch.setattr(pipeline, "execute_prepared", spy)
    spec = str(Path(__file__).resolve().parents[1] / "examples" / "small_model.yaml")
    result = run("--machine", "4xK520", "run", spec, "--strategy", "balanced",
                 "--memory-limit", "64MiB")  # fmt: skip
    assert result.code == 0, result.err
    assert seen == [None]
