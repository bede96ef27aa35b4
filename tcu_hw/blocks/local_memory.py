"""Local (main) memory: a true dual-port RAM with registered reads (block RAM style).

Port A serves the array/accumulator side, port B the DRAM side. Each port does one read or
one write per cycle::

    cycle t     addr, write, wdata presented    (a write commits at the end of t)
    cycle t+1   rdata = mem[addr of cycle t]

A read presented at cycle t+1 or later sees a write presented at cycle t on either port. The
core never accesses an address on one port in the cycle the other port writes it (its hazard
tracking guarantees it), and never uses a port's read data from a cycle in which that port
wrote, so the memory needs no transparency between ports (see :mod:`tcu_hw.blocks.ram`).
"""

from __future__ import annotations

from .ram import Ram


class LocalMemory:
    """A ``depth`` × ``width`` true dual-port memory with registered reads.

    Args:
        depth: words (vectors); the address has max(clog2(depth), 1) bits.
        width: bits of a word (one vector: n·W).
        name: prefix of the RAM and its wires (port A: ``<name>_ram_p0_addr`` ...).
        external: build the RAM as ports to a Verilog RAM module, appending its description
            to this list (see :mod:`tcu_hw.blocks.ram`); None: a PyRTL MemBlock.

    Ports:
        a, b: :class:`~tcu_hw.blocks.stream.RamPort` (memory side): inputs ``addr`` (A),
            ``write`` (1), ``wdata`` (width); output ``rdata`` (width), the word at the
            previous cycle's address. No handshake: every port serves every cycle.

    Latency: one cycle. ``mem`` is the MemBlock (None when external).
    """

    def __init__(self, depth: int, width: int, name: str = "local",
                 external: list | None = None) -> None:
        ram = Ram(f"{name}_ram", "tdp", width, depth, external=external)
        self.ram = ram
        self.mem = ram.mem
        self.a, self.b = ram.ports
