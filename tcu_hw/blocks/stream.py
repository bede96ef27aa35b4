"""Handshake plumbing: packed records and a small register FIFO with visible entries.

Conventions used by every block: a transfer happens in a cycle where ``valid & ready``
("fires"); ``valid`` must not depend combinationally on ``ready`` of the same interface.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, WireVector


class Struct:
    """A packed record: named fields of fixed widths, first field in the low bits.

    ``Struct(kind=3, addr=13).pack(kind=k, addr=a)`` gives one wire; ``unpack(wire)`` gives a
    namespace of slices. Missing fields pack as zero; zero-width fields unpack as a 1-bit 0.
    """

    def __init__(self, **widths: int) -> None:
        self.widths = {k: int(v) for k, v in widths.items()}
        self.offsets = {}
        at = 0
        for k, w in self.widths.items():
            self.offsets[k] = at
            at += w
        self.width = max(at, 1)

    def pack(self, **values) -> WireVector:
        unknown = set(values) - set(self.widths)
        if unknown:
            raise KeyError(f"unknown fields {sorted(unknown)}")
        parts = []
        for k, w in self.widths.items():
            if w == 0:
                continue
            v = values.get(k)
            if v is None:
                parts.append(Const(0, w))
            else:
                v = pyrtl.as_wires(v, bitwidth=w)
                parts.append(v.zero_extended(w) if v.bitwidth < w else v[:w])
        return pyrtl.concat_list(parts) if parts else Const(0, 1)

    def unpack(self, wire: WireVector) -> SimpleNamespace:
        return SimpleNamespace(**{k: wire[self.offsets[k]:self.offsets[k] + w] if w else
                                  Const(0, 1) for k, w in self.widths.items()})


class RegFifo:
    """A FIFO of ``depth`` entries held in registers, head at entry 0 (a shift queue).

    Inputs (drive with ``<<=``): ``enq_valid``, ``enq_data``, ``deq_ready``.
    Outputs: ``enq_ready`` (not full), ``deq_valid`` (not empty), ``deq_data`` (head),
    ``entries`` = [(valid, data)] head first (for hazard checks), ``count``.
    An enqueue into a full FIFO is accepted in the cycle the head leaves. Latency: one cycle
    from enqueue to ``deq_valid``.
    """

    def __init__(self, width: int, depth: int, name: str) -> None:
        self.enq_valid = WireVector(1, f"{name}_enq_valid")
        self.enq_data = WireVector(width, f"{name}_enq_data")
        self.deq_ready = WireVector(1, f"{name}_deq_ready")
        valid = [pyrtl.Register(1, f"{name}_v{i}") for i in range(depth)]
        data = [pyrtl.Register(width, f"{name}_d{i}") for i in range(depth)]
        deq = valid[0] & self.deq_ready
        self.enq_ready = WireVector(1, f"{name}_enq_ready")
        self.enq_ready <<= ~valid[-1] | deq
        enq = self.enq_valid & self.enq_ready
        for i in range(depth):
            above_v = valid[i + 1] if i + 1 < depth else Const(0, 1)
            above_d = data[i + 1] if i + 1 < depth else data[i]
            below_v = valid[i - 1] if i > 0 else Const(1, 1)
            # the new entry lands in the first free slot, or one lower when the head leaves
            land_here = enq & pyrtl.select(deq, valid[i] & ~above_v, ~valid[i] & below_v)
            keep_v = pyrtl.select(deq, above_v, valid[i])
            keep_d = pyrtl.select(deq, above_d, data[i])
            valid[i].next <<= keep_v | land_here
            data[i].next <<= pyrtl.select(land_here, self.enq_data, keep_d)
        self.deq_valid = valid[0]
        self.deq_data = data[0]
        self.entries = list(zip(valid, data))
        self.count = sum_bits(valid)


def sum_bits(bits) -> WireVector:
    """Number of set wires among ``bits`` (small counts)."""
    total = Const(0, 1)
    for b in bits:
        total = total + b
    return total


def fires(valid: WireVector, ready: WireVector) -> WireVector:
    return valid & ready


def fit(wire, width: int) -> WireVector:
    """``wire`` zero-extended or truncated to ``width`` bits (unsigned)."""
    wire = pyrtl.as_wires(wire)
    return wire.zero_extended(width) if wire.bitwidth < width else wire[:width]


def named(wire, name: str) -> WireVector:
    """``wire`` under a readable name (for waveforms and probes)."""
    wire = pyrtl.as_wires(wire)
    out = WireVector(wire.bitwidth, name)
    out <<= wire
    return out


def name_ports(block_object, prefix: str) -> None:
    """Give every public port of a block object that is still an anonymous wire the name
    ``<prefix>_<attribute>`` (lists: ``<prefix>_<attribute><k>``; groups of ports in a
    ``SimpleNamespace``: ``<prefix>_<group>_<attribute>``), so that waveforms, probes
    and the documentation show it."""
    for attr, value in list(vars(block_object).items()):
        if attr.startswith("_"):
            continue
        if isinstance(value, WireVector) and value.name.startswith("tmp"):
            setattr(block_object, attr, named(value, f"{prefix}_{attr}"))
        elif isinstance(value, SimpleNamespace):
            name_ports(value, f"{prefix}_{attr}")
        elif isinstance(value, list) and value and all(isinstance(v, WireVector)
                                                       for v in value):
            setattr(block_object, attr, [named(v, f"{prefix}_{attr}{k}")
                                         if v.name.startswith("tmp") else v
                                         for k, v in enumerate(value)])
