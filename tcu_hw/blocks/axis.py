"""AXI-Stream instruction input: stream words of any width → whole instructions.

The stream carries the `.tprog` bytes in order, the first instruction in the low bytes of the
first word (TCU.md §6); zero bytes pad the last word (they decode as NoOps). A byte buffer of
``instruction bytes + word bytes`` collects words and hands out one instruction per cycle::

    tdata (D bits) ─▶ buffer[count .. count + D/8) ── low I bytes ─▶ instruction (I bytes)

``tready`` is high when the word fits after the instruction that may leave this cycle;
``tlast`` is ignored. Throughput: one instruction per cycle while the stream keeps up
(a D-bit stream delivers D/8 bytes per cycle).

Ports (``name_`` prefix): inputs ``tdata`` (D), ``tvalid``, ``out_ready``; outputs
``tready``, ``out_valid``, ``out_data`` (8·I). Both sides are valid/ready. Latency: a word
accepted at cycle t completes an instruction on ``out_valid`` at t+1 at the earliest.
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import clog2
from .stream import name_ports


class InstructionStream:
    def __init__(self, instruction_bytes: int, data_width: int, name: str = "instr") -> None:
        if data_width % 8:
            raise ValueError("the stream width must be whole bytes")
        ib, wb = instruction_bytes, data_width // 8
        cap = ib + wb
        self.tdata = WireVector(data_width, f"{name}_tdata")
        self.tvalid = WireVector(1, f"{name}_tvalid")
        self.out_ready = WireVector(1, f"{name}_out_ready")
        buf = Register(8 * cap, f"{name}_buffer")
        count = Register(clog2(cap + 1), f"{name}_count")              # bytes held
        self.out_valid = count >= ib
        self.out_data = buf[:8 * ib]
        leave = self.out_valid & self.out_ready
        after = pyrtl.select(leave, (count - ib)[:count.bitwidth], count)
        self.tready = WireVector(1, f"{name}_tready")
        self.tready <<= after <= cap - wb
        take = self.tvalid & self.tready
        shifted = pyrtl.select(leave, pyrtl.concat(Const(0, 8 * ib), buf[8 * ib:]), buf)
        # the word lands at byte `after` (0 .. cap - wb): a mux of fixed placements
        placements = [pyrtl.concat(self.tdata, Const(0, 8 * k)).zero_extended(8 * cap)
                      if k else self.tdata.zero_extended(8 * cap) for k in range(cap - wb + 1)]
        incoming = pyrtl.mux(after, *placements, default=Const(0, 8 * cap))
        buf.next <<= pyrtl.select(take, shifted | incoming, shifted)
        count.next <<= pyrtl.select(take, (after + wb)[:count.bitwidth], after)
        name_ports(self, name)
