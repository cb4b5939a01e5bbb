"""TensorFlow device names: parsing (tf.DeviceSpec's grammar), scope merging, canonical strings.

Accepted (case-insensitive bare types, as `with tf.device(...)`): `/cpu:0`, `/gpu:1`, `GPU:1`,
`/GPU:*`, `/device:GPU:1`, `/job:localhost/replica:0/task:0/device:GPU:0`, and "" or "/" for
no constraint. Errors use TensorFlow's wording ("Cannot specify multiple device types",
"Unknown attribute"). Merging nested scopes keeps, field by field, the inner value when set.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import BadInput

VALID_TYPES = frozenset({"CPU", "GPU", "TPU", "CUSTOM", "EPU"})
LOCAL = "/job:localhost/replica:0/task:0"


class DeviceNameError(BadInput):
    """A device string TensorFlow would reject."""


@dataclass(frozen=True)
class DeviceSpec:
    """A (partial) device: each field None means "any", as in tf.DeviceSpec."""

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    def merged_into(self, outer: DeviceSpec) -> DeviceSpec:
        """This (inner) spec on top of an enclosing scope: set fields win, unset ones inherit.

        Strictly field by field, as TF's `_get_combined_properties`: `/device:GPU:*` inside
        `/cpu:1` gives `/device:GPU:1`.
        """
        return DeviceSpec(
            job=self.job if self.job is not None else outer.job,
            replica=self.replica if self.replica is not None else outer.replica,
            task=self.task if self.task is not None else outer.task,
            device_type=self.device_type if self.device_type is not None else outer.device_type,
            device_index=self.device_index if self.device_index is not None else outer.device_index,
        )

    def to_string(self) -> str:
        """Canonical form, `/job:J/replica:R/task:T/device:TYPE:IDX` (`*` for any index)."""
        out = ""
        if self.job is not None:
            out += f"/job:{self.job}"
        if self.replica is not None:
            out += f"/replica:{self.replica}"
        if self.task is not None:
            out += f"/task:{self.task}"
        if self.device_type is not None:
            index = "*" if self.device_index is None else str(self.device_index)
            out += f"/device:{self.device_type}:{index}"
        return out

    def matches(self, device_type: str, index: int) -> bool:
        """Whether the local device TYPE:index (job localhost, replica 0, task 0) satisfies this."""
        return (
            self.job in (None, "localhost")
            and self.replica in (None, 0)
            and self.task in (None, 0)
            and self.device_type in (None, device_type)
            and self.device_index in (None, index)
        )

    def without_type(self) -> DeviceSpec:
        """Job, replica and task kept; type and index cleared (soft placement's first fallback)."""
        return replace(self, device_type=None, device_index=None)


def _number(text: str, spec: str, what: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise DeviceNameError(
            f"Malformed device specification {spec!r}: {what} must be a number >= 0, got {text!r}"
        )
    return int(text)


def parse_device(spec: str) -> DeviceSpec:
    """Parse a device string the way tf.DeviceSpec.from_string does."""
    job: str | None = None
    replica = task = index = None
    dtype: str | None = None
    for piece in spec.split("/"):
        parts = piece.split(":")
        n = len(parts)
        if n == 2 and parts[0] == "job":
            job = parts[1]
        elif n == 2 and parts[0] == "replica":
            replica = _number(parts[1], spec, "replica")
        elif n == 2 and parts[0] == "task":
            task = _number(parts[1], spec, "task")
        elif (n in (1, 2) and parts[0].upper() in VALID_TYPES) or (n == 3 and parts[0] == "device"):
            if dtype is not None:
                raise DeviceNameError(f"Cannot specify multiple device types: {spec}")
            if n == 3:
                dtype = parts[1].upper() if parts[1] in ("cpu", "gpu") else parts[1]
            else:
                dtype = parts[0].upper()
            raw = parts[-1] if n > 1 else "*"
            index = None if raw == "*" else _number(raw, spec, "device index")
        elif parts[0] != "" or n > 1:
            raise DeviceNameError(f"Unknown attribute: '{piece}' in '{spec}'")
    return DeviceSpec(job, replica, task, dtype, index)


def canonical(spec: str) -> str:
    """The canonical string of a device string (what error messages print): `/gpu:1` ->
    `/device:GPU:1`."""
    return parse_device(spec).to_string()


def full_name(device_type: str, index: int) -> str:
    """`/job:localhost/replica:0/task:0/device:GPU:0`, the name TensorFlow logs."""
    return f"{LOCAL}/device:{device_type}:{index}"
