"""What the placer produces: one device and one reason per op, as plain data.

`Placement.decisions` is in graph order; `Placement.order` is the order TensorFlow's placer
assigns (and, with `log_device_placement`, prints) the ops: non-generators first, then the
generators it deferred to its second pass (`placer.cc`, `Placer::Run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import RuntimeFailure, Text

KINDS = frozenset(
    {
        "explicit",
        "default",
        "follows-consumer",
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
