"""One training step's memory per device (`--training`), as `plan` and `mem` show it: a block of
what each part holds at the device's peak, and the records of `--json`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..units import device_memory
from .explain import short_device

if TYPE_CHECKING:  # a plan without --training does not load memory/training.py
    from ..memory.training import Training, TrainingMemory

TRAINING_HEADER = (
    "DEVICE", "WEIGHTS", "GRADIENTS", "OPTIMIZER", "ACTIVATIONS", "TRANSIENT", "PEAK (TRAIN)",
    "AT",
)  # fmt: skip
TRAINING_DROP = ("AT", "TRANSIENT", "GRADIENTS")  # what a narrow terminal loses first


def training_title(training: Training) -> str:
    return f"Training step ({training.label()}), predicted: each part at the device's peak"


def train_column_title(training: Training) -> str:
    """Above `mem`'s table: what its PEAK (TRAIN) column is."""
    return (
        f"PEAK (TRAIN): one training step ({training.label()}), predicted; the run held PEAK IN USE"
    )


def training_rows(steps: Sequence[TrainingMemory]) -> list[tuple[str, ...]]:
    """Per device that holds anything in the step: its parts, peak and where the peak falls."""
    from ..memory.training import PARTS  # loaded already: `steps` come from it

    return [
        (short_device(t.device), *(device_memory(getattr(t, p)) for p in PARTS),
         device_memory(t.peak), f"{t.phase} {t.op}")
        for t in steps
        if t.peak
    ]  # fmt: skip


def training_record(training: Training | None) -> dict[str, Any] | None:
    """`training` of a document: the optimizer and dtype sized, or None (no --training)."""
    if training is None:
        return None
    return {"optimizer": training.optimizer, "dtype": training.dtype, "slots": training.slots}


def step_record(step: TrainingMemory) -> dict[str, Any]:
    """A device's training step in a document: bytes per part at its peak, and where it falls."""
    return {**step.parts(), "peak": step.peak, "peak_op": step.op, "peak_phase": step.phase}
