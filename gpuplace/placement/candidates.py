"""The machine's devices and the candidate devices of a group (TF's `GetDevicesForNode`).

Devices are CPU:0 plus GPU:0..n-1, ordered as `DeviceSet::SortPrioritizedDeviceVector` orders
them: device priority first (GPU 210, CPU 70), then full names compared as strings, so GPU:10
sorts before GPU:2 and GPU:0 always comes first. Candidates for a requested spec are the
matching devices whose type has a kernel, in that order; with soft placement an empty list
falls back to the same job/replica/task with type and id cleared (`GetSoftDeviceCandidates`).
Candidates are cached per (spec, kernel types), so placing n ops costs O(n) lookups.
`Consumers` holds what heuristic A (generators follow their consumers) needs to know.

On a cluster (`DeviceTable(..., tasks=...)`) the devices are the union of every task's
CPU:0 and GPUs, named `/job:J/replica:R/task:T/device:TYPE:i`, and sorted as TF's
`SortPrioritizedDeviceVector` sorts a session's `DeviceSet`: type priority, then the session's
(master's) task before the others (`IsLocal`), then the name. Partial specs (`/task:1`,
`/device:GPU:0`) match across tasks; soft placement clears only type and index, so it never
leaves the requested job, replica or task (../shared/reference/multihost-dask.md, section 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..devices.cluster import TaskName, full_device, task_label
from ..devices.names import DeviceSpec, full_name
from ..echo import sample
from ..errors import Message, Term, Text
from .colocation import has_details
from .model import PlacementError

_PRIORITY = {"GPU": 210, "CPU": 70}
_LISTED = 32  # devices TF's messages list whole (a 16-GPU node's); past that, a sample
LOCALHOST = TaskName("localhost", 0)


@dataclass(frozen=True)
class LocalDevice:
    """One device the placer may choose (TF's `Device`): type, index, full name and task.

    `label` is the short name reasons print: "" for a single machine's `GPU:0`, and
    `task:1/GPU:0` (job worker) or `ps/task:0/CPU:0` (another job) on a cluster."""

    type: str
    index: int
    name: str  # full name, /job:localhost/replica:0/task:0/device:TYPE:i
    task: TaskName = LOCALHOST
    label: str = ""

    @property
    def short(self) -> str:
        return self.label or f"{self.type}:{self.index}"

    def satisfies(self, spec: DeviceSpec) -> bool:
        """Whether this device matches the (partial) spec, field by field."""
        task = self.task
        return spec.matches_at(task.job, task.replica, task.task, self.type, self.index)


class Candidates(NamedTuple):
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

    def collect(
        self,
        producers: Sequence[int],
        arity: Sequence[int],
        generator: Sequence[bool],
        assigned: Sequence[LocalDevice | None],
    ) -> None:
        """Record, input by input (`model.Wiring`: op j's `arity[j]` inputs read the ops of
        `producers`, -1 for none), each op j (placed on `assigned[j]`) that reads a generator;
        an op reading one generator twice counts once."""
        _collect(self, producers, arity, generator, assigned)

    def one_device(self, g: int) -> LocalDevice | None:
        """The device all of g's consumers sit on, or None (no consumers, or several)."""
        return None if self.mixed[g] else self.device[g]


def _collect(
    consumers: Consumers,
    producers: Sequence[int],
    arity: Sequence[int],
    generator: Sequence[bool],
    assigned: Sequence[LocalDevice | None],
) -> None:
    """`Consumers.collect`'s walk, on C integers where compiled (candidates.pxd). Op j is
    made a Python int once, at its first input that reads a generator (compiled, `j` is a C
    integer, which each use as an object would box again), and only then."""
    first, count, device = consumers.first, consumers.count, consumers.device
    mixed, last = consumers.mixed, consumers.last
    at = 0
    for j in range(len(arity)):
        end = at + arity[j]
        reader = None  # j as an object
        while at < end:
            g = producers[at]
            at += 1
            if g < 0 or not generator[g]:
                continue
            if reader is None:
                reader = j
            elif last[g] == reader:  # read twice by this op: one consumer
                continue
            last[g] = reader
            if not count[g]:
                first[g], device[g] = reader, assigned[j]
            elif assigned[j] is not device[g]:  # one LocalDevice object per device
                mixed[g] = True
            count[g] += 1


def _numbers(values: Sequence[int]) -> str:
    """`0-3`, `0, 2`, `0-1, 5`: sorted task numbers as runs."""
    runs: list[list[int]] = []
    for v in sorted(set(values)):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def describe_tasks(tasks: Sequence[TaskName]) -> str:
    """`tasks 0-1 of job worker`, `task 0 of job ps and tasks 0-3 of job worker`."""
    jobs: dict[str, list[int]] = {}
    for t in sorted(tasks):
        jobs.setdefault(t.job if not t.replica else f"{t.job}/replica:{t.replica}", []).append(
            t.task
        )
    parts = [
        f"{'task' if len(ns) == 1 else 'tasks'} {_numbers(ns)} of job {job}"
        for job, ns in jobs.items()
    ]
    return " and ".join(parts)


class DeviceTable:
    """The devices of a machine with `num_gpus` GPUs, or of a cluster's tasks (`tasks`: each
    task with its number of GPUs; `master`: the session's task, whose devices win ties), and
    candidate lookups against them."""

    def __init__(
        self,
        num_gpus: int,
        soft: bool,
        tasks: Sequence[tuple[TaskName, int]] = (),
        master: TaskName | None = None,
    ) -> None:
        self.tasks = tuple(name for name, _ in tasks)
        self.master = master if master is not None else (self.tasks[0] if tasks else LOCALHOST)
        made: list[LocalDevice] = []
        if not tasks:
            made.append(LocalDevice("CPU", 0, full_name("CPU", 0)))
            made += [LocalDevice("GPU", i, full_name("GPU", i)) for i in range(num_gpus)]
        for task, gpus in tasks:
            prefix = task_label(task)
            for kind, index in [("CPU", 0), *(("GPU", i) for i in range(gpus))]:
                local = f"{kind}:{index}"
                made.append(
                    LocalDevice(kind, index, full_device(task, local), task, f"{prefix}/{local}")
                )
        self.created = tuple(made)  # DeviceSet insertion order: by task, CPU:0, then GPUs
        master_task = self.master
        self.devices = tuple(
            sorted(made, key=lambda d: (-_PRIORITY[d.type], d.task != master_task, d.name))
        )
        self._by_id = {(d.task, d.type, d.index): d for d in made}
        self.types = frozenset(d.type for d in made)
        self.soft = soft
        self._cache: dict[tuple[DeviceSpec, frozenset[str]], Candidates] = {}
        self._exists: dict[DeviceSpec, int] = {}

    def matching(self, spec: DeviceSpec, types: frozenset[str]) -> tuple[LocalDevice, ...]:
        """`FindMatchingDevices` then `FilterSupportedDevices`, in priority order.

        A spec naming one device (`/device:GPU:7`) is looked up, not matched against every
        device: with a replica per logical GPU, scanning would cost devices x specs."""
        task = self._task_of(spec)
        if task is not None and spec.device_type is not None and spec.device_index is not None:
            found = self._by_id.get((task, spec.device_type, spec.device_index))
            hit = found is not None and found.type in types and found.satisfies(spec)
            return (found,) if hit and found is not None else ()
        return tuple(d for d in self.devices if d.type in types and d.satisfies(spec))

    def _task_of(self, spec: DeviceSpec) -> TaskName | None:
        """The one task a spec can name, where that is known without scanning: this process's
        on a single machine, a task the spec names in full on a cluster; else None."""
        if not self.tasks:
            return self.master
        if spec.job is None or spec.task is None:
            return None
        return TaskName(spec.job, spec.task, 0 if spec.replica is None else spec.replica)

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

    def has_phrase(self) -> str:
        """`this machine has 2 GPUs (GPU:0 to GPU:1)`, or on a cluster `the cluster (tasks 0-1
        of job worker) has 3 GPUs`: for hints."""
        if not self.tasks:
            return f"this machine has {self.gpus_phrase()}"
        n = sum(d.type == "GPU" for d in self.created)
        count = "no GPU" if n == 0 else f"{n} GPU{'s' if n > 1 else ''}"
        return f"the cluster ({describe_tasks(self.tasks)}) has {count}"

    def _has_task(self, spec: DeviceSpec) -> bool:
        """Whether some device's job, replica and task match the spec's."""
        return any(d.satisfies(spec.without_type()) for d in self.created)

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
            fix = f"{self.has_phrase()}; request one of its devices"
        else:
            # The spec matches devices, so it has a type: a typeless local spec matches all.
            message = (
                f"Could not satisfy explicit device specification '{requested}' because no "
                f"supported kernel for {own.device_type} devices is available.{debug}"
            )
            fix = f"{kernels}; request such a device"
        return PlacementError(prefix + message, self._hint(group, fix), name)

    def _hint(self, group: DeviceSpec, fix: str) -> Text:
        if not self._has_task(group):
            return self._task_hint(group)
        if self.soft:
            return f"gpuplace: {fix}."
        return Message(f"gpuplace: {fix}, or pass ", Term.SOFT_PLACEMENT, ".")

    def _task_hint(self, group: DeviceSpec) -> Text:
        """The hint for a request naming a job, replica or task that does not exist."""
        if not self.tasks:
            return Message(
                "gpuplace: only /job:localhost/replica:0/task:0 exists on this machine, and "
                "soft placement keeps the job, replica and task; to place ops on other tasks, "
                "describe the cluster (", Term.CLUSTER, ").",
            )  # fmt: skip
        where = f"gpuplace: the cluster has {describe_tasks(self.tasks)}"
        if group.job == "localhost":
            return (
                f"{where}; /job:localhost names the one process of a run without a cluster: "
                f"drop the job (/device:GPU:0) or name a task ({self.master}/device:GPU:0)."
            )
        return (
            f"{where}; request a device of one of them (soft placement keeps the job, replica "
            "and task)."
        )
