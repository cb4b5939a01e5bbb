"""Resolving inputs and ordering ops: stages of the loader between the walk and inference.

Each input names an op as seen from the op's namespace (its tower copy, then the enclosing
scopes, then every op's global name), `name:k` picks output k, and a name defined in towers
gives one input per copy. Inputs may name ops defined later in the file; then the ops are
ordered by Kahn's algorithm (linear), and a cycle is reported as its path.

`direct` does walk, resolve and inference in one pass for the common shape of a large spec (a
flat list of ops whose inputs name ops above them); anything else goes the general way.
"""

from __future__ import annotations

import string
import sys
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, NamedTuple, NoReturn

from ..echo import ITEMS, sample, show
from .model import Op, TensorRef, TensorSpec
from .ops import EMPTY, REGISTRY, OpDef, suggest
from .scope import UNCONSTRAINED, Names, Scope, SpecError
from .walk import Entry, Walker, is_op_name

Inputs = list[tuple[int, int]]  # (entry index, output index) per input
# An int argument of a function resolve.pxd declares: compiled, a plain `int` annotation is
# Cython's own exact int type, which the declaration (an object) contradicts.
Int = int


class Lookup:
    """Resolves a name seen from a scope: local names first, then every op's global name."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self._global: dict[str, int] | None = None

    def find(self, scope: Scope, name: str) -> list[int] | None:
        found = scope.find(name)
        if found is None:
            if self._global is None:
                self._global = {e.name: i for i, e in enumerate(self.entries)}
            index = self._global.get(name)
            found = None if index is None else [index]
        return found

    def refs(self, scope: Scope, text: Any, what: str, where: object) -> Inputs:
        """`name` or `name:k` -> (entry, output) pairs; a body's name gives one per copy."""
        if type(text) is not str:
            raise SpecError(f"{what} {show(text)} is not an op name (a string)", where)
        name, index = text, 0
        if ":" in text:
            name, _, digits = text.rpartition(":")
            if not (digits.isascii() and digits.isdigit()):
                raise SpecError(
                    f"{what} {text!r} is not NAME or NAME:OUTPUT (e.g. s:1 for split s's second "
                    "output)",
                    where,
                )
            index = int(digits)
        found = self.find(scope, name)
        if found is None:
            known = self._visible(scope)
            raise SpecError(f"{what} {name!r} names no op{suggest(name, known, 'ops')}", where)
        return [(j, index) for j in found]

    def _visible(self, scope: Scope) -> list[str]:
        seen = {e.name for e in self.entries}
        chain: Scope | None = scope
        while chain is not None:
            seen.update(chain.names)
            chain = chain.parent
        return sorted(seen)


def resolve_inputs(
    entries: list[Entry], names: Lookup
) -> tuple[list[Inputs], dict[int, str], bool]:
    """Each entry's inputs as (entry, output) pairs, its colocation target, and whether any
    input points forward (then the file order is not an execution order)."""
    all_inputs: list[Inputs] = []
    colocate: dict[int, str] = {}
    forward = False
    for i, e in enumerate(entries):
        raw = e.raw.get("inputs")
        inputs: Inputs = []
        if raw is not None:
            if type(raw) is not list:
                raise SpecError(
                    f"op '{e.name}': inputs must be a list of op names, e.g. [a, b], got "
                    f"{show(raw)}",
                    e.raw,
                )
            local = e.scope.names
            for text in raw:
                found = local.get(text) if type(text) is str else None
                if found is not None and len(found) == 1:
                    j = found[0]
                    inputs.append((j, 0))
                    forward = forward or j >= i
                    continue
                if found is None:  # outer scopes, global names, `name:k`, or an error
                    pairs = names.refs(e.scope, text, f"op '{e.name}': input", e.raw)
                else:
                    pairs = [(j, 0) for j in found]
                forward = forward or any(j >= i for j, _ in pairs)
                inputs.extend(pairs)
        high = e.opdef.max_inputs
        if not e.opdef.min_inputs <= len(inputs) <= (len(inputs) if high is None else high):
            _bad_arity(e, inputs, raw)
        all_inputs.append(inputs)
        if "colocate_with" in e.raw:
            colocate[i] = _colocation(i, e, names)
    return all_inputs, colocate, forward


def _bad_arity(e: Entry, inputs: Inputs, raw: Any) -> NoReturn:
    low, high = e.opdef.min_inputs, e.opdef.max_inputs
    if high is None:
        takes = f"at least {low} input{'s' if low > 1 else ''}"
    elif low == high:
        takes = f"{low} input{'s' if low != 1 else ''}" if low else "no inputs"
    else:
        takes = f"{low} to {high} inputs"
    copies = (
        " (a name defined in towers means all its copies)" if raw and len(inputs) > len(raw) else ""
    )
    example = ", ".join("abcdefgh"[: min(max(low, 1), 8)])
    fix = "remove 'inputs'" if high == 0 else f"list {takes}, e.g. inputs: [{example}]"
    raise SpecError(
        f"op '{e.name}' ({e.opdef.name}) takes {takes}, got {len(inputs)} "
        f"(inputs: {show(raw or [])}){copies}; {fix}",
        e.raw,
    )


def _colocation(i: int, e: Entry, names: Lookup) -> str:
    text = e.raw["colocate_with"]
    found = names.refs(e.scope, text, f"op '{e.name}': colocate_with", e.raw)
    if len(found) != 1 or found[0][1] != 0 or found[0][0] == i:
        raise SpecError(
            f"op '{e.name}': colocate_with {show(text)} must name one other op (not an output "
            "like s:1, nor a name defined in towers, which means every copy)",
            e.raw,
        )
    return names.entries[found[0][0]].name


def order(entries: list[Entry], inputs: list[Inputs]) -> list[int]:
    """Kahn's algorithm, first-in first-out from the file order; a cycle is an error."""
    n = len(entries)
    waiting = [len(ins) for ins in inputs]
    consumers: list[list[int]] = [[] for _ in range(n)]
    for i, ins in enumerate(inputs):
        for j, _ in ins:
            consumers[j].append(i)
    ready = deque(i for i in range(n) if not waiting[i])
    order = []
    while ready:
        j = ready.popleft()
        order.append(j)
        for i in consumers[j]:
            waiting[i] -= 1
            if not waiting[i]:
                ready.append(i)
    if len(order) < n:
        _cycle(entries, inputs, waiting)
    return order


def _cycle(entries: list[Entry], inputs: list[Inputs], waiting: list[int]) -> None:
    """Raise naming one cycle, in data-flow order (a -> b: a is an input of b)."""
    at = next(i for i, count in enumerate(waiting) if count)
    seen: dict[int, int] = {}
    path: list[int] = []
    while at not in seen:
        seen[at] = len(path)
        path.append(at)
        at = next(j for j, _ in inputs[at] if waiting[j])
    loop = [*path[seen[at] :], at][::-1]
    text = sample([entries[i].name for i in loop], " -> ")
    size = f" (a cycle of {len(loop) - 1:,} ops)" if len(loop) > ITEMS else ""
    raise SpecError(
        f"cycle in the graph: {text}{size}; an op cannot depend on its own output, remove one "
        "of these inputs",
        entries[loop[0]].raw,
    )


# Per-op objects are made as instances of a plain class with the same slots, whose fields are
# stored one by one (a slot store, the fastest Python has), and which then become the frozen
# dataclass they stand for (`__class__`: the layouts are the same): a third of the time of
# setting each slot through its descriptor, and a sixth of the dataclass's own `__init__`,
# which goes through `object.__setattr__`; the class has no `__init__` (a call with arguments
# costs more than the stores). A test checks they equal `Op(...)`/`TensorRef(...)`.


class _NewOp:
    __slots__ = tuple(f.name for f in fields(Op))
    name: str
    type: str
    inputs: tuple[TensorRef, ...]
    device: str
    attrs: Mapping[str, Any]
    outputs: tuple[TensorSpec, ...]
    colocate_with: str | None
    line: int | None
    module: str


class _NewRef:
    __slots__ = tuple(f.name for f in fields(TensorRef))
    op: str
    index: int


def new_op(
    name: str,
    type_: str,
    inputs: tuple[TensorRef, ...],
    device: str,
    attrs: Mapping[str, Any],
    outputs: tuple[TensorSpec, ...],
    colocate_with: str | None,
    line: Int | None,
    module: str = "",
) -> Op:
    """`Op(name, type_, inputs, device, attrs, outputs, colocate_with, line, module)`."""
    op = _NewOp()
    op.name = name
    op.type = type_
    op.inputs = inputs
    op.device = device
    op.attrs = attrs
    op.outputs = outputs
    op.colocate_with = colocate_with
    op.line = line
    op.module = module
    op.__class__ = Op  # type: ignore[assignment]
    return op  # type: ignore[return-value]


def new_ref(op: str, index: Int = 0) -> TensorRef:
    """`TensorRef(op, index)`."""
    ref = _NewRef()
    ref.op = op
    ref.index = index
    ref.__class__ = TensorRef  # type: ignore[assignment]
    return ref  # type: ignore[return-value]


_OPDEFS = dict(REGISTRY)  # a plain dict: faster to read than the registry's mapping proxy


class Direct(NamedTuple):
    """A spec loaded in one pass: ops in file order (which is their run order), each op's
    outputs, per op whether its output 0 is consumed, the default fetch, and the inputs as
    indices (`model.Wiring`: each name's op, the op each input reads, each op's
    number of inputs)."""

    ops: list[Op]
    outputs: list[tuple[TensorSpec, ...]]
    used: bytearray
    by_name: dict[str, int]
    producers: list[int]
    arity: list[int]
    fetch: tuple[TensorRef, ...]  # the outputs no op reads, in run order
    types: list[str]  # each op's type and requested device (`model.Columns`)
    devices: list[str]


def direct(items: list[Any], walker: Walker, lines: Mapping[int, int] | None) -> Direct | None:
    """Walk, resolve and infer `graph:` in one pass, or None when it needs the general path.

    The common case: every item is an op whose inputs are plain names of ops above it (no
    blocks, towers, replicate, `name:k` or forward inputs). Then file order is run order, every
    name is global, and nothing has to be kept for later stages. Anything else, errors
    included, gives None, and the general path starts over and reports what it finds, in its
    own order, with its own words.
    """
    try:
        return _direct(items, walker, Names(), lines)
    except Exception:  # any error: the general path finds it again and says it its way
        return None


def _direct(
    items: list[Any],
    walker: Walker,
    names: Names,
    lines: Mapping[int, int] | None,
) -> Direct | None:
    """`direct`'s pass; its loop runs on C integers where compiled (resolve.pxd)."""
    index: dict[str, int] = {}  # name -> op; at the top level every name is global
    # Written names are kept here as written, and generated ones skip only generated ones: TF's
    # rule gives the same names exactly when no two names are equal but for case (a written
    # name equal to an earlier name, generated or not, is renamed: `Const_1_1`, `A_1`; an
    # unnamed op after a written `Const` is `Const_1`). That is checked once at the end, on
    # the names lowered in one call; otherwise the general path names them.
    ops: list[Op] = []
    outputs: list[tuple[TensorSpec, ...]] = []
    firsts: list[TensorRef] = []  # output 0 of each op: shared by all its consumers
    producers: list[int] = []  # the op each input reads, input by input (index's own ints)
    arity: list[int] = []
    types: list[str] = []  # each op's type and device: `model.Columns`, with `outputs`
    devices_of: list[str] = []
    used = bytearray(len(items))
    # An item of nothing but `name`, `op`, `inputs` and `device` (most of a large spec) has
    # what its op type alone says: its definition, TF type and default attrs, worked out once
    # per type (`_plain`); what inference makes of it then depends on its input specs alone,
    # so it is asked once per op type and input specs, in the type's own table (each distinct
    # spec numbered, once, by `_canonical`: the key is the input's number, an int already
    # made, or a tuple of small ints, not specs, whose hash is a Python call); each device
    # written is parsed once.
    plain: dict[Any, _Plain] = {}
    canon: dict[TensorSpec, int] = {}  # each distinct spec -> its number, its place in `distinct`
    distinct: list[TensorSpec] = []
    numbers: list[int] = []  # per op, its output 0's number (-1: it has no outputs)
    # per op, the 1-tuple of its output 0 once an op reads it alone: shared by all such
    # readers (a fan's 100,000 ops read one input), made at the first
    alone: list[tuple[TensorRef] | None] = [None] * len(items)
    devices: dict[str, str] = {}  # each device written, as TF writes it
    get_line = None if lines is None else lines.get
    i = 0  # a counter, not enumerate(): compiled, a C integer
    for item in items:
        if type(item) is not dict:
            return None
        op: dict[str, Any] = item
        kind = op.get("op")
        name = op.get("name")
        raw = op.get("inputs")
        has_device = "device" in op
        # only `name`, `op`, `inputs` and `device` (each key counted once: a null is no key here)
        keys = (kind is not None) + (name is not None) + (raw is not None) + has_device
        if keys == len(op):
            found = plain.get(kind) if type(kind) is str else None
            if found is None:
                found = _plain(kind, item, walker, plain)
                if found is None:
                    return None
            opdef, type_name, tf_type, tf_type_of, given, low, high, inferred = found
            if tf_type_of is not None:
                tf_type = tf_type_of(item)
            if name is None:
                name = names.unique(tf_type)
            elif type(name) is not str:  # the rule for names is checked at the end, at once
                return None
            shared = given is not None
            if given is None:  # an unseeded random op: its seed is a hash of its name
                given = opdef.normalize(name, item, walker.base, walker.writes)
            attrs = given
            device, colocate = "", None
            if has_device:
                text = op["device"]
                known = devices.get(text) if type(text) is str else None
                if known is None:  # null is no device; else raises for a bad one
                    known = walker.device(text, UNCONSTRAINED, item, f"op '{name}'").text
                    if type(text) is str:
                        devices[text] = known
                device = known
        else:
            head = _head(item, walker, names)
            if head is None:
                return None
            opdef, tf_type, name, device, attrs = head
            type_name = opdef.name
            low = opdef.min_inputs
            high = sys.maxsize if opdef.max_inputs is None else opdef.max_inputs
            shared = False
            colocate = None
            if "colocate_with" in op:
                target = op["colocate_with"]
                j = index.get(target) if type(target) is str else None
                if j is None:
                    return None
                colocate = ops[j].name
                device = ops[j].device or device  # TF1 copies the target's device onto the op
        if raw is None:
            raw = ()
        elif type(raw) is not list:
            return None
        at = len(producers)  # this op's inputs in `producers`
        p = -1
        for text in raw:
            producer = index.get(text) if type(text) is str else None
            if producer is None:  # defined below, `name:k`, an outer name or an error
                return None
            p = producer  # compiled, a C integer: the lists below are indexed in C
            if not outputs[p]:  # nothing to read: the general path says so
                return None
            used[p] = 1
            producers.append(producer)
        count = len(producers) - at
        if not low <= count <= high:
            return None
        q = producers[at] if count == 2 else p  # the first of two inputs (p: the last)
        if count == 1:
            lone = alone[p]
            if lone is None:
                lone = alone[p] = (firsts[p],)
            refs: tuple[TensorRef, ...] = lone
        elif count == 2:
            refs = (firsts[q], firsts[p])
        else:
            refs = tuple([firsts[j] for j in producers[at:]])
        if shared:  # the op type's own attrs: inferred once per type and input specs
            if count == 1:
                key: Any = numbers[p]
            elif count == 2:
                key = (numbers[q], numbers[p])
            else:
                key = tuple([numbers[j] for j in producers[at:]])
            if tf_type_of is not None:  # the TF type varies with the attrs
                key = (tf_type, key)
            found_out = inferred.get(key)
            if found_out is None:
                made = opdef.infer_fn(name, tf_type, attrs, _specs(outputs, producers, at))
                found_out = inferred[key] = _canonical(made, canon, distinct)
        else:
            made = opdef.infer_fn(name, tf_type, attrs, _specs(outputs, producers, at))
            found_out = _canonical(made, canon, distinct)
        out, number = found_out
        if index.setdefault(name, i) != i:  # bound twice: the general path decides
            return None
        firsts.append(new_ref(name))
        outputs.append(out)
        numbers.append(number)
        arity.append(count)
        types.append(type_name)
        devices_of.append(device)
        line = None if get_line is None else get_line(id(item))
        ops.append(new_op(name, type_name, refs, device, attrs, out, colocate, line))
        i += 1  # noqa: SIM113
    if _bad_names(index):
        return None  # a name against TF's rule, or two equal but for case (TF renames one)
    fetch: list[TensorRef] = []  # the default fetch: every output no op reads, in run order
    i = 0
    for out in outputs:
        if out:
            if not used[i]:
                fetch.append(firsts[i])
            for k in range(1, len(out)):  # no input names an output past 0 here
                fetch.append(new_ref(ops[i].name, k))
        i += 1  # noqa: SIM113
    return Direct(ops, outputs, used, index, producers, arity, tuple(fetch), types, devices_of)


def _specs(
    outputs: list[tuple[TensorSpec, ...]], producers: list[int], at: Int
) -> tuple[TensorSpec, ...]:
    """The specs an op reads: output 0 of each of its producers (`producers[at:]`)."""
    return tuple([outputs[j][0] for j in producers[at:]])


def _canonical(
    out: tuple[TensorSpec, ...], canon: dict[TensorSpec, int], distinct: list[TensorSpec]
) -> tuple[tuple[TensorSpec, ...], int]:
    """`out` with each spec the first equal one seen (`distinct`, its place there in `canon`:
    new specs join both), and output 0's number (-1: no outputs)."""
    made: list[TensorSpec] = []
    first = -1
    for spec in out:
        number = canon.setdefault(spec, len(distinct))
        if number == len(distinct):
            distinct.append(spec)
        made.append(distinct[number])
        if first < 0:
            first = number
    return tuple(made), first


# opdef, its name and TF type, and its `tf_type_of` (kept here: an attribute read costs more
# than a tuple's item), attrs (None: made per op, a seed from its name), fewest and most
# inputs, and what inference made of its input specs (`_direct`'s key -> outputs and output
# 0's number)
_Plain = tuple[
    OpDef,
    str,
    str,
    Callable[[Mapping[str, Any]], str] | None,
    Mapping[str, Any] | None,
    int,
    int,
    dict[Any, tuple[tuple[TensorSpec, ...], int]],
]


def _plain(kind: Any, item: Any, walker: Walker, plain: dict[Any, _Plain]) -> _Plain | None:
    """What every item of only `name`, `op`, `inputs` and `device` with op `kind` has (kept in
    `plain`); None when `kind` is no op type. Raises where the op type needs an attr."""
    opdef = _OPDEFS.get(kind) if type(kind) is str else None
    if opdef is None:
        return None
    attrs: Mapping[str, Any] | None = EMPTY
    if "seed" in opdef.attrs:
        attrs = None  # an unseeded random op's seed is a hash of its name
    elif opdef.attrs:
        attrs = opdef.normalize("", item, walker.base, walker.writes)  # the name is in no value
    high = sys.maxsize if opdef.max_inputs is None else opdef.max_inputs
    found = plain[kind] = (
        opdef,
        opdef.name,
        opdef.tf_type,
        opdef.tf_type_of,
        attrs,
        opdef.min_inputs,
        high,
        {},
    )
    return found


# The characters of TF's rule for op names (walk.NAME_RULE), as bytes to delete
# (`bytes.translate`), and those it allows only after the first (a test checks `_bad_names`
# against `is_op_name`)
_NAME_BYTES = (string.ascii_letters + string.digits + "_.-/>").encode("ascii")
_NOT_FIRST = ("_", "-", "/", ">", "\n")  # "\n": no empty name


def _bad_names(names: Mapping[str, int]) -> bool:
    """Whether one of `names` (distinct) breaks TF's rule for op names (`is_op_name`), or two
    are equal but for case; checked on their lines joined, in a few calls that each run in C
    over all of them (a regex would step through each character): deleting the rule's
    characters must leave just the newlines between names, and no line may start with one
    the rule allows only after the first (the rule has no newline in a name). Names are
    compared only when some name has a capital letter."""
    text = "\n".join(names)
    if not text.isascii() or text[:1] in ("", *_NOT_FIRST) or text[-1] == "\n":
        return True
    if text.encode("ascii").translate(None, _NAME_BYTES) != b"\n" * (len(names) - 1):
        return True
    if any("\n" + c in text for c in _NOT_FIRST):
        return True
    low = text.lower()
    return low != text and len(set(low.split("\n"))) < len(names)


def _head(
    item: Any, walker: Walker, names: Names
) -> tuple[OpDef, str, str, str, Mapping[str, Any]] | None:
    """An op item's definition, TF type, name, device and attrs, as the walk finds them at the
    top level; None when the item is not a plain op. Raises on bad devices and attrs."""
    if type(item) is not dict:
        return None
    kind = item.get("op")
    opdef = _OPDEFS.get(kind) if type(kind) is str else None
    if opdef is None or not opdef.fields.issuperset(item):
        return None
    tf_type = opdef.tf_type if opdef.tf_type_of is None else opdef.tf_type_of(item)
    name = item.get("name")
    if name is None:
        if "name" in item:
            return None
        name = names.unique(tf_type)
    elif type(name) is not str or not is_op_name(name):
        return None
    device = ""
    if "device" in item:
        device = walker.device(item["device"], UNCONSTRAINED, item, f"op '{name}'").text
    attrs = opdef.normalize(name, item, walker.base, walker.writes) if opdef.attrs else EMPTY
    return opdef, tf_type, name, device, attrs
