"""One training step's memory per device, from the graph: what `--training OPTIMIZER` sizes.

The forward graph is what gpuplace places and runs; a training step adds, on the same devices:
- **weights**: every resident `variable` output, for the whole step (under mixed precision its
  float32 values are held in the low dtype, 2 bytes per element);
- **gradients**: one per trainable weight, on the weight's device, from the backward step of the
  weight's last forward reader (its first gradient contribution) to the optimizer's update at the
  end of the step;
- **optimizer**: the optimizer's slots, float32, one buffer per slot per trainable weight
  (`OPTIMIZERS`: sgd 0, momentum 1, adam and adamw 2), and under mixed precision the float32
  master copy of each weight (DeepSpeed counts it with the optimizer states), whole step;
- **activations**: every forward output (and every copy of one to another device), from the step
  that makes it to its last forward reader or, when a gradient op reads it (`GRADIENT_NEEDS`),
  to that gradient op's step;
- **transient**: the gradients flowing back through the activations: an op's output gradient
  (accumulated over its readers' contributions) lives from its first contribution to the op's
  own backward step, and a contribution made on another device, or to a tensor that already has
  one, is held for the step that makes it.

The step is a timeline of 2N steps for N forward ops: forward step i is op i (graph order, as
the executor runs it), and the backward pass runs the forward schedule in reverse, op i's
gradient at step 2N-1-i on op i's device. Only ops that depend on a trainable weight and lead to
a fetched tensor (the loss) have a gradient op; gradients flow through float tensors only.
Sizes are rounded to 256 B as the ledgers round them. Per device, the peak is the most bytes in
use at any step, and the breakdown is what each part holds at that step (they sum to the peak).

Everything is linear in ops and inputs: one forward and one backward pass over the flattened
graph (`placement.flat.Flat`, the data the estimate and the balanced placer share), then a few
numpy passes over the buffers' events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import BadInput, Message, RuntimeFailure, Setting
from ..graph.model import DTYPES, TRAINING_DTYPES, TRAINING_OPTIMIZERS
from ..placement.flat import Flat
from ..units import allocation_size, human

# slots per weight: sgd 0, momentum 1 (velocity), adam and adamw 2 (first and second moments)
OPTIMIZERS: Mapping[str, int] = dict(zip(TRAINING_OPTIMIZERS, (0, 1, 2, 2), strict=True))
PRECISIONS = TRAINING_DTYPES  # the weights' and activations' dtype
SLOT_BYTES = 4  # optimizer slots and master weights are float32
LOW_BYTES = 2  # float16 and bfloat16
FLOATS = frozenset({"float16", "float32", "float64"})
PARTS = ("weights", "gradients", "optimizer", "activations", "transient")
WEIGHTS, GRADIENTS, OPTIMIZER, ACTIVATIONS, TRANSIENT = range(len(PARTS))


@dataclass(frozen=True)
class Needs:
    """What an op's gradient op reads of the forward pass: its inputs, its outputs."""

    inputs: bool
    outputs: bool


NOTHING, INPUTS, OUTPUTS, BOTH = Needs(False, False), Needs(True, False), Needs(False, True), Needs(True, True)  # fmt: skip

# The gradient rule table: per op type, the forward tensors its gradient needs (TensorFlow's
# registered gradients, `math_grad.py` / `nn_grad.py`). An op type not listed (an imported
# model's op, say) is assumed to need both, which can only overstate what is kept.
GRADIENT_NEEDS: Mapping[str, Needs] = {
    "matmul": INPUTS,  # dA = dC B^T, dB = A^T dC
    "mul": INPUTS,  # d(xy) = y dx + x dy
    "div": INPUTS,  # d(x/y) = dx / y - x dy / y^2
    "log": INPUTS,  # d log x = dx / x
    "exp": OUTPUTS,  # d exp x = exp(x) dx
    "tanh": OUTPUTS,  # 1 - y^2
    "sigmoid": OUTPUTS,  # y (1 - y)
    "relu": OUTPUTS,  # dy where y > 0
    "softmax": OUTPUTS,  # (dy - sum(dy y)) y
    "reduce_max": BOTH,  # the gradient goes where x equals the max
    "add": NOTHING, "sub": NOTHING, "neg": NOTHING, "add_n": NOTHING, "average_n": NOTHING,
    "reduce_sum": NOTHING, "reduce_mean": NOTHING,  # shapes only
    "identity": NOTHING, "print": NOTHING, "cast": NOTHING, "transpose": NOTHING,
    "reshape": NOTHING, "concat": NOTHING, "split": NOTHING, "batch_slice": NOTHING,
    # ONNX operators (an imported model), by the same rules as their PyTorch autograd formulas
    "MatMul": INPUTS, "Gemm": INPUTS, "Conv": INPUTS, "Mul": INPUTS, "Div": INPUTS,
    "Pow": INPUTS, "Log": INPUTS, "Erf": INPUTS, "Gelu": INPUTS,  # d gelu(x) needs x
    "LayerNormalization": INPUTS, "BatchNormalization": INPUTS,  # x (and its statistics)
    "Gather": INPUTS, "GatherND": INPUTS, "Where": INPUTS,  # indices / condition
    "Relu": OUTPUTS, "Tanh": OUTPUTS, "Sigmoid": OUTPUTS, "Exp": OUTPUTS, "Sqrt": OUTPUTS,
    "Softmax": OUTPUTS, "LogSoftmax": OUTPUTS,
    "MaxPool": BOTH, "GlobalMaxPool": BOTH, "ReduceMax": BOTH, "Max": BOTH, "Min": BOTH,
    "Add": NOTHING, "Sub": NOTHING, "Neg": NOTHING, "Identity": NOTHING, "Dropout": NOTHING,
    "Cast": NOTHING, "Reshape": NOTHING, "Transpose": NOTHING, "Concat": NOTHING,
    "Split": NOTHING, "Slice": NOTHING, "Squeeze": NOTHING, "Unsqueeze": NOTHING,
    "Flatten": NOTHING, "Expand": NOTHING, "ReduceSum": NOTHING, "ReduceMean": NOTHING,
    "AveragePool": NOTHING, "GlobalAveragePool": NOTHING,
}  # fmt: skip


@dataclass(frozen=True)
class Training:
    """A training step to size: the optimizer (`OPTIMIZERS`) and the weights' and activations'
    dtype (`PRECISIONS`; float16 or bfloat16 is mixed precision, with float32 master weights)."""

    optimizer: str
    dtype: str = "float32"

    @property
    def slots(self) -> int:
        return OPTIMIZERS[self.optimizer]

    @property
    def mixed(self) -> bool:
        return self.dtype != "float32"

    def label(self) -> str:
        """`adam`, or `adam, float16 with float32 master weights`."""
        mixed = f", {self.dtype} with float32 master weights" if self.mixed else ""
        return self.optimizer + mixed


def resolve_training(
    optimizer: object, dtype: object, config: Mapping[str, Any] | None = None
) -> Training | None:
    """The step to size: `optimizer` and `dtype` (Options.training, Options.training_dtype, the
    flags), else the spec's `config.training`; None when neither asks for one. BadInput names
    the setting and what it accepts."""
    config = config or {}
    optimizer = optimizer if optimizer is not None else config.get("optimizer")
    dtype = dtype if dtype is not None else config.get("dtype")
    if optimizer is None:
        if dtype is not None:
            raise BadInput(
                Message(
                    Setting("training_dtype", dtype), " sizes a training step in mixed "
                    "precision: give the optimizer too (e.g. ", Setting("training", "adam"), ")",
                )
            )  # fmt: skip
        return None
    if optimizer not in OPTIMIZERS:
        raise BadInput(
            Message(Setting("training", optimizer, quote=True),
                    f": not an optimizer; expected one of {', '.join(OPTIMIZERS)}")
        )  # fmt: skip
    if dtype is not None and dtype not in PRECISIONS:
        raise BadInput(
            Message(Setting("training_dtype", dtype, quote=True),
                    f": expected one of {', '.join(PRECISIONS)}")
        )  # fmt: skip
    return Training(str(optimizer), str(dtype or "float32"))


@dataclass(frozen=True)
class TrainingMemory:
    """One device's training step: bytes each part holds at the device's peak (they sum to
    `peak`), and where the peak falls (`op`, in the `phase` forward or backward)."""

    device: str
    weights: int = 0
    gradients: int = 0
    optimizer: int = 0
    activations: int = 0
    transient: int = 0
    op: str = ""
    phase: str = ""

    @property
    def peak(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.transient

    def parts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in PARTS}


@dataclass
class _Backward:
    """What the backward pass of a flattened graph reads and makes (see the module docstring).

    `origin[i]`: the buffer each output of op i is ((op, output); a print forwards its input's);
    `backward[i]`: op i has a gradient op; `kept[(op, k)]`: the last step (backward order) a
    gradient op reads that forward buffer; `last_reader[(op, k)]`: the last forward op whose
    gradient op contributes to that buffer's gradient; `trainable[i]`: a weight with a gradient.
    """

    origin: list[tuple[tuple[int, int], ...]]
    backward: list[bool]
    trainable: list[bool]
    kept: dict[tuple[int, int], int]
    last_reader: dict[tuple[int, int], int]


def _backward(flat: Flat) -> _Backward:
    """One forward pass (origins, which outputs depend on a weight) and one backward pass (which
    ops lead to a fetched tensor), then the gradient ops' reads."""
    ops, n = flat.graph.ops, len(flat.names)
    origin: list[tuple[tuple[int, int], ...]] = []
    grads = [False] * n  # its float outputs depend on a trainable weight
    resident, is_print = flat.resident, flat.is_print
    for i, (op, reads) in enumerate(zip(ops, flat.inputs, strict=True)):
        outputs = op.outputs
        if is_print[i]:
            origin.append(tuple([origin[p][k] for p, k in reads]))
        else:
            origin.append(
                ((i, 0),) if len(outputs) == 1 else tuple([(i, k) for k in range(len(outputs))])
            )
        if outputs and outputs[0].dtype in FLOATS:  # an op's outputs share a dtype
            if resident[i]:
                grads[i] = True
            else:
                for p, _ in reads:
                    if grads[p]:
                        grads[i] = True
                        break
    loss = [False] * n  # leads to a fetched tensor
    for p, _ in flat.fetch:
        loss[p] = True
    for j in range(n - 1, -1, -1):
        if loss[j]:
            for p, _ in flat.inputs[j]:
                loss[p] = True
    wants = [g and lo for g, lo in zip(grads, loss, strict=True)]
    backward = [w and not flat.resident[i] and not flat.is_print[i] and bool(flat.inputs[i])
                for i, w in enumerate(wants)]  # fmt: skip
    trainable = [w and flat.resident[i] for i, w in enumerate(wants)]
    kept: dict[tuple[int, int], int] = {}
    last_reader: dict[tuple[int, int], int] = {}
    bwd = 2 * n - 1
    for j in range(n - 1, -1, -1):  # backward order: the first write is the latest step
        if not backward[j]:
            continue
        needs = GRADIENT_NEEDS.get(ops[j].type, BOTH)
        for p, k in flat.inputs[j]:
            src = origin[p][k]
            if needs.inputs:
                kept.setdefault(src, bwd - j)
            if wants[src[0]] and ops[src[0]].outputs[src[1]].dtype in FLOATS:
                last_reader.setdefault(src, j)
        if needs.outputs:
            for k in range(len(ops[j].outputs)):
                kept.setdefault((j, k), bwd - j)
    return _Backward(origin, backward, trainable, kept, last_reader)


def _sizes(flat: Flat, training: Training) -> list[tuple[int, ...]]:
    """Each op's output buffers as allocated: float32 ones in the low dtype when mixed."""
    if not training.mixed:
        return list(flat.sizes)
    out: list[tuple[int, ...]] = []
    for op, made, sizes in zip(flat.graph.ops, flat.out_bytes, flat.sizes, strict=True):
        low = tuple(
            allocation_size(n * LOW_BYTES // 4) if s.dtype == "float32" else allocation_size(n)
            for s, n in zip(op.outputs, made, strict=True)
        )
        out.append(low if sizes else ())
    return out


def _state(op_outputs: Sequence[Any], training: Training) -> int:
    """The optimizer's bytes for one trainable weight: its slots (and, mixed, its master copy),
    each a float32 buffer of the weight's elements."""
    elements = sum(s.nbytes // DTYPES[s.dtype] for s in op_outputs)
    buffers = training.slots + int(training.mixed)
    return buffers * allocation_size(elements * SLOT_BYTES)


Buffer = tuple[int, int, int, int, int]  # device, size, first and last step held, part (PARTS)


def _buffers(flat: Flat, device_of: Sequence[int], training: Training) -> list[Buffer]:
    """Every buffer of one training step (see the module docstring); some may be empty."""
    n = len(flat.names)
    last = bwd = 2 * n - 1  # the last step; op i's gradient runs at bwd - i
    plan = _backward(flat)
    kept = plan.kept
    sizes = _sizes(flat, training)
    out: list[Buffer] = []
    add = out.append
    copies: dict[tuple[int, int, int], list[int]] = {}  # (op, output, device) -> [first, last]
    fetched: dict[int, list[int]] = {}  # op -> its fetched outputs (the loss)
    for p, k in flat.fetch:
        fetched.setdefault(p, []).append(k)
    for i in range(n):
        dev = device_of[i]
        if flat.resident[i]:
            for size in sizes[i]:
                add((dev, size, 0, last, WEIGHTS))
            if plan.trainable[i]:
                reader = max(plan.last_reader.get((i, k), -1) for k in range(len(sizes[i])))
                for size in sizes[i] if reader >= 0 else ():  # no gradient reaches it: none
                    add((dev, size, bwd - reader, last, GRADIENTS))
                add((dev, _state(flat.graph.ops[i].outputs, training), 0, last, OPTIMIZER))
        else:
            for k, (size, end) in enumerate(zip(sizes[i], flat.ends[i], strict=True)):
                add((dev, size, i, max(end, kept.get((i, k), -1)), ACTIVATIONS))
        for p, k in flat.inputs[i]:  # forward copies to this op's device
            q, m = plan.origin[p][k]
            if device_of[q] != dev:
                life = copies.setdefault((q, m, dev), [i, i])
                life[1] = i
        if plan.backward[i]:
            _gradient_flow(flat, plan, sizes, device_of, i, fetched.get(i, ()), out)
    for (q, m, dev), (first, end) in copies.items():
        add((dev, sizes[q][m], first, end, ACTIVATIONS))
    return out


def _gradient_flow(flat: Flat, plan: _Backward, sizes: Sequence[tuple[int, ...]],
                   device_of: Sequence[int], j: int, fetched: Sequence[int],
                   out: list[Buffer]) -> None:  # fmt: skip
    """Op j's output gradients (accumulated until its backward step; `fetched`: its outputs
    that are the loss) and the contributions its gradient op makes that are held apart for
    that step."""
    n = len(flat.names)
    bwd, dev = 2 * n - 1, device_of[j]
    for k, size in enumerate(sizes[j]):
        reader = plan.last_reader.get((j, k))
        if reader is not None:
            out.append((dev, size, bwd - reader, bwd - j, TRANSIENT))
        elif k in fetched:  # the loss: its gradient is seeded as the backward pass starts
            out.append((dev, size, n, bwd - j, TRANSIENT))
    for p, k in flat.inputs[j]:
        q, m = plan.origin[p][k]
        if plan.last_reader.get((q, m)) is None:
            continue
        first = plan.last_reader[(q, m)] == j and device_of[q] == dev
        if not first:  # added into the gradient already there, or sent to its device
            out.append((dev, sizes[q][m], bwd - j, bwd - j, TRANSIENT))


def training_memory(
    flat: Flat, device_of: Sequence[int], devices: Sequence[str], training: Training
) -> list[TrainingMemory]:
    """One training step of `flat` with op i on `devices[device_of[i]]`: per device (in
    `devices` order), the bytes each part holds at its peak."""
    import numpy as np

    buffers = _buffers(flat, device_of, training)
    n, count = len(flat.names), len(devices)
    columns = list(zip(*buffers, strict=True)) or [(), (), (), (), ()]
    exact = sum(columns[1]) >= 2**62  # past int64: exact Python ints
    kind: Any = object if exact else np.int64
    device, start, end, part = (np.asarray(columns[c], dtype=np.int64) for c in (0, 2, 3, 4))
    size = np.asarray(columns[1], dtype=kind)
    time = np.concatenate([start * 2, end * 2 + 1])
    where = np.concatenate([device, device])
    delta = np.concatenate([size, -size])
    order = np.lexsort((time, where))
    time, where, delta = time[order], where[order], delta[order]
    held = np.cumsum(delta) if len(delta) else delta
    bounds = np.searchsorted(where, np.arange(count + 1))
    at = np.full(count, -1, dtype=np.int64)  # each device's step at its peak
    for d in range(count):
        lo, hi = int(bounds[d]), int(bounds[d + 1])
        if lo == hi:
            continue
        before = held[lo - 1] if lo else 0
        top = int(np.argmax(held[lo:hi] - before))
        if held[lo + top] - before > 0:  # holds something: its peak's step
            at[d] = int(time[lo + top]) // 2
    peak_at = at[device] if len(device) else device
    alive = (start <= peak_at) & (end >= peak_at)
    parts = np.zeros((count, len(PARTS)), dtype=kind)
    np.add.at(parts, (device[alive], part[alive]), size[alive])
    out = []
    for d, name in enumerate(devices):
        step = int(at[d])
        op, phase = ("", "") if step < 0 else (
            (flat.names[step], "forward") if step < n else (flat.names[2 * n - 1 - step], "backward")
        )  # fmt: skip
        bytes_of = {what: int(v) for what, v in zip(PARTS, parts[d], strict=True)}
        out.append(TrainingMemory(name, op=op, phase=phase, **bytes_of))
    return out


def training_flat(training: Training) -> Callable[[Flat], Flat]:
    """What a placer charges for a training step (`--strategy balanced --training`): each
    trainable weight's buffer holds the weight, its gradient and its optimizer state, and every
    forward buffer a gradient op reads lives to the end of the forward pass (the backward pass
    comes after it); under mixed precision float32 buffers are held in the low dtype."""

    def adjust(flat: Flat) -> Flat:
        plan = _backward(flat)
        sizes = _sizes(flat, training)
        ends = list(flat.ends)
        for i in {i for i, _ in plan.kept}:  # kept for the backward pass
            if not flat.resident[i]:
                ends[i] = tuple(
                    flat.last if (i, k) in plan.kept else e for k, e in enumerate(flat.ends[i])
                )
        for i, trainable in enumerate(plan.trainable):
            if trainable:
                state = _state(flat.graph.ops[i].outputs, training)
                sizes[i] = (2 * sizes[i][0] + state, *(2 * s for s in sizes[i][1:]))
        return replace(flat, sizes=tuple(sizes), given_ends=tuple(ends))

    return adjust


def training_oom(
    steps: Sequence[TrainingMemory], limits: Mapping[str, int | None], training: Training
) -> RuntimeFailure | None:
    """The first device whose training step would pass its limit (`limits` by device name), as
    one error naming the device, its parts, the limit and the ways out; None when all fit."""
    for step in steps:
        limit = limits.get(step.device)
        if limit is None or step.peak <= limit:
            continue
        parts = ", ".join(f"{name} {human(value)}" for name, value in step.parts().items())
        return RuntimeFailure(
            Message(
                f"a training step ({training.label()}) would need {human(step.peak)} "
                f"({step.peak:,} B) on {step.device} at the {step.phase} of op '{step.op}' "
                f"({parts}), more than its limit {human(limit)} ({limit:,} B); predicted, nothing "
                "was run.",
            ),
            Message(
                "spread it with ", Setting("strategy", "balanced"), ", take an optimizer with "
                "fewer slots (", Setting("training", "sgd"), " holds none), or make the batch "
                "smaller",
            ),
        )  # fmt: skip
    return None
