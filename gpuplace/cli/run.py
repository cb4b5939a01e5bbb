"""`gpuplace run`: place a graph the way TensorFlow does, run it, print the log and results.

Heavy modules (numpy, the loader, the executor) are imported inside the command so that
`gpuplace devices` stays fast.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import click

from ..echo import LINE_CHARS, sample
from ..errors import BadInput, CheckFailed, RuntimeFailure
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
from .output import draw_table, echo_json, stages, terminal_width, warn, warn_no_gpu, warn_prepared

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..devices.model import View
    from ..execute.executor import CopyRecord, RunResult
    from ..execute.verify import Verified
    from ..results import Prepared


def check_save_path(path: str) -> None:
    """`--save` writes exactly the path given, where the user said (it is their flag, not the
    spec's), as an .npz archive; a name that does not say so, a directory or a missing
    directory is refused before anything runs."""
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
            f"--save {path}: the file is an .npz archive (one array per fetch); {fix} "
            "(e.g. --save values.npz)"
        )
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        raise BadInput(
            f"--save {path}: the directory {parent} does not exist; create it first, or save "
            "somewhere that exists"
        )


@click.command(
    cls=Command,
    short_help="Place a graph as TensorFlow does, run it, print the results",
    examples=["gpuplace run examples/guide/02_manual_placement.yaml --explain", "gpuplace --machine 4xK520 run examples/small_model.yaml --strategy balanced --memory-limit 64MiB"],
)  # fmt: skip
@click.argument("spec", metavar="GRAPH.yaml")
@click.option("--log-placement/--no-log-placement", "log", default=None,
              help="Print TensorFlow's device mapping and placement log (overrides config; "
                   "--json always carries both).")  # fmt: skip
@click.option("--log-format", type=click.Choice(["guide", "tensorflow"]), default=None,
              help="The placement log's lines (config log_format): guide's 'a: /job:...' (the "
                   "default) or tensorflow, TensorFlow 2.x's exact 'a: (Const): /job:...' in its "
                   "order; implies --log-placement.")  # fmt: skip
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
    help="Write the fetched values to FILE.npz (the name must end in .npz), atomically.",
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
    "--force",
    is_flag=True,
    help="Run even when the plan predicts running out of GPU memory "
    "(never past the host memory available: the kernel would kill the run).",
)
@WIDE
@memory_options
@global_options
@click.pass_obj
def run(app: AppContext, /, spec: str, log: bool | None, log_format: str | None,
        soft: bool | None, explain: bool, as_json: bool, save: str | None, verify: bool,
        feed: tuple[str, ...], force: bool, wide: bool, **kw: Any) -> None:  # fmt: skip
    """Place a graph the way TensorFlow does, run it, print the placement log and the results."""
    from ..across_hosts import ClusterRuns
    from ..pipeline import execute_on_cluster, execute_prepared, predict_memory, prepare
    from ..report import run as report
    from ..report.records import json_chunks

    memory = pop_memory_flags(kw)
    if log_format is not None and log is None:
        log = True  # asking for a format asks for the log
    if save is not None:  # given empty: refused, not dropped
        check_save_path(save)
    view = app.view()
    for w in view.warnings:
        warn(w)
    with stages(app, spec, as_json) as stage, contextlib.closing(ClusterRuns()) as runs:
        stage("loading and placing")
        options = options_from_flags(memory, soft, log, feed)
        cluster = app.cluster_description()
        prepared = prepare(spec, view, options, app.env, cluster=cluster, connect=runs.connect)
        prepared = _without_estimate(prepared)
        if save is not None:
            check_members(save, prepared.graph.fetch)
        warn_prepared(prepared)
        warn_no_gpu(view, prepared)
        if prepared.training is not None:
            warn(FORWARD_ONLY)
        if not force and prepared.cluster is None:
            stage("predicting memory")
            oom = predict_memory(prepared, view)[1]
            if oom is not None:
                raise oom
        stage("running")
        app.keep(*prepared.planned)  # the layout predicted on, which the run lets go of
        if prepared.cluster is None:
            outcome = execute_prepared(prepared, view, app.cupy_loader)
        else:  # one worker process per task; a simulated cluster's start here
            outcome = execute_on_cluster(prepared, runs)
        result = outcome.result
        checked: list[Verified] = []
        if verify:
            stage(
                "verifying against a float64 CPU run"
                + (" and onnxruntime" if prepared.graph.onnx_model else "")
            )
            checked = _verify(prepared, result, view)
    if save is not None:
        _save(save, result.values)
    if as_json:
        doc = report.run_json(view, prepared, outcome)
        if verify:
            doc["verify"] = [c.__dict__ for c in checked]
        echo_json(json_chunks(doc))
        app.keep(doc)
    else:
        _print_run(app, view, prepared, result, (explain, wide), checked, log_format)
    app.keep(prepared, outcome)
    bad = [c for c in checked if not c.ok]
    if bad:
        raise CheckFailed(sample([
            f"--verify: {c.fetch} differs from the {c.against} run by {c.max_rel_error:.2e} "
            f"(relative; tolerance for {c.dtype} is {c.tolerance:.0e})"
            + (f"; {c.hint}" if c.hint else "") for c in bad
        ], "; ", width=LINE_CHARS))  # fmt: skip


FORWARD_ONLY = (
    "training (--training or config training): run executes the forward graph only, placed "
    "for the training step's memory, and checks the forward run's memory; gpuplace plan and "
    "gpuplace mem predict the training step's"
)


def _without_estimate(prepared: Prepared) -> Prepared:
    """`run` estimates nothing: let go of what `balanced` worked out for `plan`'s estimate (the
    flattened graph, TF's placement, the timeline's result: about 0.5 KB per op) before running."""
    import dataclasses

    if prepared.placement.judged is None:
        return prepared
    placement = dataclasses.replace(prepared.placement, judged=None)
    return dataclasses.replace(prepared, placement=placement)


def _verify(prepared: Prepared, result: RunResult, view: View) -> list[Verified]:
    from ..pipeline import verify

    return verify(prepared, result, view)


def check_members(path: str, fetch: Sequence[object]) -> None:
    """Each fetch is the archive member `NAME.npy`; a name with a `..` between slashes (TF's
    op names allow `a/../../evil`) would unpack outside the folder it is unpacked in (zip
    slip), so it is refused before anything runs."""
    for ref in map(str, fetch):
        if ".." in ref.split("/"):
            raise BadInput(
                f"--save {path}: fetch {ref!r} would be the archive member {ref + '.npy'!r}, "
                "which unpacks outside the folder it is unpacked in; rename the op (no '..' "
                "between slashes), or drop --save"
            )


def _save(path: str, values: dict[str, Any]) -> None:
    """The values as an .npz archive, written atomically (the old file survives a failure);
    a file that cannot be written is a runtime failure (exit 1)."""
    import numpy as np

    from ..fileio import write_atomic

    try:
        write_atomic(path, lambda f: np.savez(f, **values))
    except OSError as exc:
        raise RuntimeFailure(f"--save {path}: cannot write: {exc.strerror or exc}") from exc


def _print_run(app: AppContext, view: View, prepared: Prepared, result: RunResult,
               explain: tuple[bool, bool], checked: list[Verified],
               log_format: str | None = None) -> None:  # fmt: skip
    """The log, the `--explain` table (`explain`: asked, and --wide), results and checks."""
    from ..report import run as report
    from ..report.lines import pruned_line, title

    mapping, cluster = prepared.log_device_placement, prepared.cluster
    if cluster is not None:  # across hosts: the Cluster: line says what is simulated
        if mapping:
            click.echo(report.cluster_mapping(cluster, prepared.task_logical))
        else:
            click.echo(report.cluster_line(cluster))
    else:
        if view.machine.simulated and not (mapping and prepared.logical):
            # the device mapping marks each simulated GPU; without it, one line says so
            click.echo(title(view, prepared.strategy, "Run"))
        if mapping:
            click.echo(report.device_mapping(prepared.logical))
    if mapping:
        graph, placement = prepared.placed()
        click.echo(report.placement_log(graph, placement, log_format or graph.config.log_format))
    pruned = pruned_line(prepared)
    if pruned:
        click.echo(pruned)
    for line in result.printed:
        click.echo(line, err=True)
    if explain[0]:
        _explain(app, prepared, result.copies, wide=explain[1])
    if result.values:
        click.echo(report.results_text(result.values))
    elif prepared.graph.targets:  # fetch: named only ops run for their effect (save)
        click.echo(f"ran {sample(prepared.graph.targets)}; nothing fetched to show or verify")
    for c in checked:
        verdict = "ok" if c.ok else "MISMATCH" + (f" ({c.hint})" if c.hint else "")
        click.echo(f"verify {c.fetch}: max relative error {c.max_rel_error:.1e} vs {c.against} "
                   f"({c.dtype}, tolerance {c.tolerance:.0e}): {verdict}")  # fmt: skip


def _explain(app: AppContext, prepared: Prepared, copies: Sequence[CopyRecord], wide: bool) -> None:
    from ..report.explain import explain_fitted, explain_plain

    if not wide and draw_table(app, len(prepared.graph.ops)):  # a long table: the plain layout
        click.echo(explain_fitted(prepared.graph, prepared.placement, copies, terminal_width(app)))
    else:
        click.echo(explain_plain(prepared.graph, prepared.placement, copies))
