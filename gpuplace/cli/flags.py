"""Flags shared by several commands: --machine / --debug after a command, the memory and
strategy flags of run, plan and mem, --feed, --allow-soft-placement, --json."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ..echo import TEXT_CHARS, clip, show
from ..errors import BadInput
from ..units import parse_count
from .context import MACHINE_ENV, AppContext

if TYPE_CHECKING:
    from ..options import Options

F = TypeVar("F", bound=Callable[..., Any])
MACHINE_HELP = (
    "Simulate a machine: a preset list (4xK520, 2xA100-80GB,1xT4) or a YAML machine file. "
    f"Env: {MACHINE_ENV} (ignored when empty). Accepted before or after the command."
)
CLUSTER_HELP = (
    "Work across hosts: a Dask scheduler address (tcp://head:8786), Dask's scheduler.json, or "
    "a YAML cluster file (cluster: block). Beats the spec's cluster: block. Env: "
    "GPUPLACE_CLUSTER. Simulated clusters: --machine '2x(4xV100-16GB)' or 4xV100-16GB+1xT4."
)
DEBUG_HELP = "Show tracebacks for errors (the exit code stays the same)."
MEMORY_FLAGS = ("allow_growth", "memory_fraction", "memory_limit", "virtual_gpus", "max_memory",
                "strategy", "replicate", "out_dir", "allow_writes_anywhere", "dims", "training",
                "training_dtype", "device_map")  # fmt: skip


def count_flag(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A whole number >= 0 in the ASCII digits 0-9 (`units.parse_count`), as a click callback:
    click's int would take '３' as 3, and echo all of 5,000 digits in its error."""
    if value is None:
        return None
    count = parse_count(value.strip())
    if count is None:
        raise click.BadParameter(f"{show(value, TEXT_CHARS)} is not a whole number >= 0 (e.g. 2)")
    return count


def _merge_globals(
    app: AppContext, machine_spec: str | None, debug: bool, cluster_spec: str | None = None
) -> None:
    """Fold --machine / --cluster / --debug given after the command into the app (see
    `global_options`)."""
    app.debug = app.debug or debug
    for flag, value in (("machine", machine_spec), ("cluster", cluster_spec)):
        if value is None:
            continue
        before = click.get_current_context().meta.get(f"gpuplace.{flag}")
        if before is not None and before != value:
            raise BadInput(
                f"--{flag} is given twice with different values: {show(before, TEXT_CHARS)} "
                f"before the command and {show(value, TEXT_CHARS)} after it; give it once"
            )
        setattr(app, f"{flag}_spec", value)


def global_options(command: F) -> F:
    """Accept the group's --machine and --debug after a command too (`gpuplace run g.yaml
    --debug`), with the same meaning; a --machine given on both sides must be the same.

    Put it right above `@click.pass_obj`, so the two options are listed last in --help."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        app = click.get_current_context().find_object(AppContext)
        machine, debug = kwargs.pop("sub_machine_spec"), kwargs.pop("sub_debug")
        cluster = kwargs.pop("sub_cluster_spec")
        if app is not None:
            _merge_globals(app, machine, debug, cluster)
        return command(*args, **kwargs)

    click.option("--debug", "sub_debug", is_flag=True, help=DEBUG_HELP)(wrapper)
    click.option("--cluster", "sub_cluster_spec", metavar="SPEC", help=CLUSTER_HELP)(wrapper)
    click.option("--machine", "sub_machine_spec", metavar="SPEC", help=MACHINE_HELP)(wrapper)
    return cast(F, wrapper)


def _dims_flag(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> dict[str, int]:
    """`--dim NAME=N` items by name; each dim bound once, to a whole number >= 1."""
    dims: dict[str, int] = {}
    for item in values:
        name, eq, text = item.partition("=")
        count = parse_count(text.strip()) if eq else None
        if not name or count is None or count < 1:
            raise BadInput(
                f"--dim {show(item, TEXT_CHARS)}: expected NAME=N with N a whole number >= 1 "
                "(e.g. --dim batch=32)"
            )
        if name in dims and dims[name] != count:
            raise BadInput(
                f"--dim {clip(name)} is given twice ({dims[name]} and {count}); bind each dim once"
            )
        dims[name] = count
    return dims


def _device_map_flag(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> dict[str, int | str] | None:
    """`--device-map FILE`: the map read (bounded) from its JSON file."""
    if value is None:
        return None
    from ..placement.devmap import read_device_map  # only with the flag

    return read_device_map(value)


def memory_options(f: Any) -> Any:
    """The flags run, plan and mem share, each an `Options` field: memory policy (overrides
    config.gpu_options), --replicate and --strategy (overrides config.placement), and where the
    spec's save ops may write (--out-dir, --allow-writes-anywhere: the same rule for all three,
    so plan refuses what run would)."""
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
        click.option("--max-memory", "max_memory", metavar="SPEC",
                     help="Accelerate's max_memory: GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB caps each "
                          "device named (a memory limit per GPU; CPU: what CPU:0 may hold)."),
        click.option("--replicate", "replicate", metavar="N|all",
                     help="Data-parallel: split the top-level placeholders over N GPUs (or all) and "
                          "merge the outputs on the CPU, as Keras' multi_gpu_model."),
        click.option("--strategy", type=click.Choice(["tensorflow", "balanced", "round-robin"]),
                     default=None, help="Placement strategy (config placement.strategy); "
                     "default tensorflow: TensorFlow's rules."),
        click.option("--device-map", "device_map", metavar="FILE", callback=_device_map_flag,
                     help="Place by a device map (JSON: Accelerate's device_map, or what plan "
                          "--format device-map writes): each op asks for the device of the "
                          "longest module path covering it."),
        click.option("--out-dir", "out_dir", metavar="DIR",
                     help="Folder the spec's save paths start at (default: the spec's folder; "
                          "a spec writes only under it)."),
        click.option("--allow-writes-anywhere", "allow_writes_anywhere", is_flag=True,
                     help="Let the spec's save paths be absolute, start with ~, climb out with "
                          "'..' or go through symbolic links."),
        click.option("--dim", "dims", multiple=True, metavar="NAME=N", callback=_dims_flag,
                     help="Bind an ONNX model's symbolic dim (e.g. --dim batch=32); repeatable."),
        click.option("--training", "training", metavar="OPTIMIZER",
                     type=click.Choice(["sgd", "momentum", "adam", "adamw"]),
                     help="Size one training step (weights, gradients, optimizer slots, kept "
                          "activations) for plan and mem, and place for it with balanced "
                          "(config training). run still runs the forward graph only."),
        click.option("--dtype", "training_dtype", type=click.Choice(["float32", "float16", "bfloat16"]),
                     default=None, help="With --training: mixed precision (float16/bfloat16 "
                     "weights and activations, float32 master weights and slots)."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


def pop_memory_flags(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take `memory_options`' values out of a command's keyword arguments."""
    return {k: kwargs.pop(k) for k in MEMORY_FLAGS}


SOFT = click.option(
    "--allow-soft-placement/--no-allow-soft-placement", "soft", default=None,
    help="TensorFlow's allow_soft_placement: fall back to an existing device (overrides config).",
)  # fmt: skip
JSON = click.option("--json", "as_json", is_flag=True, help="One JSON document.")
WIDE = click.option("--wide", is_flag=True,
                    help="On a terminal, every column whole (as a pipe gets it), however wide.")  # fmt: skip


def parse_feeds(values: Sequence[str]) -> dict[str, str]:
    """`--feed NAME=VALUE` items by name; a placeholder fed twice is refused, not overwritten."""
    feeds: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BadInput(
                f"--feed {show(item, TEXT_CHARS)}: expected NAME=FILE.npy or NAME=JSON (e.g. x=[[1,2]])"
            )
        name = name.strip()
        if name in feeds:
            first, again = (clip(f"{name}={v}", TEXT_CHARS) for v in (feeds[name], value))
            raise BadInput(
                f"--feed {clip(name)} is given twice ({first} and {again}); feed each placeholder once"
            )
        feeds[name] = value
    return feeds


def options_from_flags(
    memory: dict[str, Any], soft: bool | None = None, log: bool | None = None,
    feed: Sequence[str] = (),
) -> Options:  # fmt: skip
    """The library's Options for what the flags asked (the Python API takes the same)."""
    from ..options import Options

    return Options(
        allow_soft_placement=soft, log_device_placement=log, feeds=parse_feeds(feed), **memory
    )


def _a_number(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """click's FloatRange lets NaN through (no comparison with it is true): refuse it."""
    if value is not None and value != value:
        raise click.BadParameter(f"{value} is not a number of seconds; give e.g. 2", ctx, param)
    return value


def watch_options(like: str) -> Callable[[F], F]:
    """`--watch [SECONDS]` and `--count N` (`mem`, `devices`): refresh as `like` does."""

    def decorate(command: F) -> F:
        command = click.option("--count", type=click.IntRange(min=1), metavar="N",
                               help="With --watch: stop after N refreshes.")(command)  # fmt: skip
        return click.option(
            "--watch", type=click.FloatRange(min=0.1, max=86400), is_flag=False, flag_value=2.0,
            default=None, metavar="[SECONDS]", callback=_a_number,
            help=f"Refresh every SECONDS (default 2), as {like} does; Ctrl-C stops (exit 0).",
        )(command)  # fmt: skip

    return decorate
