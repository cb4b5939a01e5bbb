"""`gpuplace run` and `gpuplace plan`: graph commands, registered on the `cli` group.

Heavy modules (numpy, the loader, the executor) are imported inside the commands so that
`gpuplace devices` stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from .cli import AppContext, cli, echo_renderable, echo_renderables, global_options, warn
from .errors import BadInput, CheckFailed


def parse_feeds(values: Sequence[str]) -> dict[str, str]:
    """`--feed NAME=VALUE` items by name; a placeholder fed twice is refused, not overwritten."""
    feeds: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BadInput(f"--feed {item!r}: expected NAME=FILE.npy or NAME=JSON (e.g. x=[[1,2]])")
        name = name.strip()
        if name in feeds:
            raise BadInput(
                f"--feed {name} is given twice ({name}={feeds[name]} and {name}={value}); "
                f"feed each placeholder once"
            )
        feeds[name] = value
    return feeds


def check_save_path(path: str) -> None:
    """`--save` writes exactly the path given: numpy would add `.npz` to any other name (and
    write `adir.npz` beside a directory), so those are refused before anything runs."""
    import os

    fix = "give a file name ending in .npz"
    if not path:
        raise BadInput(f"--save '': no file name; {fix} (e.g. --save values.npz)")
    if os.path.isdir(path):
        raise BadInput(
            f"--save {path}: is a directory; {fix} (e.g. --save {os.path.join(path, 'values.npz')})"
        )
    if not path.endswith(".npz"):
        raise BadInput(
            f"--save {path}: numpy would write {path}.npz instead; {fix} (e.g. --save values.npz)"
        )
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        raise BadInput(
            f"--save {path}: the directory {parent} does not exist; create it first, or save "
            "somewhere that exists"
        )


def _options(
    soft: bool | None, log: bool | None, feed: Sequence[str], memory: dict[str, Any]
) -> Any:
    from .naming import CLI
    from .options import Options

    return Options(
        allow_soft_placement=soft, log_device_placement=log, feeds=parse_feeds(feed),
        naming=CLI, **memory,
    )  # fmt: skip


def memory_options(f: Any) -> Any:
    """The machine-shaping flags shared by run, plan and mem: memory policy (overrides
    config.gpu_options), --replicate and --strategy (overrides config.placement)."""
    options = [
        click.option("--allow-growth/--no-allow-growth", "allow_growth", default=None,
                     help="TensorFlow's allow_growth: start at 2 MiB and grow (overrides config; "
                          "env TF_FORCE_GPU_ALLOW_GROWTH wins)."),
        click.option("--memory-fraction", "memory_fraction", type=float, metavar="F",
                     help="per_process_gpu_memory_fraction: limit = total x F, F in (0, 1]."),
        click.option("--memory-limit", "memory_limit", metavar="SIZE",
                     help="Memory limit per GPU (e.g. 64MiB), preallocated unless growing."),
        click.option("--virtual-gpus", "virtual_gpus", metavar="SPEC",
                     help="Logical GPUs: GPU:0=2GiB,2GiB splits GPU:0 into two (';' between GPUs)."),
        click.option("--replicate", "replicate", metavar="N|all",
                     help="Data-parallel: split the top-level placeholders over N GPUs (or all) and "
                          "merge the outputs on the CPU, as Keras' multi_gpu_model."),
        click.option("--strategy", type=click.Choice(["tensorflow", "balanced", "round-robin"]),
                     default=None, help="Placement strategy (config placement.strategy); "
                     "default tensorflow: TensorFlow's rules."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


def pop_memory_flags(kwargs: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "allow_growth",
        "memory_fraction",
        "memory_limit",
        "virtual_gpus",
        "strategy",
        "replicate",
    )
    return {k: kwargs.pop(k) for k in keys}


SOFT = click.option(
    "--allow-soft-placement/--no-allow-soft-placement", "soft", default=None,
    help="TensorFlow's allow_soft_placement: fall back to an existing device (overrides config).",
)  # fmt: skip
JSON = click.option("--json", "as_json", is_flag=True, help="One JSON document.")


@cli.command()
@click.argument("spec", metavar="GRAPH.yaml")
@click.option("--log-placement/--no-log-placement", "log", default=None,
              help="Print TensorFlow's device mapping and placement log (overrides config; "
                   "--json always carries both).")  # fmt: skip
@SOFT
@click.option(
    "--explain",
    is_flag=True,
    help="Print why each op went where it did "
    "(--json always carries it: each op's device and reason, and the copies).",
)
@JSON
@click.option(
    "--save",
    metavar="FILE.npz",
    help="Write the fetched values to FILE.npz (the name must end in .npz).",
)
@click.option(
    "--verify", is_flag=True, help="Compare every fetch with a float64 CPU run; exit 1 on mismatch."
)
@click.option(
    "--feed",
    multiple=True,
    metavar="NAME=VALUE",
    help="Feed a placeholder: NAME=FILE.npy or NAME=JSON.",
)
@click.option(
    "--force", is_flag=True, help="Run even when the plan predicts running out of memory."
)
@memory_options
@global_options
@click.pass_obj
def run(app: AppContext, /, spec: str, log: bool | None, soft: bool | None, explain: bool,
        as_json: bool, save: str | None, verify: bool, feed: tuple[str, ...], force: bool,
        **kw: Any) -> None:  # fmt: skip
    """Place a graph the way TensorFlow does, run it, print the placement log and the results."""
    from .report import run as report
    from .session import execute_prepared, predict_memory, prepare

    memory = pop_memory_flags(kw)
    if save is not None:  # given empty: refused, not dropped
        check_save_path(save)
    view = app.view()
    for w in view.warnings:
        warn(w)
    prepared = prepare(spec, view, _options(soft, log, feed, memory), app.env)
    warn_prepared(prepared, rates=prepared.strategy == "balanced")
    warn_no_gpu(view, prepared)
    if not force:
        oom = predict_memory(prepared, view)[1]
        if oom is not None:
            raise oom
    outcome = execute_prepared(prepared, view, app.cupy_loader)
    result = outcome.result
    checked = _verify(prepared, result, view) if verify else []
    if save is not None:
        _save(save, result.values)
    if as_json:
        doc = report.run_json(view, prepared, outcome)
        if verify:
            doc["verify"] = [c.__dict__ for c in checked]
        click.echo(report.json_text(doc))
    else:
        _print_run(app, view, prepared, result, explain, checked)
    bad = [c for c in checked if not c.ok]
    if bad:
        raise CheckFailed("; ".join(
            f"--verify: {c.fetch} differs from the float64 CPU run by {c.max_rel_error:.2e} "
            f"(relative; tolerance for {c.dtype} is {c.tolerance:.0e})"
            + (f"; {c.hint}" if c.hint else "") for c in bad
        ))  # fmt: skip


def warn_no_gpu(view: Any, prepared: Any) -> None:
    """One warning when a graph runs without any GPU: everything is on CPU:0, and why."""
    if not prepared.logical:
        from .report.run import no_gpu_warning

        warn(no_gpu_warning(view))


def warn_prepared(prepared: Any, rates: bool, seen: set[str] | None = None) -> None:
    """The memory policy's warnings, and (where the cost model used them) the rates file's;
    each once where `seen` collects those already given (mem --compare prepares many times)."""
    seen = set() if seen is None else seen
    for w in (*prepared.policy.warnings, *(prepared.rates.warnings if rates else ())):
        if w not in seen:
            seen.add(w)
            warn(w)


def _verify(prepared: Any, result: Any, view: Any) -> list[Any]:
    from .session import verify

    return verify(prepared, result, view)


def _save(path: str, values: dict[str, Any]) -> None:
    import numpy as np

    try:
        np.savez(path, **values)
    except OSError as exc:
        raise BadInput(f"--save {path!r}: cannot write: {exc.strerror}") from exc


def _print_run(app: AppContext, view: Any, prepared: Any, result: Any, explain: bool,
               checked: list[Any]) -> None:  # fmt: skip
    from .report import run as report

    mapping = prepared.log_device_placement
    if view.machine.simulated and not (mapping and prepared.logical):
        # the device mapping marks each simulated GPU; without it, one line says so
        click.echo(report.title(view, prepared.strategy, "Run"))
    if mapping:
        click.echo(report.device_mapping(prepared.logical))
        click.echo(report.placement_log(*prepared.placed()))
    pruned = report.pruned_line(prepared)
    if pruned:
        click.echo(pruned)
    for line in result.printed:
        click.echo(line, err=True)
    if explain:
        _explain(app, prepared, result.copies)
    if result.values:
        click.echo(report.results_text(result.values))
    elif prepared.graph.targets:  # fetch: named only ops run for their effect (save)
        click.echo(f"ran {', '.join(prepared.graph.targets)}; nothing fetched to show or verify")
    for c in checked:
        verdict = "ok" if c.ok else "MISMATCH" + (f" ({c.hint})" if c.hint else "")
        click.echo(f"verify {c.fetch}: max relative error {c.max_rel_error:.1e} vs float64 CPU "
                   f"({c.dtype}, tolerance {c.tolerance:.0e}): {verdict}")  # fmt: skip


def _explain(app: AppContext, prepared: Any, copies: Any) -> None:
    from .report import run as report

    plain = report.explain_plain(prepared.graph, prepared.placement, copies)
    if app.terminal():
        table = report.explain_table(prepared.graph, prepared.placement, copies)
        echo_renderable(app, table, fallback=plain)
    else:
        click.echo(plain)


@cli.command()
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
    from .memory.devices import check_reservations
    from .report import plan as report
    from .report.run import json_text, pruned_line
    from .session import estimate_plan, predict_memory, prepare

    if as_json and fmt not in (None, "json"):
        raise BadInput(
            f"--json conflicts with --format {fmt}: --json is short for --format json; give one "
            "of them"
        )
    view = app.view()
    for w in view.warnings:
        warn(w)
    prepared = prepare(
        spec, view, _options(soft, None, (), pop_memory_flags(kw)), app.env, feeds=False
    )
    warn_prepared(prepared, rates=True)
    memory, oom = predict_memory(prepared, view, anyway=run_anyway(spec))
    est = estimate_plan(prepared, view)
    if fmt == "dot":
        from .report.dot import to_dot

        title = report.title(view, prepared.strategy)
        pruned = pruned_line(prepared)
        if pruned:  # a DOT comment: the graph shows the ops that run
            click.echo(f"// {pruned}")
        click.echo(to_dot(prepared.graph, prepared.placement, title), nl=False)
    elif as_json or fmt == "json":
        click.echo(json_text(report.plan_json(view, prepared, memory, est)))
    elif app.terminal():
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
