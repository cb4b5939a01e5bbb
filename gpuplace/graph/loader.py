"""Load a graph spec (YAML or JSON) into a `Graph`: names, devices, inputs, order, shapes.

Stages, each linear in the number of ops: parse the text (`parse.py`, GC paused); walk the
`graph:` list into entries (`walk.py`: scopes, towers, TF default names); resolve each input to
the ops it names (inputs may name ops defined later); order the ops topologically (Kahn's
algorithm, only when some input points forward; a cycle is reported as its path); infer shapes
in that order, which also checks them. Any bad input raises one BadInput naming the file:line,
the op, the field, the value and the fix; nothing is returned half-built.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..devices.cluster_spec import ClusterDescription, cluster_block
from ..echo import clip_middle, sample, show
from ..errors import BadInput, Message, Setting, Term
from ..gc_pause import gc_paused
from ..limits import SPEC_SIZE_ENV, Limits, read_bytes, utf8_text
from ..parse import Document, key_line, parse
from ..parse_json import json_lines
from .config import read_config
from .expansion import count_ops
from .model import Columns, Config, Graph, Op, TensorRef, TensorSpec, Wiring
from .onnx_import import is_onnx_path, load_onnx, looks_like_onnx
from .ops import suggest
from .replicate import FlagSettings, Synthetic, replica_error
from .resolve import Inputs, Lookup, direct, new_op, new_ref, order, resolve_inputs
from .scope import Scope, SpecError
from .walk import Entry, Walker
from .writes import WriteRules, write_rules

TOP_KEYS = ("config", "graph", "fetch", "cluster")
WRAPPER_KEYS = ("model", "dims", "devices", "config")  # an ONNX model wrapped (docs/onnx.md)
EXAMPLE = "e.g. graph: [{name: a, op: constant, value: 1.0}]"


def load(path: str | Path, **options: Any) -> Graph:
    """Read and load a spec file; relative paths inside it (load, save) start at its folder
    (`save`'s at `out_dir` when given); `options` are `loads`' keywords. A file larger than
    `limits.spec_bytes` is refused before it is read."""
    path = Path(path)
    if is_onnx_path(path):
        _no_replicate(options.get("replicate"))
        return load_onnx(path, dims=options.get("dims"), limits=options.get("limits"))
    limit = (options.get("limits") or Limits()).spec_bytes
    hint = f"set {SPEC_SIZE_ENV} to raise the limit (e.g. {SPEC_SIZE_ENV}=4GiB)"
    name = clip_middle(str(path))
    data = read_bytes(path, limit, f"cannot read spec {name!r}", hint)
    if looks_like_onnx(data[:2]):  # a pipe (`<(cat model.onnx)`) is read once: its bytes tell
        _no_replicate(options.get("replicate"))
        return load_onnx(path, dims=options.get("dims"), limits=options.get("limits"), data=data)
    text = utf8_text(data, name)
    del data  # its bytes, as large as the text: not held while the spec is loaded
    return loads(text, str(path), base=str(path.parent), **options)


def loads(
    text: str,
    source: str = "<spec>",
    base: str | None = None,
    *,
    gpus: Callable[[Config], int] | None = None,
    replicate: int | str | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    allow_writes_anywhere: bool = False,
    limits: Limits | None = None,
    dims: Mapping[str, int] | None = None,
) -> Graph:
    """Load spec text; `source` names it in messages, `base` anchors relative paths (cwd).

    `gpus(config)` is the number of GPUs the process will have (what `replicate: {gpus: all}`
    means); `replicate` (`--replicate N|all`) wraps a graph with no replicate block in one,
    and messages name it as a Setting (`--replicate 2`, or `Options.replicate=2`). A `save`
    writes under `out_dir` if given, else under `base`, and nowhere else unless
    `allow_writes_anywhere` (`writes.py`: refused here, before anything runs). `limits` bound
    what the text may expand to (`Limits()`: the defaults; `read_limits(env)`: as the
    environment sets them). `dims` binds an ONNX model's symbolic dims (`--dim batch=8`), over
    a wrapper's `dims:` (a spec with `model: file.onnx`, see `_wrapper`).
    """
    base = os.path.abspath(base or os.curdir)
    extra = Extra(
        gpus,
        replicate,
        write_rules(base, out_dir, allow_writes_anywhere),
        limits or Limits(),
        dims or {},
    )
    with gc_paused():
        doc = parse(text, source, extra.limits.aliases)
        if doc.data is None:
            what = "is empty" if not text.strip() else "holds no data (only comments or null)"
            raise BadInput(
                f"{source}: the file {what}; a spec needs a 'graph:' list of ops, {EXAMPLE}"
            )
        try:
            return _build(doc, source, base, extra)
        except SpecError as err:
            lines: Mapping[int, int] | None = doc.lines
            if lines is None and err.where is not None and type(err.where) is not FetchAt:
                # JSON: read again, with lines
                err, lines = _with_lines(err, text, source, base, extra)
            raise _locate(err, source, lines, text) from None
        except RecursionError:
            raise BadInput(f"{source}: the spec is nested too deeply") from None


def _with_lines(
    err: SpecError, text: str, source: str, base: str, extra: Extra
) -> tuple[SpecError, Mapping[int, int] | None]:
    """The same error again from a JSON read that keeps each object's line."""
    try:
        doc = Document(*json_lines(text))
        _build(doc, source, base, extra)
    except SpecError as again:
        return again, doc.lines
    except RecursionError:
        pass
    return err, None


class FetchAt:
    """Where a `fetch:` error is: its item `index` (None: the key) in the spec's top mapping
    `data`; the line is found on error (`key_line`), else the mapping's own."""

    def __init__(self, index: int | None, data: object) -> None:
        self.index = index
        self.data = data


def _locate(
    err: SpecError, source: str, lines: Mapping[int, int] | None, text: str = ""
) -> BadInput:
    """`file:line: message`, citing the first of two clashing mappings when there is one.

    An op gpuplace wrote for a replicate block has the line of the block, else of the user's op
    it stands for (`--replicate` writes the block); a fetch error has the line of its item."""
    where = err.where
    if type(where) is FetchAt:
        line = key_line(text, "fetch", where.index) or _line(where.data, lines)
    else:
        line = _line(where, lines)
    other = _line(err.other, lines)
    at = f"{source}:{line}" if line else source
    also = f" (first defined at line {other})" if other else ""
    parts = err.message.parts if isinstance(err.message, Message) else (err.message,)
    one_line = [p.replace("\n", "\\n") if isinstance(p, str) else p for p in parts]  # any value
    located = BadInput(Message(f"{at}: ", *one_line, also))
    located.exit_code = err.exit_code  # 1 when the machine, not the spec, is the problem
    return located


def _line(where: object, lines: Mapping[int, int] | None) -> int | None:
    """The line of a mapping; for an op gpuplace wrote, of its block or of the op it stands for."""
    if not lines or where is None:
        return None
    line = lines.get(id(where))
    if line is None and type(where) is Synthetic:
        line = lines.get(id(where.block)) or lines.get(id(where.anchor))
    return line


class Extra(NamedTuple):
    """What the caller adds to a spec: its GPU count (by config), `--replicate`, where its
    `save` ops may write, and the limits."""

    gpus: Callable[[Config], int] | None
    replicate: int | str | None
    writes: WriteRules
    limits: Limits
    dims: Mapping[str, int]


def _wrap_replicate(items: list[Any], count: int | str) -> list[Any]:
    """`--replicate N|all`: the graph's top-level placeholders stay outside and are split; the
    rest becomes the body of one replicate block."""
    if any(type(i) is dict and "replicate" in i for i in items):
        raise SpecError(
            Message(
                Setting("replicate"), ": the graph already has a replicate: block; drop ",
                Term.REPLICATE_AGAIN,
            )
        )  # fmt: skip
    inputs = [i for i in items if type(i) is dict and i.get("op") == "placeholder"]
    names = [i.get("name") for i in inputs]
    if not inputs or not all(type(n) is str for n in names):
        raise SpecError(
            Message(
                Setting("replicate"), ": the graph has no named top-level placeholder to split "
                "along the batch; add one, or write a replicate: block with split: [...]",
            )
        )  # fmt: skip
    body = [i for i in items if not (type(i) is dict and i.get("op") == "placeholder")]
    settings = FlagSettings({"gpus": count, "split": names}, Setting("replicate", count))
    return [*inputs, {"replicate": settings, "graph": body}]


def _build(doc: Document, source: str, base: str, extra: Extra) -> Graph:
    data = doc.data
    if type(data) is not dict:
        raise SpecError(f"expected a mapping with 'graph:' (a list of ops), got {show(data)}")
    if "model" in data:
        return _wrapper(data, source, base, extra)
    for key in data:
        if key not in TOP_KEYS:
            raise SpecError(f"unknown top-level key {show(key)}{suggest(key, TOP_KEYS)}", data)
    if "graph" not in data:
        raise SpecError(f"the spec has no 'graph:'; a spec needs a list of ops, {EXAMPLE}", data)
    items = data["graph"]
    if type(items) is not list or not items:
        raise SpecError(
            f"'graph' must be a non-empty list of ops, e.g. [{{name: a, op: constant, value: 1.0}}],"
            f" got {show(items)}",
            data,
        )
    config = read_config(data.get("config"), data)
    cluster = _cluster(data, source)
    if extra.replicate is not None:
        items = _wrap_replicate(items, extra.replicate)
    walker = Walker(base, extra.gpus(config) if extra.gpus else None, extra.writes)
    count_ops(items, walker.num_gpus, extra.limits.ops)
    if extra.replicate is None and data.get("fetch") is None:
        done = direct(items, walker, doc.lines)
        if done is not None:
            made = tuple(done.ops)
            # each name once, in op order (`_direct` checks so): the names are its keys
            found = Columns(list(done.by_name), done.types, done.devices, done.outputs)
            wired = Wiring(made, done.by_name, done.producers, done.arity, columns=found)
            return Graph(
                made, done.fetch, config, source, fetch_given=False, cluster=cluster, wiring=wired
            )
    top = Scope()
    walker.top(items, top)
    entries = walker.entries
    names = Lookup(entries)
    inputs, colocate, forward = resolve_inputs(entries, names)
    run_order = order(entries, inputs) if forward else range(len(entries))
    outputs, wired = _infer(entries, inputs, colocate, run_order, doc.lines)
    fetch, targets = _fetch(data, top, names, inputs, outputs, run_order)
    given = data.get("fetch") is not None
    return Graph(wired.ops, fetch, config, source, targets, given, cluster, wiring=wired)


def _cluster(data: dict[str, Any], source: str) -> ClusterDescription | None:
    """The spec's `cluster:` block (devices/cluster_spec.py), its errors naming the line."""
    if "cluster" not in data:
        return None
    block = data["cluster"]
    try:
        return cluster_block(
            block, "cluster", f"the cluster: block of {source}", "the spec's cluster: block"
        )
    except BadInput as err:
        message = str(err).removeprefix("cluster: ")  # the loader adds the file and line
        raise SpecError(message, block if type(block) is dict else data) from None


def _wrapper(data: dict[str, Any], source: str, base: str, extra: Extra) -> Graph:
    """`model: bert.onnx` with `dims: {batch: 8}`, `devices: {encoder.layer.0: /gpu:1}` and
    `config:`: the ONNX model, its dims bound (`--dim` wins) and ops pinned."""
    for key in data:
        if key not in WRAPPER_KEYS:
            raise SpecError(
                f"unknown key {show(key)} beside 'model:'{suggest(key, WRAPPER_KEYS)}", data
            )
    model, dims, devices = data["model"], data.get("dims") or {}, data.get("devices") or {}
    if type(model) is not str or not model:
        raise SpecError(f"model: expected the path of an .onnx file, got {show(model)}", data)
    if type(dims) is not dict or not all(
        type(k) is str and type(v) is int and v >= 1 for k, v in dims.items()
    ):
        raise SpecError(
            f"dims: expected names mapped to sizes >= 1, e.g. {{batch: 8}}, got {show(dims)}", data
        )
    if type(devices) is not dict:
        raise SpecError(
            f"devices: expected op names or module paths mapped to devices, e.g. "
            f"{{encoder.layer.0: /gpu:1}}, got {show(devices)}",
            data,
        )
    config = read_config(data.get("config"), data)
    _no_replicate(extra.replicate)
    path = os.path.join(base, os.path.expanduser(model))
    return load_onnx(
        path, dims={**dims, **extra.dims}, devices=devices, config=config, limits=extra.limits
    )


def _no_replicate(replicate: int | str | None) -> None:
    """`--replicate` splits a spec's placeholders; an ONNX model has no replicate block yet."""
    if replicate is not None:
        raise BadInput(
            Message(
                Setting("replicate", replicate), ": replicates a YAML or JSON spec; an ONNX "
                "model is placed as exported (bind a larger batch with --dim instead)",
            )
        )  # fmt: skip


def _infer(
    entries: list[Entry],
    inputs: list[Inputs],
    colocate: dict[int, str],
    order: Sequence[int],
    lines: Mapping[int, int] | None,
) -> tuple[list[tuple[TensorSpec, ...]], Wiring]:
    """The inferred outputs (shape errors in TensorFlow's words) and the ops in execution order
    (`Wiring.ops`) with their inputs as indices of that order."""
    outputs: list[tuple[TensorSpec, ...]] = [()] * len(entries)
    first = [new_ref(e.name) for e in entries]  # output 0 of each op: most inputs
    device = _colocated_devices(entries, colocate)
    ops: list[Op] = []
    at = [0] * len(entries)  # entry -> its place in `order`
    producers: list[int] = []
    read: list[int] = []  # the output each input reads
    arity: list[int] = []
    names: list[str] = []  # `model.Columns`, with the ops' outputs
    types: list[str] = []
    devices: list[str] = []
    made: list[tuple[TensorSpec, ...]] = []
    for i in order:
        e = entries[i]
        specs, refs = [], []  # one loop for both: most ops have one or two inputs
        try:
            for j, k in inputs[i]:
                specs.append(outputs[j][k])
                refs.append(new_ref(first[j].op, k) if k else first[j])
                producers.append(at[j])
                read.append(k)
        except IndexError:
            if type(e.raw) is Synthetic:  # a merge of a body op without outputs (save)
                raise replica_error(e.raw, None, "") from None
            raise _no_output(e, inputs[i], outputs, entries) from None
        try:
            out = e.opdef.infer_fn(e.name, e.tf_type, e.attrs, tuple(specs))
        except BadInput as err:
            if type(e.raw) is Synthetic:  # a replica's slice or a merge: the block's words
                raise replica_error(e.raw, specs, str(err)) from None
            raise SpecError(str(err), e.raw) from None
        outputs[i] = out
        line = lines.get(id(e.raw)) if lines is not None else None
        dev = device.get(i, e.device)
        at[i] = len(ops)
        arity.append(len(refs))
        type_name = e.opdef.name
        ops.append(new_op(e.name, type_name, tuple(refs), dev, e.attrs, out, colocate.get(i), line))
        names.append(e.name)
        types.append(type_name)
        devices.append(dev)
        made.append(out)
    done = tuple(ops)
    index = {name: p for p, name in enumerate(names)}
    found = Columns(names, types, devices, made)
    return outputs, Wiring(done, index, producers, arity, read if any(read) else None, found)


def _colocated_devices(entries: list[Entry], colocate: dict[int, str]) -> dict[int, str]:
    """The device of each colocated op whose target has one: TF1's `Graph._create_op_helper`
    sets an op made under `tf.colocate_with(target)` to the target's device (after the device
    functions: it wins over the op's own `tf.device`); a chain takes its first target's."""
    if not colocate:
        return {}
    index = {e.name: i for i, e in enumerate(entries)}
    out: dict[int, str] = {}
    for i in sorted(colocate):
        j = index.get(colocate[i])
        if j is not None:
            target = out.get(j, entries[j].device)
            if target:
                out[i] = target
    return out


def _no_output(
    e: Entry, ins: Inputs, outputs: list[tuple[TensorSpec, ...]], entries: list[Entry]
) -> SpecError:
    j, k = next((j, k) for j, k in ins if k >= len(outputs[j]))
    has = len(outputs[j])
    producer = entries[j]
    outs = f"{has} output{'s' if has != 1 else ''}" if has else "no outputs"
    fix = f"use {producer.name}:0 to {producer.name}:{has - 1}" if has else "it cannot be an input"
    return SpecError(
        f"op '{e.name}': input '{producer.name}:{k}' does not exist: {producer.name} "
        f"({producer.opdef.name}) has {outs}; {fix}",
        e.raw,
    )


def _fetch(
    data: dict[str, Any],
    top: Scope,
    names: Lookup,
    inputs: list[Inputs],
    outputs: list[tuple[TensorSpec, ...]],
    order: Sequence[int],
) -> tuple[tuple[TensorRef, ...], tuple[str, ...]]:
    """(`fetch:` resolved at the top level, else every output no op consumes, in run order;
    the ops without outputs it names, as targets run for their effect: `session.run(save_op)`)."""
    entries = names.entries
    raw = data.get("fetch")
    targets: list[str] = []
    if raw is None:
        used = bytearray(len(entries))  # output 0 consumed
        used_other: set[tuple[int, int]] = set()
        for ins in inputs:
            for j, k in ins:
                if k:
                    used_other.add((j, k))
                else:
                    used[j] = 1
        pairs = _unconsumed(used, used_other, outputs, order)
    else:
        items = [raw] if type(raw) is str else raw
        if type(items) is not list or not items:
            raise SpecError(
                f"fetch: expected a list of op names, e.g. [c], got {show(raw)}",
                FetchAt(None, data),
            )
        pairs = []
        for i, text in enumerate(items):
            where = FetchAt(i if type(raw) is list else None, data)
            found = names.refs(top, text, "fetch", where)
            for j, k in found:
                if not outputs[j] and k == 0 and ":" not in str(text):
                    targets.append(entries[j].name)  # nothing to return: run it
                elif k >= len(outputs[j]):
                    raise _no_fetch(text, j, k, entries, inputs, outputs, where)
                else:
                    pairs.append((j, k))
    return tuple(new_ref(entries[j].name, k) for j, k in pairs), tuple(targets)


def _no_fetch(
    text: str,
    j: int,
    k: int,
    entries: list[Entry],
    inputs: list[Inputs],
    outputs: list[tuple[TensorSpec, ...]],
    where: FetchAt,
) -> SpecError:
    """`fetch: [text]` names output k of op j, which it does not have; in the words written."""
    e, has = entries[j], len(outputs[j])
    name = text.rpartition(":")[0] if ":" in text else text
    if has:
        fix = (
            f"{has} outputs; fetch {name}:0 to {name}:{has - 1}"
            if has > 1
            else f"1 output; fetch {name}"
        )
        return SpecError(f"fetch {text!r}: op {name!r} ({e.opdef.name}) has {fix}", where)
    fed = [entries[i].name + (f":{o}" if o else "") for i, o in inputs[j]]
    instead = f" instead: fetch: [{sample(fed)}]" if fed else " instead"
    if e.opdef.name == "save":
        path = e.raw.get("path")
        writes = f"writes its input to {path!r}" if type(path) is str else "writes its input"
        return SpecError(
            f"fetch {text!r}: op {name!r} is a save, which has no output to fetch (it {writes} "
            f"and outputs nothing); name it alone to run it (fetch: [{name}]), or fetch the "
            f"tensor it saves{instead}",
            where,
        )
    return SpecError(
        f"fetch {text!r}: op {name!r} ({e.opdef.name}) has no output to fetch; fetch one of "
        f"its inputs{instead}",
        where,
    )


def _unconsumed(
    used: bytearray,
    used_other: set[tuple[int, int]],
    outputs: list[tuple[TensorSpec, ...]],
    order: Sequence[int],
) -> list[tuple[int, int]]:
    """The default fetch: (op, output) pairs no op consumes, in run order; `used` marks each
    op's output 0 consumed, `used_other` the other outputs consumed."""
    return [
        (i, k)
        for i in order
        if not used[i] or len(outputs[i]) > 1  # skips most ops: one output, consumed
        for k in range(len(outputs[i]))
        if not (used[i] if k == 0 else (i, k) in used_other)
    ]
