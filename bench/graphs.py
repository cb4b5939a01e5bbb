"""Generated graphs for the placement-strategy benchmark, built straight from the model (no loader).

- `chain`: a deep MLP, one layer after another (nothing runs in parallel);
- `wide`: `width` independent layer stacks that mix with their neighbour every `mix` layers;
- `transformer`: a stack of blocks, each with parallel attention heads and a feed-forward part
  split in chunks (Megatron-style), weights as variables;
- `random_dag`: `n` ops, each reading one to three of the `window` ops before it (matmul, add_n,
  tanh), with a few random inputs at the start;
- `fan`: one input read by groups of `width` matmuls, each group summed by an add_n (a wide
  fan-out and fan-in: the shape whose copies once made the balanced placer quadratic);
- `sized(shape, n)`: about `n` ops of any of these shapes, with tensors small enough that a
  million ops fit 8 simulated K520s (bench_strategy.py's scaling run).

All tensors are float32 matrices; outputs are computed here as the loader would infer them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import MappingProxyType

from gpuplace.graph.model import Graph, Op, TensorRef, TensorSpec

_NO_ATTRS: MappingProxyType[str, object] = MappingProxyType({})
_MATMUL = MappingProxyType({"transpose_a": False, "transpose_b": False})
_MATMUL_T = MappingProxyType({"transpose_a": False, "transpose_b": True})


class Builder:
    """Appends ops in execution order; each returns its name."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.shape: dict[str, tuple[int, ...]] = {}

    def add(self, name: str, op_type: str, inputs: Sequence[str], shape: tuple[int, ...],
            attrs: MappingProxyType[str, object] = _NO_ATTRS) -> str:  # fmt: skip
        refs = tuple(TensorRef(i) for i in inputs)
        self.ops.append(Op(name, op_type, refs, attrs=attrs, outputs=(TensorSpec(shape),)))
        self.shape[name] = shape
        return name

    def source(self, name: str, shape: tuple[int, ...], op_type: str = "random_normal") -> str:
        return self.add(name, op_type, (), shape)

    def matmul(self, name: str, a: str, b: str, transpose_b: bool = False) -> str:
        rows = self.shape[a][0]
        cols = self.shape[b][0] if transpose_b else self.shape[b][1]
        return self.add(name, "matmul", (a, b), (rows, cols), _MATMUL_T if transpose_b else _MATMUL)

    def same(self, name: str, op_type: str, *inputs: str) -> str:
        """An op whose output has its first input's shape (relu, add, add_n, softmax)."""
        return self.add(name, op_type, inputs, self.shape[inputs[0]])

    def graph(self, fetch: Sequence[str]) -> Graph:
        return Graph(ops=tuple(self.ops), fetch=tuple(TensorRef(f) for f in fetch))


def chain(layers: int = 200, batch: int = 1024, width: int = 2048) -> Graph:
    """x -> (matmul with a weight variable, relu) x layers."""
    b = Builder()
    h = b.source("x", (batch, width))
    for i in range(layers):
        w = b.source(f"w{i}", (width, width), "variable")
        h = b.same(f"relu{i}", "relu", b.matmul(f"mm{i}", h, w))
    return b.graph([h])


def wide(
    width: int = 64, layers: int = 16, mix: int = 4, batch: int = 512, size: int = 2048
) -> Graph:
    """`width` stacks of (matmul, relu); every `mix` layers each stack adds its neighbour's."""
    b = Builder()
    prev = [b.source(f"x{i}", (batch, size)) for i in range(width)]
    for layer in range(layers):
        cur = []
        for i in range(width):
            h = prev[i]
            if layer % mix == mix - 1:
                h = b.same(f"mix{layer}_{i}", "add", h, prev[(i + 1) % width])
            w = b.source(f"w{layer}_{i}", (size, size), "variable")
            cur.append(b.same(f"r{layer}_{i}", "relu", b.matmul(f"m{layer}_{i}", h, w)))
        prev = cur
    return b.graph([b.same("out", "add_n", *prev)])


def transformer(blocks: int = 4, heads: int = 16, tokens: int = 2048, dim: int = 2048,
                chunks: int = 8) -> Graph:  # fmt: skip
    """Blocks of multi-head attention and a chunked feed-forward part, with residual adds."""
    b = Builder()
    x = b.source("x", (tokens, dim))
    dh, ff = dim // heads, 4 * dim // chunks
    for k in range(blocks):
        outs = []
        for h in range(heads):
            p = f"b{k}h{h}"
            q, kk, v = (
                b.matmul(f"{p}{t}", x, b.source(f"{p}w{t}", (dim, dh), "variable")) for t in "qkv"
            )
            probs = b.same(f"{p}p", "softmax", b.matmul(f"{p}s", q, kk, transpose_b=True))
            outs.append(b.matmul(f"{p}o", probs, v))
        cat = b.add(f"b{k}cat", "concat", outs, (tokens, dim), MappingProxyType({"axis": 1}))
        proj = b.matmul(f"b{k}proj", cat, b.source(f"b{k}wo", (dim, dim), "variable"))
        r = b.same(f"b{k}res", "add", x, proj)
        parts = []
        for c in range(chunks):
            p = f"b{k}f{c}"
            hid = b.same(
                f"{p}r", "relu", b.matmul(f"{p}a", r, b.source(f"{p}w1", (dim, ff), "variable"))
            )
            parts.append(b.matmul(f"{p}b", hid, b.source(f"{p}w2", (ff, dim), "variable")))
        x = b.same(f"b{k}out", "add", r, b.same(f"b{k}ffn", "add_n", *parts))
    return b.graph([x])


def random_dag(n: int = 10_000, window: int = 64, size: int = 1024, seed: int = 0) -> Graph:
    """`n` ops over [size, size] tensors; each reads 1-3 of the `window` ops before it."""
    rng = random.Random(seed)
    b = Builder()
    names = [b.source(f"in{i}", (size, size)) for i in range(min(16, n))]
    while len(names) < n:
        i = len(names)
        lo = max(0, i - window)
        k = rng.choice((1, 2, 2, 3))
        picks = rng.sample(range(lo, i), min(k, i - lo))
        ins = [names[p] for p in picks]
        if len(ins) == 2:
            names.append(b.matmul(f"op{i}", ins[0], ins[1]))
        elif len(ins) == 3:
            names.append(b.same(f"op{i}", "add_n", *ins))
        else:
            names.append(b.same(f"op{i}", "tanh", ins[0]))
    return b.graph([names[-1]])


def fan(n: int = 10_000, width: int = 1000, size: int = 256) -> Graph:
    """x, then groups of `width` matmuls x @ x, each group summed by an add_n; the sums summed."""
    b = Builder()
    x = b.source("x", (size, size))
    sums: list[str] = []
    group: list[str] = []
    while len(b.ops) < n - 1:
        group.append(b.matmul(f"m{len(b.ops)}", x, x))
        if len(group) == width or len(b.ops) == n - 2:
            sums.append(b.same(f"s{len(b.ops)}", "add_n", *group))
            group = []
    return b.graph([b.same("out", "add_n", *sums)])


def transformer_ops(heads: int = 16, chunks: int = 8) -> int:
    """Ops in one `transformer` block: 9 per head, 5 per chunk, 6 more."""
    return 9 * heads + 5 * chunks + 6


SHAPES = ("chain", "fan", "random DAG", "transformer")


def sized(shape: str, n: int) -> Graph:
    """About `n` ops of `shape` (one of SHAPES), with small tensors."""
    if shape == "chain":
        return chain(layers=max(1, n // 3), batch=64, width=64)
    if shape == "fan":
        return fan(n, width=1000, size=256)
    if shape == "random DAG":
        return random_dag(n=n, size=256)
    if shape == "transformer":
        blocks = max(1, n // transformer_ops(8, 4))
        return transformer(blocks=blocks, heads=8, tokens=64, dim=128, chunks=4)
    raise ValueError(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
