"""`gpuplace mem`: nvidia-smi's view, and what TensorFlow's memory policies do with a graph."""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from ..errors import BadInput, CheckFailed
from .context import AppContext
from .flags import (
    global_options,
    memory_options,
    options_from_flags,
    pop_memory_flags,
    watch_options,
)
from .help import Command
from .output import gpus_required, warn, warn_no_gpu, warn_prepared, watch_views

if TYPE_CHECKING:
    from ..devices.model import Gpu, View
    from ..memory.pools import DeviceMemory
    from ..memory.training import TrainingMemory
    from ..options import Options
    from ..results import PolicyRun, Prepared, Reservation


@click.command(
    cls=Command,
    short_help="nvidia-smi's memory view and TensorFlow's memory policies",
    examples=["gpuplace --machine 2xK520 mem --compare --memory-fraction 0.4", "gpuplace --machine 4xK520 mem examples/guide/04_multi_tower.yaml --compare"],
)  # fmt: skip
@click.argument("spec", metavar="[GRAPH.yaml]", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON document (sizes in bytes).")
@click.option("--compare", is_flag=True,
              help="Default, allow_growth and the given fraction side by side (with a graph: runs it under each).")  # fmt: skip
@click.option("--require-gpus", type=click.IntRange(min=0), metavar="N",
              help="Exit 1 unless at least N GPUs are visible.")  # fmt: skip
@click.option("--feed", multiple=True, metavar="NAME=VALUE", help="Feed a placeholder.")
@watch_options("nvidia-smi -l")
@memory_options
@global_options
@click.pass_obj
def mem(app: AppContext, /, spec: str | None, as_json: bool, compare: bool,
        require_gpus: int | None, feed: tuple[str, ...], watch: float | None, count: int | None,
        **kw: Any) -> None:  # fmt: skip
    """nvidia-smi's memory view and what TensorFlow's memory policies reserve; with a graph, run
    it under a policy (or each, with --compare) and show the result."""
    from ..report import mem as report
    from ..report.devices import notice, title
    from ..report.lines import pruned_line
    from ..report.records import json_text, machine_record, rate_records
    from ..report.schema import SCHEMA_VERSION

    if spec is None:
        _needs_graph(feed, kw)
    _check_watch(spec, watch, count)
    if compare:
        from ..pipeline import check_comparable

        check_comparable(kw["allow_growth"])
    described = app.cluster_description()
    if described is not None and spec is None:  # not task 0's view alone, silently
        raise BadInput(
            f"{described.source}: mem without a graph shows one process's GPUs; across hosts "
            "give it a graph (it runs on every task's worker and shows each task's memory), "
            "or list every task's devices with gpuplace devices"
        )
    view = app.view()
    for w in view.warnings:
        warn(w)
    if spec is None:  # nvidia-smi's view, and what the policy (or each compared) reserves
        policy = _policy(kw, compare)
        if watch is None:
            click.echo(_screen(app, view, policy, compare, as_json, once=True))
        else:
            watch_views(app, view, watch, count, as_json,
                        lambda seen: _screen(app, seen, policy, compare, as_json))  # fmt: skip
        if require_gpus is not None and len(view.gpus) < require_gpus:
            raise CheckFailed(gpus_required(require_gpus, len(view.gpus)))
        return
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "machine": machine_record(view)}
    cards = report.visible_cards(view)
    runs, seen = _with_graph(app, view, spec, feed, kw, compare)
    cards = seen or cards
    steps = _training_steps(runs)
    doc["policies"] = report.policy_records(runs, steps)
    prepared = runs[-1].prepared  # what the fetches prune is the same for every policy
    doc["strategy"], doc["rates"] = prepared.strategy, rate_records(prepared)
    doc["pruned"] = list(prepared.pruned)
    pruned = pruned_line(prepared)
    if prepared.cluster is not None and not as_json:  # across hosts: no one host's cards
        from ..report.cluster import cluster_line

        click.echo(cluster_line(prepared.cluster))
        if pruned:
            click.echo(pruned)
        click.echo(report.memory_plain(runs))
        _require_gpus(require_gpus, view, prepared)
        return
    if view.machine.simulated and not as_json:
        click.echo(title(view))  # first, above the policy table and nvidia-smi's view alike
    if pruned and not as_json:
        click.echo(pruned)
    if any(run.prepared.logical for run in runs) and not as_json:  # no GPU: no rows (warned)
        click.echo(report.memory_plain(runs, steps) + "\n")
    if as_json:
        doc["gpus"] = report.smi_records(cards)
        click.echo(json_text(doc))
    elif not view.gpus:
        click.echo(notice(view) or "No GPU listed.")
    else:
        from ..report.smi import smi_text

        click.echo(smi_text(view.machine, cards, datetime.now()))
    _require_gpus(require_gpus, view, prepared)


def _require_gpus(require_gpus: int | None, view: View, prepared: Prepared) -> None:
    """--require-gpus after a graph ran: over every task of a cluster (naming the short one),
    else over this machine's visible GPUs."""
    if require_gpus is None:
        return
    if prepared.cluster is not None:
        from ..echo import LINE_CHARS, sample
        from ..report.cluster import short_tasks

        failures = short_tasks(prepared.cluster.tasks, require_gpus, None)
        if failures:
            raise CheckFailed(sample(failures, "; ", width=LINE_CHARS))
    elif len(view.gpus) < require_gpus:
        raise CheckFailed(gpus_required(require_gpus, len(view.gpus)))


def _check_watch(spec: str | None, watch: float | None, count: int | None) -> None:
    if watch is not None and spec is not None:
        raise BadInput(
            "--watch refreshes nvidia-smi's view and the policies' reservations and runs nothing; "
            "drop the GRAPH to watch, or drop --watch to run it"
        )
    if count is not None and watch is None:
        raise BadInput("--count needs --watch: it stops a watch after N refreshes; add --watch")


def _screen(
    app: AppContext,
    view: View,
    policy: Options | None,
    compare: bool,
    as_json: bool,
    once: bool = False,
) -> str:
    """What `mem` without a graph shows: as text, or as JSON (`once`: the command's document,
    else one compact line per refresh of a watch, with its time)."""
    from ..report import mem as report
    from ..report.devices import notice, title
    from ..report.records import json_text, machine_record
    from ..report.schema import SCHEMA_VERSION

    held = _reserved(app, view, policy, compare)
    cards = report.visible_cards(view)
    if as_json:
        import json

        doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "machine": machine_record(view)}
        if not once:
            doc["time"] = datetime.now().isoformat(timespec="seconds")
        if held:
            doc["reservations"] = report.reservation_records(held)
        doc["gpus"] = report.smi_records(cards)
        return json_text(doc) if once else json.dumps(doc, separators=(",", ":"))
    parts = [title(view)] if view.machine.simulated else []
    if any(r.logical for r in held):
        parts.append(report.reservation_plain(held) + "\n")
    if not view.gpus:
        parts.append(notice(view) or "No GPU listed.")
    else:
        from ..report.smi import smi_text

        parts.append(smi_text(view.machine, cards, datetime.now()))
    return "\n".join(parts)


def _needs_graph(feed: tuple[str, ...], kw: dict[str, Any]) -> None:
    """Without a graph mem shows nvidia-smi's view and what a memory policy would reserve:
    refuse the flags that shape a run."""
    given = [flag for flag, on in (
        ("--replicate", kw["replicate"] is not None),
        ("--strategy", kw["strategy"] is not None),
        ("--feed", bool(feed)),
        ("--out-dir", kw["out_dir"] is not None),
        ("--allow-writes-anywhere", kw["allow_writes_anywhere"]),
        ("--training", kw["training"] is not None),
        ("--dtype", kw["training_dtype"] is not None),
    ) if on]  # fmt: skip
    if given:
        names = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
        verb, them = ("needs", "it") if len(given) == 1 else ("need", "them")
        raise BadInput(
            f"{names} {verb} a GRAPH: without one, mem shows nvidia-smi's view and what a memory "
            f"policy reserves, and runs nothing; name a graph (gpuplace mem GRAPH.yaml "
            f"{given[0]} ...) or drop {them}"
        )


_POLICY_FLAGS = ("allow_growth", "memory_fraction", "memory_limit", "virtual_gpus", "max_memory")


def _policy(kw: dict[str, Any], compare: bool) -> Options | None:
    """Without a graph: the Options whose policy to show (popped from `kw`), or None when no
    policy flag and no --compare was given."""
    if not compare and all(kw[name] is None for name in _POLICY_FLAGS):
        return None
    return options_from_flags(pop_memory_flags(kw))


def _reserved(
    app: AppContext, view: View, options: Options | None, compare: bool
) -> list[Reservation]:
    """What TensorFlow would reserve under `options`' policy, or under each compared policy."""
    if options is None:
        return []
    from ..pipeline import reservations

    return reservations(view, options, app.env, compare)


def _with_graph(app: AppContext, view: View, spec: str, feed: tuple[str, ...], kw: dict[str, Any],
                compare: bool) -> tuple[list[PolicyRun], list[Gpu]]:  # fmt: skip
    """Run `spec` under the policy (or each compared policy): the runs, in order, and
    nvidia-smi's cards while the last run held its memory. Each run's warnings are given once
    it is prepared, before it runs; the no-GPU warning once."""
    from ..across_hosts import ClusterRuns
    from ..pipeline import compare_policies, run_policies

    options = options_from_flags(pop_memory_flags(kw), feed=feed)
    shown: list[Gpu] = []
    warned: set[str] = set()
    prepared_runs: list[PolicyRun] = []

    def prepared(run: PolicyRun) -> None:
        warn_prepared(run.prepared, seen=warned)
        if not prepared_runs:
            warn_no_gpu(view, run.prepared)
        prepared_runs.append(run)
        if run.repeat_of:  # e.g. TF_FORCE_GPU_ALLOW_GROWTH makes default and allow_growth one
            warn(f"--compare: the {run.label} run would repeat the {run.repeat_of} run (both are "
                 f"{run.name} here); shown once")  # fmt: skip

    def observe(prepared: Prepared, memory: list[DeviceMemory]) -> None:
        shown[:] = _observe(app, view, prepared, memory) or shown

    cluster = app.cluster_description()
    with contextlib.closing(ClusterRuns()) as across:  # worker processes end with the runs
        if compare:
            runs = compare_policies(spec, view, options, app.env, app.cupy_loader, observe,
                                    prepared, cluster=cluster, runs=across)  # fmt: skip
        else:
            runs = run_policies(spec, view, [("", options)], app.env, app.cupy_loader, observe,
                                prepared, cluster=cluster, runs=across)  # fmt: skip
    return runs, shown


def _training_steps(runs: list[PolicyRun]) -> list[dict[str, TrainingMemory] | None]:
    """With --training (or config training): each run's training step by device; else []."""
    from ..pipeline import predict_training

    if all(run.prepared.training is None for run in runs):
        return []
    out: list[dict[str, TrainingMemory] | None] = []
    for run in runs:
        steps = predict_training(run.prepared)
        out.append(None if steps is None else {t.device: t for t in steps})
    return out


def _observe(
    app: AppContext, view: View, prepared: Prepared, memory: list[DeviceMemory]
) -> list[Gpu]:
    """nvidia-smi's cards while the run holds its memory: NVML again on a real machine."""
    from ..report import mem as report

    if view.machine.simulated:
        return report.with_process(
            report.visible_cards(view), prepared.logical, memory, os.getpid()
        )
    return report.visible_cards(app.view())
