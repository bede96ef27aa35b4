"""Performance sampler (TCU.md §6): a 64-bit status word every ``interval`` cycles.

Word: bits 31:0 the program counter, then valid/ready pairs at bits 32/33 array, 34/35
accumulator, 36/37 dataflow, 38/39 DRAM1, 40/41 DRAM0, 42/43 local port B, 44/45 local
port A, 46/47 instruction; bits 63:48 zero. ``last`` marks every ``block_size``-th word.
``interval = 0`` produces nothing; a new interval takes effect at once (a count already past
it samples on the next cycle). A sample that finds the output register still occupied is
dropped (samples are never queued); the output follows AXI-Stream rules (valid holds until
ready).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from .stream import SOURCE, Stream, Struct, named


class Sampler:
    """Samples the program counter and eight valid/ready pairs into a stream of words.

    Args:
        block_size: words per block (``last`` on every ``block_size``-th word; ≥ 1).
        name: prefix of the wires and registers.

    Ports:
        interval: input (16), cycles between samples (0: none).
        pc: input (32), the program counter.
        pairs: input (16), the eight valid/ready pairs, array first, valid in the even bit.
        samples: :class:`~tcu_hw.blocks.stream.Stream` source: ``data`` (64), ``last`` (1)
            (AXI-Stream ``tdata``/``tlast``; ``valid`` holds until ``ready``).
        dropped: output (1), a sample was dropped this cycle.

    Latency: the word taken when a sample is due is on ``samples`` the next cycle.
    """

    def __init__(self, block_size: int, name: str = "sample") -> None:
        if block_size < 1:
            raise ValueError("the sampler needs a block size of at least 1")
        self.interval = WireVector(16, f"{name}_interval")
        self.pc = WireVector(32, f"{name}_pc")
        self.pairs = WireVector(16, f"{name}_pairs")
        self.samples = Stream(Struct(data=64, last=1), f"{name}_samples", SOURCE)
        count = Register(16, f"{name}_count")
        # ">=": an interval lowered below the running count takes effect at once
        due = (self.interval != 0) & (count >= (self.interval - 1)[:16])
        count.next <<= pyrtl.select(due | (self.interval == 0), Const(0, 16), (count + 1)[:16])
        valid = Register(1, f"{name}_valid")
        data = Register(64, f"{name}_data")
        last = Register(1, f"{name}_last")
        words = Register(max(block_size.bit_length(), 1), f"{name}_words")
        leaving = valid & self.samples.ready
        take = due & (~valid | leaving)
        word = pyrtl.concat(Const(0, 16), self.pairs, self.pc)
        wrap = words == block_size - 1
        valid.next <<= take | (valid & ~leaving)
        data.next <<= pyrtl.select(take, word, data)
        last.next <<= pyrtl.select(take, wrap, last)
        words.next <<= pyrtl.select(take, pyrtl.select(wrap, Const(0, words.bitwidth),
                                                       (words + 1)[:words.bitwidth]), words)
        self.samples.drive(valid, data=data, last=last)
        self.dropped = named(due & ~take, f"{name}_dropped")
