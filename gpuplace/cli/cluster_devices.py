"""`gpuplace devices` across hosts: every task's devices in one table with a HOST column, or
one JSON document; `--require-gpus` and `--min-memory` count over the cluster."""

from __future__ import annotations

import json

import click

from ..devices.cluster import Cluster
from ..devices.cluster_spec import ClusterDescription, simulated_cluster
from ..echo import LINE_CHARS, sample
from ..errors import BadInput, CheckFailed
from .context import AppContext
from .output import warn


def cluster_devices(
    app: AppContext, described: ClusterDescription, as_json: bool, require_gpus: int | None,
    minimum: int | None, min_memory: str | None, runs: bool,
) -> None:  # fmt: skip
    """List a simulated cluster's devices (a live one's inventory is the runtime's: it calls
    `show_cluster` with the Cluster it built); `runs`: --check or --watch was given."""
    if described.scheduler is not None:
        if runs:
            raise BadInput(
                f"--check and --watch on the Dask cluster at {described.scheduler} are not "
                "supported yet; run them on each node (gpuplace devices --check)"
            )
        from ..pipeline import ClusterRuns

        across = ClusterRuns()
        try:  # each task's own discovery, run in its worker
            live = across.connect(described)
        finally:
            across.close()
        show_cluster(live, as_json, require_gpus, minimum, min_memory)
        return
    if runs:
        raise BadInput(
            "--check and --watch run on real workers; a simulated cluster has none: run them "
            "on one simulated host (--machine 4xV100-16GB) or on a live cluster (--cluster)"
        )
    cluster = simulated_cluster(described, app.env, app.host_memory)
    show_cluster(cluster, as_json, require_gpus, minimum, min_memory)


def show_cluster(
    cluster: Cluster, as_json: bool, require_gpus: int | None, minimum: int | None,
    min_memory: str | None, pids: tuple[int | None, ...] = (),
) -> None:  # fmt: skip
    """Print the cluster's devices (the table, its `Cluster:` line and per-task notes, or the
    JSON document), then fail naming the task that falls short of the checks."""
    from ..report.cluster import (
        cluster_line,
        devices_cluster_json,
        devices_table,
        short_tasks,
        task_notes,
    )

    for note in task_notes(cluster.tasks):
        warn(note)
    if as_json:
        click.echo(json.dumps(devices_cluster_json(cluster, pids), indent=2))
    else:
        click.echo(cluster_line(cluster))
        click.echo(devices_table(cluster.tasks))
    failures = short_tasks(cluster.tasks, require_gpus, minimum)
    if min_memory is not None:
        failures = [f if "required" in f else f"{f}, less than --min-memory {min_memory}"
                    for f in failures]  # fmt: skip
    if failures:
        raise CheckFailed(sample(failures, "; ", width=LINE_CHARS))
