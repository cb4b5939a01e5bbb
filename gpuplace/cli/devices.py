"""`gpuplace devices`: the devices a CUDA program would see, and CI smoke checks on them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from ..devices import View
from ..echo import LINE_CHARS, sample
from ..errors import BadInput, CheckFailed
from .context import AppContext
from .flags import count_flag, global_options
from .help import Command
from .output import echo_renderable, gpus_required, warn

if TYPE_CHECKING:
    from ..execute.device_check import CheckResult, RateSizes


def _min_memory_failures(v: View, minimum: int) -> list[str]:
    from ..units import human

    return [
        f"{g.name} ({g.product}, nvml {g.gpu.nvml_index}) has "
        f"{'unknown' if g.memory_total is None else human(g.memory_total)} total"
        for g in v.gpus
        if g.memory_total is None or g.memory_total < minimum
    ]


def _run_checks(
    app: AppContext, v: View, as_json: bool, doc: dict[str, Any], sizes: RateSizes
) -> list[str]:
    from ..execute.device_check import check_all
    from ..report.device_check import check_records, checks_plain

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


def _save_rates(app: AppContext, results: list[CheckResult], as_json: bool) -> None:
    """Keep what `--check` measured on real GPUs for the balanced strategy (one line says where;
    on stderr under --json, so stdout stays one document)."""
    import datetime

    from ..devices.rates import rates_path, save_rates, shown
    from ..execute.device_check import measured_rates

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
        warn(f"measured rates not saved to {shown(path)}: {exc.strerror or type(exc).__name__}")
        return
    click.echo(f"Saved the measured rates of {len(measured)} GPU(s) to {shown(path)}", err=as_json)


@click.command(
    cls=Command,
    short_help="List the devices a CUDA program would see",
    examples=["gpuplace devices", "CUDA_VISIBLE_DEVICES=1,0 gpuplace --machine 4xK520 devices", "gpuplace --machine 2xA100-80GB devices --require-gpus 2 --min-memory 40GiB --json"],
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="One JSON document (sizes in bytes).")
@click.option(
    "--require-gpus",
    callback=count_flag,
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
    from ..report.devices import devices_json, devices_plain, devices_table, notice

    if presets:
        _presets(as_json, require_gpus=require_gpus is not None, min_memory=min_memory, check=check)
        return
    minimum = None
    if min_memory is not None:
        from ..units import parse_size

        minimum = parse_size(min_memory, "--min-memory")
    sizes = None
    if check:  # a bad GPUPLACE_CHECK_SIZES is refused before anything prints
        from ..execute.device_check import SIZES_ENV, rate_sizes

        sizes = rate_sizes(app.env.get(SIZES_ENV))
    v = app.view()
    doc = devices_json(v)
    for w in v.warnings:
        warn(w)
    if v.gpus and not v.machine.host.simulated:  # a real driver: does the installed cupy fit it?
        from ..devices.cuda_match import cupy_driver_warning

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
        raise CheckFailed(sample(failures, "; ", width=LINE_CHARS))


def _presets(as_json: bool, **others: object) -> None:
    """`devices --presets`: the listing alone; a check flag beside it is a usage error."""
    from ..report.presets import presets_json, presets_plain

    given = [f"--{name.replace('_', '-')}" for name, value in others.items() if value]
    if given:
        flags = given[0] if len(given) == 1 else ", ".join(given[:-1]) + " or " + given[-1]
        raise BadInput(
            f"--presets lists the presets; it cannot be combined with {flags}: "
            "run `gpuplace devices --presets` and the check separately"
        )
    click.echo(json.dumps(presets_json(), indent=2) if as_json else presets_plain())
