"""`gpuplace mem`: nvidia-smi's view, and what TensorFlow's memory policies do with a graph."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

import click

from .cli import AppContext, cli, warn
from .cli_graph import memory_options, parse_feeds, pop_memory_flags, warn_prepared
from .errors import CheckFailed


@cli.command()
@click.argument("spec", metavar="[GRAPH.yaml]", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON document (sizes in bytes).")
@click.option("--compare", is_flag=True,
              help="Run the graph under default, allow_growth and the given fraction; one table.")  # fmt: skip
@click.option("--require-gpus", type=click.IntRange(min=0), metavar="N",
              help="Exit 1 unless at least N GPUs are visible.")  # fmt: skip
@click.option("--feed", multiple=True, metavar="NAME=VALUE", help="Feed a placeholder.")
@memory_options
@click.pass_obj
def mem(app: AppContext, /, spec: str | None, as_json: bool, compare: bool,
        require_gpus: int | None, feed: tuple[str, ...], **kw: Any) -> None:  # fmt: skip
    """nvidia-smi's memory view; with a graph, run it under a memory policy and show the result."""
    from .report import mem as report
    from .report.devices import notice, title

    view = app.view()
    for w in view.warnings:
        warn(w)
    doc: dict[str, Any] = {"machine": {"source": view.machine.source, "description": view.machine.description,
                                       "driver_version": view.machine.driver_version,
                                       "cuda_version": view.machine.cuda_version,
                                       "no_gpu_reason": notice(view)}}  # fmt: skip
    cards = report.visible_cards(view)
    if spec is not None:
        cards = _with_graph(app, view, spec, feed, kw, compare, as_json, doc) or cards
    if as_json:
        doc["gpus"] = report.smi_records(cards)
        click.echo(json.dumps(doc, indent=2))
    elif not view.gpus:
        click.echo(notice(view) or "No GPU listed.")
    else:
        from .report.smi import smi_text

        if view.machine.simulated:
            click.echo(title(view))
        click.echo(smi_text(view.machine, cards, datetime.now()))
    if require_gpus is not None and len(view.gpus) < require_gpus:
        raise CheckFailed(f"{require_gpus} GPUs required, {len(view.gpus)} visible")


def _with_graph(app: AppContext, view: Any, spec: str, feed: tuple[str, ...], kw: dict[str, Any],
                compare: bool, as_json: bool, doc: dict[str, Any]) -> list[Any]:  # fmt: skip
    """Run `spec` under the policy (or each compared policy); return the cards to show."""
    from .report import mem as report
    from .session import Options, prepare

    memory = pop_memory_flags(kw)
    variants = [memory]
    if compare:
        base = {**memory, "allow_growth": None, "memory_fraction": None}
        variants = [{**base, "allow_growth": False}, {**base, "allow_growth": True}]
        if memory["memory_fraction"] is not None:
            variants.append(
                {**base, "allow_growth": False, "memory_fraction": memory["memory_fraction"]}
            )
    runs: list[tuple[str, Any, Any]] = []
    shown: list[Any] = []
    for variant in variants:
        prepared = prepare(spec, view, Options(feeds=parse_feeds(feed), **variant), app.env)
        warn_prepared(prepared, rates=prepared.strategy == "balanced")
        outcome, seen = _run_observed(app, view, prepared)
        runs.append((prepared.policy.name(), prepared.logical, outcome.memory))
        shown = seen or shown
    doc["policies"] = [
        {"policy": name, "devices": report.memory_records(logical, memory)}
        for name, logical, memory in runs
    ]
    if not as_json:
        click.echo(report.memory_plain(runs))
        click.echo()
    return shown


def _run_observed(app: AppContext, view: Any, prepared: Any) -> tuple[Any, list[Any]]:
    """Run, capturing nvidia-smi's cards while the run still holds its memory."""
    from .session import execute_prepared

    seen: list[Any] = []

    def observe(memory: Any) -> None:
        seen.extend(_observe(app, view, prepared, memory))

    return execute_prepared(prepared, view, app.cupy_loader, observe=observe), seen


def _observe(app: AppContext, view: Any, prepared: Any, memory: Any) -> list[Any]:
    """nvidia-smi's cards while the run holds its memory: NVML again on a real machine."""
    from .report import mem as report

    if view.machine.simulated:
        return report.with_process(
            report.visible_cards(view), prepared.logical, memory, os.getpid()
        )
    return report.visible_cards(app.view())
