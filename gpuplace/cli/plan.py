"""`gpuplace plan`: everything but execute: placement, shapes, memory per device, copies, and
the estimated makespan against its lower bounds."""

from __future__ import annotations

from typing import Any

import click

from ..errors import BadInput
from .context import AppContext
from .flags import JSON, SOFT, global_options, memory_options, options_from_flags, pop_memory_flags
from .output import draw_table, echo_renderables, warn, warn_prepared


@click.command()
@click.argument("spec", metavar="GRAPH.yaml")
@SOFT
@JSON
@click.option("--format", "fmt", type=click.Choice(["text", "json", "dot"]), default=None,
              help="Output format; dot is a Graphviz graph (render: gpuplace plan G.yaml --format dot | dot -Tsvg > plan.svg).")  # fmt: skip
@memory_options
@global_options
@click.pass_obj
def plan(app: AppContext, /, spec: str, soft: bool | None, as_json: bool, fmt: str | None,
         **kw: Any) -> None:  # fmt: skip
    """Everything but execute: placement with reasons, shapes, bytes per device, copies."""
    from ..memory.pools import check_reservations
    from ..pipeline import estimate_plan, predict_memory, prepare
    from ..report import plan as report
    from ..report.lines import pruned_line
    from ..report.records import json_text

    if as_json and fmt not in (None, "json"):
        raise BadInput(
            f"--json conflicts with --format {fmt}: --json is short for --format json; give one "
            "of them"
        )
    view = app.view()
    for w in view.warnings:
        warn(w)
    options = options_from_flags(pop_memory_flags(kw), soft)
    prepared = prepare(spec, view, options, app.env, feeds=False)
    warn_prepared(prepared)
    memory, oom = predict_memory(prepared, view, anyway=run_anyway(spec))
    est = estimate_plan(prepared, view)
    if fmt == "dot":
        from ..report.dot import to_dot

        title = report.title(view, prepared.strategy)
        pruned = pruned_line(prepared)
        if pruned:  # a DOT comment: the graph shows the ops that run
            click.echo(f"// {pruned}")
        click.echo(to_dot(prepared.graph, prepared.placement, title), nl=False)
    elif as_json or fmt == "json":
        click.echo(json_text(report.plan_json(view, prepared, memory, est)))
    elif draw_table(app, len(prepared.graph.ops)):  # a long table: the plain layout
        echo_renderables(
            app,
            report.plan_renderables(view, prepared, memory, est),
            fallback=report.plan_plain(view, prepared, memory, est),
        )
    else:
        click.echo(report.plan_plain(view, prepared, memory, est))
    if oom is not None:
        raise oom
    check_reservations(prepared.logical)  # what run checks before it starts


def run_anyway(spec: str) -> str:
    """For `plan`'s predicted OOM: the command that runs the graph anyway."""
    import shlex

    return f"`gpuplace run {shlex.quote(spec)} --force` (with the same options) runs it anyway"
