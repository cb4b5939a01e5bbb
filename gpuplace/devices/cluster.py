"""A cluster of TensorFlow tasks: what `/job:worker/replica:0/task:1/device:GPU:0` names.

TensorFlow's `tf.train.ClusterSpec` maps each job to its tasks; one task is one server process
with its own devices. gpuplace maps one task to one process too (a Dask worker named exactly
`/job:J/replica:R/task:T`, or a simulated host), and a task's devices are what gpuplace's own
discovery sees inside that process (its NVML, its `CUDA_VISIBLE_DEVICES`). Plain data: no Dask
here (see ../shared/reference/multihost-dask.md for the design and TensorFlow's rules).

`full_device(task, "GPU:0")` and `split_device(full)` convert between a task-qualified device
name and the (task, local device) pair the task's own executor understands.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import BadInput
from .model import View

_TASK = re.compile(r"/job:([A-Za-z][A-Za-z0-9_]*)/replica:(\d+)/task:(\d+)")
_FULL = re.compile(_TASK.pattern + r"/device:([A-Z]+:\d+)")


class TaskName(NamedTuple):
    """One TensorFlow task: `/job:worker/replica:0/task:1`."""

    job: str
    task: int
    replica: int = 0

    def __str__(self) -> str:
        return f"/job:{self.job}/replica:{self.replica}/task:{self.task}"

    @classmethod
    def parse(cls, text: str) -> TaskName:
        """The task of a full name (`/job:worker/replica:0/task:1`, with or without a device)."""
        found = _TASK.match(text)
        if found is None:
            raise BadInput(
                f"task name {text!r} is not of the form /job:NAME/replica:N/task:N; "
                "for example /job:worker/replica:0/task:1"
            )
        return cls(found.group(1), int(found.group(3)), int(found.group(2)))


def full_device(task: TaskName, local: str) -> str:
    """`/job:worker/replica:0/task:1/device:GPU:0` from the task and a local `GPU:0`."""
    return f"{task}/device:{local}"


def split_device(full: str) -> tuple[TaskName, str]:
    """(task, `GPU:0`) of a full device name; BadInput when `full` is not one."""
    found = _FULL.fullmatch(full)
    if found is None:
        raise BadInput(
            f"device {full!r} is not a full device name; expected "
            "/job:NAME/replica:N/task:N/device:TYPE:N"
        )
    task = TaskName(found.group(1), int(found.group(3)), int(found.group(2)))
    return task, found.group(4)


def task_label(task: TaskName) -> str:
    """`task:1` for a task of job worker (replica 0), else `ps/task:0` (`/replica:R` when R is
    not 0): how tables and reasons name a task in short."""
    job = "" if task.job == "worker" else f"{task.job}/"
    replica = f"replica:{task.replica}/" if task.replica else ""
    return f"{job}{replica}task:{task.task}"


def short_name(full: str) -> str:
    """How tables and reasons name a device in short: `GPU:0` for this process's
    (`/job:localhost/replica:0/task:0/device:GPU:0`), `task:1/GPU:0` for a cluster task's
    (`/job:worker/replica:0/task:1/device:GPU:0`); another name, its part after `device:`."""
    found = _FULL.fullmatch(full)
    if found is None or full.startswith("/job:localhost/replica:0/task:0/"):
        return full.rsplit("device:", 1)[-1]
    task = TaskName(found.group(1), int(found.group(3)), int(found.group(2)))
    return f"{task_label(task)}/{found.group(4)}"


class Network(NamedTuple):
    """The link between any two tasks: bytes per second and seconds of latency."""

    bandwidth: float
    latency: float
    source: str  # where the numbers came from: "cluster file", "measured", "default"


NETWORK_REPEATS = 3  # timed transfers of each size; the fastest counts


class Transfer(NamedTuple):
    """A host array Dask moved from one task's worker to another's: the best of a few transfers
    of `nbytes` and of a 1-byte array (the latency), as the receiver's transfer log timed them."""

    source: TaskName
    target: TaskName
    nbytes: int
    seconds: float
    latency: float

    @property
    def bandwidth(self) -> float:
        """Bytes per second beyond the latency (the cost model's `latency + bytes / rate`)."""
        return self.nbytes / max(self.seconds - self.latency, self.seconds / 2, 1e-9)


class Task(NamedTuple):
    """One task of the cluster and the devices its process sees.

    `host`: the host name the task runs on (a simulated one for simulated clusters).
    `address`: the Dask worker's address (`tcp://10.0.0.2:40123`), None while none is known
    (simulated clusters before their workers start). `machine_spec`: for a simulated task, the
    `--machine` text its worker process gets as `GPUPLACE_MACHINE`; None on real hardware."""

    name: TaskName
    host: str
    view: View
    address: str | None = None
    machine_spec: str | None = None
    cuda_visible_devices: str | None = None
    pid: int | None = None  # the worker's process, once one answered (its inventory)


class Cluster(NamedTuple):
    """Every task, the session's master task (its devices win ties, TensorFlow's local-first
    rule), the Dask scheduler (None for a simulated cluster that `plan` never starts), whether
    the cluster is simulated, and the network between tasks."""

    tasks: tuple[Task, ...]
    master: TaskName
    scheduler: str | None = None
    simulated: bool = False
    network: Network | None = None
    description: str = ""  # what the user gave: --machine text, file, address

    def task(self, name: TaskName) -> Task:
        for task in self.tasks:
            if task.name == name:
                return task
        listed = ", ".join(str(t.name) for t in self.tasks)
        raise BadInput(f"the cluster has no task {name}; its tasks: {listed}")
