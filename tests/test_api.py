"""The library API: lazy, cheap to import, and enough to do what the CLI does."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gpuplace


def test_import_is_cheap() -> None:
    code = "import sys, gpuplace; sys.exit(1 if {'numpy', 'cupy', 'yaml', 'click'} & set(sys.modules) else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_end_to_end_through_the_api() -> None:
    seen = gpuplace.view(gpuplace.discover("4xK20m"), {})
    graph = gpuplace.load("examples/guide/04_multi_tower.yaml")
    placement = gpuplace.place(graph, len(seen.gpus))
    assert placement.decisions["AddN"].device.endswith("CPU:0")
    prepared = gpuplace.prepare("examples/guide/04_multi_tower.yaml", seen, gpuplace.Options(), {})
    outcome = gpuplace.execute_prepared(prepared, seen)
    assert outcome.result.values["AddN"].tolist() == [[44.0, 56.0], [98.0, 128.0]]
    assert sorted(gpuplace.__all__) == gpuplace.__all__ and "place" in gpuplace.__all__


def test_unknown_attribute() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gpuplace.nope  # noqa: B018


GUIDE_TOWERS = "examples/guide/04_multi_tower.yaml"


def test_compare_policies_runs_what_mem_compare_shows() -> None:
    seen = gpuplace.view(gpuplace.discover("4xK520"), {})
    held: list[str] = []
    runs = gpuplace.compare_policies(
        GUIDE_TOWERS, seen, gpuplace.Options(memory_fraction=0.3), {},
        observe=lambda prepared, memory: held.append(prepared.policy.name()),
    )  # fmt: skip
    assert [(r.label, r.name, r.repeat_of) for r in runs] == [
        ("default", "default", ""),
        ("allow_growth", "allow_growth", ""),
        ("fraction 0.3", "fraction 0.3", ""),
    ]
    assert held == ["default", "allow_growth", "fraction 0.3"]  # seen while each run held it
    reserved = [
        {m.device[-5:]: m.reserved >> 20 for m in r.outcome.memory if "GPU" in m.device}
        for r in runs
        if r.outcome is not None
    ]
    assert reserved == [
        {f"GPU:{i}": 3596 for i in range(4)},
        {"GPU:0": 0, "GPU:1": 0, "GPU:2": 2, "GPU:3": 2},
        {f"GPU:{i}": 1228 for i in range(4)},
    ]


def test_compare_policies_runs_a_repeated_policy_once() -> None:
    seen = gpuplace.view(gpuplace.discover("4xK520"), {})
    env = {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    runs = gpuplace.compare_policies(GUIDE_TOWERS, seen, gpuplace.Options(), env)
    assert [(r.label, r.name, r.repeat_of, r.outcome is None) for r in runs] == [
        ("default", "allow_growth", "", False),
        ("allow_growth", "allow_growth", "default", True),
    ]


def test_compare_policies_refuses_a_policy_it_would_override() -> None:
    seen = gpuplace.view(gpuplace.discover("2xK520"), {})
    with pytest.raises(gpuplace.BadInput) as caught:
        gpuplace.compare_policies(GUIDE_TOWERS, seen, gpuplace.Options(allow_growth=True), {})
    assert str(caught.value) == (
        "Options.allow_growth=True conflicts with compare_policies: compare_policies runs the "
        "default policy and allow_growth side by side (and the given Options.memory_fraction); "
        "drop Options.allow_growth=True"
    )


def test_reservations_without_a_graph_agree_with_the_runs() -> None:
    """What `mem --compare` shows without a graph is what a run of each policy reserves at start."""
    seen = gpuplace.view(gpuplace.discover("4xK520"), {})
    held = gpuplace.reservations(seen, gpuplace.Options(memory_fraction=0.3), {}, compare=True)
    runs = gpuplace.compare_policies(GUIDE_TOWERS, seen, gpuplace.Options(memory_fraction=0.3), {})
    assert [(h.label, h.name) for h in held] == [(r.label, r.name) for r in runs]
    for h, r in zip(held, runs, strict=True):
        assert [(lg.limit, lg.reserve) for lg in h.logical] == [
            (lg.limit, lg.reserve) for lg in r.prepared.logical
        ]
    env = {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    again = gpuplace.reservations(seen, gpuplace.Options(), env, compare=True)
    assert [(h.label, h.name, h.repeat_of) for h in again] == [
        ("default", "allow_growth", ""),
        ("allow_growth", "allow_growth", "default"),
    ]
