"""Where a cluster comes from: the spec's `cluster:` block, `--cluster`, `GPUPLACE_CLUSTER`,
a simulated cluster (`--machine '2x(4xV100-16GB)'`, `--machine 4xV100-16GB+1xT4`) or a cluster
file; read into a `ClusterDescription` (what the user said, no processes, no Dask), and for a
simulated cluster into the `Cluster` the placer and `plan` use (`simulated_cluster`).

The `cluster:` block has `tf.train.ClusterSpec`'s shape plus Dask's scheduler:

    cluster:
      scheduler: tcp://head:8786        # a running `dask scheduler` (None: a simulated cluster)
      worker: [node1, node2:8788]       # task i of job worker; a host, `worker: 2` a count,
                                        # or {machine: 2xV100-16GB, cuda_visible_devices: "1,0"}
      ps: 1                             # more jobs, as in TensorFlow
      master: /job:worker/task:0        # the session's task (default: chief's task 0, else
                                        # task 0 of the first job)
      network: {bandwidth: 25Gbit/s, latency: 20us}

A cluster file is a YAML file with that block. Everything is bounded: at most MAX_TASKS tasks,
a description of at most MAX_TEXT characters, one level of `Nx(...)`. See
../shared/reference/multihost-dask.md, section 4.1.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ..echo import clip, clip_middle, show
from ..errors import BadInput
from ..limits import MACHINE_ALIASES, MACHINE_FILE_BYTES, read_text
from ..parse_json import json_file
from .cluster import Cluster, Network, Task, TaskName
from .host_memory import available_memory

MAX_TASKS = 64  # tasks of one cluster: a repeat count, a job's list, all jobs together
MAX_TEXT = 4096  # characters of a --machine or --cluster text
CLUSTER_ENV = "GPUPLACE_CLUSTER"
DEFAULT_NETWORK = Network(10e9 / 8, 50e-6, "default")  # 10 Gbit/s Ethernet, 50 us
BLOCK_KEYS = ("scheduler", "master", "network")
TASK_KEYS = ("machine", "host", "cuda_visible_devices")
# _JOB, _RATE, _TIME: compiled on first use (`re`'s cache), by a cluster's description alone
_JOB = r"[A-Za-z][A-Za-z0-9_]*"
_REPEAT = re.compile(r"^\s*(\d+)\s*[xX]\s*\((.*)\)\s*$", re.S)
_RATE = r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]+)/s\s*$"
_TIME = r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zµ]+)\s*$"
_RATES = {"bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "tbit": 1e12 / 8,
          "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip
_TIMES = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
CLUSTER_FORMS = (
    "a Dask scheduler address (tcp://head:8786), Dask's scheduler.json, or a YAML file with a "
    "cluster: block"
)


class TaskPlan(NamedTuple):
    """One task as described, before any process runs: its name, the host it must run on
    (`node2`, `node2:8788`; None: anywhere), the `--machine` text it simulates (None: real
    hardware) and its CUDA_VISIBLE_DEVICES (None: inherited)."""

    name: TaskName
    host: str | None = None
    machine: str | None = None
    cuda_visible_devices: str | None = None


class ClusterDescription(NamedTuple):
    """A cluster as the user described it. `tasks` is () for a bare scheduler address (the
    live cluster's workers name them); `master` None means the default (chief's task 0, else
    task 0 of the first job); `scheduler` None means a simulated cluster; `source` says where
    it came from (`--machine`, `--cluster`, the spec), `text` what was given."""

    tasks: tuple[TaskPlan, ...]
    master: TaskName | None = None
    scheduler: str | None = None
    network: Network | None = None
    source: str = ""
    text: str = ""

    @property
    def simulated(self) -> bool:
        return self.scheduler is None

    def default_master(self) -> TaskName:
        """The session's task: the given one, else task 0 of job chief, else of the first job."""
        if self.master is not None:
            return self.master
        names = [t.name for t in self.tasks]
        chief = [n for n in names if n.job == "chief"]
        first = (chief or names)[0].job
        return min(n for n in names if n.job == first)


def network_of(cluster: Cluster) -> Network:
    """The link between a cluster's tasks: the cluster file's (or a measured) rate, else the
    default (10 Gbit/s Ethernet, 50 us)."""
    return cluster.network or DEFAULT_NETWORK


def _refuse(source: str, text: str, why: str) -> BadInput:
    return BadInput(f"{source}: {show(text, 80)} {why}")


def _split_hosts(text: str) -> list[str]:
    """`a+b` -> [a, b], `+` inside parentheses kept (`2x(a+b)` is refused later)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "+" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def is_cluster_machine(text: str) -> bool:
    """Whether a --machine text describes several hosts (`+`, or `Nx(...)`), not one machine
    (a preset list or a machine file)."""
    stripped = text.strip()
    if stripped.endswith((".yaml", ".yml", ".json")):
        return False
    return "+" in stripped or _REPEAT.match(stripped) is not None


def machine_cluster(text: str, source: str = "--machine") -> ClusterDescription:
    """Tasks 0..n-1 of job worker, one per host of `text`: hosts separated by `+`, and
    `N x (MACHINE)` for N hosts alike (N from 1 to MAX_TASKS)."""
    if len(text) > MAX_TEXT:
        raise _refuse(source, text, f"is {len(text)} characters long; a cluster's is at most "
                      f"{MAX_TEXT}")  # fmt: skip
    machines: list[str] = []
    for part in _split_hosts(text):
        found = _REPEAT.match(part)
        if found is not None:
            inner = found.group(2).strip()
            if "(" in inner or ")" in inner or "+" in inner:
                raise _refuse(source, part, "nests hosts; write Nx(MACHINE) with one machine "
                              "inside, e.g. 2x(4xV100-16GB)+1xT4")  # fmt: skip
            count = int(found.group(1)) if len(found.group(1)) <= 4 else MAX_TASKS + 1
            if not 1 <= count <= MAX_TASKS:
                raise _refuse(source, part, f"repeats a host {found.group(1)} times; a "
                              f"simulated cluster has 1 to {MAX_TASKS} tasks")  # fmt: skip
            machines += [inner] * count
        elif "(" in part or ")" in part:
            raise _refuse(source, part, "is not a host; write N x (MACHINE), e.g. "
                          "2x(4xV100-16GB), or MACHINE+MACHINE")  # fmt: skip
        else:
            machines.append(part.strip())
        if len(machines) > MAX_TASKS:
            raise _refuse(source, text, f"makes more than {MAX_TASKS} tasks; ask for fewer")
    for m in machines:
        if not m:
            raise _refuse(source, text, "has an empty host; write hosts like "
                          "4xV100-16GB+1xT4 or 2x(4xV100-16GB)")  # fmt: skip
    tasks = tuple(TaskPlan(TaskName("worker", i), machine=m) for i, m in enumerate(machines))
    return ClusterDescription(tasks, source=source, text=text.strip())


def _text(value: object, where: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{where}: {what} must be a non-empty string, got {show(value)}")
    if len(value) > MAX_TEXT:
        raise BadInput(f"{where}: {what} is {len(value)} characters long; at most {MAX_TEXT}")
    return value.strip()


def parse_bandwidth(value: object, where: str) -> float:
    """Bytes per second from `25Gbit/s`, `1.5GB/s`, `100MiB/s` (a bare number: bytes/s)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    found = re.match(_RATE, str(value)) if isinstance(value, str) else None
    unit = found.group(2).lower() if found else ""
    rate = float(found.group(1)) * _RATES[unit] if found and unit in _RATES else 0.0
    if not 0 < rate < float("inf"):
        raise BadInput(
            f"{where}: network bandwidth {show(value)} is not a rate; write e.g. 25Gbit/s, "
            "10Gbit/s or 1.2GB/s"
        )
    return rate


def parse_latency(value: object, where: str) -> float:
    """Seconds from `20us`, `0.5ms`, `50µs` (a bare number: seconds)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        seconds = float(value)
    else:
        found = re.match(_TIME, value) if isinstance(value, str) else None
        unit = found.group(2) if found else ""
        seconds = float(found.group(1)) * _TIMES[unit] if found and unit in _TIMES else -1.0
    if not 0 <= seconds <= 60:
        raise BadInput(
            f"{where}: network latency {show(value)} is not a time from 0 to 60 s; write e.g. "
            "20us, 0.5ms or 50us"
        )
    return seconds


def parse_network(value: object, where: str) -> Network:
    """`network: {bandwidth: 25Gbit/s, latency: 20us}` (latency optional: 50us)."""
    if not isinstance(value, dict) or "bandwidth" not in value:
        raise BadInput(
            f"{where}: network must be a mapping with a bandwidth, e.g. "
            "{bandwidth: 25Gbit/s, latency: 20us}"
        )
    extra = sorted(str(k) for k in value if k not in ("bandwidth", "latency"))
    if extra:
        raise BadInput(f"{where}: network has no field {clip(extra[0])}; it has bandwidth "
                       "and latency")  # fmt: skip
    latency = parse_latency(value.get("latency", "50us"), where)
    return Network(parse_bandwidth(value["bandwidth"], where), latency, "cluster file")


def _task_entry(job: str, index: int, entry: object, where: str) -> TaskPlan:
    name = TaskName(job, index)
    if entry is None:
        return TaskPlan(name)
    if isinstance(entry, str):
        return TaskPlan(name, host=_text(entry, where, f"the host of {name}"))
    if not isinstance(entry, dict):
        raise BadInput(
            f"{where}: task {index} of job {job} is {show(entry)}; write a host (node1 or "
            "node1:8788) or a mapping with machine, host and cuda_visible_devices"
        )
    extra = sorted(str(k) for k in entry if k not in TASK_KEYS)
    if extra:
        raise BadInput(f"{where}: task {index} of job {job} has no field {clip(extra[0])}; "
                       f"its fields: {', '.join(TASK_KEYS)}")  # fmt: skip
    got = {k: _text(entry[k], where, f"{k} of {name}") if k != "cuda_visible_devices"
           else str(entry[k]) for k in TASK_KEYS if entry.get(k) is not None}  # fmt: skip
    cvd = got.get("cuda_visible_devices")
    if cvd is not None and len(cvd) > MAX_TEXT:
        raise BadInput(f"{where}: cuda_visible_devices of {name} is too long")
    return TaskPlan(name, got.get("host"), got.get("machine"), cvd)


def _job_tasks(job: str, value: object, where: str) -> list[TaskPlan]:
    if isinstance(value, bool) or value is None:
        value = "?"
    if isinstance(value, int):
        if not 1 <= value <= MAX_TASKS:
            raise BadInput(f"{where}: job {job} has {value} tasks; a cluster has 1 to "
                           f"{MAX_TASKS}")  # fmt: skip
        return [TaskPlan(TaskName(job, i)) for i in range(value)]
    if isinstance(value, list):
        if not 1 <= len(value) <= MAX_TASKS:
            raise BadInput(f"{where}: job {job} lists {len(value)} tasks; a cluster has 1 to "
                           f"{MAX_TASKS}")  # fmt: skip
        return [_task_entry(job, i, e, where) for i, e in enumerate(value)]
    if isinstance(value, dict) and value:  # TF's sparse form {1: "host:port"}
        tasks = []
        for key, entry in value.items():
            if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < 2**31:
                raise BadInput(f"{where}: job {job}: task numbers are whole numbers >= 0, got "
                               f"{show(key)}")  # fmt: skip
            tasks.append(_task_entry(job, key, entry, where))
        if len(tasks) > MAX_TASKS:
            raise BadInput(f"{where}: job {job} lists {len(tasks)} tasks; at most {MAX_TASKS}")
        return sorted(tasks, key=lambda t: t.name)
    raise BadInput(
        f"{where}: job {job} is {show(value)}; write a count (worker: 2), a list of hosts "
        "(worker: [node1, node2]) or of tasks ({machine: 2xV100-16GB})"
    )


def cluster_block(
    data: object, where: str, source: str = "cluster:", text: str | None = None
) -> ClusterDescription:
    """The `cluster:` block (of a spec or a cluster file) as a ClusterDescription; errors start
    with `where`, and `text` (default: `where`) is how the Cluster: line names it."""
    if not isinstance(data, dict) or not data:
        raise BadInput(
            f"{where}: cluster must be a mapping of jobs to tasks, e.g. "
            "{scheduler: tcp://head:8786, worker: [node1, node2]}"
        )
    tasks: list[TaskPlan] = []
    for key, value in data.items():
        if key in BLOCK_KEYS:
            continue
        if not isinstance(key, str) or re.fullmatch(_JOB, key) is None:
            raise BadInput(
                f"{where}: cluster key {show(key)} is neither a job name (a letter, then "
                f"letters, digits or _) nor one of {', '.join(BLOCK_KEYS)}"
            )
        tasks += _job_tasks(key, value, where)
        if len(tasks) > MAX_TASKS:
            raise BadInput(f"{where}: the cluster has more than {MAX_TASKS} tasks")
    if not tasks:
        raise BadInput(f"{where}: the cluster names no job; add one, e.g. worker: 2")
    scheduler = data.get("scheduler")
    if scheduler is not None:
        scheduler = _text(scheduler, where, "cluster.scheduler")
    master = None
    if data.get("master") is not None:
        text = _text(data["master"], where, "cluster.master")
        master = _master(text, where)
        if master not in {t.name for t in tasks}:
            listed = ", ".join(str(t.name) for t in tasks[:8])
            raise BadInput(f"{where}: cluster.master {clip(text)} is not one of its tasks: "
                           f"{listed}")  # fmt: skip
    network = parse_network(data["network"], where) if "network" in data else None
    shown = where if text is None else text
    return ClusterDescription(tuple(tasks), master, scheduler, network, source, shown)


def _master(text: str, where: str) -> TaskName:
    """`/job:worker/task:0` or `/job:worker/replica:0/task:0` as a TaskName."""
    found = re.fullmatch(r"/job:([A-Za-z][A-Za-z0-9_]*)(?:/replica:(\d{1,9}))?/task:(\d{1,9})",
                         text)  # fmt: skip
    if found is None:
        raise BadInput(f"{where}: cluster.master {clip(text)} is not a task; write e.g. "
                       "/job:worker/task:0")  # fmt: skip
    return TaskName(found.group(1), int(found.group(3)), int(found.group(2) or 0))


def _is_file(text: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(text).st_mode)
    except (OSError, ValueError):
        return False


def cluster_option(text: str, source: str = "--cluster") -> ClusterDescription:
    """`--cluster` / GPUPLACE_CLUSTER: a scheduler address, Dask's scheduler.json (its
    "address"), or a YAML file with a `cluster:` block (a cluster file)."""
    from ..parse import parse

    value = text.strip()
    if not value or len(value) > MAX_TEXT:
        raise BadInput(f"{source}: {show(text, 80)} is not a cluster; give {CLUSTER_FORMS}")
    if re.match(r"^[a-z][a-z0-9+.-]*://", value):
        return ClusterDescription((), scheduler=value, source=source, text=value)
    if not _is_file(value):
        raise BadInput(
            f"{source}: {clip_middle(value)} is neither a scheduler address nor a file; "
            f"give {CLUSTER_FORMS}"
        )
    path = Path(value)
    raw = read_text(path, MACHINE_FILE_BYTES, f"{source}: cannot read", "a cluster file is small")
    if value.endswith(".json"):
        data: Any = json_file(raw, f"{source}: {clip_middle(value)}")
        if isinstance(data, dict) and isinstance(data.get("address"), str):
            address = _text(data["address"], value, "address")
            return ClusterDescription((), scheduler=address, source=source, text=value)
    else:
        data = parse(raw, value, MACHINE_ALIASES).data
    if not isinstance(data, dict) or "cluster" not in data:
        raise BadInput(
            f"{source}: {clip_middle(value)} has neither a scheduler address (Dask's "
            "scheduler.json) nor a cluster: block"
        )
    return cluster_block(data["cluster"], value, source)


def with_machine(description: ClusterDescription, machine: str, source: str) -> ClusterDescription:
    """Every task without a machine of its own simulates `machine` (a one-host --machine next
    to a spec's cluster: block: each task is such a host)."""
    tasks = tuple(t if t.machine else t._replace(machine=machine) for t in description.tasks)
    text = f"{description.text}, each task {machine}"
    return description._replace(tasks=tasks, source=f"{description.source} with {source}",
                               text=text, scheduler=None)  # fmt: skip


def simulated_cluster(
    description: ClusterDescription,
    env: Mapping[str, str],
    host_available: int | Callable[[], int | None] | None = available_memory,
) -> Cluster:
    """The Cluster of a simulated description: each task's machine loaded as `--machine`
    would load it, seen through the task's CUDA_VISIBLE_DEVICES (else `env`'s)."""
    from . import load_machine, view

    missing = [t for t in description.tasks if t.machine is None]
    if description.scheduler is not None or missing or not description.tasks:
        named = str(missing[0].name) if missing else "the cluster"
        raise BadInput(
            f"{description.source or 'cluster'}: {named} has no simulated machine; give each "
            "task a machine (cluster file: machine: 2xV100-16GB), or --machine, or connect "
            "to a running cluster (--cluster tcp://HOST:8786)"
        )
    measured = host_available() if callable(host_available) else host_available
    tasks: list[Task] = []
    loaded: dict[str, Any] = {}
    for i, plan in enumerate(description.tasks):
        text = str(plan.machine)
        where = f"{description.source} ({plan.name})"
        machine = loaded.get(text) or loaded.setdefault(text, load_machine(text, where))
        task_env = dict(env)
        if plan.cuda_visible_devices is not None:
            task_env["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible_devices
        seen = view(machine, task_env, measured)
        host = plan.host or f"sim-{i}"
        tasks.append(Task(plan.name, host, seen, None, text, plan.cuda_visible_devices))
    return Cluster(
        tuple(tasks),
        description.default_master(),
        None,
        simulated=True,
        network=description.network,
        description=description.text,
    )
