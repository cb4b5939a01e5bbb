"""Load -> place -> (check fit) -> execute -> verify: the library behind `gpuplace run` and `plan`.

Each stage is a pure function of its inputs (DESIGN's data flow); the CLI only parses flags and
prints. Device names here are TensorFlow's full names (`/job:localhost/replica:0/task:0/...`).
These functions are the Python API (`gpuplace.prepare`, ...): they check what a caller passes and
raise gpuplace's errors (BadInput, exit code 2), naming settings as data that each caller says
in its own words (`Options.memory_fraction` from Python, `--memory-fraction` from the CLI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .devices.model import View
from .devices.names import full_name
from .devices.rates import MeasuredRate, Rates, load_rates
from .errors import BadInput, RuntimeFailure
from .execute.ledger import OutOfMemory
from .graph import apply_feeds, get_op, load
from .graph.model import STRATEGIES, Config, Graph
from .graph.prune import needed, prune
from .memory.devices import (
    DeviceMemory,
    check_reservations,
    ledgers,
    oom_hint,
    prepare_pools,
    release_after_failure,
    release_pools,
    summary,
)
from .memory.policy import LogicalGpu, Policy, logical_gpus, resolve
from .options import Options, check_feed_names, check_replicas, replicate_count
from .placement import place
from .placement.model import Placement
from .units import human

if TYPE_CHECKING:
    from .execute.executor import RunResult
    from .placement.baselines import Bounds
    from .placement.estimate import Estimate

CPU0 = full_name("CPU", 0)
# Relative tolerance per dtype when --verify compares against a float64 CPU run.
TOLERANCE = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}


@dataclass(frozen=True)
class Prepared:
    """A placed graph ready to run. `graph` and `placement` hold the ops the fetches need (what
    runs); `pruned` names the others, and `whole` is the whole graph as it was placed (TF's
    placer sees every op: the placement log lists them all), or None when nothing was pruned."""

    graph: Graph
    placement: Placement
    log_device_placement: bool
    policy: Policy
    logical: tuple[LogicalGpu, ...]
    strategy: str = "tensorflow"
    rates: Rates = field(default_factory=Rates)  # measured by `devices --check`, from env's file
    allow_soft_placement: bool = False  # in effect: the flag, else the spec's config
    pruned: tuple[str, ...] = ()  # ops the fetches do not need, in graph order: not run
    whole: tuple[Graph, Placement] | None = None

    def placed(self) -> tuple[Graph, Placement]:
        """Every op as placed (the placement log's view), pruned or not."""
        return self.whole or (self.graph, self.placement)


@dataclass(frozen=True)
class Outcome:
    """A finished run: `result` holds the fetched values (numpy arrays, by fetch name), the
    copies and the `print` output; `memory` what each device reserved, peaked at and may use."""

    result: RunResult
    memory: list[DeviceMemory]


def _expect(value: object, kind: type | tuple[type, ...], what: str, fix: str) -> None:
    """BadInput for an API caller's argument of the wrong kind, rather than an AttributeError
    deep inside: `what` names the argument and what it must be, `fix` how to make one."""
    if not isinstance(value, kind):
        shown = repr(value)
        if value is not None:
            shown = f"{type(value).__name__} {shown}" if len(shown) <= 40 else type(value).__name__
        raise BadInput(f"{what} ({fix}), got {shown}")


def _expect_view(view: object, function: str) -> None:
    _expect(view, View, f"{function}: view must be a View", "gpuplace.view(machine, os.environ)")


def _expect_prepared(prepared: object, function: str) -> None:
    what = f"{function}: prepared must be a Prepared"
    _expect(prepared, Prepared, what, "what gpuplace.prepare(...) returns")


def device_limits(view: View, logical: Sequence[LogicalGpu]) -> dict[str, int | None]:
    """The memory each device may use: the host's for CPU:0, the policy's limit for GPU:i."""
    sizes: dict[str, int | None] = {CPU0: view.machine.host.memory_total}
    for g in logical:
        sizes[full_name("GPU", g.index)] = g.limit
    return sizes


def check_fits(graph: Graph, placement: Placement, limits: Mapping[str, int | None]) -> None:
    """Refuse, before anything is allocated, a tensor larger than its device's memory."""
    for op in graph.ops:
        device = placement.decisions[op.name].device
        limit = limits.get(device)
        for spec in op.outputs:
            if limit is not None and spec.nbytes > limit:
                raise RuntimeFailure(
                    f"op {op.name!r} ({op.type}) outputs a {list(spec.shape)} {spec.dtype} tensor of "
                    f"{human(spec.nbytes)}, larger than all {human(limit)} {device} may use; nothing "
                    "was allocated. Place it on a device with more memory or make the tensor smaller"
                )


def prepare(
    path: str | Path,
    view: View,
    options: Options,
    env: Mapping[str, str],
    feeds: bool = True,
) -> Prepared:
    """Load the spec at `path`, apply `options.feeds` (unless `feeds` is False, as `plan` does),
    resolve the memory policy into logical GPUs, place every op on them (with the rates measured
    on this machine, from the rates file `env` names), prune the graph to the ops its fetches
    need, and check that every tensor they make fits its device. Returns the Prepared graph for
    `predict_memory`, `estimate_plan` and `execute_prepared`.

    `view` is what the process sees (`gpuplace.view(machine, env)`); `env` is the environment
    (`os.environ`, or a dict): TF_FORCE_GPU_ALLOW_GROWTH and GPUPLACE_RATES are read from it.
    As TensorFlow's DirectSession (with its default `place_pruned_graph: false`), the tensorflow
    strategy places the whole graph, so device requests and colocations count for every op,
    then only what the fetches need runs; balanced and round-robin, which spread work, place
    only the ops that run. A placeholder the fetches do not need need not be fed."""
    _expect(path, (str, os.PathLike), "prepare: path must be a file name", "the spec's path")
    _expect_view(view, "prepare")
    what = "prepare: options must be an Options"
    _expect(options, Options, what, "e.g. gpuplace.Options(strategy='balanced')")
    _expect(env, Mapping, "prepare: env must be a mapping", "os.environ, or a dict such as {}")
    flags = options.memory_flags()
    count = replicate_count(options.replicate)

    def gpus(config: Config) -> int:
        n = len(logical_gpus(view.gpus, resolve(config.gpu_options, flags, env)))
        if count is not None:
            check_replicas(count, n)
        return n

    graph = load(path, gpus=gpus, replicate=count)
    keep = needed(graph)
    if feeds:
        check_feed_names(graph, options.feeds)
        graph = apply_feeds(_unneeded_fed(graph, keep, options.feeds), options.feeds)
    policy = resolve(graph.config.gpu_options, flags, env)
    logical = tuple(logical_gpus(view.gpus, policy))
    soft = options.allow_soft_placement
    if soft is None:
        soft = graph.config.allow_soft_placement
    strategy = options.strategy or str(graph.config.placement.get("strategy", "tensorflow"))
    rates = load_rates(env)
    whole: tuple[Graph, Placement] | None = None
    dropped: tuple[str, ...] = ()
    whole_graph = strategy == "tensorflow"  # TF's placer sees every op; the others weigh work
    if keep is not None and not whole_graph:
        graph, dropped = _pruned(graph, keep)
    placement = place_with(strategy, graph, view, logical, soft, rates.by_uuid)
    if keep is not None and whole_graph:  # placed whole; the run needs fewer
        whole = (graph, placement)
        graph, dropped = _pruned(graph, keep)
        placement = _kept(placement, keep)
    check_fits(graph, placement, device_limits(view, logical))
    log = options.log_device_placement
    log = graph.config.log_device_placement if log is None else log
    return Prepared(graph, placement, log, policy, logical, strategy, rates, soft, dropped, whole)


def _unneeded_fed(graph: Graph, keep: frozenset[str] | None, feeds: Mapping[str, Any]) -> Graph:
    """The graph with a stand-in value for each placeholder the fetches do not need and no feed
    gives, so that only the needed ones must be fed (as in TF); pruning drops the stand-ins."""
    if keep is None:
        return graph
    ops = tuple(
        replace(op, attrs={**op.attrs, "value": None})
        if op.type == "placeholder" and op.name not in keep and op.name not in feeds
        else op
        for op in graph.ops
    )
    return replace(graph, ops=ops)


def _pruned(graph: Graph, keep: frozenset[str]) -> tuple[Graph, tuple[str, ...]]:
    pruned = prune(graph, keep)
    return pruned.graph, pruned.dropped


def _kept(placement: Placement, keep: frozenset[str]) -> Placement:
    """The decisions of the kept ops, in the same orders."""
    return replace(
        placement,
        decisions={n: d for n, d in placement.decisions.items() if n in keep},
        order=tuple(n for n in placement.order if n in keep),
    )


def predict_memory(
    prepared: Prepared, view: View, anyway: str | None = None
) -> tuple[list[DeviceMemory], OutOfMemory | None]:
    """Predict, without running anything, each device's memory (a DeviceMemory per device:
    reserved, peak, limit) and the OutOfMemory a run would hit (None when it fits), with advice
    and `anyway`, how to run it regardless (by default `run`'s --force, or execute_prepared
    for a Python caller). Returns (memory, oom); the OOM is returned, not raised."""
    from .memory.predict import predict

    _expect_prepared(prepared, "predict_memory")
    _expect_view(view, "predict_memory")
    prediction = predict(prepared.graph, prepared.placement, prepared.logical)
    oom = prediction.oom
    if oom is not None:
        hint = oom_hint(oom, prepared.policy, prepared.logical, view)
        oom = oom.with_hint(hint, predicted=True, anyway=anyway)
    return prediction.memory, oom


@dataclass(frozen=True)
class PlanEstimate:
    """The cost model's view of a placement: per-device busy time and copies, the makespan,
    and the lower bounds no placement can beat (reference notes A.5, and stage by stage)."""

    estimate: Estimate  # makespan, and per device busy seconds, peak bytes, copies in and out
    bounds: Bounds  # critical_path, work, stages (seconds)

    @property
    def bound(self) -> float:
        """The tightest lower bound (seconds): `estimate.makespan / bound` is plan's ratio."""
        return float(self.bounds.best)


def estimate_plan(prepared: Prepared, view: View) -> PlanEstimate:
    """The cost model's estimate of the ops that run, under the soft placement `prepare` used
    (the flag, else the spec's config): a PlanEstimate with the makespan and the lower bounds
    no placement can beat (what `gpuplace plan` prints). Runs nothing."""
    from .placement.cost import LinkModel, device_models, split_devices
    from .placement.estimate import device_index, lower_bounds, simulate
    from .placement.flat import flatten

    _expect_prepared(prepared, "estimate_plan")
    _expect_view(view, "estimate_plan")
    models = device_models(prepared.logical, view.machine.host, prepared.rates.by_uuid)
    gpus, cpu = split_devices(models)
    ordered, link = [*gpus, cpu], LinkModel()
    flat = flatten(prepared.graph)  # once, for the estimate and the bounds
    est = simulate(flat, device_index(prepared.placement, flat, ordered), ordered, link)
    tf = prepared.placement if prepared.strategy == "tensorflow" else None  # TF's own: reuse it
    soft = prepared.allow_soft_placement
    bounds = lower_bounds(prepared.graph, models, link, allow_soft_placement=soft, tf=tf, flat=flat)
    return PlanEstimate(est, bounds)


def place_with(
    strategy: str, graph: Graph, view: View, logical: Sequence[LogicalGpu], soft: bool,
    rates: Mapping[str, MeasuredRate] | None = None,
) -> Placement:  # fmt: skip
    """Place by TensorFlow's rules, or spread the ops it would pile on GPU:0 (balanced,
    round-robin); explicit devices, colocation and CPU-only ops are honoured by all three.
    Balanced costs ops with `rates` (measured, by GPU UUID) where a card has them."""
    if strategy == "tensorflow":
        return place(graph, len(logical), allow_soft_placement=soft)
    if strategy == "round-robin":
        from .placement.baselines import round_robin

        return round_robin(graph, len(logical), allow_soft_placement=soft)
    if strategy == "balanced":
        from .placement.balanced import place_balanced
        from .placement.cost import device_models

        models = device_models(logical, view.machine.host, rates)
        return place_balanced(graph, models, allow_soft_placement=soft)
    raise BadInput(
        f"placement strategy {strategy!r} is not one of {', '.join(STRATEGIES)} "
        "(--strategy, or config placement.strategy)"
    )


def backends(view: View, logical: Sequence[LogicalGpu], cupy_loader: Any = None) -> dict[str, Any]:
    """One backend per device: numpy for the CPU and simulated GPUs, cupy for real GPUs."""
    from .execute.backends import backend_for

    out: dict[str, Any] = {CPU0: backend_for(view.machine, None)}
    for g in logical:
        out[full_name("GPU", g.index)] = backend_for(view.machine, g.gpu, cupy_loader, g.index)
    return out


def execute_prepared(
    prepared: Prepared, view: View, cupy_loader: Any = None,
    observe: Callable[[list[DeviceMemory]], None] | None = None,
) -> Outcome:  # fmt: skip
    """Run the prepared graph under its memory policy: reserve, run with per-device ledgers,
    release. Returns an Outcome (the fetched values and what each device held); raises
    OutOfMemory (a RuntimeFailure) with advice when a device runs out, after freeing
    everything. `observe` sees the memory while it is still held (nvidia-smi's view of this
    process); `cupy_loader` imports cupy for real GPUs (tests pass a fake)."""
    from .execute.executor import plan, run

    _expect_prepared(prepared, "execute_prepared")
    _expect_view(view, "execute_prepared")
    logical = prepared.logical
    backs = backends(view, logical, cupy_loader)
    devices = {name: d.device for name, d in prepared.placement.decisions.items()}
    schedule = plan(prepared.graph, devices, backs, get_op)
    check_reservations(logical)
    names = [CPU0, *(full_name("GPU", g.index) for g in logical)]
    books = {lg.device: lg for lg in ledgers(names, logical)}
    prepare_pools(logical, backs)
    try:
        result = run(schedule, [books[d] for d in schedule.devices])
        if observe is not None:
            observe(summary(list(books.values()), {}))
    except BaseException as exc:
        release_after_failure(logical, backs)  # a lost CUDA context fails again: say it once
        if isinstance(exc, OutOfMemory):
            raise exc.with_hint(oom_hint(exc, prepared.policy, logical, view)) from None
        raise
    pools = release_pools(logical, backs)
    return Outcome(result, summary(list(books.values()), pools))


@dataclass(frozen=True)
class Verified:
    """One fetch compared with the float64 CPU run: the largest error relative to the
    reference's largest finite magnitude, against the dtype's tolerance."""

    fetch: str
    dtype: str
    max_rel_error: float
    tolerance: float
    ok: bool
    hint: str = ""  # why it differs, when gpuplace can tell (float16 overflow, ...)


# Where a float dtype overflows to inf: the hint for a value infinite only in that dtype.
OVERFLOWS = {"float16": "65504", "float32": "3.4e38"}


class _Float64:
    """Kernels as registered, computing in float64: host values (constants, random draws,
    variables) are drawn as specified, then widened, so both runs start from the same numbers."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.host_value = kernel.host_value

    def compute(self, xp: Any, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        if self.host_value:
            outs = self.kernel.compute(xp, inputs, attrs)
            return [o.astype(np.float64) if o.dtype.kind == "f" else o for o in outs]
        if attrs.get("dtype") in TOLERANCE:
            attrs = {**attrs, "dtype": "float64"}
        return list(self.kernel.compute(xp, inputs, attrs))


def verify(prepared: Prepared, result: RunResult | Outcome, view: View) -> list[Verified]:
    """Run the graph again in float64 on the CPU and compare every fetch of `result` (what
    execute_prepared returned, or its `.result`): one Verified per fetch (`ok` when within
    the dtype's tolerance: 1e-2 float16, 1e-4 float32, 1e-9 float64, exact for integers).

    The reference run has no side effects: `save` ops are skipped and `print` ops forward their
    input without printing (the run being checked already wrote and printed)."""
    from .execute.executor import RunResult, execute

    _expect_prepared(prepared, "verify")
    _expect_view(view, "verify")
    if isinstance(result, Outcome):
        result = result.result
    what = "verify: result must be a RunResult"
    _expect(result, RunResult, what, "what gpuplace.execute_prepared(...) returns, or its .result")
    graph = prepared.graph
    devices = {op.name: CPU0 for op in graph.ops}
    cpu = backends(view, ())[CPU0]
    reference = execute(graph, devices, {CPU0: cpu}, lambda t: _Float64(get_op(t)), effects=False)
    out = []
    for name, value in result.values.items():
        ref = np.asarray(reference.values[name], dtype=np.float64)
        got = np.asarray(value, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: equal values, no warning
            same = (got == ref) | (np.isnan(got) & np.isnan(ref))
            finite = np.abs(ref[np.isfinite(ref)])
            scale = float(np.max(finite)) if finite.size else 0.0
            diff = np.where(same, 0.0, np.abs(got - ref))
            err = float(np.max(diff)) / (scale or 1.0) if ref.size else 0.0
        dtype = str(value.dtype)
        tol = TOLERANCE.get(dtype, 0.0)
        ok = bool(np.isfinite(err) and err <= tol)
        hint = ""
        if not ok and dtype in OVERFLOWS and bool(np.any(~np.isfinite(got) & np.isfinite(ref))):
            hint = f"{dtype} overflows above {OVERFLOWS[dtype]}"
        out.append(Verified(name, dtype, err, tol, ok, hint))
    return out
