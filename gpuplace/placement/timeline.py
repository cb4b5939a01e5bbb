"""The executor's run in miniature: its buffers (slots) and the devices' and links' timelines.

One model for the balanced placer (`balanced.py`, which runs each op here as it places it) and
the estimate (`estimate.py`, which replays a placement here), so the plan and the estimate
agree. It follows the executor's planner (`execute/schedule.py`) and its ledgers:
- a slot per op output on the op's device, and per (tensor, device) copy, shared by every
  reader there; `print` makes none, it forwards the slots it reads;
- a slot is freed after the last step that reads it (a copy reads its source);
- each device runs its ops one at a time in graph order; an op starts once its device is
  free and its inputs are there; a copy is made when its reader's turn comes, in the idle
  time of the source's outbound and the reader's inbound link once its tensor is ready
  (`links.py`).
The placer passes an `Occupancy` and every slot is charged there for its life; an output's
life is taken up front to its static last step (`Flat.ends`), so each choice sees what later
steps will hold (longer than the real life only where a `print` on another device forwards
a copy). The estimate passes none: a life grows with its readers, as the ledgers see it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from .cost import LinkModel, copy_time
from .flat import Flat
from .links import Int, Link, walk

if TYPE_CHECKING:
    from .occupancy import Occupancy

_BITS = 30  # bits of `Timeline.sent` per op: small ints (devices past 30 share bits)


@dataclass
class Slot:
    """One buffer the executor allocates: an op's output, or a copy of one on another device."""

    # slots named here, not `dataclass(slots=True)`: compiled, Slot is a C type (timeline.pxd)
    # made a dataclass by Cython, which takes no `slots`
    __slots__ = ("device", "last", "ready", "size", "step")
    device: int
    size: int  # bytes, rounded as the allocator rounds them
    step: int  # the step that allocates it
    last: int  # the last step that reads it (it is freed after that step)
    ready: float  # when its value is there: its op's or its copy's end


class Network(NamedTuple):
    """Across hosts: `tasks[d]` is the task of device d; copies between tasks go over `link`
    (one network card per task, each direction one transfer at a time) and arrive `hop`
    seconds later (the runtime's overhead per cross-task hand-over)."""

    tasks: tuple[int, ...]
    link: LinkModel
    hop: float = 0.0


class Timeline:
    """Slots and the devices' and links' busy time so far; `run` adds one op's step."""

    def __init__(self, flat: Flat, devices: int, link: LinkModel,
                 occupancy: Occupancy | None = None, network: Network | None = None,
                 ) -> None:  # fmt: skip
        """`occupancy`: the placer's, charged for every slot (see the module docstring);
        `network`: across hosts, which task each device belongs to and the link between
        tasks (`Network`): a copy between tasks uses their network cards' links instead."""
        self.flat, self.link, self.occupancy, self.network = flat, link, occupancy, network
        if network is not None:
            hosts = max(network.tasks, default=-1) + 1
            self.nic_out = [Link() for _ in range(hosts)]
            self.nic_in = [Link() for _ in range(hosts)]
        self.done = [0.0] * len(flat.names)  # when each op has run
        self.home: list[tuple[Slot, ...]] = [()] * len(flat.names)  # outputs (print: forwarded)
        self.copied: dict[tuple[int, int, int], Slot] = {}  # (producer, output, device) -> copy
        # the devices each op's outputs were copied to, a bit per device (`copy_of`); 0: none
        self.sent = [0] * len(flat.names)
        self.slots: list[Slot] = []  # every slot made, for the estimate's peaks
        self.free_at = [0.0] * devices  # when each device has run its ops so far
        self.outbound = [Link() for _ in range(devices)]
        self.inbound = [Link() for _ in range(devices)]
        self.solid: dict[tuple[int, int], Link] = {}  # (source, device): see `links.transfer`

    def run(self, op: int, device: int, seconds: float, charge: bool = True) -> float:
        """Run `op` on `device` for `seconds` once the device is free and its inputs are there
        (each copied in on its first reader there); when it ends. Its outputs are charged to
        the occupancy unless `charge` is False (the caller reserved them before)."""
        flat, done, home = self.flat, self.done, self.home
        ready: float = 0.0  # typed: a C double where compiled (timeline.pxd)
        slot: Slot
        copy: Slot | None
        for producer, output in flat.inputs[op]:
            slot = home[producer][output]
            if slot.last < op:
                self.extend(slot, op)
            if slot.device != device:
                copy = self.copy_of(producer, output, device)
                if copy is None:
                    copy = self._copy(producer, output, slot, device, op)
                elif copy.last < op:
                    self.extend(copy, op)
                slot = copy
            if done[producer] > ready:
                ready = done[producer]
            if slot.ready > ready:
                ready = slot.ready
        free: float = self.free_at[device]
        done[op] = (free if free > ready else ready) + seconds
        end = self.free_at[device] = done[op]  # one float object, shared (compiled too)
        if flat.is_print[op]:  # forwards the slots it read (copies made above)
            home[op] = tuple(self._read(op, device))
            return end
        sizes = flat.sizes[op]
        if self.occupancy is None:  # a life grows with its readers
            outputs = tuple([Slot(device, size, op, op, end) for size in sizes])
        else:  # to its static last step, charged up front (unless reserved before)
            lives = zip(sizes, flat.ends[op], strict=True)
            outputs = tuple([Slot(device, size, op, last, end) for size, last in lives])
            if charge:
                add = self.occupancy.add
                for slot in outputs:
                    add(device, op, slot.last, slot.size)
        home[op] = outputs
        self.slots += outputs
        return end

    def copy_of(self, producer: Int, output: Int, device: Int) -> Slot | None:
        """The copy of `producer`'s output `output` on `device`, None if none was made. Looked
        up only where `sent` has the device's bit (device d sets bit d % _BITS): most asks are
        of devices without one, and a dict of every copy misses the caches at 1,000,000 ops."""
        mask = self.sent[producer]  # (a C long where compiled, timeline.pxd)
        if mask >> device % _BITS & 1:
            return self.copied.get((producer, output, device))
        return None

    def _read(self, op: int, device: int) -> list[Slot]:
        """The slots `op` on `device` reads, one per input (after `run` made its copies)."""
        home, copied = self.home, self.copied
        reads = []
        for producer, output in self.flat.inputs[op]:
            slot = home[producer][output]
            reads.append(slot if slot.device == device else copied[producer, output, device])
        return reads

    def extend(self, slot: Slot, step: int) -> None:
        """`slot` is read at `step`: it lives at least until then."""
        if slot.last < step:
            if self.occupancy is not None:
                self.occupancy.add(slot.device, slot.last + 1, step, slot.size)
            slot.last = step

    def route(self, source: int, device: int) -> tuple[LinkModel, Link, Link, float]:
        """How a copy from device `source` to `device` travels: its link model, the outbound
        and inbound links it books, and the runtime's extra seconds (across hosts: the
        tasks' network cards and the hand-over; else the devices' own links, 0)."""
        network = self.network
        if network is not None and network.tasks[source] != network.tasks[device]:
            out, into = network.tasks[source], network.tasks[device]
            return network.link, self.nic_out[out], self.nic_in[into], network.hop
        return self.link, self.outbound[source], self.inbound[device], 0.0

    def _copy(self, producer: int, output: int, source: Slot, device: int, step: int) -> Slot:
        """A copy of `source` to `device` for step `step`, on the links' timelines."""
        link, outbound, inbound, hop = self.route(source.device, device)
        length = copy_time(self.flat.out_bytes[producer][output], link)
        start = max(self.done[producer], source.ready)
        solid = self.solid.get((source.device, device))
        if solid is None:
            solid = self.solid[source.device, device] = Link()
        end, pieces = walk(outbound, inbound, start, length, None, (solid,))
        outbound.book(pieces)
        inbound.book(pieces)
        solid.cover(start, end)  # both links are busy from `start` to `end` now
        end += hop  # the runtime's cost per cross-task hand-over (a Dask task), off the links
        copy = self.copied[producer, output, device] = Slot(device, source.size, step, step, end)
        self.sent[producer] |= 1 << device % _BITS
        self.slots.append(copy)
        if self.occupancy is not None:
            self.occupancy.add(device, step, step, source.size)
        return copy
