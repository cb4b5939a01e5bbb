"""TensorFlow's device names: parsing, scope merging, canonical strings.

TensorFlow reads a device string twice, and so does gpuplace:

1. **Python's `tf.DeviceSpec`** (`device_spec.py`, `_string_to_components`), when `tf.device`
   is entered: `parse_device`. The string is split on `/` and each piece on `:`; `job:J`,
   `replica:N`, `task:N`, a bare type (`cpu`, `GPU:1`, `gpu:*`: any case, upper-cased) and
   `device:TYPE:N` (the type kept as written; `cpu` and `gpu` upper-cased) are read, a piece
   whose first part is empty (`//`, `:`) is skipped, and numbers go through Python's `int()`:
   `/cpu:0 `, `/cpu: 0`, `/cpu:+0`, `/cpu:0_0` and `/cpu:٠` all mean CPU:0, `/cpu:-1` is
   accepted here. The result's `to_string()` is the op's requested device (`NodeDef.device`).
   Errors are TF 2.21's words ("Unknown attribute 'foo' is encountered while parsing the
   device spec: '/foo:0'.", "Multiple device types are not allowed ...", and int()'s
   "invalid literal for int() with base 10: 'x'"), each followed by gpuplace's hint.
2. **The C++ placer** (`DeviceNameUtils::ParseFullName` on that requested string, in
   `ColocationGraph::InitializeMember`): `placer_view`. It takes a job that starts with a
   letter (then letters, digits, `_`) or `*`, a device type likewise, and numbers of ASCII
   digits that fit 64 bits (kept as a C `int`: the low 32 bits, signed); anything else is
   "Malformed device specification '...' in node: ..." at run time (`/device:GPU:-1`,
   `/job:a-b`, `/device:Gpu :0`). `*` means "any" in every field.

Merging nested scopes keeps, field by field, the inner value when set. All examples above
are replayed from real TensorFlow in tests/conformance/test_device_strings.py.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..echo import clip
from ..errors import BadInput

VALID_TYPES = frozenset({"CPU", "GPU", "TPU", "CUSTOM", "EPU"})  # device_spec._VALID_DEVICE_TYPES
LOCAL = "/job:localhost/replica:0/task:0"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # ConsumeJobName, ConsumeDeviceType
_UINT64 = 2**64  # ConsumeLeadingDigits fails past uint64
FORMS = "/cpu:0, /gpu:1, /device:GPU:1 or /job:localhost/replica:0/task:0/device:GPU:0"


class DeviceNameError(BadInput):
    """A device string TensorFlow would reject: `message` is TensorFlow's words, `fix`
    gpuplace's hint."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message, fix, joint=" gpuplace: ")


class DeviceSpec(NamedTuple):
    """A (partial) device: each field None means "any", as in tf.DeviceSpec.

    From `parse_device`, the fields are Python's (a job or type may be any text, a number
    any int); from `placer_view`, the C++ placer's (names checked, `*` cleared)."""

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
        return self.matches_at("localhost", 0, 0, device_type, index)

    def matches_at(self, job: str, replica: int, task: int, device_type: str, index: int) -> bool:
        """Whether the device TYPE:index of task /job:JOB/replica:R/task:T satisfies this
        (`DeviceNameUtils::IsCompleteSpecification`'s field-by-field match: unset fields match
        any value, so `/task:1` matches every device of task 1 of any job)."""
        return (
            self.job in (None, job)
            and self.replica in (None, replica)
            and self.task in (None, task)
            and self.device_type in (None, device_type)
            and self.device_index in (None, index)
        )

    def without_type(self) -> DeviceSpec:
        """Job, replica and task kept; type and index cleared (soft placement's first fallback)."""
        return self._replace(device_type=None, device_index=None)


def _int(text: str) -> int:
    """Python's `int()`, as tf.DeviceSpec calls it, with the value in its message clipped."""
    try:
        return int(text)
    except ValueError as err:
        if str(err).startswith("invalid literal"):
            raise DeviceNameError(
                f"invalid literal for int() with base 10: {clip(repr(text))}",
                "device numbers are whole numbers (an index may be *), e.g. /gpu:1 or "
                "/job:localhost/replica:0/task:0/device:GPU:1.",
            ) from None
        raise DeviceNameError(str(err), "write a device number of a few digits.") from None


def _device_type(written: str) -> str:
    """`_as_device_str_or_none`: the /device: form keeps the type as written, but for `cpu` and
    `gpu` ("for backwards compatibility only")."""
    return written.upper() if written in ("cpu", "gpu") else written


def parse_device(spec: str) -> DeviceSpec:
    """Parse a device string the way `tf.DeviceSpec.from_string` (TF 2.21) does."""
    job: str | None = None
    replica: str | None = None
    task: str | None = None
    dtype: str | None = None
    index: int | None = None
    for piece in spec.split("/"):
        y = piece.split(":")
        n = len(y)
        if n == 2 and y[0] == "job":
            job = y[1]
        elif n == 2 and y[0] == "replica":
            replica = y[1]
        elif n == 2 and y[0] == "task":
            task = y[1]
        elif (n in (1, 2) and y[0].upper() in VALID_TYPES) or (n == 3 and y[0] == "device"):
            if dtype is not None:
                raise DeviceNameError(
                    f"Multiple device types are not allowed while parsing the device spec: "
                    f"{clip(spec)}.",
                    "name one device type, e.g. /gpu:1 or /device:GPU:1.",
                )
            dtype = _device_type(y[1]) if n == 3 else y[0].upper()
            if n > 1 and y[-1] != "*":
                index = _int(y[-1])
        elif y[0] != "":
            raise DeviceNameError(
                f"Unknown attribute '{clip(y[0])}' is encountered while parsing the device "
                f"spec: '{clip(spec)}'.",
                f"write devices like {FORMS}.",
            )
    return DeviceSpec(
        job,
        None if replica is None else _int(replica),
        None if task is None else _int(task),
        dtype,
        index,
    )


class MalformedDevice(Exception):
    """A requested device string the C++ placer cannot parse (`ParseFullName` fails)."""


def _number(value: int) -> int:
    """`ConsumeNumber`: ASCII digits that fit 64 bits, stored in a C int (the low 32 bits)."""
    if not 0 <= value < _UINT64:
        raise MalformedDevice
    low = value & 0xFFFFFFFF
    return low - 2**32 if low >= 2**31 else low


def _name(value: str) -> str | None:
    if value == "*":
        return None
    if _NAME.fullmatch(value) is None:
        raise MalformedDevice
    return value


def placer_view(spec: DeviceSpec) -> DeviceSpec:
    """What TF's C++ placer reads from `spec.to_string()` (`DeviceNameUtils::ParseFullName`):
    `*` fields are "any" and numbers are C ints. Raises MalformedDevice where it fails."""
    return DeviceSpec(
        None if spec.job is None else _name(spec.job),
        None if spec.replica is None else _number(spec.replica),
        None if spec.task is None else _number(spec.task),
        None if spec.device_type is None else _name(spec.device_type),
        None if spec.device_index is None else _number(spec.device_index),
    )


def placer_spec(device: str) -> DeviceSpec:
    """The placer's view (`placer_view`) of an op's requested device, a canonical string the
    placer has already accepted (placement strategies after TensorFlow's own)."""
    return placer_view(parse_device(device))


def malformed_fix() -> str:
    """gpuplace's hint after TF's "Malformed device specification" error."""
    return (
        "TensorFlow's placer reads device numbers >= 0 and job and device type names that "
        "start with a letter (then letters, digits or _); write devices like "
        f"{FORMS}."
    )


def canonical(spec: str) -> str:
    """The canonical string of a device string (what error messages print): `/gpu:1` ->
    `/device:GPU:1`."""
    return parse_device(spec).to_string()


def full_name(device_type: str, index: int) -> str:
    """`/job:localhost/replica:0/task:0/device:GPU:0`, the name TensorFlow logs."""
    return f"{LOCAL}/device:{device_type}:{index}"
