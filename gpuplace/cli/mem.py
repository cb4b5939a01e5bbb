"""`gpuplace mem`: nvidia-smi's view, and what TensorFlow's memory policies do with a graph."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import click

from ..errors import BadInput, CheckFailed, Message
from .context import AppContext
from .flags import global_options, memory_options, options_from_flags, pop_memory_flags
from .output import gpus_required, warn, warn_no_gpu, warn_prepared


@click.command()
@click.argument("spec", metavar="[GRAPH.yaml]", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON document (sizes in bytes).")
@click.option("--compare", is_flag=True,
              help="Run the graph under default, allow_growth and the given fraction; one table.")  # fmt: skip
@click.option("--require-gpus", type=click.IntRange(min=0), metavar="N",
              help="Exit 1 unless at least N GPUs are visible.")  # fmt: skip
@click.option("--feed", multiple=True, metavar="NAME=VALUE", help="Feed a placeholder.")
@memory_options
@global_options
@click.pass_obj
def mem(app: AppContext, /, spec: str | None, as_json: bool, compare: bool,
        require_gpus: int | None, feed: tuple[str, ...], **kw: Any) -> None:  # fmt: skip
    """nvidia-smi's memory view; with a graph, run it under a memory policy and show the result."""
    from ..report import mem as report
    from ..report.devices import notice, title
    from ..report.run import json_text, machine_record, pruned_line, rate_records

    if spec is None:
        _needs_graph(compare, feed, kw)
    if compare and kw["allow_growth"] is not None:
        flag = "--allow-growth" if kw["allow_growth"] else "--no-allow-growth"
        raise BadInput(
            f"{flag} conflicts with --compare: --compare runs the default policy and allow_growth "
            f"side by side (and the given --memory-fraction); drop {flag}"
        )
    view = app.view()
    for w in view.warnings:
        warn(w)
    doc: dict[str, Any] = {"machine": {**machine_record(view),
                                       "driver_version": view.machine.driver_version,
                                       "cuda_version": view.machine.cuda_version,
                                       "no_gpu_reason": notice(view)}}  # fmt: skip
    cards = report.visible_cards(view)
    runs: list[tuple[str, Any, Any]] = []
    pruned: str | None = None
    if spec is not None:
        runs, seen, prepared = _with_graph(app, view, spec, feed, kw, compare)
        cards = seen or cards
        doc["policies"] = [
            {"policy": name, "devices": report.memory_records(logical, memory)}
            for name, logical, memory in runs
        ]
        doc["strategy"], doc["rates"] = prepared.strategy, rate_records(prepared)
        doc["pruned"] = list(prepared.pruned)
        pruned = pruned_line(prepared)
    if view.machine.simulated and not as_json:
        click.echo(title(view))  # first, above the policy table and nvidia-smi's view alike
    if pruned and not as_json:
        click.echo(pruned)
    if any(logical for _, logical, _ in runs) and not as_json:  # no GPU: no rows (warned)
        click.echo(report.memory_plain(runs) + "\n")
    if as_json:
        doc["gpus"] = report.smi_records(cards)
        click.echo(json_text(doc))
    elif not view.gpus:
        click.echo(notice(view) or "No GPU listed.")
    else:
        from ..report.smi import smi_text

        click.echo(smi_text(view.machine, cards, datetime.now()))
    if require_gpus is not None and len(view.gpus) < require_gpus:
        raise CheckFailed(gpus_required(require_gpus, len(view.gpus)))


def _needs_graph(compare: bool, feed: tuple[str, ...], kw: dict[str, Any]) -> None:
    """Without a graph mem only shows nvidia-smi's view: refuse the flags that shape a run."""
    given = [flag for flag, on in (
        ("--allow-growth", kw["allow_growth"] is True),
        ("--no-allow-growth", kw["allow_growth"] is False),
        ("--memory-fraction", kw["memory_fraction"] is not None),
        ("--memory-limit", kw["memory_limit"] is not None),
        ("--virtual-gpus", kw["virtual_gpus"] is not None),
        ("--replicate", kw["replicate"] is not None),
        ("--strategy", kw["strategy"] is not None),
        ("--compare", compare),
        ("--feed", bool(feed)),
    ) if on]  # fmt: skip
    if given:
        names = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
        verb, them = ("needs", "it") if len(given) == 1 else ("need", "them")
        raise BadInput(
            f"{names} {verb} a GRAPH: without one, mem only shows nvidia-smi's view and runs "
            f"nothing; name a graph (gpuplace mem GRAPH.yaml {given[0]} ...) or drop {them}"
        )


def _variants(memory: dict[str, Any], compare: bool) -> list[tuple[str, dict[str, Any]]]:
    """The policies to run, each with the label `--compare` asked for it under."""
    if not compare:
        return [("", memory)]
    base = {**memory, "allow_growth": None, "memory_fraction": None}
    variants = [("default", {**base, "allow_growth": False}),
                ("allow_growth", {**base, "allow_growth": True})]  # fmt: skip
    fraction = memory["memory_fraction"]
    if fraction is not None:
        variants.append((f"fraction {fraction:g}", {**base, "allow_growth": False,
                                                   "memory_fraction": fraction}))  # fmt: skip
    return variants


def _with_graph(app: AppContext, view: Any, spec: str, feed: tuple[str, ...], kw: dict[str, Any],
                compare: bool) -> tuple[list[tuple[str, Any, Any]], list[Any], Any]:  # fmt: skip
    """Run `spec` under the policy (or each compared policy): (policy name, logical GPUs,
    memory) per run, nvidia-smi's cards while the last run held its memory, and the last
    run's prepared graph (what its fetches pruned is the same for every policy)."""
    from ..session import prepare

    memory = pop_memory_flags(kw)
    runs: list[tuple[str, Any, Any]] = []
    shown: list[Any] = []
    warned: set[str] = set()
    warned_no_gpu = False
    labels: dict[str, str] = {}  # policy name -> the compared label that ran it
    prepared: Any = None
    for label, variant in _variants(memory, compare):
        options = options_from_flags(variant, feed=feed)
        prepared = prepare(spec, view, options, app.env)
        if compare and prepared.policy.virtual:
            raise BadInput(
                Message(
                    "--compare conflicts with ", prepared.policy.virtual_source, ": --compare "
                    "runs allow_growth, which TensorFlow does not allow on a GPU with virtual "
                    "devices; drop one of them",
                )
            )  # fmt: skip
        warn_prepared(prepared, rates=prepared.strategy == "balanced", seen=warned)
        if not warned_no_gpu:
            warn_no_gpu(view, prepared)
            warned_no_gpu = True
        name = prepared.policy.name()
        if name in labels:  # e.g. TF_FORCE_GPU_ALLOW_GROWTH makes default and allow_growth one
            warn(f"--compare: the {label} run would repeat the {labels[name]} run (both are "
                 f"{name} here); shown once")  # fmt: skip
            continue
        labels[name] = label
        outcome, seen = _run_observed(app, view, prepared)
        runs.append((name, prepared.logical, outcome.memory))
        shown = seen or shown
    return runs, shown, prepared


def _run_observed(app: AppContext, view: Any, prepared: Any) -> tuple[Any, list[Any]]:
    """Run, capturing nvidia-smi's cards while the run still holds its memory."""
    from ..session import execute_prepared

    seen: list[Any] = []

    def observe(memory: Any) -> None:
        seen.extend(_observe(app, view, prepared, memory))

    return execute_prepared(prepared, view, app.cupy_loader, observe=observe), seen


def _observe(app: AppContext, view: Any, prepared: Any, memory: Any) -> list[Any]:
    """nvidia-smi's cards while the run holds its memory: NVML again on a real machine."""
    from ..report import mem as report

    if view.machine.simulated:
        return report.with_process(
            report.visible_cards(view), prepared.logical, memory, os.getpid()
        )
    return report.visible_cards(app.view())
