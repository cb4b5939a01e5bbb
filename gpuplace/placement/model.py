"""What the placer produces: one device and one reason per op, as plain data.

`Placement.decisions` is in graph order; `Placement.order` is the order TensorFlow's placer
assigns (and, with `log_device_placement`, prints) the ops: non-generators first, then the
generators it deferred to its second pass (`placer.cc`, `Placer::Run`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import Message, RuntimeFailure, Setting, Term, Text
from ..units import human

KINDS = frozenset(
    {
        "explicit",
        "default",
        "follows-consumer",
        "follows-input",
        "colocated",
        "soft-fallback",
        "balanced",
        "round-robin",
    }
)


@dataclass(frozen=True, slots=True)
class Decision:
    """Where one op runs and why, in a line a user reads in `--explain`."""

    device: str  # full name, e.g. "/job:localhost/replica:0/task:0/device:GPU:0"
    kind: str  # one of KINDS
    reason: str


@dataclass(frozen=True)
class Placement:
    """The device of every op, and the machine's devices in TensorFlow's priority order."""

    decisions: Mapping[str, Decision]  # op name -> decision, in graph order
    devices: tuple[str, ...]  # full names, in TF priority order (GPUs by name, then CPU:0)
    order: tuple[str, ...] = ()  # op names in TF's assignment order; () means graph order
    # what the strategy already worked out to judge it (`estimate.Judged`), so that `plan`
    # does not flatten, place and simulate the graph again; never compared or printed
    judged: object = field(default=None, compare=False, repr=False)

    def in_order(self, names: Sequence[str]) -> list[Decision]:
        """The decision of each op of `names` (the graph's ops, in graph order): `decisions`'
        own order where it is theirs (as the placers keep it: a walk, no lookup by name, which
        costs ten times as much on a large graph), else looked up by name (KeyError: none)."""
        decisions = self.decisions
        if len(decisions) == len(names) and list(decisions) == list(names):
            return list(decisions.values())
        return [decisions[name] for name in names]

    def log_order(self) -> tuple[str, ...]:
        """Op names in the order TF's placer logs them (`placer.cc` `LogDeviceAssignment`)."""
        return self.order or tuple(self.decisions)


class PlacementError(RuntimeFailure):
    """This machine cannot satisfy the graph's device requests (TF's InvalidArgumentError).

    `tf_message` is TensorFlow's text verbatim (without the trailing `[[node]]` context); the
    fix (`hint`, None for none) is gpuplace's own sentence, starting with "gpuplace:".
    """

    def __init__(self, tf_message: str, hint: Text | None = None, op: str | None = None) -> None:
        joint = "\n" if "\n" in tf_message else " "  # after TF's multi-line debug info: own line
        super().__init__(tf_message if hint is None else tf_message.rstrip(), hint, joint)
        self.tf_message = tf_message
        self.op = op


class NoFit(PlacementError):
    """No candidate device can take an op within its memory limit: names the op (and the
    generators that would come with it), the bytes it needs and the room on each candidate."""

    def __init__(self, what: str, op: str, need: int, rooms: Sequence[tuple[str, int, int]],
                 pinned: str = "") -> None:  # fmt: skip
        where = ", ".join(
            f"{short} has {human(max(room, 0))} free of its {human(limit)} limit"
            for short, room, limit in sorted(rooms, key=lambda r: -r[1])[:4]
        )
        if pinned:
            text = f"{what} must stay on its device ({pinned}) and needs {human(need)} more there"
        else:
            text = f"{what} needs {human(need)} more on the GPU that takes it"
        super().__init__(
            f"balanced placement: {text}, but at that step {where}.",
            Message(
                "gpuplace: the graph needs more memory than these GPUs offer under this policy; "
                "add GPUs (", Term.MACHINE, "), give each more (", Setting("memory_limit"), ", ",
                Setting("memory_fraction"), "), or make the largest tensors smaller.",
            ),
            op,
        )  # fmt: skip
        self.need, self.rooms = need, tuple(rooms)
