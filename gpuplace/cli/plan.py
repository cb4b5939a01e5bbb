"""`gpuplace plan`: everything but execute: placement, shapes, memory per device, copies, and
the estimated makespan against its lower bounds."""

from __future__ import annotations

from typing import Any

import click

from ..errors import BadInput
from .context import AppContext
from .flags import (
    JSON,
    SOFT,
    WIDE,
    global_options,
    memory_options,
    options_from_flags,
    pop_memory_flags,
)
from .help import Command
from .output import draw_table, stages, terminal_width, warn, warn_prepared


@click.command(
    cls=Command,
    short_help="Place and size a graph without running it",
    examples=["gpuplace --machine 4xK520 plan examples/big_model.yaml --strategy balanced", "gpuplace --machine 4xK520 plan examples/guide/04_multi_tower.yaml --json", "gpuplace --machine 4xK520 plan examples/small_model.yaml --training adam --strategy balanced --memory-limit 256MiB"],
)  # fmt: skip
@click.argument("spec", metavar="GRAPH.yaml")
@SOFT
@JSON
@click.option("--format", "fmt", type=click.Choice(["text", "json", "dot", "html"]), default=None,
              help="Output format; dot is a Graphviz graph (render: gpuplace plan G.yaml --format dot | dot -Tsvg > plan.svg); html writes a report to -o.")  # fmt: skip
@click.option("-o", "--output", "output", metavar="FILE.html",
              help="Where --format html writes its report (one self-contained file).")  # fmt: skip
@WIDE
@memory_options
@global_options
@click.pass_obj
def plan(app: AppContext, /, spec: str, soft: bool | None, as_json: bool, fmt: str | None,
         output: str | None, wide: bool, **kw: Any) -> None:  # fmt: skip
    """Everything but execute: placement with reasons, shapes, bytes per device, copies."""
    from ..memory.pools import check_reservations
    from ..pipeline import estimate_plan, predict_memory, predict_training, prepare
    from ..report import plan as report
    from ..report.lines import pruned_line
    from ..report.records import json_text

    if as_json and fmt not in (None, "json"):
        raise BadInput(
            f"--json conflicts with --format {fmt}: --json is short for --format json; give one "
            "of them"
        )
    if fmt == "html" or output is not None:
        from .plan_html import check_output

        check_output(fmt, output, spec)
    view = app.view()
    for w in view.warnings:
        warn(w)
    options = options_from_flags(pop_memory_flags(kw), soft)
    with stages(app, spec, as_json or fmt == "json") as stage:
        stage("loading and placing")
        prepared = prepare(spec, view, options, app.env, feeds=False)
        warn_prepared(prepared)
        stage("predicting memory")
        memory, oom = predict_memory(prepared, view, anyway=run_anyway(spec))
        steps = predict_training(prepared)
        stage("estimating the schedule")
        est = estimate_plan(prepared, view)
    if fmt == "html" and output is not None:
        from .plan_html import write_report

        write_report(app, view, spec, options, (prepared, memory, est), output)
    elif fmt == "dot":
        from ..report.dot import to_dot

        title = report.title(view, prepared.strategy)
        pruned = pruned_line(prepared)
        if pruned:  # a DOT comment: the graph shows the ops that run
            click.echo(f"// {pruned}")
        click.echo(to_dot(prepared.graph, prepared.placement, title), nl=False)
    elif as_json or fmt == "json":
        click.echo(json_text(report.plan_json(view, prepared, memory, est, steps)))
    elif not wide and draw_table(app, len(prepared.graph.ops)):  # a long table: plain
        click.echo(report.plan_fitted(view, prepared, memory, est, terminal_width(app), steps))
    else:
        click.echo(report.plan_plain(view, prepared, memory, est, steps))
    if oom is not None:
        raise oom
    if steps is not None and prepared.training is not None:
        from ..memory.training import training_oom

        failed = training_oom(steps, {m.device: m.limit for m in memory}, prepared.training)
        if failed is not None:
            raise failed
    check_reservations(prepared.logical)  # what run checks before it starts


def run_anyway(spec: str) -> str:
    """For `plan`'s predicted OOM: the command that runs the graph anyway."""
    import shlex

    return f"`gpuplace run {shlex.quote(spec)} --force` (with the same options) runs it anyway"
