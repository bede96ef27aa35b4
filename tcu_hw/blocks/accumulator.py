"""Accumulator memory with in-place add (TCU.md §2, §4.1): one write or accumulate per cycle.

``depth`` vectors of n·W bits with one write port and two read ports with registered
addresses (block RAM style; see :mod:`tcu_hw.blocks.ram`): one read serves the
read-modify-write of accumulates, the other the outside. With an integer data type the
lanes are its accumulator type's (INT32, INT48) and a write may *shift in* a digit instead
(docs/integer.md: ``new = old · 2^W + (data mod 2^W)``, wrapped), which builds wide values
from W-bit local vectors.

Timing::

    cycle p     write request (write.valid, addr, data, accumulate) registered;
                its read-modify-write read is presented
    cycle p+1   old = mem[addr], or the value written at the end of cycle p when that was the
                same address (forwarded); new = accumulate ? add(old, data) : data;
                mem[addr] <= new
    cycle t     r_addr presented;  cycle t+1: r_data = mem[r_addr]

Back-to-back accumulates to the same address each add to the previous result (Tensil can
lose the first add here). A read presented at cycle t sees every write presented at cycle
t-2 or earlier; ``pending`` is the write presented at t-1 (still in flight), which a client
must wait for before reading that address. Throughput: one write and one read per cycle, no
back-pressure.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Register, WireVector

from ..isa import clog2
from ..numeric import DataType
from . import fixed, lanes
from .ram import Ram
from .stream import SINK, Stream, Struct, named


class Accumulator:
    """Accumulators: ``depth`` vectors of ``n`` lanes of ``dt``, written or added in place.

    Args:
        depth: vectors; A = max(clog2(depth), 1) address bits.
        n: lanes per vector (n·W bits, W = ``dt.accumulator.width``: ``dt.width`` but for
            the integer types, 32 or 48).
        dt: the fixed-point or integer data type (saturating add at W bits).
        name: prefix of the wires.
        external: build the RAM as ports to Verilog RAM modules (see :mod:`tcu_hw.blocks.ram`).

    Ports:
        write: :class:`~tcu_hw.blocks.stream.Stream` sink, always ready: ``addr`` (A),
            ``data`` (n·W), ``accumulate`` (1: add to the stored vector, 0: overwrite); with
            an integer type also ``shift`` (1: shift the low ``dt.width`` bits of each data
            lane in; wins over ``accumulate``).
        r_addr: input (A), a read address.
        r_data: output (n·W), the vector at ``r_addr`` one cycle later.
        busy: output (1), a write is in its second cycle.
        pending: ``valid`` (1) / ``addr`` (A) outputs: that write (read its address only
            after it lands).

    Latency: a write lands 2 cycles after it is presented; reads take 1 cycle.
    """

    def __init__(self, depth: int, n: int, dt: DataType, name: str = "acc",
                 external: list | None = None) -> None:
        a = max(clog2(depth), 1)
        at = dt.accumulator                      # dt itself but for the integer types
        vec = n * at.width
        fields = dict(addr=a, data=vec, accumulate=1)
        if dt.is_integer:
            fields["shift"] = 1
        self.write = Stream(Struct(**fields), f"{name}_write", SINK, always_ready=True)
        w = self.write.payload
        self.r_addr = WireVector(a, f"{name}_r_addr")

        ram = Ram(f"{name}_ram", "sdp", vec, depth, reads=2, external=external)
        self.ram, self.mem = ram, ram.mem
        valid = Register(1, f"{name}_q_valid")
        addr = Register(a, f"{name}_q_addr")
        data = Register(vec, f"{name}_q_data")
        accumulate = Register(1, f"{name}_q_accumulate")
        valid.next <<= self.write.valid
        addr.next <<= w.addr
        data.next <<= w.data
        accumulate.next <<= w.accumulate
        ram.raddr[0] <<= w.addr

        # the value written at the end of the previous cycle, forwarded to a same-address RMW
        last_valid = Register(1, f"{name}_last_valid")
        last_addr = Register(a, f"{name}_last_addr")
        last_value = Register(vec, f"{name}_last_value")
        forward = last_valid & (last_addr == addr)
        old = lanes.split(pyrtl.select(forward, last_value, ram.rdata[0]), n)
        new = lanes.split(data, n)
        summed = [fixed.add(o, d, at) for o, d in zip(old, new)]
        value = pyrtl.select(accumulate, lanes.join(summed), data)
        if dt.is_integer:                        # shift in: old · 2^W + (data mod 2^W)
            shift = Register(1, f"{name}_q_shift")
            shift.next <<= w.shift
            shifted = [pyrtl.concat(o[:at.width - dt.width], d[:dt.width])
                       for o, d in zip(old, new)]
            value = pyrtl.select(shift, lanes.join(shifted), value)
        ram.waddr <<= addr
        ram.write <<= valid
        ram.wdata <<= value
        last_valid.next <<= valid
        last_addr.next <<= addr
        last_value.next <<= value
        self.busy = named(valid, f"{name}_busy")
        self.pending = SimpleNamespace(valid=named(valid, f"{name}_pending_valid"),
                                       addr=named(addr, f"{name}_pending_addr"))

        ram.raddr[1] <<= self.r_addr
        self.r_data = named(ram.rdata[1], f"{name}_r_data")
