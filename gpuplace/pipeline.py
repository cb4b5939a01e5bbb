"""The pipeline behind `gpuplace run`, `plan` and `mem`, and the Python API: load -> place ->
check fit -> predict memory -> execute -> verify, each stage a call into the layer that owns it.

This module only sequences the stages and checks what a Python caller passes (BadInput naming
the argument); the work is in `graph/`, `placement/`, `memory/` and `execute/`, and the results
are the plain types of `results.py`. Device names are TensorFlow's full names
(`/job:localhost/replica:0/task:0/...`). Errors carry the settings they name as data, which each
caller says in its own words (`Options.memory_fraction` from Python, `--memory-fraction` from
the CLI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .across_hosts import (
    ClusterRuns,
    Connect,
    cluster_limits,
    estimate_on_cluster,
    measured_network,
    place_on_cluster,
    refuse_training,
    resolve_cluster,
    run_on_cluster,
    task_devices,
    task_gpus,
)
from .devices.cluster import Cluster, short_name
from .devices.cluster_spec import ClusterDescription
from .devices.model import View
from .devices.names import full_name
from .devices.rates import load_rates
from .errors import BadInput, Message, Setting, Term, Text
from .graph import apply_feeds, load
from .graph.model import Config, Graph
from .graph.onnx_import import refuse_opaque
from .graph.prune import needed, prune
from .limits import read_limits
from .memory.fit import check_fits, check_host_memory, device_limits
from .memory.ledger import OutOfMemory
from .memory.policy import Policy, capped_host, logical_gpus, resolve_policy
from .memory.pools import (
    DeviceMemory,
    check_reservations,
    ledgers,
    oom_hint,
    prepare_pools,
    release_after_failure,
    release_pools,
    summary,
)
from .options import Options, check_feed_names, check_replicas, replicate_count
from .placement.model import Placement
from .placement.strategies import place_with
from .results import Outcome, PlanEstimate, PolicyRun, Prepared, Reservation

if TYPE_CHECKING:
    from .execute.backends import CupyLoader
    from .execute.executor import Layout, RunResult
    from .execute.verify import Verified
    from .memory.training import Training, TrainingMemory
    from .placement.flat import Flat

CPU0 = full_name("CPU", 0)
Observer = Callable[[Prepared, list[DeviceMemory]], None]  # a run's memory while it is held


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


def _local_only(prepared: Prepared, what: str) -> None:
    """Refuse a graph placed across hosts where one process's executor would run it."""
    if prepared.cluster is not None:
        raise BadInput(
            f"{what} a graph placed across hosts needs gpuplace's cluster runtime (its tasks "
            f"are {', '.join(str(t.name) for t in prepared.cluster.tasks[:4])}); install it "
            "with pip install 'gpuplace[cluster]'"
        )


def prepare(
    path: str | Path,
    view: View,
    options: Options,
    env: Mapping[str, str],
    feeds: bool = True,
    cluster: Cluster | ClusterDescription | None = None,
    connect: Connect | None = None,
) -> Prepared:
    """Load the spec at `path`, apply `options.feeds` (unless `feeds` is False, as `plan` does),
    resolve the memory policy into logical GPUs, place every op on them (with the rates measured
    on this machine, from the rates file `env` names), prune the graph to the ops its fetches
    need, and check that every tensor they make fits its device. Returns the Prepared graph for
    `predict_memory`, `estimate_plan` and `execute_prepared`.

    `view` is what the process sees (`gpuplace.view(machine, env)`); `env` is the environment
    (`os.environ`, or a dict): TF_FORCE_GPU_ALLOW_GROWTH, GPUPLACE_RATES and the input limits
    (GPUPLACE_MAX_OPS, GPUPLACE_MAX_SPEC_SIZE) are read from it.
    As TensorFlow's DirectSession (with its default `place_pruned_graph: false`), the tensorflow
    strategy places the whole graph, so device requests and colocations count for every op,
    then only what the fetches need runs; balanced and round-robin, which spread work, place
    only the ops that run. A placeholder the fetches do not need need not be fed. Where `save`
    ops may write (`options.out_dir`, `options.allow_writes_anywhere`) is checked here, before
    anything runs.

    Across hosts: `cluster` (a Cluster, or a description: `--cluster`, a simulated
    `--machine '2x(4xV100-16GB)'`), else the spec's `cluster:` block, places the graph over the
    union of the tasks' devices by TensorFlow's cluster rules (`placement.place_cluster`); a
    description with a Dask scheduler is turned into a Cluster by `connect` (the runtime's
    inventory of the live workers). Without either, one process, `/job:localhost`."""
    _expect(path, (str, os.PathLike), "prepare: path must be a file name", "the spec's path")
    _expect_view(view, "prepare")
    what = "prepare: options must be an Options"
    _expect(options, Options, what, "e.g. gpuplace.Options(strategy='balanced')")
    _expect(env, Mapping, "prepare: env must be a mapping", "os.environ, or a dict such as {}")
    flags = options.memory_flags()
    count = replicate_count(options.replicate)

    def gpus(config: Config) -> int:
        n = len(logical_gpus(view.gpus, resolve_policy(config.gpu_options, flags, env)))
        if count is not None:
            check_replicas(count, n)
        return n

    writes = {"out_dir": options.out_dir, "allow_writes_anywhere": options.allow_writes_anywhere}
    graph = load(
        path, gpus=gpus, replicate=count, limits=read_limits(env), dims=options.dims, **writes
    )
    keep = needed(graph)
    if feeds:
        refuse_opaque(graph)
        check_feed_names(graph, options.feeds)
        graph = apply_feeds(_unneeded_fed(graph, keep, options.feeds), options.feeds)
    policy = resolve_policy(graph.config.gpu_options, flags, env)
    found = resolve_cluster(cluster, graph, view, env, connect)
    per_task = {} if found is None else task_gpus(found, policy)
    logical = tuple(logical_gpus(view.gpus, policy)) if found is None else per_task[found.master]
    if options.device_map is not None:
        from .placement.devmap import pin  # only with a device map: its dataclasses, its regexes

        graph = pin(graph, options.device_map, len(logical)).graph
    soft = options.allow_soft_placement
    if soft is None:
        soft = graph.config.allow_soft_placement
    strategy = options.strategy or str(graph.config.placement.get("strategy", "tensorflow"))
    rates = load_rates(env)
    if found is not None:
        found = measured_network(found, rates)
    training: Training | None = None
    footprint = None
    if options.training is not None or options.training_dtype is not None or graph.config.training:
        from .memory.training import resolve_training, training_flat  # only then (start-up)

        training = resolve_training(options.training, options.training_dtype, graph.config.training)  # fmt: skip
        footprint = None if training is None else training_flat(training)
    whole: tuple[Graph, Placement] | None = None
    dropped: tuple[str, ...] = ()
    whole_graph = strategy == "tensorflow"  # TF's placer sees every op; the others weigh work
    if keep is not None and not whole_graph:
        graph, dropped = _pruned(graph, keep)
    if found is None:
        host = capped_host(view.machine.host, policy)
        placement = place_with(strategy, graph, logical, host, soft, rates.by_uuid, footprint)
        limits = device_limits(host, logical)
    else:
        refuse_training(found, training)
        placement = place_on_cluster(strategy, graph, found, per_task, soft, rates.by_uuid)
        limits = cluster_limits(found, per_task)
    if keep is not None and whole_graph:  # placed whole; the run needs fewer
        whole = (graph, placement)
        graph, dropped = _pruned(graph, keep)
        placement = _kept(placement, keep)
    check_fits(graph, placement, limits)
    log = options.log_device_placement
    log = graph.config.log_device_placement if log is None else log
    return Prepared(
        graph, placement, log, policy, logical, strategy, rates, soft, dropped, whole,
        cluster=found, task_logical=per_task, training=training,
    )  # fmt: skip


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
    from .execute.predict import predict

    _expect_prepared(prepared, "predict_memory")
    _expect_view(view, "predict_memory")
    named = None if prepared.cluster is None else task_devices(prepared)
    laid = _layout(prepared)
    prediction = predict(
        prepared.graph, prepared.placement, prepared.logical, laid, named,
        prepared.policy.cpu_limit,
    )  # fmt: skip
    oom = prediction.oom
    if oom is not None:
        if named is None:
            hint: Text = oom_hint(oom, prepared.policy, prepared.logical, view)
        else:
            hint = Message(
                f"gpuplace: {short_name(oom.device)} cannot hold what this placement puts on "
                "it; give its task more memory (", Setting("memory_limit"), ", ",
                Setting("memory_fraction"), ") or place fewer ops there",
            )  # fmt: skip
        oom = oom.with_hint(hint, predicted=True, anyway=anyway)
    return prediction.memory, oom


def predict_training(prepared: Prepared) -> list[TrainingMemory] | None:
    """One training step's memory per device (CPU:0, then each logical GPU) for the training
    `prepare` resolved (Options.training, else the spec's config.training): weights,
    gradients, optimizer state, kept activations and gradients in flight at each device's peak
    (`memory/training.py`); None when no training step was asked for. Runs nothing."""
    from .execute.predict import device_names

    _expect_prepared(prepared, "predict_training")
    if prepared.training is None:
        return None
    from .memory.training import training_memory  # only for a training step

    names = device_names(prepared.logical)
    index = {name: i for i, name in enumerate(names)}
    flat = _flat(prepared)
    device_of = [index[prepared.placement.decisions[name].device] for name in flat.names]
    return training_memory(flat, device_of, names, prepared.training)


def _flat(prepared: Prepared) -> Flat:
    """The graph that runs, flattened once: what balanced worked out, else flattened here."""
    from .placement.estimate import Judged
    from .placement.flat import flatten

    judged = prepared.placement.judged
    if isinstance(judged, Judged) and judged.flat.graph is prepared.graph:
        return judged.flat
    if not prepared.flats:
        prepared.flats.append(flatten(prepared.graph))
    return prepared.flats[0]


def _layout(prepared: Prepared) -> Layout:
    """The run's layout (slots, copies, frees, charges), planned once per Prepared for its next
    run: `run` predicts its memory and then runs it from the same one."""
    from .execute.predict import cluster_layout, placed_layout

    if not prepared.planned:
        if prepared.cluster is None:
            laid = placed_layout(prepared.graph, prepared.placement, prepared.logical)
        else:
            laid = cluster_layout(prepared.graph, prepared.placement, task_devices(prepared))
        prepared.planned.append(laid)
    return prepared.planned[0]


def estimate_plan(prepared: Prepared, view: View) -> PlanEstimate:
    """The cost model's estimate of the ops that run, under the soft placement `prepare` used
    (the flag, else the spec's config): a PlanEstimate with the makespan and the lower bounds
    no placement can beat (what `gpuplace plan` prints). Runs nothing."""
    from .placement.cost import device_models
    from .placement.estimate import estimate_with_bounds

    _expect_prepared(prepared, "estimate_plan")
    _expect_view(view, "estimate_plan")
    if prepared.cluster is not None:
        return estimate_on_cluster(prepared)
    host = capped_host(view.machine.host, prepared.policy)
    models = device_models(prepared.logical, host, prepared.rates.by_uuid)
    tf = prepared.placement if prepared.strategy == "tensorflow" else None  # TF's own: reuse it
    # flattened once and kept with the Prepared (as its layout is): a command frees neither
    est, bounds = estimate_with_bounds(
        prepared.graph, prepared.placement, models,
        allow_soft_placement=prepared.allow_soft_placement, tf=tf, flat=_flat(prepared),
    )  # fmt: skip
    return PlanEstimate(est, bounds)


def execute_prepared(
    prepared: Prepared, view: View, cupy_loader: CupyLoader | None = None,
    observe: Callable[[list[DeviceMemory]], None] | None = None,
) -> Outcome:  # fmt: skip
    """Run the prepared graph under its memory policy: reserve, run with per-device ledgers,
    release. Returns an Outcome (the fetched values and what each device held); raises
    OutOfMemory (a RuntimeFailure) with advice when a device runs out, after freeing
    everything, and a RuntimeFailure before anything runs when the tensors it keeps in host
    memory (CPU:0, simulated GPUs) would need more than `view.host_available`. `observe` sees
    the memory while it is still held (nvidia-smi's view of this process); `cupy_loader`
    imports cupy for real GPUs (tests pass a fake)."""
    from .execute.backends import device_backends
    from .execute.executor import bind, run
    from .execute.predict import host_peak

    _expect_prepared(prepared, "execute_prepared")
    _expect_view(view, "execute_prepared")
    _local_only(prepared, "running")
    logical = prepared.logical
    backs = device_backends(view.machine, logical, cupy_loader)
    schedule = bind(_layout(prepared), backs)
    prepared.planned.clear()  # the run's own: freed with it (a second run plans again)
    peak = host_peak(schedule)
    check_host_memory(peak.nbytes, peak.op, view.host_available)
    check_reservations(logical)
    names = [CPU0, *(full_name("GPU", g.index) for g in logical)]
    books = {lg.device: lg for lg in ledgers(names, logical, cpu_limit=prepared.policy.cpu_limit)}
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


def execute_on_cluster(prepared: Prepared, runs: ClusterRuns) -> Outcome:
    """Run a graph placed across hosts on its cluster's tasks (a simulated cluster's worker
    processes start here): each (task, stage) chunk runs gpuplace's executor on that task's
    worker; tensors between tasks are copies of kind `network`. The Outcome's memory lists
    every task's devices by full name."""
    _expect_prepared(prepared, "execute_on_cluster")
    return run_on_cluster(prepared, runs)


def verify(prepared: Prepared, result: RunResult | Outcome, view: View) -> list[Verified]:
    """Run the graph again in float64 on the CPU and compare every fetch of `result` (what
    execute_prepared returned, or its `.result`): one Verified per fetch (`ok` when within
    the dtype's tolerance: 1e-2 float16, 1e-4 float32, 1e-9 float64, exact for integers).

    An imported ONNX model is also run by onnxruntime when it is installed (`Verified.against`).
    The reference run has no side effects: `save` ops are skipped and `print` ops forward their
    input without printing (the run being checked already wrote and printed)."""
    from .execute.executor import RunResult
    from .execute.verify import verify_values

    _expect_prepared(prepared, "verify")
    _expect_view(view, "verify")
    if isinstance(result, Outcome):
        result = result.result
    what = "verify: result must be a RunResult"
    _expect(result, RunResult, what, "what gpuplace.execute_prepared(...) returns, or its .result")
    checked = verify_values(prepared.graph, result.values, view.machine.host.simulated)
    if prepared.graph.onnx_model is None:
        return checked
    from .execute.onnx_reference import onnxruntime_checks

    return checked + onnxruntime_checks(prepared.graph, result.values)


def compared_options(options: Options) -> list[tuple[str, Options]]:
    """The policies `mem --compare` runs, each with its label: TensorFlow's default
    (preallocate), allow_growth, and the given memory fraction if there is one."""
    base = replace(options, allow_growth=None, memory_fraction=None)
    variants = [("default", replace(base, allow_growth=False)),
                ("allow_growth", replace(base, allow_growth=True))]  # fmt: skip
    if options.memory_fraction is not None:
        fraction = replace(base, allow_growth=False, memory_fraction=options.memory_fraction)
        variants.append((f"fraction {options.memory_fraction:g}", fraction))
    return variants


def check_comparable(allow_growth: bool | None) -> None:
    """Comparing policies runs TensorFlow's default and allow_growth side by side: refuse an
    allow_growth the caller set, which the comparison would override."""
    if allow_growth is not None:
        given = Setting("allow_growth", allow_growth)
        raise BadInput(
            Message(
                given, " conflicts with ", Term.COMPARE, ": ", Term.COMPARE, " runs the default "
                "policy and allow_growth side by side (and the given ", Setting("memory_fraction"),
                "); drop ", given,
            )
        )  # fmt: skip


def _check_compared(policy: Policy, verb: str) -> None:
    """Refuse virtual GPUs in a comparison: it includes allow_growth, which TF refuses with them."""
    if policy.virtual:
        raise BadInput(
            Message(
                Term.COMPARE, " conflicts with ", policy.virtual_source, ": ", Term.COMPARE,
                f" {verb} allow_growth, which TensorFlow does not allow on a GPU with virtual "
                "devices; drop one of them",
            )
        )  # fmt: skip


def compare_policies(
    path: str | Path, view: View, options: Options, env: Mapping[str, str],
    cupy_loader: CupyLoader | None = None, observe: Observer | None = None,
    on_prepared: Callable[[PolicyRun], None] | None = None, *,
    cluster: ClusterDescription | None = None, runs: ClusterRuns | None = None,
) -> list[PolicyRun]:  # fmt: skip
    """Run the spec at `path` under each of `compared_options(options)` (`gpuplace mem
    --compare`): one PolicyRun per policy, in that order (see `run_policies`)."""
    _expect(options, Options, "compare_policies: options must be an Options", "gpuplace.Options()")
    check_comparable(options.allow_growth)

    def check(run: PolicyRun) -> None:
        _check_compared(run.prepared.policy, "runs")
        if on_prepared is not None:
            on_prepared(run)

    variants = compared_options(options)
    return run_policies(
        path, view, variants, env, cupy_loader, observe, check, cluster=cluster, runs=runs
    )


def run_policies(
    path: str | Path, view: View, variants: Sequence[tuple[str, Options]],
    env: Mapping[str, str], cupy_loader: CupyLoader | None = None,
    observe: Observer | None = None, on_prepared: Callable[[PolicyRun], None] | None = None,
    *, cluster: ClusterDescription | None = None, runs: ClusterRuns | None = None,
) -> list[PolicyRun]:  # fmt: skip
    """Prepare and run the spec at `path` once per (label, options), in order. A policy that
    resolves to one run before (TF_FORCE_GPU_ALLOW_GROWTH makes default and allow_growth the
    same) is not run again: its PolicyRun has no outcome and names the run it repeats.
    `on_prepared(run)` sees each run once prepared, before it runs (outcome None: the CLI warns
    then); `observe(prepared, memory)` sees a run's memory while it is still held (one process
    only). Across hosts (`cluster`, or the spec's block) each run goes through `runs`, and its
    memory lists every task's devices (each task's peaks, as its worker counted them)."""
    connect = None if runs is None else runs.connect
    done: list[PolicyRun] = []
    by_name: dict[str, str] = {}  # policy name -> the label that ran it
    for label, options in variants:
        prepared = prepare(path, view, options, env, cluster=cluster, connect=connect)
        name = prepared.policy.name()
        pending = PolicyRun(label, name, prepared, None, repeat_of=by_name.get(name, ""))
        if on_prepared is not None:
            on_prepared(pending)
        if pending.repeat_of:
            done.append(pending)
            continue
        by_name[name] = label

        def seen(memory: list[DeviceMemory], prepared: Prepared = prepared) -> None:
            if observe is not None:
                observe(prepared, memory)

        if prepared.cluster is not None and runs is not None:
            outcome = execute_on_cluster(prepared, runs)
        else:
            outcome = execute_prepared(prepared, view, cupy_loader, observe=seen)
        done.append(pending._replace(outcome=outcome))
    return done


def reservations(
    view: View, options: Options, env: Mapping[str, str], compare: bool = False
) -> list[Reservation]:
    """What TensorFlow would reserve on each visible GPU at start, with no graph: under the
    policy `options` sets, or with `compare` under each of `compared_options(options)`
    (`gpuplace mem --compare` without a graph). A policy that resolves to one listed before is
    kept as a Reservation naming it (`repeat_of`), as in `run_policies`."""
    _expect_view(view, "reservations")
    _expect(options, Options, "reservations: options must be an Options", "gpuplace.Options()")
    if compare:
        check_comparable(options.allow_growth)
    variants = compared_options(options) if compare else [("", options)]
    out: list[Reservation] = []
    by_name: dict[str, str] = {}
    for label, variant in variants:
        policy = resolve_policy({}, variant.memory_flags(), env)
        if compare:
            _check_compared(policy, "shows")
        name = policy.name()
        logical = tuple(logical_gpus(view.gpus, policy))
        out.append(Reservation(label, name, logical, by_name.get(name, "")))
        by_name.setdefault(name, label)
    return out
