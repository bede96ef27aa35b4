"""Test harness: stream vectors from memories through combinational PyRTL logic, one per cycle.

``run_vectors(fn, {name: (width, values)}, out_width)`` builds a private block in which a
counter addresses one input memory per operand, ``fn(**wires)`` computes a result, and the
result is stored at the same address; it runs one cycle per test vector on
:class:`sim.pyrtl_sim.ArraySimulation` and returns the results as Python ints.
"""

from __future__ import annotations

import numpy as np
import pyrtl

from sim.pyrtl_sim import ArraySimulation


def run_vectors(fn, inputs: dict, out_width: int, signed: bool = True) -> np.ndarray:
    count = len(next(iter(inputs.values()))[1])
    abits = max(1, (count - 1).bit_length())
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        addr = pyrtl.Register(abits, "addr")
        addr.next <<= addr + 1
        wires = {}
        for name, (width, _) in inputs.items():
            mem = pyrtl.MemBlock(width, abits, f"in_{name}")
            wires[name] = mem[addr]
        out = pyrtl.MemBlock(out_width, abits, "result")
        out[addr] <<= fn(**wires)
    sim = ArraySimulation(block=block)
    for name, (width, values) in inputs.items():
        sim.memory(f"in_{name}")[:count, 0] = np.asarray(values, np.int64) & ((1 << width) - 1)
    sim.run_cycles(count)
    res = sim.memory("result")[:count, 0].astype(np.int64)
    if signed:
        res = res - ((res >> (out_width - 1)) << out_width)
    return res
