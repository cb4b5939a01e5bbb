"""The outside world a command may read, in one object: `AppContext`, built by the group in
`ctx.obj` (tests inject another). Commands read no globals."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..devices import Gpu, Machine, View, available_memory, discover, view
from ..devices.cluster_spec import (
    CLUSTER_ENV,
    ClusterDescription,
    cluster_option,
    is_cluster_machine,
    machine_cluster,
)
from ..devices.libcuda import OrderProbe, probe_order
from ..devices.model import ProbedOrder
from ..devices.nvml import NvmlLoader, load_pynvml
from ..errors import BadInput

if TYPE_CHECKING:
    from ..execute.backends import CupyLoader

MACHINE_ENV = "GPUPLACE_MACHINE"


@dataclass(eq=False, repr=False)
class AppContext:
    """Everything a command may read from the outside world. Compared by identity, and with
    no generated repr (it would print the whole environment): the methods a dataclass
    generates are exec'd at every start-up (CONTRIBUTING.md)."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    nvml_loader: NvmlLoader = load_pynvml
    cupy_loader: CupyLoader | None = None
    is_terminal: bool | None = None  # None: ask stdout
    stderr_is_terminal: bool | None = None  # None: ask stderr (progress bars go there)
    machine_spec: str | None = None  # --machine; None: GPUPLACE_MACHINE, else the real machine
    cluster_spec: str | None = None  # --cluster; None: GPUPLACE_CLUSTER, else none
    debug: bool = False
    json_errors: bool = False  # the command line asked for JSON: errors get a document too
    installed: Callable[[str], str | None] | None = None  # distribution -> version; None: look
    host_memory: Callable[[], int | None] = available_memory  # bytes this host can still give
    order_probe: OrderProbe = probe_order  # asks the CUDA driver its GPU order (real GPUs only)
    # what a command's large results are handed to once printed, so that the console script,
    # which ends without the interpreter's teardown, does not free them one object at a time
    # first (a 100,000-op run: 20-40 ms); None: they are freed as the command returns
    kept: list[object] | None = field(default=None, repr=False)
    _orders: dict[tuple[str, ...], ProbedOrder] = field(default_factory=dict, repr=False)

    def keep(self, *results: object) -> None:
        """Hold `results` for as long as this context lives (see `kept`)."""
        if self.kept is not None:
            self.kept.extend(results)

    def installed_version(self, name: str) -> str | None:
        from ..devices.cuda_match import installed_version

        return (self.installed or installed_version)(name)

    def terminal(self) -> bool:
        if self.is_terminal is None:
            try:
                return sys.stdout is not None and bool(sys.stdout.isatty())
            except (OSError, ValueError):  # closed or broken stdout
                return False
        return self.is_terminal

    def stderr_terminal(self) -> bool:
        if self.stderr_is_terminal is None:
            try:
                return sys.stderr is not None and bool(sys.stderr.isatty())
            except (OSError, ValueError):
                return False
        return self.stderr_is_terminal

    def machine_source(self) -> tuple[str | None, str]:
        """(spec, where it came from): --machine wins over a non-empty GPUPLACE_MACHINE."""
        if self.machine_spec is not None:
            return self.machine_spec, "--machine"
        spec = self.env.get(MACHINE_ENV)
        return (spec, MACHINE_ENV) if spec else (None, "")

    def machine(self) -> Machine:
        """The machine (for a simulated cluster, `--machine '2x(4xV100-16GB)'`, its first
        task's: `cluster_description` gives them all)."""
        spec, source = self.machine_source()
        if spec is not None and is_cluster_machine(spec):
            spec = machine_cluster(spec, source or "--machine").tasks[0].machine
        return discover(spec, self.nvml_loader, source or "--machine", self._order)

    def cluster_description(self) -> ClusterDescription | None:
        """The cluster the command works on: --cluster (else a non-empty GPUPLACE_CLUSTER), or a
        simulated one from --machine (`2x(4xV100-16GB)`, `4xV100-16GB+1xT4`); None: one
        process (the spec's own cluster: block still applies)."""
        machine, machine_source = self.machine_source()
        clustered = machine is not None and is_cluster_machine(machine)
        given, source = self.cluster_spec, "--cluster"
        if given is None and self.env.get(CLUSTER_ENV):
            given, source = self.env[CLUSTER_ENV], CLUSTER_ENV
        if given is not None:
            if clustered:
                raise BadInput(
                    f"{source} and {machine_source} both describe a cluster ({machine_source} "
                    "with several hosts); give one of them"
                )
            return cluster_option(given, source)
        if clustered and machine is not None:
            return machine_cluster(machine, machine_source)
        return None

    def _order(self, gpus: Sequence[Gpu]) -> ProbedOrder:
        """The driver's order, asked once per set of GPUs (`mem` views the machine twice)."""
        key = tuple(g.uuid for g in gpus)
        if key not in self._orders:
            self._orders[key] = self.order_probe(gpus)
        return self._orders[key]

    def view(self) -> View:
        return view(self.machine(), self.env, self.host_memory)
