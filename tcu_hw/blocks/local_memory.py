"""Local (main) memory: a true dual-port RAM with registered reads (block RAM style).

Port A serves the array/accumulator side, port B the DRAM side. Each port does one read or
one write per cycle::

    cycle t     x_addr, x_write, x_wdata presented   (a write commits at the end of t)
    cycle t+1   x_rdata = mem[x_addr of cycle t]

A read presented at cycle t+1 or later sees a write presented at cycle t on either port. The
core never accesses an address on one port in the cycle the other port writes it (its hazard
tracking guarantees it), and never uses a port's read data from a cycle in which that port
wrote, so the memory needs no transparency between ports (see :mod:`tcu_hw.blocks.ram`).

Ports (``name_`` prefix): inputs ``a_addr``, ``a_write``, ``a_wdata``, ``b_addr``,
``b_write``, ``b_wdata``; outputs ``a_rdata``, ``b_rdata`` (width bits).
"""

from __future__ import annotations

from pyrtl import WireVector

from ..isa import clog2
from .ram import Ram
from .stream import name_ports


class LocalMemory:
    def __init__(self, depth: int, width: int, name: str = "local",
                 external: list | None = None) -> None:
        a = max(clog2(depth), 1)
        ram = Ram(f"{name}_ram", "tdp", width, depth, external=external)
        self.ram = ram
        self.mem = ram.mem
        for p, port in enumerate(("a", "b")):
            addr = WireVector(a, f"{name}_{port}_addr")
            write = WireVector(1, f"{name}_{port}_write")
            wdata = WireVector(width, f"{name}_{port}_wdata")
            ram.addr[p] <<= addr
            ram.write[p] <<= write
            ram.wdata[p] <<= wdata
            setattr(self, f"{port}_addr", addr)
            setattr(self, f"{port}_write", write)
            setattr(self, f"{port}_wdata", wdata)
            setattr(self, f"{port}_rdata", ram.rdata[p])
        name_ports(self, name)
