"""The ledgers counted for a whole run up front (`Replay`) against `Ledger.allocate` and
`Ledger.free` called step by step: the same OOM (step and message) and, at every step where a
run can end, the same in use, peak and allow_growth regions, on random charges (hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.memory.ledger import GROWTH_PASSES, Charges, Ledger, OutOfMemory, Replay

DEVICES = ("/device:CPU:0", "/device:GPU:0", "/device:GPU:1")
MIB = 2**20


@dataclass(frozen=True)
class Run:
    """Per step: its device and the bytes it charges; per tensor (one per step): the step after
    which it is freed (`len(steps)`: never), its device and bytes."""

    step_device: list[int]
    step_bytes: list[int]
    frees: tuple[list[int], list[int], list[int]]

    def charges(self) -> Charges:
        return Charges(len(DEVICES), self.step_device, self.step_bytes, self.frees)


@st.composite
def runs(draw: st.DrawFn, unit: int = 256) -> Run:
    n = draw(st.integers(0, 30))
    devices = draw(st.lists(st.integers(0, len(DEVICES) - 1), min_size=n, max_size=n))
    size = st.integers(0, 3 * MIB // 256).map(lambda k: k * unit)  # up to 3 MiB in 256 B
    sizes = draw(st.lists(size, min_size=n, max_size=n))
    last = [draw(st.integers(s, n)) for s in range(n)]  # n: kept to the end
    # a tensor lives where its step ran, or (a copy) on another device
    where = [draw(st.sampled_from([d, (d + 1) % len(DEVICES)])) for d in devices]
    return Run(devices, sizes, (last, where, sizes))


@st.composite
def books(draw: st.DrawFn) -> list[Ledger]:
    """One ledger per device, some with limits, reservations or allow_growth; sometimes one
    ledger for two devices."""
    made = []
    for device in DEVICES:
        limit = draw(st.none() | st.integers(0, 12 * MIB))
        growth = draw(st.booleans())
        reserve = 0 if growth else draw(st.sampled_from([0, MIB]))
        made.append(Ledger(device, limit, reserve=reserve, growth=growth))
    if draw(st.booleans()):
        made[2] = made[1]
    return made


def state(ledgers: list[Ledger]) -> list[tuple[int, int, int, int]]:
    return [(lg.in_use, lg.peak, lg.reserved, lg.next_region) for lg in ledgers]


def step_by_step(run: Run, ledgers: list[Ledger], upto: int, charged: bool) -> str | None:
    """Charge and free as the executor did step by step, stopping before step `upto` (after its
    charge when `charged`): the OOM message, if a charge passes a limit."""
    last, where, sizes = run.frees
    for step in range(min(upto + int(charged), len(run.step_device))):
        try:
            ledgers[run.step_device[step]].allocate(run.step_bytes[step], f"op{step}")
        except OutOfMemory as exc:
            return f"{step}: {exc}"
        if step == upto:
            break
        for tensor, freed in enumerate(last):
            if freed == step:
                ledgers[where[tensor]].free(sizes[tensor])
    return None


def replayed(run: Run, ledgers: list[Ledger], upto: int, charged: bool) -> str | None:
    replay = Replay(run.charges(), ledgers)
    if replay.stop is not None and replay.stop < upto + int(charged):
        try:
            replay.raise_stop(f"op{replay.stop}")
        except OutOfMemory as exc:
            return f"{replay.stop}: {exc}"
    replay.settle(upto, charged)
    return None


@settings(max_examples=300, deadline=None)
@given(runs(), books(), st.data())
def test_a_replay_leaves_the_ledgers_as_charging_step_by_step(
    run: Run, made: list[Ledger], data: st.DataObject
) -> None:
    n = len(run.step_device)
    upto = data.draw(st.integers(0, n))
    charged = upto < n and data.draw(st.booleans())
    twins = [Ledger(lg.device, lg.limit, reserve=lg.reserved, growth=lg.growth) for lg in made]
    if made[2] is made[1]:
        twins[2] = twins[1]
    expected = step_by_step(run, twins, upto, charged)
    assert replayed(run, made, upto, charged) == expected
    assert state(made) == state(twins)


def test_a_replay_finds_the_first_step_past_a_limit_on_any_device() -> None:
    run = Run(
        [0, 1, 1, 0], [512, 1024, 512, 256], ([1, 4, 4, 4], [0, 1, 1, 0], [512, 1024, 512, 256])
    )
    cpu, gpu = Ledger(DEVICES[0], 600), Ledger(DEVICES[1], 1200)
    replay = Replay(run.charges(), [cpu, gpu, Ledger(DEVICES[2])])
    assert replay.stop == 2  # GPU:0 holds 1024 B and is asked for 512 more
    with pytest.raises(OutOfMemory) as caught:
        replay.raise_stop("c")
    assert (caught.value.op, caught.value.in_use, caught.value.requested) == ("c", 1024, 512)
    assert [(lg.in_use, lg.peak) for lg in (cpu, gpu)] == [(0, 512), (1024, 1024)]


@settings(max_examples=50, deadline=None)
@given(runs(unit=2**55), books())
def test_charges_past_int64_are_counted_exactly(run: Run, made: list[Ledger]) -> None:
    """Hostile shapes can ask for more bytes than an int64 holds: the replay counts in Python
    ints then, as the ledgers do."""
    for lg in made:
        lg.limit = None if lg.limit is None else lg.limit * 2**40
    twins = [Ledger(lg.device, lg.limit, reserve=lg.reserved, growth=lg.growth) for lg in made]
    if made[2] is made[1]:
        twins[2] = twins[1]
    n = len(run.step_device)
    assert replayed(run, made, n, False) == step_by_step(run, twins, n, False)
    assert state(made) == state(twins)


def test_growth_capped_by_the_limit_extends_once_per_charge_past_the_reservation() -> None:
    """Once allow_growth's regions reach the limit, every charge that still leaves more in use
    than reserved extends by nothing (and doubles the next region): one step at a time, past
    the replay's array passes."""
    n = 2 + 3 * GROWTH_PASSES
    run = Run([0] * n, [600, 200] + [0] * (n - 2), ([n] * n, [0] * n, [600, 200] + [0] * (n - 2)))
    made = [Ledger(DEVICES[0], 1000, growth=True), Ledger(DEVICES[1]), Ledger(DEVICES[2])]
    twins = [Ledger(DEVICES[0], 1000, growth=True), Ledger(DEVICES[1]), Ledger(DEVICES[2])]
    assert replayed(run, made, n, False) == step_by_step(run, twins, n, False) is None
    assert state(made) == state(twins)
    assert made[0].reserved == 768 and made[0].next_region == 2 * MIB * 2**n  # one per charge
