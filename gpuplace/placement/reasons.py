"""The one-line reason behind each placement decision, as `--explain` prints it.

TensorFlow logs only the device; these lines say which of its rules chose it: an explicit
request, the default (highest-priority device with a kernel), a generator following its
consumers, a colocation group, or soft placement, and for soft placement why it was needed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..devices.names import DeviceSpec
from ..graph.model import Op, OpMeta
from ..graph.tf_registry import KernelMatch
from .candidates import Candidates, Consumers, DeviceTable, LocalDevice
from .colocation import ColocationGraph, has_details
from .identity import Identities
from .model import Decision


def article(word: str) -> str:
    """The article before `word`, "a" or "an", by its first sound: an AddN, an Exp, an int32,
    an LRN; a MatMul, a Unique."""
    if len(word) > 1 and word[:2].isupper():  # an acronym: letter names
        return "an" if word[0] in "AEFHILMNORSX" else "a"
    first = word[:1].lower()
    if first == "u" and word[1:3].lower() in ("ni", "se", "si", "su", "ti", "re", "ri"):
        return "a"  # a Unique, a Use...
    return "an" if first in ("a", "e", "i", "o", "u") else "a"


def _wants(device: str) -> str:
    return f"requests {device}" if device else "requests no device"


class Reasons:
    """Builds decisions from the placer's state (shared, read as the placer fills it)."""

    def __init__(
        self,
        ops: Sequence[Op],
        meta: Sequence[OpMeta],
        own: Sequence[DeviceSpec],
        groups: ColocationGraph,
        table: DeviceTable,
        consumers: Consumers,
        tf_type: Callable[[int], str] | None = None,
        narrowed: Mapping[int, KernelMatch] | None = None,
    ) -> None:
        self.ops, self.meta, self.own, self.groups = ops, meta, own, groups
        self.table, self.consumers = table, consumers
        self.tf_type = tf_type or (lambda i: meta[i].tf_type)
        # op -> its registry match where that decided more than "a kernel" (see tf.py)
        self.narrowed = narrowed or {}

    def pinned(self, i: int, device: LocalDevice, by: str) -> Decision:
        """Op i's group was already placed by op `by` (TF pins groups in `AssignAndLog`)."""
        op, own = self.ops[i], self.own[i]
        clauses = self._ignored(i)
        if has_details(own) and not device.satisfies(own):
            clauses.append(f"requested {op.device} not honoured")
        if clauses:
            text = f"soft placement: {'; '.join(clauses)}; colocated with {by}"
            return Decision(device.name, "soft-fallback", text)
        if has_details(own):
            return Decision(device.name, "explicit", f"requested {op.device} (colocated with {by})")
        return Decision(device.name, "colocated", f"colocated with {by}")

    def chosen(
        self, i: int, device: LocalDevice, cands: Candidates, followed: bool, generator: bool
    ) -> Decision:
        """Op i chose its group's device: its consumers' one, or the first candidate."""
        op, own = self.ops[i], self.own[i]
        root = self.groups.root(i)
        group, requester = self.groups.requested[root], self.groups.requester(root)
        lone = not followed and generator  # heuristic A tried and did not apply
        followed = followed and len(cands.devices) > 1  # with one candidate it chose nothing
        honoured = has_details(own) and device.satisfies(own)
        clauses = self._ignored(i)
        if cands.soft is not None:
            clauses.append(cands.soft + self._held_back(i, root, group))
        elif has_details(own) and not honoured:
            clauses.append(f"requested {op.device} conflicts with its colocation group")
        if followed:
            base = self._follows(i, device)
        elif cands.soft is not None:
            base = f"best supported device {device.short}"
        elif honoured:
            base = f"requested {op.device}{self._first_match(i, own, device)}"
        elif has_details(group):
            base = (
                f"colocated with {requester}; the group requests {group.to_string()}"
                f"{self._first_match(i, group, device)}"
            )
        else:
            base = (
                f"no device requested: {device.short} is the highest-priority device with "
                f"{self._kernel(i)}{self._registry(i, device)}"
                f"{self._not_followed(i) if lone else ''}"
            )
        if clauses:
            return Decision(
                device.name, "soft-fallback", f"soft placement: {'; '.join(clauses)}; {base}"
            )
        if followed:
            return Decision(device.name, "follows-consumer", f"generator {base}")
        if honoured:
            return Decision(device.name, "explicit", base)
        kind = "colocated" if has_details(group) else "default"
        return Decision(device.name, kind, base)

    def follows_input(
        self, i: int, device: LocalDevice, identities: Identities, cands: Candidates
    ) -> Decision:
        """Identity op i took its input's device (placer.cc's `MatchIdentityOperation`)."""
        before, consumer = self.ops[identities.source[i]], identities.consumer[i]
        wanted = f"request {before.device}" if before.device else "request no device"
        if consumer >= 0:
            why = f"its input and its one consumer {self.ops[consumer].name} both {wanted}"
        else:
            why = "it has no consumer and its input requests no device"
        text = f"Identity follows its input {before.name} on {device.short}: {why}"
        clauses = self._ignored(i)
        if cands.soft is not None:
            clauses.append(cands.soft)
        if clauses:
            return Decision(
                device.name, "soft-fallback", f"soft placement: {'; '.join(clauses)}; {text}"
            )
        return Decision(device.name, "follows-input", text)

    def identity_missed(
        self, decision: Decision, i: int, got: LocalDevice | None, identities: Identities
    ) -> Decision:
        """`decision` for an Identity that did not take its input's device, and why TF's
        Identity rule did not apply (`got`: its input's device so far, None for none)."""
        before = self.ops[identities.source[i]]
        edges, consumer = identities.edges[i], identities.consumer[i]
        wants = _wants(before.device)
        if i in identities.matched:
            why = (
                f"its input {before.name} is placed after it (a generator)"
                if got is None
                else f"its input's device {got.short} cannot take it"
            )
        elif edges > 1:
            why = f"it is read {edges} times"
        elif consumer < 0:
            why = f"it has no consumer, and its input {before.name} {wants}"
        else:
            theirs = _wants(self.ops[consumer].device)
            why = f"its input {before.name} {wants} but its consumer {self.ops[consumer].name} {theirs}"
        reason = f"{decision.reason}; not its input's device: {why}"
        return Decision(decision.device, decision.kind, reason)

    def _ignored(self, i: int) -> list[str]:
        note = self.groups.ignored.get(i)
        return [] if note is None else [note]

    def _kernel(self, i: int) -> str:
        if self.groups.size[self.groups.root(i)] > 1:
            return "kernels for its whole colocation group"
        kind = self.tf_type(i)
        return f"{article(kind)} {kind} kernel"

    def _registry(self, i: int, device: LocalDevice) -> str:
        """Which registry entry decided, where it decided more than "a kernel": `: no GPU
        kernel for Relu with T=DT_INT32 in TensorFlow 2.21's registry (CUDA build); CPU kernel
        registered`, or the DEFAULT kernel serving the device."""
        found = self.narrowed.get(i)
        if found is None or self.groups.size[self.groups.root(i)] > 1:
            return ""
        kernel = found.kernel(device.type)
        if kernel is None:
            return ""
        served = (
            f"{device.type} served by {kernel.describe(found.attrs)}"
            if found.notable(device.type) else f"{device.type} kernel registered"
        )  # fmt: skip
        missing = [
            found.missing(t)
            for t in ("GPU", "CPU")
            if t in self.table.types and t not in found.devices
        ]
        return f": {'; '.join([*missing, served])}"

    def lacking(self, root: int, device_type: str) -> str:
        """`p (Print) has no GPU kernel`: the members of root's group that keep it off
        `device_type` ("" if none does)."""
        found = self.groups.lacking(root, device_type)
        named = [f"{self.ops[j].name} ({self.tf_type(j)})" for j in found[:3]]
        if len(found) > 3:
            named[-1] = f"{len(found) - 2} more"
        if not named:
            return ""
        listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
        verb = "has" if len(found) == 1 else "have"
        return f"{listed} {verb} no {device_type} kernel"

    def _held_back(self, i: int, root: int, group: DeviceSpec) -> str:
        """Why op i's group had no kernel for its requested type, for soft placement's reason:
        the members without one (as TF's Colocation Debug Info lists them), or the registry
        entry that leaves op i alone without one."""
        wanted = group.device_type
        if wanted is None or wanted in self.groups.types[root]:
            return ""
        if self.groups.size[root] > 1:
            lacking = self.lacking(root, wanted)
            return f" in its colocation group: {lacking}" if lacking else ""
        found = self.narrowed.get(i)
        if found is None or wanted in found.devices:
            return ""
        return f": {found.missing(wanted)}"

    def _first_match(self, i: int, spec: DeviceSpec, device: LocalDevice) -> str:
        """For a partial spec (`/device:GPU:*`), why this device among those it matches."""
        if self.table.exists(spec) <= 1:
            return ""
        return f": {device.short} is the highest-priority matching device with {self._kernel(i)}"

    def _follows(self, i: int, device: LocalDevice) -> str:
        first, count = self.ops[self.consumers.first[i]].name, self.consumers.count[i]
        if count == 1:
            return f"follows its consumer {first} on {device.short}"
        return f"follows its consumers {first} and {count - 1} more on {device.short}"

    def _not_followed(self, i: int) -> str:
        """Why heuristic A did not apply to a generator placed by default."""
        if self.consumers.mixed[i]:
            return "; its consumers sit on several devices"
        only = self.consumers.device[i]
        return "" if only is None else f"; its consumers' device {only.short} has no kernel for it"
