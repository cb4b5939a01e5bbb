"""Walking the spec's `graph:` list into entries: device scopes, towers, names.

- A nested block `{device: D, graph: [...]}` is `with tf.device(D)`: its ops' devices merge onto
  D field by field, the inner value winning (`DeviceSpec.merged_into`).
- `{towers: [D1, D2], graph: [...]}` repeats the body once per device (`expand`, which a later
  `replicate:` reuses with name prefixes `replica_i/`). Inside a copy, names are the copy's own;
  outside, a name defined in the body means the list of all its copies, in tower order.
- Names follow TensorFlow: an op without `name` gets the name TF1's Python API gives it
  (`OpDef.default_name`: `Const`, `MatMul`, `add` for `x + y`, `zeros`, `Variable`), made
  unique the way `Graph.unique_name` does, in file order, written names too (`Const`,
  `Const_1`, then a written `Const_1` is `Const_1_1`; `a` then `A` is `A_1`; in a tower copy
  `c`, `c_1`). That is the op's name everywhere gpuplace shows it. The spec's own references
  (inputs, colocate_with, fetch) mean by a written name the op written with it, else the op
  TensorFlow names so. Each namespace (the top level, one copy of a body) also has local names:
  inside a copy, the first unnamed constant is `Const` whatever its global name.
- `colocate_with` is `with tf.colocate_with(op)`, which resets the device function stack
  (`Graph._colocate_with_for_gradient`: colocation is "stronger" than device functions): the
  op drops the device scopes around it; then (`Graph._create_op_helper`) the target's device,
  when it has one, replaces the op's (the loader does that once names resolve), else the op's
  own `device:` applies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from ..devices.names import DeviceNameError, DeviceSpec, parse_device
from ..echo import show
from ..errors import BadInput
from .ops import EMPTY, REGISTRY, OpDef, suggest
from .replicate import expand_replicate, slice_item
from .scope import UNCONSTRAINED, Device, Names, Namespace, Scope, SpecError, check_keys
from .writes import WriteRules

BLOCK_KEYS = ("device", "graph")
TOWER_KEYS = ("towers", "graph")
NAME_RULE = r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*"  # TensorFlow's op name rule
_NAME = re.compile(NAME_RULE + r"\Z")


class Entry:
    """One op of the spec before its inputs are resolved (a plain class: one per op, cheap)."""

    __slots__ = ("attrs", "device", "name", "opdef", "raw", "scope", "tf_type")

    def __init__(self, raw: dict[str, Any], opdef: OpDef, tf_type: str, name: str, device: str,
                 scope: Scope, attrs: Mapping[str, Any]) -> None:  # fmt: skip
        self.raw = raw
        self.opdef = opdef
        self.tf_type = tf_type
        self.name = name
        self.device = device
        self.scope = scope
        self.attrs = attrs


class Walker:
    """Turns `graph:` lists into `entries` in file order, each with its name, device and scope."""

    def __init__(
        self, base: str, num_gpus: int | None = None, writes: WriteRules | None = None
    ) -> None:
        self.num_gpus = num_gpus  # the GPUs `replicate: {gpus: all}` means (None: unknown)
        self.entries: list[Entry] = []
        self.names = Names()
        self.base = base
        self.writes = writes  # where `save` ops may write (None: under `base`)
        self._parsed: dict[str, DeviceSpec] = {}
        self._merged: dict[tuple[str, DeviceSpec], Device] = {}

    def top(self, items: list[Any], scope: Scope) -> None:
        """The top-level list: every op's name made unique in file order (TF's rule)."""
        self.names = Names()
        self._walk(items, scope, Namespace(None, ""), UNCONSTRAINED, None)

    def expand(self, body: list[Any], copies: Sequence[tuple[Device, str]], scope: Scope,
               where: object, slices: Sequence[tuple[str, int, int]] = ()) -> None:  # fmt: skip
        """Repeat `body` once per (device scope, name prefix); its names, local to each copy,
        mean in `scope` the list of every copy's op. `slices` (name, copy index, parts) give
        copy k a local `name` that is its share of the outer `name` (replicate's split)."""
        exported: dict[str, list[int]] = {}
        written: dict[str, object] = {}
        by_copy: dict[int, list[tuple[str, int, int]]] = {}  # each copy's slices, found once
        for item in slices:
            by_copy.setdefault(item[1], []).append(item)
        sliced = {x for x, _, _ in slices}
        for k, (device, prefix) in enumerate(copies):
            local = Scope(scope)
            for x, index, parts in by_copy.get(k, ()):
                raw = slice_item(x, index, parts)
                self.add_synthetic(raw, scope, local, x, UNCONSTRAINED, prefix + x)
            self._walk(body, local, Namespace(Names(), prefix), device, where)
            for name, indices in local.names.items():
                if name not in sliced:
                    exported.setdefault(name, []).extend(indices)
            written.update(local.written)
        for name, indices in exported.items():
            scope.define(name, indices, written.get(name))

    def _walk(self, items: list[Any], scope: Scope, ns: Namespace, device: Device,
              where: object) -> None:  # fmt: skip
        for item in items:
            if type(item) is not dict:
                raise SpecError(
                    f"graph entry {show(item)}: expected a mapping, e.g. "
                    "{name: a, op: constant, value: 1.0}",
                    where,
                )
            if "op" in item:
                self._op(item, scope, ns, device)
            elif "towers" in item:
                self._towers(item, scope, ns, device)
            elif "replicate" in item:
                expand_replicate(self, item, scope, ns, device)
            elif "graph" in item:
                check_keys(item, BLOCK_KEYS, "a device block")
                inner = device  # a block without `device` keeps the enclosing scope
                if "device" in item:
                    inner = self.device(item["device"], device, item, "device block")
                self._walk(item["graph"], scope, ns, inner, item)
            else:
                raise SpecError(
                    f"graph entry {show(item)} has no 'op' (an op) or 'graph' (a device block, "
                    "with 'device', 'towers' or 'replicate')",
                    item,
                )

    def walk_items(self, items: list[Any], scope: Scope, ns: Namespace, device: Device,
                   where: object) -> None:  # fmt: skip
        """Walk ops into `scope` (replicate's shared variables)."""
        self._walk(items, scope, ns, device, where)

    def name_scope(self, name: str) -> str:
        """`tf.name_scope(name)`'s prefix: the name made unique like an op's, then `/`."""
        return self.names.unique(name) + "/"

    def add_synthetic(self, raw: dict[str, Any], resolve_in: Scope, bind_in: Scope, local: str,
                      device: Device, name: str) -> None:  # fmt: skip
        """An op gpuplace writes itself (a replica's slice, a merge): its inputs resolve in
        `resolve_in`, its `local` name is bound in `bind_in`, `name` made globally unique."""
        opdef = REGISTRY[raw["op"]]
        unique = self.names.unique(name)
        bind_in.define(local, [len(self.entries)], raw)
        attrs = opdef.normalize(unique, raw, self.base, self.writes)
        self.entries.append(
            Entry(raw, opdef, opdef.tf_type, unique, device.text, resolve_in, attrs)
        )

    def _op(self, item: dict[str, Any], scope: Scope, ns: Namespace, device: Device) -> None:
        kind = item["op"]
        opdef = REGISTRY.get(kind) if type(kind) is str else None
        if opdef is None:
            _unknown_op(item)
        if not opdef.fields.issuperset(item):
            _unknown_key(item, opdef)
        tf_type = opdef.tf_type if opdef.tf_type_of is None else opdef.tf_type_of(item)
        given = item.get("name")
        if given is None and "name" not in item:
            default = opdef.default_name
            local = (ns.names or self.names).unique(default)
            name = local if ns.names is None else self.names.unique(ns.prefix + default)
        elif type(given) is str and is_op_name(given):
            local = given  # what the spec's inputs call it, whatever TensorFlow names it
            if ns.names is not None:
                ns.names.unique(given)  # taken in the copy's own names too
            name = self.names.unique(ns.prefix + given)
        else:
            raise SpecError(
                f"op name {show(given)} is not valid; use letters, digits and _ . - / "
                "starting with a letter or digit, e.g. conv1",
                item,
            )
        if given is None:
            scope.names.setdefault(local, [len(self.entries)])  # yields to a name already bound
        else:
            scope.define(local, [len(self.entries)], item)
        if "colocate_with" in item:  # tf.colocate_with resets the device function stack
            device = UNCONSTRAINED
        if "device" in item:
            device = self.device(item["device"], device, item, f"op '{name}'")
        attrs = EMPTY
        if opdef.attrs:
            try:
                attrs = opdef.normalize(name, item, self.base, self.writes)
            except BadInput as err:  # its message, settings kept as data for each caller's words
                raise SpecError(err.message, item) from None
        self.entries.append(Entry(item, opdef, tf_type, name, device.text, scope, attrs))

    def _towers(self, item: dict[str, Any], scope: Scope, ns: Namespace, device: Device) -> None:
        check_keys(item, TOWER_KEYS, "a towers block")
        towers = item["towers"]
        if type(towers) is not list or not towers:
            raise SpecError(
                f"towers: expected a list of devices, e.g. [/device:GPU:0, /device:GPU:1], got "
                f"{show(towers)}",
                item,
            )
        devices = [self.device(text, device, item, "towers") for text in towers]
        body = item.get("graph")
        if type(body) is not list:
            raise SpecError(f"towers: 'graph' must be a list of ops, got {show(body)}", item)
        self.expand(body, [(d, ns.prefix) for d in devices], scope, item)

    def device(self, text: Any, outer: Device, where: object, label: str) -> Device:
        """`text` (a TF device string; null clears the scope, as `tf.device(None)`) on `outer`."""
        if text is None:
            return UNCONSTRAINED
        key = (text, outer.spec) if type(text) is str else None
        found = self._merged.get(key) if key else None
        if found is not None:
            return found
        if key is None:
            raise SpecError(
                f"{label}: device must be a string like /gpu:0, got {show(text)}", where
            )
        spec = self._parsed.get(text)
        if spec is None:
            try:
                spec = self._parsed[text] = parse_device(text)
            except DeviceNameError as err:  # TF's words, then gpuplace's hint
                raise SpecError(f"{label}: {err}", where) from None
        merged = spec.merged_into(outer.spec)
        found = self._merged[key] = Device(merged, merged.to_string())
        return found


def is_op_name(name: str) -> bool:
    """TensorFlow's op name rule; most names are ASCII identifiers, checked without the regex."""
    return (name.isidentifier() and name.isascii() and name[0] != "_") or (
        _NAME.match(name) is not None
    )


def _unknown_op(item: dict[str, Any]) -> NoReturn:
    name = item.get("name")
    label = f"op {name!r}: " if type(name) is str else ""
    raise SpecError(f"{label}unknown op {show(item['op'])}{suggest(item['op'], REGISTRY)}", item)


def _unknown_key(item: dict[str, Any], opdef: OpDef) -> NoReturn:
    key = sorted(str(k) for k in item if k not in opdef.fields)[0]
    name = item.get("name")
    label = f"op {name!r} ({opdef.name})" if type(name) is str else f"a {opdef.name} op"
    raise SpecError(f"{label}: unknown field {key!r}{suggest(key, sorted(opdef.fields))}", item)
