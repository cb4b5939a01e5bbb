"""How commands print: tables fitted to the terminal's width (or the plain layout a pipe gets),
watched views, progress bars and one-line warnings on stderr. With `context.py`, the only place
that prints."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING

import click

from ..echo import fit_line
from .context import AppContext
from .words import CLI

if TYPE_CHECKING:
    from ..devices.model import View
    from ..results import Prepared


TABLE_ROWS = 1_000
"""The longest table fitted to a terminal's width (reasons wrapped, columns left out). Fitting
wraps cells one by one, and a rich table laid 100,000 rows out whole before printing its first
(46.6 s for `plan` of 100,000 ops, against 2.5 s piped); a longer table prints in the plain
layout a pipe gets: aligned columns, the same rows, at the pipe's cost."""


def draw_table(app: AppContext, rows: int) -> bool:
    """Whether a table of `rows` rows is fitted to the terminal: on one, up to TABLE_ROWS."""
    return rows <= TABLE_ROWS and app.terminal()


def terminal_width(app: AppContext) -> int:
    """The terminal's columns: COLUMNS when it is a number, else what the terminal says."""
    columns = app.env.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    import shutil

    return shutil.get_terminal_size().columns


def warn(message: str) -> None:
    """One warning line, within one screen however much input it quotes."""
    say(f"warning: {fit_line(message)}")


def say(message: str) -> None:
    """One line on stderr, if stderr can take it (nothing else can be done when it cannot)."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(message, err=True)


def echo_json(chunks: Iterable[bytes]) -> None:
    """A JSON document (ASCII bytes in pieces, `report.records.json_chunks`) and a new line on
    stdout, as bytes where main's guarded stdout takes them (no decode and encode of the whole
    text, and no joining of its pieces: each is written as it is)."""
    write = getattr(sys.stdout, "write_bytes", None)
    if write is None:
        click.echo(b"".join(chunks).decode("ascii"))
    else:
        write(chain(chunks, (b"\n",)))


def gpus_required(required: int, visible: int) -> str:
    """`--require-gpus`' failure: '1 GPU required, 0 visible'."""
    return f"{required} GPU{'' if required == 1 else 's'} required, {visible} visible"


def warn_no_gpu(view: View, prepared: Prepared) -> None:
    """One warning when a graph runs without any GPU: everything is on CPU:0, and why."""
    if not prepared.logical:
        from ..report.lines import no_gpu_warning

        warn(no_gpu_warning(view))


def warn_prepared(prepared: Prepared, seen: set[str] | None = None) -> None:
    """The memory policy's warnings, and the rates file's (a corrupt cache is said, whichever
    strategy runs, and ignored); each once where `seen` collects those already given (mem
    --compare prepares many times)."""
    seen = set() if seen is None else seen
    for w in (*prepared.policy.warnings, *prepared.rates.warnings):
        text = CLI.say(w)
        if text not in seen:
            seen.add(text)
            warn(text)


def watch_views(app: AppContext, first: View, seconds: float, count: int | None, as_json: bool,
           screen: Callable[[View], str]) -> None:  # fmt: skip
    """`--watch`: show `screen(view)` every `seconds`, reading the machine again each time,
    until `count` refreshes or Ctrl-C (exit 0, as `watch` and `nvidia-smi -l` end). On a
    terminal the view is redrawn in place; in a pipe (or as JSON lines) each refresh is
    appended."""
    import time

    view, shown = first, 0
    live = None
    try:
        if app.terminal() and not as_json:
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            live = Live(console=Console(highlight=False), auto_refresh=False)
            live.start()
        while True:
            text = screen(view)
            if live is not None:
                live.update(Text(text, no_wrap=True, overflow="crop"), refresh=True)  # as `watch`
            else:
                click.echo(text if as_json else text + "\n")
            shown += 1
            if count is not None and shown >= count:
                return
            time.sleep(seconds)
            view = app.view()
    except KeyboardInterrupt:
        return
    finally:
        if live is not None:
            live.stop()


@contextlib.contextmanager
def progress(
    app: AppContext, what: str, total: int, as_json: bool
) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr while long work runs (`step(name)` before each of `total`
    items), only when stderr is a terminal and the output is not JSON; it is gone when done.
    Elsewhere `step` does nothing, so pipes and logs stay as they were."""
    if as_json or not app.stderr_terminal():
        yield lambda name: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   console=Console(stderr=True, force_terminal=True), transient=True)  # fmt: skip
    task = bar.add_task(what, total=total)
    started = False

    def step(name: str) -> None:
        nonlocal started
        if started:  # the one before is done
            bar.advance(task)
        started = True
        bar.update(task, description=f"{what} {name}")

    with bar:
        yield step


STAGES_FROM = 1 << 20
"""The spec size (bytes) from which `run` and `plan` show their stages on a terminal's stderr:
about 10,000 ops, where a stage takes long enough to wonder about (and the import of rich's
progress display is not a small command's start-up)."""


@contextlib.contextmanager
def stages(app: AppContext, spec: str, as_json: bool) -> Iterator[Callable[[str], None]]:
    """Long work on a large spec: one line on stderr naming the stage (`stage(name)`) and the
    time so far, only when stderr is a terminal and the output is not JSON; gone when done."""
    import os

    try:
        big = os.stat(spec).st_size >= STAGES_FROM
    except OSError:  # the loader says what is wrong with it
        big = False
    if as_json or not big or not app.stderr_terminal():
        yield lambda name: None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                   console=Console(stderr=True, force_terminal=True), transient=True)  # fmt: skip
    task = bar.add_task("loading", total=None)

    def stage(name: str) -> None:
        bar.update(task, description=name)
        bar.refresh()  # each stage drawn at least once, however short

    with bar:
        yield stage
