"""`gpuplace plan`: everything but execute: placement, shapes, memory per device, copies, and
the estimated makespan against its lower bounds."""

from __future__ import annotations

from contextlib import closing
from typing import TYPE_CHECKING, Any

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
from .output import draw_table, echo_json, stages, terminal_width, warn, warn_prepared

if TYPE_CHECKING:
    from ..devices.model import View
    from ..results import Prepared


@click.command(
    cls=Command,
    short_help="Place and size a graph without running it",
    examples=["gpuplace --machine 4xK520 plan examples/big_model.yaml --strategy balanced", "gpuplace --machine 4xK520 plan examples/guide/04_multi_tower.yaml --json", "gpuplace --machine 4xK520 plan examples/small_model.yaml --training adam --strategy balanced --memory-limit 256MiB"],
)  # fmt: skip
@click.argument("spec", metavar="GRAPH.yaml")
@SOFT
@JSON
@click.option("--format", "fmt", type=click.Choice(["text", "json", "dot", "html", "device-map", "tf"]), default=None,
              help="Output format; dot is a Graphviz graph (render: gpuplace plan G.yaml --format dot | dot -Tsvg > plan.svg); html writes a report to -o; device-map is JSON in Accelerate's device_map shape; tf is Python with tf.device blocks by name scope.")  # fmt: skip
@click.option("-o", "--output", "output", metavar="FILE",
              help="Where --format html writes its report (one self-contained file), or --format device-map / tf their file (else printed).")  # fmt: skip
@WIDE
@memory_options
@global_options
@click.pass_obj
def plan(app: AppContext, /, spec: str, soft: bool | None, as_json: bool, fmt: str | None,
         output: str | None, wide: bool, **kw: Any) -> None:  # fmt: skip
    """Everything but execute: placement with reasons, shapes, bytes per device, copies."""
    from ..across_hosts import ClusterRuns
    from ..memory.pools import check_reservations
    from ..pipeline import estimate_plan, predict_memory, predict_training, prepare
    from ..report import plan as report
    from ..report.lines import pruned_line
    from ..report.records import json_chunks

    if as_json and fmt not in (None, "json"):
        raise BadInput(
            f"--json conflicts with --format {fmt}: --json is short for --format json; give one "
            "of them"
        )
    if fmt in ("html", "device-map", "tf") or output is not None:
        from .plan_html import check_output

        check_output(fmt, output, spec)
    view = app.view()
    for w in view.warnings:
        warn(w)
    options = options_from_flags(pop_memory_flags(kw), soft)
    with stages(app, spec, as_json or fmt == "json") as stage, closing(ClusterRuns()) as runs:
        stage("loading and placing")
        cluster = app.cluster_description()  # a live one: its workers' inventory (runs.connect)
        prepared = prepare(spec, view, options, app.env, feeds=False, cluster=cluster,
                           connect=runs.connect)  # fmt: skip
        warn_prepared(prepared)
        stage("predicting memory")
        memory, oom = predict_memory(prepared, view, anyway=run_anyway(spec))
        steps = predict_training(prepared)
        stage("estimating the schedule")
        est = estimate_plan(prepared, view)
    if fmt == "html" and output is not None:
        from .plan_html import write_report

        write_report(app, view, spec, options, (prepared, memory, est), output)
    elif fmt in ("device-map", "tf"):
        hand_back(view, prepared, fmt, output)
    elif fmt == "dot":
        from ..report.dot import to_dot

        title = report.plan_title(view, prepared)
        pruned = pruned_line(prepared)
        if pruned:  # a DOT comment: the graph shows the ops that run
            click.echo(f"// {pruned}")
        click.echo(to_dot(prepared.graph, prepared.placement, title), nl=False)
    elif as_json or fmt == "json":
        doc = report.plan_json(view, prepared, memory, est, steps)
        echo_json(json_chunks(doc))
        app.keep(doc)
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
    app.keep(prepared, memory, est)


def hand_back(view: View, prepared: Prepared, fmt: str, output: str | None) -> None:
    """--format device-map / tf: printed, or written to -o (atomically) with one line saying so."""
    from ..echo import clip_middle
    from ..report.devmap import device_map_doc, tf_text
    from ..report.records import json_text
    from ..units import human

    text = (
        json_text(device_map_doc(view, prepared))
        if fmt == "device-map"
        else tf_text(view, prepared)
    )
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    from .plan_html import write_output

    data = text.encode("utf-8") + (b"" if text.endswith("\n") else b"\n")
    what = "the device map" if fmt == "device-map" else "the tf.device blocks"
    write_output(output, data, what)
    sim = ", simulated GPUs" if view.machine.simulated else ""
    click.echo(f"{what[4:].capitalize()} (strategy {prepared.strategy}{sim}) written to "
               f"{clip_middle(output)} ({human(len(data))})")  # fmt: skip


def run_anyway(spec: str) -> str:
    """For `plan`'s predicted OOM: the command that runs the graph anyway."""
    import shlex

    return f"`gpuplace run {shlex.quote(spec)} --force` (with the same options) runs it anyway"
