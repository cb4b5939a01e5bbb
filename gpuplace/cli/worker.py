"""`gpuplace worker`: one TensorFlow task of a cluster, as `tf.train.Server` is: a Dask worker
named `/job:worker/replica:0/task:N` whose devices are what gpuplace discovers in it."""

from __future__ import annotations

from typing import Any

import click

from .context import AppContext
from .flags import global_options
from .help import Command


@click.command(
    cls=Command,
    short_help="Serve one task of a cluster (tf.train.Server) on a Dask scheduler",
    examples=["gpuplace worker tcp://head:8786 --task 1", "gpuplace --machine 2xV100-16GB worker scheduler.json --task 0 --job worker"],
)  # fmt: skip
@click.argument("scheduler", metavar="SCHEDULER")
@click.option("--task", "task", type=click.IntRange(min=0), required=True, metavar="N",
              help="The task's index in its job: the worker is /job:JOB/replica:0/task:N.")  # fmt: skip
@click.option("--job", "job", default="worker", show_default=True, metavar="JOB",
              help="The task's job (as in tf.train.ClusterSpec).")  # fmt: skip
@global_options
@click.pass_obj
def worker(app: AppContext, /, scheduler: str, task: int, job: str, **kw: Any) -> None:
    """Serve /job:JOB/replica:0/task:N on the Dask scheduler SCHEDULER (tcp://host:port, or the
    scheduler.json that `dask scheduler --scheduler-file` wrote) until stopped. Its devices are
    what gpuplace sees in this process (--machine, GPUPLACE_MACHINE, CUDA_VISIBLE_DEVICES).
    Needs gpuplace[cluster], the same version everywhere. A Dask scheduler runs code from any
    client that reaches it: use TLS or keep it on a private network."""
    from ..devices.cluster import TaskName
    from ..execute.dask_session import serve_worker

    name = TaskName.parse(f"/job:{job}/replica:0/task:{task}")  # BadInput for a bad job name
    serve_worker(scheduler, name, app.machine_source()[0])
