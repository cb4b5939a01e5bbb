"""`gpuplace plan --format html -o FILE.html`: where the report goes, and the second placement
it draws beside the one asked for.

The page always compares: TensorFlow's placement beside `balanced` (when the strategy in effect
is tensorflow, the default) or beside the strategy asked for (`--strategy balanced` or
`round-robin`, or the spec's `config.placement.strategy`), TensorFlow's on the left.

`-o` is the user's flag: the file is written exactly there, atomically (`fileio.write_atomic`:
a link at the path is replaced, never written through), and refused before anything is placed
when it cannot be a report: no .html/.htm name (so `-o g.yaml` never replaces a spec), the
spec itself, a folder, a folder that does not exist, or something that is not a regular file
(a FIFO, a device).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from typing import TYPE_CHECKING

import click

from ..echo import clip_middle
from ..errors import BadInput, GpuplaceError, RuntimeFailure
from ..units import human

if TYPE_CHECKING:
    from ..devices.model import View
    from ..memory.pools import DeviceMemory
    from ..options import Options
    from ..results import PlanEstimate, Prepared
    from .context import AppContext

SUFFIXES = (".html", ".htm")


def check_output(fmt: str | None, output: str | None, spec: str) -> None:
    """Refuse, before any work, an -o without --format html, --format html without -o, and a
    path the report cannot be written to or must not replace: the graph spec itself (see the
    module docstring)."""
    if fmt != "html":
        raise BadInput(
            f"-o {clip_middle(str(output))}: only --format html writes a file (the other formats "
            "print); add --format html, or drop -o"
        )
    if output is None:
        raise BadInput("--format html writes one file: name it with -o (e.g. -o plan.html)")
    shown = clip_middle(output) if output else "''"
    fix = "name a file ending in .html (e.g. -o plan.html)"
    if not output.lower().endswith(SUFFIXES):
        raise BadInput(f"-o {shown}: the report is an HTML page; {fix}")
    try:
        mode = os.lstat(output).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise BadInput(f"-o {shown}: cannot be checked ({exc.strerror or exc}); {fix}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise BadInput(f"-o {shown}: is a folder; {fix} in it")
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise BadInput(f"-o {shown}: is not a regular file (a FIFO, device or socket); {fix}")
    if mode is not None and os.path.realpath(output) == os.path.realpath(spec):
        raise BadInput(
            f"-o {shown}: is the graph spec being planned; name another file (e.g. -o plan.html)"
        )
    parent = os.path.dirname(output)
    if parent and not os.path.isdir(parent):
        raise BadInput(
            f"-o {shown}: the folder {clip_middle(parent)} does not exist; create it first, or "
            "write the report somewhere that exists"
        )


def write_report(
    app: AppContext, view: View, spec: str, options: Options,
    asked: tuple[Prepared, list[DeviceMemory], PlanEstimate], output: str,
) -> None:  # fmt: skip
    """Place the graph the other way too, render both and write the page to `output`."""
    from ..fileio import write_atomic
    from ..pipeline import estimate_plan, predict_memory, prepare
    from ..report.html import Side, plan_html
    from ..report.html.trace import trace

    prepared, memory, est = asked
    sides = [Side(prepared, memory, est, trace(prepared, view))]
    other = "balanced" if prepared.strategy == "tensorflow" else "tensorflow"
    missing = None
    try:
        second = prepare(spec, view, dataclasses.replace(options, strategy=other), app.env,
                         feeds=False, cluster=prepared.cluster)  # fmt: skip
        second_memory, _ = predict_memory(second, view)
        side = Side(second, second_memory, estimate_plan(second, view), trace(second, view))
    except GpuplaceError as exc:  # the page still shows the placement asked for, and why not
        missing = f"strategy {other}: {exc}"
    else:
        sides.insert(0 if other == "tensorflow" else 1, side)
    page = plan_html(view, sides, missing).encode("utf-8")
    try:
        write_atomic(output, lambda f: f.write(page))
    except OSError as exc:
        raise RuntimeFailure(
            f"-o {clip_middle(output)}: cannot write the report: {exc.strerror or exc}"
        ) from exc
    shown = " beside ".join(s.prepared.strategy for s in sides)
    click.echo(f"Plan report ({shown}) written to {clip_middle(output)} ({human(len(page))})")
