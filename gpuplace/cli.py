"""The `gpuplace` command line: parse flags, call the library, print. The only place that prints.

Commands read no globals: the group builds one AppContext (environment, NVML and cupy loaders,
whether stdout is a terminal) in `ctx.obj`, and tests inject another.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from .devices import Machine, View, discover, view
from .devices.nvml import NvmlLoader, load_pynvml
from .errors import BadInput, CheckFailed, GpuplaceError

if TYPE_CHECKING:
    from .execute.backends import CupyLoader


@dataclass
class AppContext:
    """Everything a command may read from the outside world."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    nvml_loader: NvmlLoader = load_pynvml
    cupy_loader: CupyLoader | None = None
    is_terminal: bool | None = None  # None: ask stdout
    machine_spec: str | None = None
    debug: bool = False

    def terminal(self) -> bool:
        if self.is_terminal is None:
            return bool(sys.stdout.isatty())
        return self.is_terminal

    def machine(self) -> Machine:
        return discover(self.machine_spec, self.nvml_loader)

    def view(self) -> View:
        return view(self.machine(), self.env)


def echo_renderable(app: AppContext, renderable: Any) -> None:
    from rich.console import Console

    Console(force_terminal=app.terminal(), soft_wrap=False, highlight=False).print(renderable)


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--machine",
    "machine_spec",
    metavar="SPEC",
    envvar="GPUPLACE_MACHINE",
    help="Simulate a machine: a preset list (4xK520, 2xA100-80GB,1xT4) or a YAML "
    "machine file. Env: GPUPLACE_MACHINE.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="gpuplace")
@click.pass_context
def cli(ctx: click.Context, machine_spec: str | None, debug: bool) -> None:
    """See the GPUs a CUDA program would see, and place work on them the way TensorFlow does."""
    app = ctx.ensure_object(AppContext)
    if machine_spec is not None:
        app.machine_spec = machine_spec
    app.debug = app.debug or debug


def _min_memory_failures(v: View, minimum: int) -> list[str]:
    from .units import human

    return [
        f"{g.name} ({g.product}, nvml {g.gpu.nvml_index}) has "
        f"{'unknown' if g.memory_total is None else human(g.memory_total)} total"
        for g in v.gpus
        if g.memory_total is None or g.memory_total < minimum
    ]


def _run_checks(app: AppContext, v: View, as_json: bool, doc: dict[str, Any]) -> list[str]:
    from .execute.check import check_all
    from .report.checks import check_records, checks_plain

    results = check_all(v, app.cupy_loader)
    if as_json:
        doc["checks"] = check_records(results)
    else:
        click.echo(checks_plain(results))
    _save_rates(app, results, as_json)
    return [f"{r.device} failed the matmul check: {r.detail}" for r in results if not r.passed]


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
    from .report.devices import devices_json, devices_plain, devices_table

    if presets:
        from .report.presets import presets_json, presets_plain

        click.echo(json.dumps(presets_json(), indent=2) if as_json else presets_plain())
        return
    minimum = None
    if min_memory is not None:
        from .units import parse_size

        minimum = parse_size(min_memory, "--min-memory")
    v = app.view()
    doc = devices_json(v)
    for w in v.warnings:
        warn(w)
    if not as_json:
        if app.terminal():
            echo_renderable(app, devices_table(v))
        else:
            click.echo(devices_plain(v))
    failures: list[str] = []
    if require_gpus is not None and len(v.gpus) < require_gpus:
        failures.append(f"{require_gpus} GPUs required, {len(v.gpus)} visible")
    if minimum is not None:
        failures += [
            f"{f}, less than --min-memory {min_memory}" for f in _min_memory_failures(v, minimum)
        ]
    if check:
        failures += _run_checks(app, v, as_json, doc)
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    if failures:
        raise CheckFailed("; ".join(failures))


def main(argv: list[str] | None = None, app: AppContext | None = None) -> int:
    """Console entry point: run the group, map gpuplace errors to one message and an exit code."""
    app = app or AppContext()
    try:
        cli.main(args=argv, obj=app, standalone_mode=False, prog_name="gpuplace")
    except GpuplaceError as exc:
        if app.debug:
            raise
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        return 1
    return 0


def entry() -> None:  # pragma: no cover - thin console-script wrapper
    sys.exit(main())


from . import cli_graph, cli_mem  # noqa: E402  (register `run`, `plan` and `mem` on the group)

__all__ = ["AppContext", "BadInput", "cli", "cli_graph", "cli_mem", "main"]
