"""AXI-Stream instruction input: stream words of any width → whole instructions.

The stream carries the `.tprog` bytes in order, the first instruction in the low bytes of the
first word (TCU.md §6); zero bytes pad the last word (they decode as NoOps). A byte buffer of
``instruction bytes + word bytes`` collects words and hands out one instruction per cycle::

    words.data (D bits) ─▶ buffer[count .. count + D/8) ── low I bytes ─▶ instructions (I bytes)

``words.ready`` is high when the word fits after the instruction that may leave this cycle;
``tlast`` is not needed. ``cut`` says the stream stopped inside an instruction: part of one
is held, not all of its bytes are zero (the padding after a program's last instruction is
zero bytes, which the gearbox cannot tell from a cut NoOp) and no word is offered; the top
counts it against the timeout register. Throughput: one instruction per cycle while the stream keeps up
(a D-bit stream delivers D/8 bytes per cycle).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register

from ..isa import clog2
from .stream import SINK, SOURCE, Stream, named


class InstructionStream:
    """Width converter from AXI-Stream words to whole instructions.

    Args:
        instruction_bytes: I, bytes of one instruction (``Layout.instruction_bytes``).
        data_width: D, bits of a stream word (whole bytes).
        name: prefix of the wires and registers.

    Ports:
        words: :class:`~tcu_hw.blocks.stream.Stream` sink, ``data`` (D): AXI-Stream
            ``tdata``/``tvalid``/``tready``.
        instructions: :class:`~tcu_hw.blocks.stream.Stream` source, ``data`` (8·I): one
            instruction per transfer.
        cut: output (1), a partial instruction with a non-zero byte is held and
            ``words.valid`` is low.

    Latency: a word accepted at cycle t completes an instruction on ``instructions.valid``
    at t+1 at the earliest.
    """

    def __init__(self, instruction_bytes: int, data_width: int, name: str = "instr") -> None:
        if data_width % 8:
            raise ValueError("the stream width must be whole bytes")
        ib, wb = instruction_bytes, data_width // 8
        cap = ib + wb
        self.words = Stream(data_width, f"{name}_words", SINK)
        self.instructions = Stream(8 * ib, f"{name}_instructions", SOURCE)
        tdata = self.words.payload.data
        buf = Register(8 * cap, f"{name}_buffer")
        count = Register(clog2(cap + 1), f"{name}_count")              # bytes held
        self.instructions.drive(count >= ib, data=buf[:8 * ib])
        leave = self.instructions.fire
        after = pyrtl.select(leave, (count - ib)[:count.bitwidth], count)
        self.words.ready <<= after <= cap - wb
        take = self.words.fire
        shifted = pyrtl.select(leave, pyrtl.concat(Const(0, 8 * ib), buf[8 * ib:]), buf)
        # the word lands at byte `after` (0 .. cap - wb): a mux of fixed placements
        placements = [pyrtl.concat(tdata, Const(0, 8 * k)).zero_extended(8 * cap)
                      if k else tdata.zero_extended(8 * cap) for k in range(cap - wb + 1)]
        incoming = pyrtl.mux(after, *placements, default=Const(0, 8 * cap))
        buf.next <<= pyrtl.select(take, shifted | incoming, shifted)
        count.next <<= pyrtl.select(take, (after + wb)[:count.bitwidth], after)
        # bytes above `count` are always zero (words are placed on zeros, shifts fill zeros)
        partial = (count != 0) & (count < ib) & (buf[:8 * ib] != 0)
        self.cut = named(partial & ~self.words.valid, f"{name}_cut")
