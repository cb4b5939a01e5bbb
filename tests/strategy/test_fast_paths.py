"""The estimate's fast paths against the plain ones they replace, to the last bit, on random
placed graphs: the replay over lists (`estimate._replay`) against `Timeline`, the lower bounds'
cuts over numpy arrays against the pure-Python walk, and their fastest times against
`work_time`; the free groups and each op's candidate devices against the op-by-op loops they
replace."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.devices.names import placer_spec
from gpuplace.graph import Graph, Op, TensorRef, TensorSpec, get_op
from gpuplace.placement import baselines, place
from gpuplace.placement.cost import DeviceModel, LinkModel, copy_time, work_time
from gpuplace.placement.estimate import (
    _held_peaks,
    _peak_counts,
    _replay,
    op_seconds,
    simulate_on_timeline,
)
from gpuplace.placement.flat import (
    Flat,
    _groups,
    _matching_gpus,
    flatten,
    free_candidates,
    free_groups,
)
from gpuplace.placement.model import Placement
from gpuplace.placement.timeline import Slot, Timeline
from tests.strategy.helpers import models

TYPES = ("random_normal", "variable", "matmul", "add", "relu", "print", "neg", "add_n")
LINKS = (LinkModel(1e10, 1e-5), LinkModel(1e9, 0.0), LinkModel(1e12, 1e-3))


@st.composite
def placed_flats(draw: st.DrawFn) -> tuple[Graph, list[int]]:
    """Up to 30 ops of mixed sizes (prints forward what they read, variables stay, random
    fetches), each on one of 3 GPUs or the CPU (device index 3)."""
    ops: list[Op] = []
    for i in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(TYPES)) if ops else "random_normal"
        arity = {"random_normal": 0, "variable": 0, "matmul": 2, "add": 2, "add_n": 3}.get(kind, 1)
        inputs = tuple(TensorRef(ops[draw(st.integers(max(0, len(ops) - 6), len(ops) - 1))].name)
                       for _ in range(arity))  # fmt: skip
        n = draw(st.sampled_from((2, 16, 300, 2**31))) if arity == 0 else 0  # 2**31: past int64
        shape = (n, n) if arity == 0 else ops[0].outputs[0].shape
        attrs = get_op(kind).normalize(f"op{i}", {"shape": list(shape)} if arity == 0 else {})
        ops.append(Op(f"op{i}", kind, inputs, attrs=attrs, outputs=(TensorSpec(shape),)))
    fetch = tuple(TensorRef(op.name) for op in ops if draw(st.booleans()))
    dev = [draw(st.integers(0, 3)) for _ in ops]
    return Graph(tuple(ops), fetch), dev


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats(), st.sampled_from(LINKS))
def test_replay_equals_the_timeline(case: tuple[Graph, list[int]], link: LinkModel) -> None:
    graph, dev = case
    flat, devices = flatten(graph), models(3)
    assert _replay(flat, dev, devices, link) == simulate_on_timeline(flat, dev, devices, link)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats())
def test_cuts_over_arrays_equal_the_walk(case: tuple[Graph, list[int]]) -> None:
    flat = flatten(case[0])
    w = [1.0] * len(flat.names)
    stages = baselines._Stages(flat, w, [1] * len(w), 2, LinkModel())
    keep = [not g for g in flat.generator]
    assert baselines._cuts(flat.reads, keep) == stages.cuts()  # below NUMPY_OPS: the walk


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats())
def test_fastest_times_are_work_time(case: tuple[Graph, list[int]]) -> None:
    flat, devices = flatten(case[0]), models(3)
    choices = [devices[:1], devices[1:3], devices, devices[3:]]
    pick = [i % len(choices) for i in range(len(flat.names))]
    w, where = baselines._fastest(flat, choices, pick)  # a float64 and an int array
    assert w.tolist() == [
        min(work_time(f, b, m) for m in choices[k])
        for f, b, k in zip(flat.flops, flat.nbytes, pick, strict=True)
    ]
    assert where.tolist() == [(1, 1, 0, 2)[k] for k in pick]


def _rated(count: int) -> list[DeviceModel]:
    """`count` GPUs of as many rates, then the CPU of `models`: more rates than
    `baselines.RATE_TABLE` when `count` is 5."""
    gpus = [DeviceModel(f"GPU:{i}", "GPU", 1e12 / (i + 1), 1e11 * (i % 3 + 1), None, 1e-6 * i)
            for i in range(count)]  # fmt: skip
    return [*gpus, models(0)[-1]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats(), st.integers(1, 5), st.integers(1, 7), st.data())
def test_op_and_fastest_times_are_work_time_at_any_rates(
    case: tuple[Graph, list[int]], rates: int, lists: int, data: st.DataObject,
) -> None:  # fmt: skip
    """Few rates and lists (a table of every op's times: `rate_table`) or many (the ops of
    each apart): each op's time on its device, and its fastest on its list, are `work_time`'s
    to the last bit."""
    flat, devices = flatten(case[0]), _rated(rates)
    n = len(flat.names)
    dev = data.draw(st.lists(st.integers(0, rates), min_size=n, max_size=n))
    want = [
        work_time(f, b, devices[d]) for f, b, d in zip(flat.flops, flat.nbytes, dev, strict=True)
    ]
    assert op_seconds(flat, dev, devices).tolist() == want  # a float64 array
    choices = [data.draw(st.lists(st.sampled_from(devices), min_size=1, max_size=3))
               for _ in range(lists)]  # fmt: skip
    pick = data.draw(st.lists(st.integers(0, lists - 1), min_size=n, max_size=n))
    w, _ = baselines._fastest(flat, choices, pick)
    assert w.tolist() == [
        min(work_time(f, b, m) for m in choices[k])
        for f, b, k in zip(flat.flops, flat.nbytes, pick, strict=True)
    ]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.data())
def test_held_peaks_equal_the_slot_walk(devices: int, data: st.DataObject) -> None:
    """The ledgers' peaks over int arrays, linked per step, as `_peak_counts` walks the
    slots sorted by their last step."""
    steps = data.draw(st.integers(1, 12))
    dev = data.draw(st.lists(st.integers(0, devices - 1), min_size=steps, max_size=steps))
    slots = []
    for _ in range(data.draw(st.integers(0, 20))):
        step = data.draw(st.integers(0, steps - 1))
        last = data.draw(st.integers(step, steps - 1))
        slots.append(Slot(dev[step], data.draw(st.integers(0, 2**40)), step, last, 0.0))
    got = _held_peaks(np.array(dev, np.intp), devices, np.array([s.step for s in slots], np.intp),
                      np.array([s.last for s in slots], np.intp),
                      np.array([s.size for s in slots], np.int64))  # fmt: skip
    assert got == _peak_counts(slots, dev, devices)


def _fan_in_pair_by_pair(stages: baselines._Stages, cut: int, longest: list[float],
                         stage: list[int], k: int) -> float:  # fmt: skip
    """`_Stages._fan_in` as it was written before its path for reads of outputs 0 only:
    pair by pair, every copy time worked out, the ratios over `np.array`."""
    flat, w, link = stages.flat, stages.w, stages.link
    first: dict[int, int] = {}
    more: dict[int, set[int]] = {}
    for p, out in flat.inputs[cut]:
        if stage[p] == k and first.setdefault(p, out) != out:
            more.setdefault(p, {first[p]}).add(out)
    if not first:
        return 0.0
    works = [w[p] for p in first]
    copies = [sum([copy_time(flat.out_bytes[p][o], link) for o in more[p]]) if p in more
              else copy_time(flat.out_bytes[p][out], link) for p, out in first.items()]  # fmt: skip
    local, remote = 0.0, min([longest[p] for p in first]) + sum(copies)
    ratio = -np.array(copies) / np.maximum(np.array(works), 1e-30)
    for i in np.argsort(ratio, kind="stable").tolist():
        work, copy = works[i], copies[i]
        if local + work <= remote - copy:
            local, remote = local + work, remote - copy
            continue
        return min(sum(works), local + work * (remote - local) / (work + copy))
    return local


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats(), st.sampled_from((*LINKS, LinkModel(10**9, 0))), st.data())  # ints: apart
def test_fan_in_equals_pair_by_pair(case: tuple[Graph, list[int]], link: LinkModel,
                                    data: st.DataObject) -> None:  # fmt: skip
    """Any op as the cut, any stages and chains: the fan-in bound to the last bit."""
    flat = flatten(case[0])
    n = len(flat.names)
    times = st.floats(0.0, 1e-3, allow_subnormal=False)
    w = data.draw(st.lists(times, min_size=n, max_size=n))
    longest = data.draw(st.lists(times, min_size=n, max_size=n))
    stage = data.draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n))
    stages = baselines._Stages(flat, w, [1] * n, 2, link)
    longest_of, stage_of = np.array(longest), np.array(stage, np.intp)  # as `total` passes them
    for k in range(3):
        for cut in range(n):
            want = _fan_in_pair_by_pair(stages, cut, longest, stage, k)
            assert stages._fan_in(cut, longest_of, stage_of, k) == want


def _free_groups_op_by_op(flat: Flat, tf: Placement, num_gpus: int) -> tuple[Any, Any]:
    """`free_groups` as it was written before its fast path: op by op, group by group."""
    groups = _groups(flat.graph)
    every = tuple(range(num_gpus))
    matches: dict[str, tuple[int, ...]] = {}
    allowed: dict[int, tuple[int, ...]] = {}
    for i, op in enumerate(flat.graph.ops):
        found = matches.get(op.device)
        if found is None:
            found = matches[op.device] = _matching_gpus(placer_spec(op.device), every)
        gpus = found if "GPU" in flat.kernels[i] else ()
        root = groups[i]
        before = allowed.get(root)
        if before is None or before is every:
            allowed[root] = gpus
        elif gpus is not every:
            allowed[root] = tuple(k for k in before if k in gpus)
    free = {root: g for root, g in allowed.items() if len(g) > 1}
    soft = {name for name, d in tf.decisions.items() if d.kind == "soft-fallback"}
    for i, name in enumerate(flat.names):
        if name in soft:
            free.pop(groups[i], None)
    return groups, free


def _options_op_by_op(flat: Flat, tf: Placement, gpus: Any, cpu: Any, num_gpus: int) -> Any:
    """`baselines._options` as it was written before it skipped repeated keys."""
    groups, free = free_groups(flat, tf, num_gpus)
    models = {m.name: m for m in (*gpus, cpu)}
    choices: list[Any] = []
    known: dict[Any, int] = {}
    pick = []
    for j, name in enumerate(flat.names):
        cands = free.get(groups[j])
        if cands is None:
            key: Any = tf.decisions[name].device
        else:
            op = flat.graph.ops[j]
            key = (id(cands), flat.generator[j] and "CPU" in flat.kernels[j] and not op.device)
        k = known.get(key)
        if k is None:
            k = known[key] = len(choices)
            if cands is None:
                choices.append([models[key]])
            else:
                choices.append([*baselines._one_per_rate([gpus[i] for i in cands]),
                                *([cpu] if key[1] else [])])  # fmt: skip
        pick.append(k)
    return choices, pick


REQUESTS = ("", "", "", "/device:GPU:0", "/device:GPU:1", "/device:GPU:5", "/device:CPU:0",
            "/job:localhost/device:GPU:*")  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats(), st.data())
def test_free_groups_and_options_equal_op_by_op(case: tuple[Graph, list[int]],
                                                 data: st.DataObject) -> None:  # fmt: skip
    """With and without colocations, device requests (soft placement on), 0-3 GPUs: the same
    groups, free groups (in the same order), candidates per op, candidate lists and picks."""
    graph = case[0]
    ops = []
    for i, op in enumerate(graph.ops):
        device = data.draw(st.sampled_from(REQUESTS))
        colocate = None
        if i and data.draw(st.integers(0, 4)) == 0:
            colocate = graph.ops[data.draw(st.integers(0, i - 1))].name
        ops.append(replace(op, device=device, colocate_with=colocate))
    graph = replace(graph, ops=tuple(ops))
    num_gpus = data.draw(st.integers(0, 3))
    tf = place(graph, num_gpus, allow_soft_placement=True)
    flat = flatten(graph)
    groups, free = free_groups(flat, tf, num_gpus)
    want_groups, want_free = _free_groups_op_by_op(flat, tf, num_gpus)
    assert groups == want_groups
    assert list(free.items()) == list(want_free.items())  # in the same order
    assert free_candidates(flat, tf, num_gpus) == [want_free.get(r) for r in want_groups]
    devices = models(num_gpus)
    gpus, cpu = devices[:-1], devices[-1]
    choices, pick = baselines._options(flat, tf, gpus, cpu, {m.name: m for m in devices}, num_gpus)
    assert (choices, pick.tolist()) == _options_op_by_op(flat, tf, gpus, cpu, num_gpus)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats(), st.lists(st.integers(0, 69), min_size=30, max_size=30))
def test_a_timeline_s_copy_of_is_its_dict_of_copies(
    case: tuple[Graph, list[int]], devices: list[int]
) -> None:
    """`Timeline.copy_of` (looked up only where the op's bit for the device is set, devices
    past 30 sharing bits) finds exactly the copies its dict holds, and None elsewhere."""
    flat = flatten(case[0])
    timeline = Timeline(flat, 70, LinkModel())
    for op in range(len(flat.names)):
        timeline.run(op, devices[op], 1e-3)
    for producer, outputs in enumerate(flat.out_bytes):
        for output in range(len(outputs)):
            for device in range(70):
                found = timeline.copied.get((producer, output, device))
                assert timeline.copy_of(producer, output, device) is found
