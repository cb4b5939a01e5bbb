"""`gpuplace devices` across hosts: every task's devices in one table with a HOST column, or
one JSON document; `--require-gpus` and `--min-memory` count over the cluster; `--check` runs
gpuplace's device check in every task's worker and times worker-to-worker transfers."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from ..devices.cluster import Cluster
from ..devices.cluster_spec import ClusterDescription, simulated_cluster
from ..echo import LINE_CHARS, sample
from ..errors import BadInput, CheckFailed
from .context import AppContext
from .output import warn

if TYPE_CHECKING:
    from ..across_hosts import ClusterRuns
    from ..execute.dask_runtime import ClusterCheck
    from ..execute.device_check import RateSizes

WATCH_REFUSED = (
    "--watch refreshes one process's devices; across hosts each task's devices are fixed when "
    "its worker starts (run gpuplace devices --watch on a node to watch its GPUs)"
)


def cluster_devices(
    app: AppContext, described: ClusterDescription, as_json: bool, require_gpus: int | None,
    minimum: int | None, min_memory: str | None, sizes: RateSizes | None, watch: bool,
) -> None:  # fmt: skip
    """List a cluster's devices (a live one's from each worker's own discovery), check them
    (`sizes`: --check was given) and fail naming the task that falls short."""
    if watch:
        raise BadInput(WATCH_REFUSED)
    runs = None
    if described.scheduler is not None or sizes is not None:  # else no runtime is imported
        from ..across_hosts import ClusterRuns

        runs = ClusterRuns()
    try:
        if runs is not None and described.scheduler is not None:  # each task's own discovery
            cluster = runs.connect(described)
        else:
            cluster = simulated_cluster(described, app.env, app.host_memory)
        doc = show_cluster(cluster, as_json)
        failures = short_failures(cluster, require_gpus, minimum, min_memory)
        if runs is not None and sizes is not None:
            failures += _checks(app, runs, cluster, sizes, as_json, doc)
    finally:
        if runs is not None:
            runs.close()
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    if failures:
        raise CheckFailed(sample(failures, "; ", width=LINE_CHARS))


def show_cluster(cluster: Cluster, as_json: bool) -> dict[str, Any]:
    """Print the cluster's devices (the table, its `Cluster:` line and per-task notes); under
    --json return the document to print once the checks have added theirs."""
    from ..report.cluster import cluster_line, devices_cluster_json, devices_table, task_notes

    for note in task_notes(cluster.tasks):
        warn(note)
    if as_json:
        return devices_cluster_json(cluster)
    click.echo(cluster_line(cluster))
    click.echo(devices_table(cluster.tasks))
    return {}


def short_failures(
    cluster: Cluster, require_gpus: int | None, minimum: int | None, min_memory: str | None
) -> list[str]:
    """--require-gpus over every task, and each GPU below --min-memory, named with its task."""
    from ..report.cluster import short_tasks

    failures = short_tasks(cluster.tasks, require_gpus, minimum)
    if min_memory is not None:
        failures = [f if "required" in f else f"{f}, less than --min-memory {min_memory}"
                    for f in failures]  # fmt: skip
    return failures


def _checks(
    app: AppContext, across: ClusterRuns, cluster: Cluster, sizes: RateSizes, as_json: bool,
    doc: dict[str, Any],
) -> list[str]:  # fmt: skip
    """Run the check on every task (a simulated cluster's worker processes start here), print
    it, save a live cluster's measured network for `plan`; the failed devices, named."""
    from ..execute.device_check import SIMULATED_SIZES, SIZES_ENV
    from ..report.cluster import qualified_results, transfer_lines, transfer_records
    from ..report.device_check import check_records, checks_plain

    if cluster.simulated and not app.env.get(SIZES_ENV):
        sizes = SIMULATED_SIZES  # numpy on this host, whatever the cards: a quick measurement
    done = across.runtime().check(cluster, sizes)
    results = qualified_results(done.results)
    if as_json:
        doc["checks"] = check_records(results)
        doc["network"] = transfer_records(done.transfers)
    else:
        click.echo(checks_plain(results, sizes))
        for line in transfer_lines(done.transfers, cluster.simulated):
            click.echo(line)
    if not cluster.simulated and done.transfers:
        _save_network(app, cluster, done, as_json)
    return [
        f"{r.device} failed the matmul check: {r.detail}" + (f". Fix: {r.fix}." if r.fix else "")
        for r in results
        if not r.passed
    ]


def _save_network(app: AppContext, cluster: Cluster, done: ClusterCheck, as_json: bool) -> None:
    """Keep the slowest measured transfer as the cluster's network, by its scheduler's address,
    in the rates file (`plan` on that cluster uses it when the cluster names no network)."""
    import datetime

    from ..devices.rates import MeasuredNetwork, rates_path, save_network, shown

    slowest = min(done.transfers, key=lambda t: t.bandwidth)
    latency = max(t.latency for t in done.transfers)
    today = datetime.date.today().isoformat()
    measured = MeasuredNetwork(slowest.bandwidth / 1e9, latency * 1e6, today)
    path = rates_path(app.env)
    if path is None:
        warn("measured network not saved: set GPUPLACE_RATES, XDG_CACHE_HOME or HOME")
        return
    try:
        save_network(path, str(cluster.scheduler), measured)
    except OSError as exc:
        warn(f"measured network not saved to {shown(path)}: {exc.strerror or type(exc).__name__}")
        return
    click.echo(f"Saved the measured network of {cluster.scheduler} to {shown(path)} (plan uses "
               "it on this cluster unless the cluster names a network)", err=as_json)  # fmt: skip
