"""The machine's devices and the candidate devices of a group (TF's `GetDevicesForNode`).

Devices are CPU:0 plus GPU:0..n-1, ordered as `DeviceSet::SortPrioritizedDeviceVector` orders
them: device priority first (GPU 210, CPU 70), then full names compared as strings, so GPU:10
sorts before GPU:2 and GPU:0 always comes first. Candidates for a requested spec are the
matching devices whose type has a kernel, in that order; with soft placement an empty list
falls back to the same job/replica/task with type and id cleared (`GetSoftDeviceCandidates`).
Candidates are cached per (spec, kernel types), so placing n ops costs O(n) lookups.
`Consumers` holds what heuristic A (generators follow their consumers) needs to know.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..devices.names import DeviceSpec, full_name
from ..echo import sample
from ..errors import Message, Term, Text
from .colocation import has_details
from .model import PlacementError

_PRIORITY = {"GPU": 210, "CPU": 70}
_LISTED = 32  # devices TF's messages list whole (a 16-GPU node's); past that, a sample


@dataclass(frozen=True)
class LocalDevice:
    """One device of this process (TF's `Device`): type, index and full name."""

    type: str
    index: int
    name: str  # full name, /job:localhost/replica:0/task:0/device:TYPE:i

    @property
    def short(self) -> str:
        return f"{self.type}:{self.index}"


@dataclass(frozen=True)
class Candidates:
    """Where a group may go, best first; `soft` says why soft placement was needed, if it was."""

    devices: tuple[LocalDevice, ...]
    soft: str | None = None


class Consumers:
    """Per generator: first consumer, number of distinct consumers, and their common device.

    Flat lists indexed by op, filled edge by edge after the first pass; `mixed` marks
    generators whose consumers sit on more than one device.
    """

    def __init__(self, n: int) -> None:
        self.first = [-1] * n
        self.count = [0] * n
        self.device: list[LocalDevice | None] = [None] * n
        self.mixed = [False] * n
        self.last = [-1] * n  # latest consumer seen, to count an op reading g twice once

    def add(self, g: int, j: int, device: LocalDevice | None) -> None:
        """Record that op j (placed on `device`) reads generator g; j arrives in order."""
        if self.last[g] == j:
            return
        self.last[g] = j
        if not self.count[g]:
            self.first[g], self.device[g] = j, device
        elif device is not self.device[g]:  # one LocalDevice object per device of the table
            self.mixed[g] = True
        self.count[g] += 1

    def one_device(self, g: int) -> LocalDevice | None:
        """The device all of g's consumers sit on, or None (no consumers, or several)."""
        return None if self.mixed[g] else self.device[g]


def _is_local(spec: DeviceSpec) -> bool:
    """Whether the spec's job/replica/task is this process's (localhost, replica 0, task 0)."""
    return spec.without_type().matches("CPU", 0)


class DeviceTable:
    """The devices of a machine with `num_gpus` GPUs, and candidate lookups against them."""

    def __init__(self, num_gpus: int, soft: bool) -> None:
        made = [LocalDevice("CPU", 0, full_name("CPU", 0))]
        made += [LocalDevice("GPU", i, full_name("GPU", i)) for i in range(num_gpus)]
        self.created = tuple(made)  # DeviceSet insertion order: CPU:0, then GPUs by index
        self.devices = tuple(sorted(made, key=lambda d: (-_PRIORITY[d.type], d.name)))
        self._by_id = {(d.type, d.index): d for d in made}
        self.types = frozenset(d.type for d in made)
        self.soft = soft
        self._cache: dict[tuple[DeviceSpec, frozenset[str]], Candidates] = {}
        self._exists: dict[DeviceSpec, int] = {}

    def matching(self, spec: DeviceSpec, types: frozenset[str]) -> tuple[LocalDevice, ...]:
        """`FindMatchingDevices` then `FilterSupportedDevices`, in priority order.

        A spec naming one device (`/device:GPU:7`) is looked up, not matched against every
        device: with a replica per logical GPU, scanning would cost devices x specs."""
        if spec.device_type is not None and spec.device_index is not None:
            found = self._by_id.get((spec.device_type, spec.device_index))
            hit = (
                found is not None and found.type in types and spec.matches(found.type, found.index)
            )
            return (found,) if hit and found is not None else ()
        return tuple(d for d in self.devices if d.type in types and spec.matches(d.type, d.index))

    def exists(self, spec: DeviceSpec) -> int:
        """How many devices of this machine match the spec, kernels aside."""
        found = self._exists.get(spec)
        if found is None:
            found = self._exists[spec] = len(self.matching(spec, self.types))
        return found

    def candidates(self, spec: DeviceSpec, types: frozenset[str]) -> Candidates:
        """A group's candidates: empty when the request cannot be met (the caller raises)."""
        key = (spec, types)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._compute(spec, types)
        return found

    def _compute(self, spec: DeviceSpec, types: frozenset[str]) -> Candidates:
        devices = self.matching(spec, types)
        if devices or not self.soft or not has_details(spec):
            return Candidates(devices)
        if self.exists(spec):
            why = f"no supported kernel for {spec.device_type} devices ({spec.to_string()})"
        elif spec.device_type is not None and spec.device_index is not None:
            why = f"{spec.to_string()} does not exist here"
        else:
            why = f"no device here matches {spec.to_string()}"
        return Candidates(self.matching(spec.without_type(), types), why)

    def gpus_phrase(self) -> str:
        """`no GPU`, `1 GPU (GPU:0)`, `4 GPUs (GPU:0 to GPU:3)`: for hints."""
        n = len(self.created) - 1
        if n == 0:
            return "no GPU"
        return "1 GPU (GPU:0)" if n == 1 else f"{n} GPUs (GPU:0 to GPU:{n - 1})"

    def no_device_error(
        self,
        name: str,
        requested: str,
        own: DeviceSpec,
        group: DeviceSpec,
        kernels: str,
        debug: str = "",
    ) -> PlacementError:
        """The error `GetDevicesForNode` returns when a group has no candidate, as the placer
        wraps it ("Cannot assign a device for operation ..."); `kernels` says which device
        types have kernels, for the hint ("it has kernels for CPU only"); `debug` is the
        group's Colocation Debug Info, which TF appends (gpuplace: for groups of two or more)."""
        prefix = f"Cannot assign a device for operation {name}: "
        if own != group:
            listed = sample([d.name for d in self.created], limit=_LISTED)
            message = (
                f"Could not satisfy explicit device specification '{requested}' because the node "
                f"{{{{colocation_node {name}}}}} was colocated with a group of nodes that required "
                f"incompatible device '{group.to_string()}'. All available devices [{listed}]."
                f"{' ' + debug if debug else ''}"
            )
            fix = f"change the device of {name} or of the ops colocated with it"
        elif not self.exists(own):
            listed = sample(sorted(d.name for d in self.created), limit=_LISTED)
            message = (
                f"{{{{node {name}}}}} was explicitly assigned to {requested} but available "
                f"devices are [ {listed} ]. Make sure the device specification refers to a "
                "valid device."
            )
            fix = f"this machine has {self.gpus_phrase()}; request one of its devices"
        else:
            # The spec matches devices, so it has a type: a typeless local spec matches all.
            message = (
                f"Could not satisfy explicit device specification '{requested}' because no "
                f"supported kernel for {own.device_type} devices is available.{debug}"
            )
            fix = f"{kernels}; request such a device"
        return PlacementError(prefix + message, self._hint(group, fix), name)

    def _hint(self, group: DeviceSpec, fix: str) -> Text:
        if not _is_local(group):
            return (
                "gpuplace: only /job:localhost/replica:0/task:0 exists on this machine, and "
                "soft placement keeps the job, replica and task."
            )
        if self.soft:
            return f"gpuplace: {fix}."
        return Message(f"gpuplace: {fix}, or pass ", Term.SOFT_PLACEMENT, ".")
