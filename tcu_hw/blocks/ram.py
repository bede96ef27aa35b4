"""Memories with registered-address reads: a PyRTL MemBlock, or ports to a Verilog RAM.

Every memory of the core is one of two shapes:

- ``tdp``: two ports, each doing one read or one write per cycle (local memory);
- ``sdp``: one write port and ``reads`` read ports (accumulators).

A read presents its address in cycle t and gets the data in cycle t+1. The core never reads
an address in the same cycle another port writes it, and a port that writes does not use
the read data of that cycle, so the two implementations below behave identically:

- simulation (default): a PyRTL MemBlock, read through an address register;
- Verilog (``external`` list given): the block's ports become Inputs/Outputs of the PyRTL
  module and a description is appended to ``external``; :mod:`tcu_hw.verilog` writes a
  block-RAM template of exactly ``depth`` words (one array per read port for ``sdp``) and
  connects it. Templates read "read-first" and need no transparency between ports.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyrtl
from pyrtl import Register, WireVector

from ..isa import clog2
from .stream import name_ports


@dataclass(frozen=True)
class RamSpec:
    """What :mod:`tcu_hw.verilog` needs to write and connect an external RAM."""

    name: str
    kind: str              # "tdp" or "sdp"
    width: int
    depth: int
    reads: int             # read ports of an sdp RAM


class Ram:
    """Ports: ``tdp``: ``addr[p]``, ``write[p]``, ``wdata[p]``, ``rdata[p]`` for p in 0, 1;
    ``sdp``: ``waddr``, ``write``, ``wdata``, and ``raddr[k]``, ``rdata[k]`` per read port.
    Drive the address/write/data wires with ``<<=``."""

    def __init__(self, name: str, kind: str, width: int, depth: int, reads: int = 1,
                 external: list | None = None) -> None:
        a = max(clog2(depth), 1)
        self.spec = RamSpec(name, kind, width, depth, reads if kind == "sdp" else 2)
        self.addr_bits = a
        if kind == "tdp":
            self.addr = [WireVector(a, f"{name}_p{p}_addr") for p in range(2)]
            self.write = [WireVector(1, f"{name}_p{p}_write") for p in range(2)]
            self.wdata = [WireVector(width, f"{name}_p{p}_wdata") for p in range(2)]
            raddrs = self.addr
            writes = list(zip(self.addr, self.write, self.wdata))
        elif kind == "sdp":
            self.waddr = WireVector(a, f"{name}_waddr")
            self.write = WireVector(1, f"{name}_write")
            self.wdata = WireVector(width, f"{name}_wdata")
            self.raddr = [WireVector(a, f"{name}_r{k}_addr") for k in range(reads)]
            raddrs = self.raddr
            writes = [(self.waddr, self.write, self.wdata)]
        else:
            raise ValueError(f"unknown RAM kind {kind!r}")

        if external is None:
            mem = pyrtl.MemBlock(width, a, f"{name}_mem", max_read_ports=len(raddrs),
                                 max_write_ports=len(writes))
            self.mem = mem
            for addr, write, data in writes:
                mem[addr] <<= pyrtl.MemBlock.EnabledWrite(data, write)
            self.rdata = []
            for k, addr in enumerate(raddrs):
                q = Register(a, f"{name}_raddr{k}_q")
                q.next <<= addr
                self.rdata.append(mem[q])
        else:
            external.append(self.spec)
            self.mem = None
            for wire in [*raddrs, *[w for pair in writes for w in pair[1:]]] + \
                    ([self.waddr] if kind == "sdp" else []):
                out = pyrtl.Output(wire.bitwidth, f"xram_{wire.name}")
                out <<= wire
            self.rdata = [pyrtl.Input(width, f"xram_{name}_rdata{k}")
                          for k in range(len(raddrs))]
        name_ports(self, name)
