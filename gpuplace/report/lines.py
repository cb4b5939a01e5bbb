"""One-line messages shared by `run`, `plan` and `mem`: the title naming the machine, the
`not run` line of a pruned graph, and the warning for a run without a GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..devices.model import View
from ..echo import sample

if TYPE_CHECKING:
    from ..results import Prepared


SIM = " [simulated]"


def title(view: View, strategy: str = "tensorflow", verb: str = "Plan") -> str:
    """`Plan on the simulated machine 4xK520 (strategy tensorflow)`, or `Run on this machine ...`."""
    m = view.machine
    where = f"the simulated machine {m.description}" if m.simulated else "this machine"
    return f"{verb} on {where} (strategy {strategy})"


def pruned_line(prepared: Prepared) -> str | None:
    """`fetch [b] needs 2 of 6 ops; not run (as TensorFlow's session.run): p, q, big, bigr`, or
    None when every op runs."""
    pruned = prepared.pruned
    if not pruned:
        return None
    fetch = sample([*(str(ref) for ref in prepared.graph.fetch), *prepared.graph.targets])
    kept = len(prepared.graph.ops)
    return (
        f"fetch [{fetch}] needs {kept} of {kept + len(pruned)} ops; not run (as TensorFlow's "
        f"session.run): {sample(pruned)}"
    )


def no_gpu_warning(view: View) -> str:
    """The warning for a graph run without a GPU: why none is visible, and what would show some
    (CUDA_VISIBLE_DEVICES hiding them, a simulated machine without any, or no driver here)."""
    from .devices import notice

    note = notice(view)
    if note:
        reason = note.removeprefix("No GPU listed: ").split(". ")[0].rstrip(".")
    elif view.machine.simulated:
        reason = f"the simulated machine {view.machine.description} has none"
    else:
        reason = "none found"
    if view.machine.gpus and view.cuda_visible_devices is not None:  # the variable hides them
        reason = reason.replace(" (unset it to see all)", "")
        hint = "unset CUDA_VISIBLE_DEVICES to see them"
    elif view.machine.gpus:  # MIG-enabled GPUs without instances: `gpuplace devices` says more
        hint = "gpuplace devices says why"
    elif view.machine.simulated:
        hint = "give --machine a machine with GPUs (e.g. --machine 4xK520)"
    else:
        hint = "--machine 4xK520 simulates GPUs"
    return f"no GPU visible ({reason}): every op runs on CPU:0; {hint}"
