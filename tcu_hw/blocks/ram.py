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
from .stream import RamPort, named


@dataclass(frozen=True)
class RamSpec:
    """What :mod:`tcu_hw.verilog` needs to write and connect an external RAM."""

    name: str
    kind: str              # "tdp" or "sdp"
    width: int
    depth: int
    reads: int             # read ports of an sdp RAM


class Ram:
    """A memory of ``depth`` words of ``width`` bits with registered reads.

    Args:
        name: prefix of the memory and its wires (and of its Verilog instance).
        kind: ``"tdp"`` (two read/write ports) or ``"sdp"`` (one write port, ``reads`` read
            ports).
        width: bits per word.
        depth: words (A = max(clog2(depth), 1) address bits).
        reads: read ports of an ``sdp`` memory.
        external: a list: build the memory as ports to a Verilog RAM module and append its
            :class:`RamSpec` (``mem`` is then None); None: a PyRTL MemBlock (``mem``).

    Ports:
        ports: ``tdp`` only, two :class:`~tcu_hw.blocks.stream.RamPort` (memory side: inputs
            ``addr``, ``write``, ``wdata``; output ``rdata``).
        waddr, write, wdata: ``sdp`` only, inputs (A, 1, width bits): the write port.
        raddr: ``sdp`` only, a list of inputs (A): one read address per read port.
        rdata: ``sdp`` only, a list of outputs (width): the words read.

    Latency: read data one cycle after its address; a write commits at the end of its
    cycle.
    """

    def __init__(self, name: str, kind: str, width: int, depth: int, reads: int = 1,
                 external: list | None = None) -> None:
        a = max(clog2(depth), 1)
        self.spec = RamSpec(name, kind, width, depth, reads if kind == "sdp" else 2)
        self.addr_bits = a
        if kind == "tdp":
            self.ports = [RamPort(a, width, f"{name}_p{p}", side="memory") for p in range(2)]
            raddrs = [p.addr for p in self.ports]
            writes = [(p.addr, p.write, p.wdata) for p in self.ports]
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
            read = []
            for k, addr in enumerate(raddrs):
                q = Register(a, f"{name}_raddr{k}_q")
                q.next <<= addr
                read.append(mem[q])
        else:
            external.append(self.spec)
            self.mem = None
            for wire in [*raddrs, *[w for pair in writes for w in pair[1:]]] + \
                    ([self.waddr] if kind == "sdp" else []):
                out = pyrtl.Output(wire.bitwidth, f"xram_{wire.name}")
                out <<= wire
            read = [pyrtl.Input(width, f"xram_{name}_rdata{k}") for k in range(len(raddrs))]
        if kind == "tdp":
            for p, data in zip(self.ports, read):
                p.rdata <<= data
        else:
            self.rdata = [named(data, f"{name}_rdata{k}") for k, data in enumerate(read)]
