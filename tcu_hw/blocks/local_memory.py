"""Local (main) memory: a true dual-port RAM with registered reads (block RAM style).

Port A serves the array/accumulator side, port B the DRAM side. Each port does one read or
one write per cycle::

    cycle t     x_addr, x_write, x_wdata presented   (a write commits at the end of t)
    cycle t+1   x_rdata = mem[x_addr of cycle t]

A read presented at cycle t sees writes (on either port) presented at cycle t or earlier.
The two ports must not write the same address in the same cycle (the core's hazard tracking
guarantees it).

Ports (``name_`` prefix): inputs ``a_addr``, ``a_write``, ``a_wdata``, ``b_addr``,
``b_write``, ``b_wdata``; outputs ``a_rdata``, ``b_rdata`` (n·W).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Register, WireVector

from ..isa import clog2


class LocalMemory:
    def __init__(self, depth: int, width: int, name: str = "local") -> None:
        a = max(clog2(depth), 1)
        self.mem = pyrtl.MemBlock(width, a, f"{name}_mem", max_read_ports=2, max_write_ports=2)
        for port in ("a", "b"):
            addr = WireVector(a, f"{name}_{port}_addr")
            write = WireVector(1, f"{name}_{port}_write")
            wdata = WireVector(width, f"{name}_{port}_wdata")
            self.mem[addr] <<= pyrtl.MemBlock.EnabledWrite(wdata, write)
            q = Register(a, f"{name}_{port}_addr_q")
            q.next <<= addr
            setattr(self, f"{port}_addr", addr)
            setattr(self, f"{port}_write", write)
            setattr(self, f"{port}_wdata", wdata)
            setattr(self, f"{port}_rdata", self.mem[q])
