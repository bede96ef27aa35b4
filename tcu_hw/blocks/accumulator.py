"""Accumulator memory with in-place add (TCU.md §2, §4.1): one write or accumulate per cycle.

``depth`` vectors of n·W bits in one memory with a write port, a read-modify-write read port
and an external read port; both read ports have registered addresses (block RAM style).

Timing::

    cycle p     write request (w_valid, w_addr, w_data, w_accumulate) is registered
    cycle p+1   old = mem[addr]; new = accumulate ? add(old, data) : data; mem[addr] <= new
    cycle t     r_addr presented;  cycle t+1: r_data = mem[r_addr]

The read in cycle p+1 sees the write committed at the end of cycle p, so back-to-back
accumulates to the same address each add to the previous result (Tensil can lose the first
add here). A read presented at cycle t sees every write presented at cycle t-1 or earlier.
Throughput: one write and one read per cycle, no back-pressure.

Ports (``name_`` prefix): inputs ``w_valid`` (1), ``w_addr`` (A), ``w_data`` (n·W),
``w_accumulate`` (1), ``r_addr`` (A); outputs ``r_data`` (n·W), ``busy`` (a write is in its
second cycle), ``saturated`` (1 when an accumulate clipped a lane this cycle).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Register, WireVector

from ..isa import clog2
from ..numeric import DataType
from . import fixed, lanes


class Accumulator:
    def __init__(self, depth: int, n: int, dt: DataType, name: str = "acc") -> None:
        a = max(clog2(depth), 1)
        vec = n * dt.width
        self.w_valid = WireVector(1, f"{name}_w_valid")
        self.w_addr = WireVector(a, f"{name}_w_addr")
        self.w_data = WireVector(vec, f"{name}_w_data")
        self.w_accumulate = WireVector(1, f"{name}_w_accumulate")
        self.r_addr = WireVector(a, f"{name}_r_addr")

        self.mem = pyrtl.MemBlock(vec, a, f"{name}_mem", max_read_ports=2)
        valid = Register(1, f"{name}_q_valid")
        addr = Register(a, f"{name}_q_addr")
        data = Register(vec, f"{name}_q_data")
        accumulate = Register(1, f"{name}_q_accumulate")
        valid.next <<= self.w_valid
        addr.next <<= self.w_addr
        data.next <<= self.w_data
        accumulate.next <<= self.w_accumulate

        old = lanes.split(self.mem[addr], n)
        new = lanes.split(data, n)
        summed = [fixed.add(o, d, dt) for o, d in zip(old, new)]
        value = pyrtl.select(accumulate, lanes.join(summed), data)
        self.mem[addr] <<= pyrtl.MemBlock.EnabledWrite(value, valid)
        self.busy = valid
        wide = [(o.sign_extended(dt.width + 1) + d.sign_extended(dt.width + 1))[:dt.width + 1]
                for o, d in zip(old, new)]
        clipped = pyrtl.Const(0, 1)
        for v in wide:
            clipped = clipped | (v[-1] != v[-2])
        self.saturated = valid & accumulate & clipped

        raddr = Register(a, f"{name}_r_addr_q")
        raddr.next <<= self.r_addr
        self.r_data = self.mem[raddr]
