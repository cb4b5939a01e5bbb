"""The `gpuplace` command line: parse flags, call the library, print. The only place that prints.

Commands read no globals: the group builds one AppContext (environment, NVML and cupy loaders,
whether stdout is a terminal) in `ctx.obj`, and tests inject another.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

import click

from .devices import Machine, View, discover, view
from .devices.nvml import NvmlLoader, load_pynvml
from .errors import BadInput, CheckFailed, GpuplaceError, OutputError

if TYPE_CHECKING:
    from .execute.backends import CupyLoader
    from .execute.check import RateSizes

F = TypeVar("F", bound=Callable[..., Any])
MACHINE_ENV = "GPUPLACE_MACHINE"
MACHINE_HELP = (
    "Simulate a machine: a preset list (4xK520, 2xA100-80GB,1xT4) or a YAML machine file. "
    f"Env: {MACHINE_ENV} (ignored when empty). Accepted before or after the command."
)
DEBUG_HELP = "Show tracebacks for errors (the exit code stays the same)."


@dataclass
class AppContext:
    """Everything a command may read from the outside world."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    nvml_loader: NvmlLoader = load_pynvml
    cupy_loader: CupyLoader | None = None
    is_terminal: bool | None = None  # None: ask stdout
    machine_spec: str | None = None  # --machine; None: GPUPLACE_MACHINE, else the real machine
    debug: bool = False
    installed: Callable[[str], str | None] | None = None  # distribution -> version; None: look

    def installed_version(self, name: str) -> str | None:
        from .devices.cuda_match import installed_version

        return (self.installed or installed_version)(name)

    def terminal(self) -> bool:
        if self.is_terminal is None:
            try:
                return sys.stdout is not None and bool(sys.stdout.isatty())
            except (OSError, ValueError):  # closed or broken stdout
                return False
        return self.is_terminal

    def machine_source(self) -> tuple[str | None, str]:
        """(spec, where it came from): --machine wins over a non-empty GPUPLACE_MACHINE."""
        if self.machine_spec is not None:
            return self.machine_spec, "--machine"
        spec = self.env.get(MACHINE_ENV)
        return (spec, MACHINE_ENV) if spec else (None, "")

    def machine(self) -> Machine:
        spec, source = self.machine_source()
        return discover(spec, self.nvml_loader, source or "--machine")

    def view(self) -> View:
        return view(self.machine(), self.env)


def echo_renderable(app: AppContext, renderable: Any, fallback: str | None = None) -> bool:
    """Print one rich renderable (see `echo_renderables`)."""
    return echo_renderables(app, [renderable], fallback)


def echo_renderables(
    app: AppContext, renderables: Sequence[Any], fallback: str | None = None
) -> bool:
    """Print rich renderables: styled on a terminal, with no style at all under NO_COLOR, and
    never cutting a value short. When a table among them is too wide for the terminal, print
    `fallback` (the plain layout) instead and return False; without one, fold its cells."""
    from rich.console import Console
    from rich.table import Table

    columns = app.env.get("COLUMNS", "")
    console = Console(
        force_terminal=app.terminal(),
        color_system=None if app.env.get("NO_COLOR") else "auto",
        width=int(columns) if columns.isdigit() and int(columns) > 0 else None,
        soft_wrap=False,
        highlight=False,
        markup=False,
        emoji=False,
    )
    tables = [r for r in renderables if isinstance(r, Table)]
    too_wide = [t for t in tables if not _fits(console, t)]
    if too_wide and fallback is not None:
        click.echo(fallback)
        return False
    for table in tables:  # a word wider than its column folds onto the next line, never "…"
        for column in table.columns:
            column.no_wrap = column.no_wrap and table not in too_wide
            column.overflow = "ellipsis" if column.no_wrap else "fold"
    for renderable in renderables:
        console.print(renderable)
    return True


def _fits(console: Any, table: Any) -> bool:
    """Whether `table` fits the console with every no-wrap cell whole and every other cell
    wrapped at spaces only (rich squeezes wrapping columns first, then truncates)."""
    from rich.measure import Measurement

    _top, right, _bottom, left = table.padding
    width = (2 if table.box and table.show_edge else 0) + (
        len(table.columns) - 1 if table.box else 0
    )
    for column in table.columns:
        sizes = [
            Measurement.get(console, console.options, c) for c in [column.header, *column.cells]
        ]
        width += left + right + max(m.maximum if column.no_wrap else m.minimum for m in sizes)
    return bool(width <= console.width)


def warn(message: str) -> None:
    _say(f"warning: {message}")


def _say(message: str) -> None:
    """One line on stderr, if stderr can take it (nothing else can be done when it cannot)."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(message, err=True)


def gpus_required(required: int, visible: int) -> str:
    """`--require-gpus`' failure: '1 GPU required, 0 visible'."""
    return f"{required} GPU{'' if required == 1 else 's'} required, {visible} visible"


def _merge_globals(app: AppContext, machine_spec: str | None, debug: bool) -> None:
    """Fold --machine / --debug given after the command into the app (see `global_options`)."""
    app.debug = app.debug or debug
    if machine_spec is None:
        return
    before = click.get_current_context().meta.get("gpuplace.machine")
    if before is not None and before != machine_spec:
        raise BadInput(
            f"--machine is given twice with different values: {before!r} before the command and "
            f"{machine_spec!r} after it; give it once"
        )
    app.machine_spec = machine_spec


def global_options(command: F) -> F:
    """Accept the group's --machine and --debug after a command too (`gpuplace run g.yaml
    --debug`), with the same meaning; a --machine given on both sides must be the same.

    Put it right above `@click.pass_obj`, so the two options are listed last in --help."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        app = click.get_current_context().find_object(AppContext)
        if app is not None:
            _merge_globals(app, kwargs.pop("sub_machine_spec"), kwargs.pop("sub_debug"))
        return command(*args, **kwargs)

    click.option("--debug", "sub_debug", is_flag=True, help=DEBUG_HELP)(wrapper)
    click.option("--machine", "sub_machine_spec", metavar="SPEC", help=MACHINE_HELP)(wrapper)
    return cast(F, wrapper)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--machine", "machine_spec", metavar="SPEC", help=MACHINE_HELP)
@click.option("--debug", is_flag=True, help=DEBUG_HELP)
@click.version_option(package_name="gpuplace")
@click.pass_context
def cli(ctx: click.Context, machine_spec: str | None, debug: bool) -> None:
    """See the GPUs a CUDA program would see, and place work on them the way TensorFlow does."""
    app = ctx.ensure_object(AppContext)
    if machine_spec is not None:
        app.machine_spec = machine_spec
        ctx.meta["gpuplace.machine"] = machine_spec
    app.debug = app.debug or debug


def _min_memory_failures(v: View, minimum: int) -> list[str]:
    from .units import human

    return [
        f"{g.name} ({g.product}, nvml {g.gpu.nvml_index}) has "
        f"{'unknown' if g.memory_total is None else human(g.memory_total)} total"
        for g in v.gpus
        if g.memory_total is None or g.memory_total < minimum
    ]


def _run_checks(
    app: AppContext, v: View, as_json: bool, doc: dict[str, Any], sizes: RateSizes
) -> list[str]:
    from .execute.check import check_all
    from .report.checks import check_records, checks_plain

    results = check_all(v, app.cupy_loader, sizes)
    if as_json:
        doc["checks"] = check_records(results)
    else:
        click.echo(checks_plain(results, sizes))
    _save_rates(app, results, as_json)
    return [
        f"{r.device} failed the matmul check: {r.detail}" + (f". Fix: {r.fix}." if r.fix else "")
        for r in results
        if not r.passed
    ]


def _save_rates(app: AppContext, results: list[Any], as_json: bool) -> None:
    """Keep what `--check` measured on real GPUs for the balanced strategy (one line says where;
    on stderr under --json, so stdout stays one document)."""
    import datetime

    from .devices.rates import rates_path, save_rates
    from .execute.check import measured_rates

    measured = measured_rates(results, datetime.date.today().isoformat())
    if not measured:
        return
    path = rates_path(app.env)
    if path is None:
        warn("measured rates not saved: set GPUPLACE_RATES, XDG_CACHE_HOME or HOME")
        return
    try:
        save_rates(path, measured)
    except OSError as exc:
        warn(f"measured rates not saved to {path}: {exc}")
        return
    click.echo(f"Saved the measured rates of {len(measured)} GPU(s) to {path}", err=as_json)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON document (sizes in bytes).")
@click.option(
    "--require-gpus",
    type=click.IntRange(min=0),
    metavar="N",
    help="Exit 1 unless at least N GPUs are visible.",
)
@click.option(
    "--min-memory",
    metavar="SIZE",
    help="Exit 1 naming each visible GPU with less total memory (16GiB, 500MB).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Run a small matmul on every device vs a float64 reference, and measure its "
    "TFLOP/s and GB/s (saved per real GPU for --strategy balanced).",
)
@click.option("--presets", is_flag=True, help="List the GPU presets for --machine.")
@global_options
@click.pass_obj
def devices(
    app: AppContext,
    as_json: bool,
    require_gpus: int | None,
    min_memory: str | None,
    check: bool,
    presets: bool,
) -> None:
    """List the devices a CUDA program would see (CPU:0, then GPUs in CUDA order)."""
    from .report.devices import devices_json, devices_plain, devices_table, notice

    if presets:
        _presets(as_json, require_gpus=require_gpus is not None, min_memory=min_memory, check=check)
        return
    minimum = None
    if min_memory is not None:
        from .units import parse_size

        minimum = parse_size(min_memory, "--min-memory")
    sizes = None
    if check:  # a bad GPUPLACE_CHECK_SIZES is refused before anything prints
        from .execute.check import SIZES_ENV, rate_sizes

        sizes = rate_sizes(app.env.get(SIZES_ENV))
    v = app.view()
    doc = devices_json(v)
    for w in v.warnings:
        warn(w)
    if v.gpus and not v.machine.host.simulated:  # a real driver: does the installed cupy fit it?
        from .devices.cuda_match import cupy_driver_warning

        mismatch = cupy_driver_warning(v.machine.cuda_version, app.installed_version)
        if mismatch:
            warn(mismatch)
    if not as_json:
        if app.terminal():
            note = notice(v)  # the plain layout ends with it; the table does not
            if echo_renderable(app, devices_table(v), fallback=devices_plain(v)) and note:
                click.echo(note)
        else:
            click.echo(devices_plain(v))
    failures: list[str] = []
    if require_gpus is not None and len(v.gpus) < require_gpus:
        failures.append(gpus_required(require_gpus, len(v.gpus)))
    if minimum is not None:
        failures += [
            f"{f}, less than --min-memory {min_memory}" for f in _min_memory_failures(v, minimum)
        ]
    if sizes is not None:
        failures += _run_checks(app, v, as_json, doc, sizes)
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    if failures:
        raise CheckFailed("; ".join(failures))


def _presets(as_json: bool, **others: object) -> None:
    """`devices --presets`: the listing alone; a check flag beside it is a usage error."""
    from .report.presets import presets_json, presets_plain

    given = [f"--{name.replace('_', '-')}" for name, value in others.items() if value]
    if given:
        flags = given[0] if len(given) == 1 else ", ".join(given[:-1]) + " or " + given[-1]
        raise BadInput(
            f"--presets lists the presets; it cannot be combined with {flags}: "
            "run `gpuplace devices --presets` and the check separately"
        )
    click.echo(json.dumps(presets_json(), indent=2) if as_json else presets_plain())


class _GuardedStdout:
    """sys.stdout, with its write failures raised as OutputError, so that a full disk, a closed
    descriptor or a reader that went away is told apart from other OSErrors and gets one line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc), exc.errno) from exc
        except ValueError as exc:  # I/O operation on closed file
            raise OutputError(str(exc)) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc), exc.errno) from exc
        except ValueError as exc:
            raise OutputError(str(exc)) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None, app: AppContext | None = None) -> int:
    """Console entry point: run the group, map gpuplace errors to one message and an exit code
    (with --debug, the traceback too; the exit code stays the error's)."""
    app = app or AppContext()
    stdout = sys.stdout
    if stdout is None:
        return _report(app, OutputError("standard output is closed"))
    sys.stdout = cast(TextIO, _GuardedStdout(stdout))
    try:
        code = _invoke(argv, app)
        sys.stdout.flush()
    except GpuplaceError as exc:
        return _report(app, exc)
    finally:
        sys.stdout = stdout
    return code


def _invoke(argv: list[str] | None, app: AppContext) -> int:
    try:
        cli.main(args=argv, obj=app, standalone_mode=False, prog_name="gpuplace")
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        _say("Aborted.")
        return 1
    return 0


def _report(app: AppContext, exc: GpuplaceError) -> int:
    if isinstance(exc, OutputError) and exc.errno == errno.EPIPE:
        return 1  # the reader went away (`| head`): nothing to say, as cat and grep
    if app.debug:
        import traceback  # only here: it costs `devices` a few ms to import

        _say("".join(traceback.format_exception(exc)).rstrip("\n"))
    _say(f"error: {exc}")
    return exc.exit_code


def entry() -> None:  # pragma: no cover - thin console-script wrapper
    code = main()
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):  # already reported: let the interpreter's last flush go nowhere
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)


from . import cli_graph, cli_mem  # noqa: E402  (register `run`, `plan` and `mem` on the group)

__all__ = [
    "AppContext",
    "BadInput",
    "cli",
    "cli_graph",
    "cli_mem",
    "echo_renderable",
    "echo_renderables",
    "global_options",
    "gpus_required",
    "main",
    "warn",
]
