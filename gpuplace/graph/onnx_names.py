"""Names for an imported ONNX model: the module an exporter's node name says (`module_of`), the
symbolic dims left to bind (`unbound_dims`), and the wrapper's `devices:` pins (`Placer`).

A pin's key is an op name (`/encoder/layer.0/attn/MatMul`, `fc.weight`), a module path
(`encoder.layer.0`: that module and every module under it) or an exporter's scope
(`/encoder/layer.0`, the same module as PyTorch writes it in node names); the longest key that
matches an op wins. Device strings are TensorFlow's (`/gpu:1`, `/device:CPU:0`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..devices.names import DeviceNameError, parse_device
from ..echo import show
from ..errors import BadInput


def module_of(node_name: str) -> str:
    """The PyTorch module path in an exporter's node name: `/encoder/layer.0/attn/MatMul` ->
    `encoder.layer.0.attn` (`/MatMul` -> ""); a TensorFlow-style name (`model/dense/MatMul`)
    gives its name scope (`model/dense`)."""
    head = node_name.rpartition("/")[0]
    if not node_name.startswith("/"):
        return head
    if "//" not in node_name:  # no empty part to drop (the common case, a scan less)
        return head[1:].replace("/", ".")
    return ".".join(p for p in head[1:].split("/") if p)


def unbound_dims(
    inputs: Iterable[Any], dims: Mapping[str, int]
) -> tuple[list[tuple[str, str]], set[str]]:
    """([(dim, where)] for each symbolic or unknown dim of `inputs` (ValueInfoProtos) that `dims`
    does not bind, every symbolic dim name seen)."""
    missing: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i in inputs:
        t = i.type.tensor_type
        if not t.HasField("shape"):
            missing.append(("?", f"input {i.name!r} has no shape; export it with one"))
            continue
        for axis, d in enumerate(t.shape.dim):
            if d.HasField("dim_param"):
                seen.add(d.dim_param)
                if d.dim_param not in dims:
                    missing.append((d.dim_param, f"input {i.name!r} dim {axis}"))
            elif not d.HasField("dim_value"):
                missing.append(
                    ("?", f"input {i.name!r} dim {axis} has no name; export it with one")
                )
    return missing, seen


class Placer:
    """The device each imported op asks for, from the wrapper's `devices:` (key -> device)."""

    def __init__(self, devices: Mapping[str, str], source: str) -> None:
        self.source = source
        self.pins: dict[str, str] = {}
        for key, text in devices.items():
            if type(key) is not str or not key or type(text) is not str:
                raise BadInput(
                    f"{source}: devices: expected op names or module paths mapped to devices, "
                    f"e.g. {{encoder.layer.0: /gpu:1}}, got {show(key)}: {show(text)}"
                )
            try:
                spec = parse_device(text)
            except DeviceNameError as err:
                raise BadInput(f"{source}: devices: {key}: {err}") from None
            module = module_of(key + "/x") if key.startswith("/") else key
            self.pins[module] = self.pins[key] = spec.to_string()
        self.used: set[str] = set()
        self.keys = list(devices)

    def device(self, name: str, module: str) -> str:
        if not self.pins:
            return ""
        found = self.pins.get(name)
        if found is not None:
            self.used.add(name)
            return found
        path = module
        while path:
            found = self.pins.get(path)
            if found is not None:
                self.used.add(path)
                return found
            path = path.rpartition(".")[0] if "." in path else path.rpartition("/")[0]
        return ""

    def check_used(self) -> None:
        """A key that matched no op is refused (a typo would otherwise pin nothing)."""
        for key in self.keys:
            module = module_of(key + "/x") if key.startswith("/") else key
            if key not in self.used and module not in self.used:
                raise BadInput(
                    f"{self.source}: devices: {key!r} names no op or module of the model; give "
                    "an op name or a module path (e.g. encoder.layer.0)"
                )
