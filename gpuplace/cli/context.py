"""The outside world a command may read, in one object: `AppContext`, built by the group in
`ctx.obj` (tests inject another). Commands read no globals."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..devices import Gpu, Machine, View, available_memory, discover, view
from ..devices.libcuda import OrderProbe, probe_order
from ..devices.model import ProbedOrder
from ..devices.nvml import NvmlLoader, load_pynvml

if TYPE_CHECKING:
    from ..execute.backends import CupyLoader

MACHINE_ENV = "GPUPLACE_MACHINE"


@dataclass
class AppContext:
    """Everything a command may read from the outside world."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    nvml_loader: NvmlLoader = load_pynvml
    cupy_loader: CupyLoader | None = None
    is_terminal: bool | None = None  # None: ask stdout
    machine_spec: str | None = None  # --machine; None: GPUPLACE_MACHINE, else the real machine
    debug: bool = False
    json_errors: bool = False  # the command line asked for JSON: errors get a document too
    installed: Callable[[str], str | None] | None = None  # distribution -> version; None: look
    host_memory: Callable[[], int | None] = available_memory  # bytes this host can still give
    order_probe: OrderProbe = probe_order  # asks the CUDA driver its GPU order (real GPUs only)
    _orders: dict[tuple[str, ...], ProbedOrder] = field(default_factory=dict, repr=False)

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

    def machine_source(self) -> tuple[str | None, str]:
        """(spec, where it came from): --machine wins over a non-empty GPUPLACE_MACHINE."""
        if self.machine_spec is not None:
            return self.machine_spec, "--machine"
        spec = self.env.get(MACHINE_ENV)
        return (spec, MACHINE_ENV) if spec else (None, "")

    def machine(self) -> Machine:
        spec, source = self.machine_source()
        return discover(spec, self.nvml_loader, source or "--machine", self._order)

    def _order(self, gpus: Sequence[Gpu]) -> ProbedOrder:
        """The driver's order, asked once per set of GPUs (`mem` views the machine twice)."""
        key = tuple(g.uuid for g in gpus)
        if key not in self._orders:
            self._orders[key] = self.order_probe(gpus)
        return self._orders[key]

    def view(self) -> View:
        return view(self.machine(), self.env, self.host_memory)
