"""`gpuplace devices`: the devices a CUDA program would see, and CI smoke checks on them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from ..devices import View
from ..echo import LINE_CHARS, sample
from ..errors import BadInput, CheckFailed
from .context import AppContext
from .flags import count_flag, global_options, watch_options
from .help import Command
from .output import gpus_required, progress, terminal_width, warn, watch_views

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
    from ..execute.device_check import SIMULATED_SIZES, SIZES_ENV, check_all
    from ..report.device_check import check_records, checks_plain

    if v.machine.simulated and not app.env.get(SIZES_ENV):
        sizes = SIMULATED_SIZES  # numpy on this host, whatever the card: a quick measurement
    with progress(app, "checking", 1 + len(v.gpus), as_json) as step:
        results = check_all(v, app.cupy_loader, sizes, step)
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
@watch_options("gpustat -i")
@click.option("--wide", is_flag=True,
              help="On a terminal, every column whole (as a pipe gets it), however wide.")  # fmt: skip
@global_options
@click.pass_obj
def devices(
    app: AppContext,
    as_json: bool,
    require_gpus: int | None,
    min_memory: str | None,
    check: bool,
    presets: bool,
    watch: float | None,
    count: int | None,
    wide: bool,
) -> None:
    """List the devices a CUDA program would see (CPU:0, then GPUs in CUDA order)."""
    from ..report.devices import devices_fitted, devices_json, devices_plain

    if presets:
        _presets(as_json, require_gpus=require_gpus is not None, min_memory=min_memory, check=check,
                 watch=watch is not None)  # fmt: skip
        return
    _check_watch(watch, count, require_gpus is not None or min_memory is not None or check)
    minimum = None
    if min_memory is not None:
        from ..units import parse_size

        minimum = parse_size(min_memory, "--min-memory")
    sizes = None
    if check:  # a bad GPUPLACE_CHECK_SIZES is refused before anything prints
        from ..execute.device_check import SIZES_ENV, rate_sizes

        sizes = rate_sizes(app.env.get(SIZES_ENV))
    described = app.cluster_description()
    if described is not None:
        from .cluster_devices import cluster_devices

        cluster_devices(app, described, as_json, require_gpus, minimum, min_memory, sizes,
                        watch is not None)  # fmt: skip
        return
    v = app.view()
    doc = devices_json(v)
    for w in v.warnings:
        warn(w)
    if watch is not None:

        def screen(seen: View) -> str:
            if as_json:
                return json.dumps(devices_json(seen), separators=(",", ":"))
            if app.terminal() and not wide:
                return devices_fitted(seen, terminal_width(app))
            return devices_plain(seen)

        watch_views(app, v, watch, count, as_json, screen)
        return
    if v.gpus and not v.machine.host.simulated:  # a real driver: does the installed cupy fit it?
        from ..devices.cuda_match import cupy_driver_warning

        mismatch = cupy_driver_warning(v.machine.cuda_version, app.installed_version)
        if mismatch:
            warn(mismatch)
    if not as_json:
        if app.terminal() and not wide:
            bold = not app.env.get("NO_COLOR")  # no-color.org: set and not empty means none
            click.echo(devices_fitted(v, terminal_width(app), bold), color=bold)
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


def _check_watch(watch: float | None, count: int | None, checks: bool) -> None:
    if watch is not None and checks:
        raise BadInput(
            "--watch shows the devices over time; the smoke checks (--require-gpus, --min-memory, "
            "--check) run once: run them without --watch"
        )
    if count is not None and watch is None:
        raise BadInput("--count needs --watch: it stops a watch after N refreshes; add --watch")


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
