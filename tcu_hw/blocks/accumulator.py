"""Accumulator memory with in-place add (TCU.md §2, §4.1): one write or accumulate per cycle.

``depth`` vectors of n·W bits with one write port and two read ports with registered
addresses (block RAM style; see :mod:`tcu_hw.blocks.ram`): one read serves the
read-modify-write of accumulates, the other the outside.

Timing::

    cycle p     write request (w_valid, w_addr, w_data, w_accumulate) registered;
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

Ports (``name_`` prefix; A = max(clog2(depth), 1) address bits, n·W = one vector of ``n``
lanes of the data type's width W): inputs ``w_valid`` (1), ``w_addr`` (A), ``w_data`` (n·W),
``w_accumulate`` (1), ``r_addr`` (A); outputs ``r_data`` (n·W, one cycle after ``r_addr``),
``busy`` (1: a write is in its second cycle), ``pending`` = (valid, addr) of that write.
"""

from __future__ import annotations

import pyrtl
from pyrtl import Register, WireVector

from ..isa import clog2
from ..numeric import DataType
from . import fixed, lanes
from .ram import Ram
from .stream import name_ports


class Accumulator:
    def __init__(self, depth: int, n: int, dt: DataType, name: str = "acc",
                 external: list | None = None) -> None:
        a = max(clog2(depth), 1)
        vec = n * dt.width
        self.w_valid = WireVector(1, f"{name}_w_valid")
        self.w_addr = WireVector(a, f"{name}_w_addr")
        self.w_data = WireVector(vec, f"{name}_w_data")
        self.w_accumulate = WireVector(1, f"{name}_w_accumulate")
        self.r_addr = WireVector(a, f"{name}_r_addr")

        ram = Ram(f"{name}_ram", "sdp", vec, depth, reads=2, external=external)
        self.ram, self.mem = ram, ram.mem
        valid = Register(1, f"{name}_q_valid")
        addr = Register(a, f"{name}_q_addr")
        data = Register(vec, f"{name}_q_data")
        accumulate = Register(1, f"{name}_q_accumulate")
        valid.next <<= self.w_valid
        addr.next <<= self.w_addr
        data.next <<= self.w_data
        accumulate.next <<= self.w_accumulate
        ram.raddr[0] <<= self.w_addr

        # the value written at the end of the previous cycle, forwarded to a same-address RMW
        last_valid = Register(1, f"{name}_last_valid")
        last_addr = Register(a, f"{name}_last_addr")
        last_value = Register(vec, f"{name}_last_value")
        forward = last_valid & (last_addr == addr)
        old = lanes.split(pyrtl.select(forward, last_value, ram.rdata[0]), n)
        new = lanes.split(data, n)
        summed = [fixed.add(o, d, dt) for o, d in zip(old, new)]
        value = pyrtl.select(accumulate, lanes.join(summed), data)
        ram.waddr <<= addr
        ram.write <<= valid
        ram.wdata <<= value
        last_valid.next <<= valid
        last_addr.next <<= addr
        last_value.next <<= value
        self.busy = valid
        self.pending = (valid, addr)

        ram.raddr[1] <<= self.r_addr
        self.r_data = ram.rdata[1]
        name_ports(self, name)
