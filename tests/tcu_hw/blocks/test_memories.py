"""Accumulator (in-place add) and local memory blocks against Python models."""

from __future__ import annotations

import numpy as np
import pyrtl
import pytest

from sim.pyrtl_sim import ArraySimulation
from tcu_hw import numeric
from tcu_hw.blocks import lanes
from tcu_hw.blocks.accumulator import Accumulator
from tcu_hw.blocks.local_memory import LocalMemory
from tcu_hw.numeric import FP16BP8, INT8, INT16

from ...conftest import requires_gcc

pytestmark = requires_gcc


def _player(count, fields):
    abits = max(1, (count - 1).bit_length())
    addr = pyrtl.Register(abits, "addr")
    addr.next <<= addr + 1
    return abits, addr, {f: pyrtl.MemBlock(w, abits, f"in_{f}")[addr] for f, w in fields.items()}


def _acc_model(old, vec, accum, shift, dt):
    """One write of the accumulator's model (docs/integer.md for the shift-in)."""
    if shift:
        w, aw = dt.width, dt.accumulator.width
        v = ((old << w) + (vec & ((1 << w) - 1))) & ((1 << aw) - 1)
        return v - ((v >> (aw - 1)) << aw)
    return numeric.add(old, vec, dt.accumulator) if accum else vec


@pytest.mark.parametrize("dt", [FP16BP8, INT8, INT16], ids=lambda d: d.name)
def test_accumulator_writes_accumulates_and_reads(dt):
    n, depth = 4, 16
    w = dt.accumulator.width
    integer = dt.is_integer
    rng = np.random.default_rng(0)
    count = 2000
    ops = []
    for _ in range(count):
        a = int(rng.integers(0, 4)) if rng.random() < 0.7 else int(rng.integers(0, depth))
        big = rng.random() < 0.2
        hi = dt.accumulator.max_raw if integer else dt.max_raw
        vec = rng.integers(-hi - 1, hi + 1, n) if big else rng.integers(-900, 900, n)
        ops.append(dict(w_valid=int(rng.random() < 0.8), w_addr=a, w_acc=int(rng.random() < 0.6),
                        w_shift=int(integer and rng.random() < 0.3),
                        r_addr=int(rng.integers(0, 4)), data=vec.tolist()))
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        acc = Accumulator(depth, n, dt)
        fields = {"w_valid": 1, "w_addr": 4, "w_acc": 1, "r_addr": 4, "data": n * w}
        abits, addr, f = _player(count, {**fields, **({"w_shift": 1} if integer else {})})
        extra = {"shift": f["w_shift"]} if integer else {}
        acc.write.drive(f["w_valid"], addr=f["w_addr"], accumulate=f["w_acc"], data=f["data"],
                        **extra)
        acc.r_addr <<= f["r_addr"]
        reads = pyrtl.MemBlock(n * w, abits, "reads")
        reads[addr] <<= acc.r_data
    sim = ArraySimulation(block=block)
    for k in ("w_valid", "w_addr", "w_acc", "r_addr") + (("w_shift",) if integer else ()):
        sim.memory(f"in_{k}")[:count, 0] = [o[k] for o in ops]
    sim.memory("in_data")[:count] = lanes.pack(np.array([o["data"] for o in ops]), w)
    sim.run_cycles(count + 2)
    got_reads = lanes.unpack(sim.memory("reads")[:count], n, w)
    # model: a write presented at cycle p commits at the end of p+1; the read presented at
    # cycle t-1 returns (at cycle t) the memory as of the start of cycle t
    mem = np.zeros((depth, n), np.int64)
    history = []                      # memory state at the start of each cycle
    pending = None
    for t in range(count):
        history.append(mem.copy())
        if pending is not None:
            a, vec, accum, shift = pending
            mem[a] = _acc_model(mem[a], vec, accum, shift, dt)
        o = ops[t]
        pending = (o["w_addr"], np.array(o["data"]), o["w_acc"], o["w_shift"]) \
            if o["w_valid"] else None
    for t in range(1, count):
        want = history[t][ops[t - 1]["r_addr"]]
        assert got_reads[t].tolist() == want.tolist(), t
    if pending is not None:
        a, vec, accum, shift = pending
        mem[a] = _acc_model(mem[a], vec, accum, shift, dt)
    final = lanes.unpack(sim.memory("acc_ram_mem")[:depth], n, w)
    assert np.array_equal(final, mem)
    if integer:                       # the shift-ins and the wide values happened
        assert sum(o["w_shift"] and o["w_valid"] for o in ops) > 300
        assert np.abs(mem).max() > dt.max_raw ** 2


def test_local_memory_two_ports():
    width, depth, count = 24, 32, 1500
    rng = np.random.default_rng(1)
    ops = [dict(a_addr=int(rng.integers(0, depth)), a_write=int(rng.random() < 0.4),
                a_data=int(rng.integers(0, 1 << width)), b_addr=int(rng.integers(0, depth)),
                b_write=int(rng.random() < 0.4), b_data=int(rng.integers(0, 1 << width)))
           for _ in range(count)]
    for o in ops:               # the ports never write the same address in one cycle
        if o["a_write"] and o["b_write"] and o["a_addr"] == o["b_addr"]:
            o["b_write"] = 0
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        local = LocalMemory(depth, width)
        abits, addr, f = _player(count, {k: (width if "data" in k else 5 if "addr" in k else 1)
                                         for k in ops[0]})
        for p in ("a", "b"):
            ram_port = getattr(local, p)
            for member, field in (("addr", "addr"), ("write", "write"), ("wdata", "data")):
                wire = getattr(ram_port, member)
                wire <<= f[f"{p}_{field}"]
            out = pyrtl.MemBlock(width, abits, f"out_{p}")
            out[addr] <<= ram_port.rdata
    sim = ArraySimulation(block=block)
    for k in ops[0]:
        sim.memory(f"in_{k}")[:count, 0] = [o[k] for o in ops]
    sim.run_cycles(count)
    mem = [0] * depth
    expected = {"a": [None], "b": [None]}
    for o in ops:
        # reads presented this cycle see this cycle's writes (data returned next cycle)
        for p in ("a", "b"):
            if o[f"{p}_write"]:
                mem[o[f"{p}_addr"]] = o[f"{p}_data"]
        for p in ("a", "b"):
            expected[p].append(mem[o[f"{p}_addr"]])
    for p in ("a", "b"):
        got = sim.memory(f"out_{p}")[:count, 0].tolist()
        assert got[1:] == expected[p][1:count], p
