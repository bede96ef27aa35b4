"""Performance sampler (TCU.md §6): a 64-bit status word every ``interval`` cycles.

Word: bits 31:0 the program counter, then valid/ready pairs at bits 32/33 array, 34/35
accumulator, 36/37 dataflow, 38/39 DRAM1, 40/41 DRAM0, 42/43 local port B, 44/45 local
port A, 46/47 instruction; bits 63:48 zero. ``tlast`` marks every ``block_size``-th word.
``interval = 0`` produces nothing; a new interval takes effect at once (a count already past
it samples on the next cycle). A sample that finds the output register still occupied is
dropped (samples are never queued); the output follows AXI-Stream rules (valid holds until
ready).

Inputs (``name_`` prefix): ``interval`` (16), ``pc`` (32), ``pairs`` (16: the eight
valid/ready pairs, array first, valid in the even bit), ``tready``. Outputs ``tvalid``,
``tdata`` (64), ``tlast``, ``dropped`` (a sample was dropped this cycle). Latency: the word
taken when a sample is due appears on ``tvalid``/``tdata`` the next cycle.
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector
from .stream import name_ports


class Sampler:
    def __init__(self, block_size: int, name: str = "sample") -> None:
        if block_size < 1:
            raise ValueError("the sampler needs a block size of at least 1")
        self.interval = WireVector(16, f"{name}_interval")
        self.pc = WireVector(32, f"{name}_pc")
        self.pairs = WireVector(16, f"{name}_pairs")
        self.tready = WireVector(1, f"{name}_tready")
        count = Register(16, f"{name}_count")
        # ">=": an interval lowered below the running count takes effect at once
        due = (self.interval != 0) & (count >= (self.interval - 1)[:16])
        count.next <<= pyrtl.select(due | (self.interval == 0), Const(0, 16), (count + 1)[:16])
        valid = Register(1, f"{name}_valid")
        data = Register(64, f"{name}_data")
        last = Register(1, f"{name}_last")
        words = Register(max(block_size.bit_length(), 1), f"{name}_words")
        leaving = valid & self.tready
        take = due & (~valid | leaving)
        word = pyrtl.concat(Const(0, 16), self.pairs, self.pc)
        wrap = words == block_size - 1
        valid.next <<= take | (valid & ~leaving)
        data.next <<= pyrtl.select(take, word, data)
        last.next <<= pyrtl.select(take, wrap, last)
        words.next <<= pyrtl.select(take, pyrtl.select(wrap, Const(0, words.bitwidth),
                                                       (words + 1)[:words.bitwidth]), words)
        self.tvalid, self.tdata, self.tlast = valid, data, last
        self.dropped = due & ~take
        name_ports(self, name)
