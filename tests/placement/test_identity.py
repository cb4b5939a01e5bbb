"""The Identity rule's reasons in `--explain` (the placements themselves are replayed from
TensorFlow in tests/conformance/test_placer.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.graph import loads
from gpuplace.placement import place

HEAD = """\
graph:
  - {name: c, op: constant, value: [1.0, 2.0]}
  - {name: n, op: neg, inputs: [c], device: /gpu:1}
"""


def explain(tail: str, gpus: int = 3) -> dict[str, tuple[str, str, str]]:
    p = place(loads(HEAD + tail, "g.yaml"), gpus)
    return {
        name: (d.device.rsplit("/device:", 1)[1], d.kind, d.reason)
        for name, d in p.decisions.items()
    }


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (
            "  - {name: i, op: identity, inputs: [n]}\n"
            "  - {name: m, op: neg, inputs: [i], device: /gpu:1}\n",
            "Identity follows its input n on GPU:1: its input and its one consumer m both "
            "request /device:GPU:1",
        ),
        (
            "  - {name: i, op: identity, inputs: [n]}\n"
            "  - {name: m, op: neg, inputs: [i], device: /gpu:2}\n",
            "no device requested: GPU:0 is the highest-priority device with an Identity kernel; "
            "not its input's device: its input n requests /device:GPU:1 but its consumer m "
            "requests /device:GPU:2",
        ),
        (
            "  - {name: i, op: identity, inputs: [n]}\n"
            "  - {name: m, op: add, inputs: [i, i], device: /gpu:1}\n",
            "no device requested: GPU:0 is the highest-priority device with an Identity kernel; "
            "not its input's device: it is read 2 times",
        ),
        (
            "  - {name: i, op: identity, inputs: [n]}\n",
            "no device requested: GPU:0 is the highest-priority device with an Identity kernel; "
            "not its input's device: it has no consumer, and its input n requests /device:GPU:1",
        ),
        (
            "  - {name: k, op: constant, value: 1.0, device: /gpu:1}\n"
            "  - {name: i, op: identity, inputs: [k]}\n"
            "  - {name: m, op: neg, inputs: [i], device: /gpu:1}\n",
            "no device requested: GPU:0 is the highest-priority device with an Identity kernel; "
            "not its input's device: its input k is placed after it (a generator)",
        ),
    ],
)
def test_explain_says_whether_the_identity_rule_applied(tail: str, reason: str) -> None:
    assert explain(tail)["i"][2] == reason


def test_follows_input_is_its_own_kind() -> None:
    found = explain(
        "  - {name: i, op: identity, inputs: [n]}\n"
        "  - {name: m, op: neg, inputs: [i], device: /gpu:1}\n"
    )
    assert found["i"][1] == "follows-input"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["", "/gpu:0", "/gpu:1", "/gpu:2", "/device:GPU:1"]), min_size=3,
             max_size=3),
    st.integers(0, 3),
)  # fmt: skip
def test_chain_of_identities_follows_the_rule(devices: list[str], readers: int) -> None:
    """Property: in n -> i -> (readers consumers), i sits on n's device exactly when the rule
    matches (one reader requesting what n requests, or no reader and n requesting nothing),
    and otherwise on the default GPU:0."""
    first, second, third = devices
    ops = [
        {"name": "c", "op": "constant", "value": [1.0, 2.0]},
        {"name": "n", "op": "neg", "inputs": ["c"], "device": first},
        {"name": "i", "op": "identity", "inputs": ["n"]},
    ]
    ops += [
        {"name": f"m{k}", "op": "neg", "inputs": ["i"], "device": (second, third)[k % 2]}
        for k in range(readers)
    ]
    p = place(loads(json.dumps({"graph": ops}), "g.json"), 3).decisions
    canon = {"": "", "/gpu:0": "/device:GPU:0", "/gpu:1": "/device:GPU:1",
             "/gpu:2": "/device:GPU:2", "/device:GPU:1": "/device:GPU:1"}  # fmt: skip
    matched = (readers == 0 and canon[first] == "") or (
        readers == 1 and canon[first] == canon[second]
    )
    if matched:
        assert (p["i"].device, p["i"].kind) == (p["n"].device, "follows-input")
    else:
        assert p["i"].device.endswith("/device:GPU:0")
        assert p["i"].kind == "default"
