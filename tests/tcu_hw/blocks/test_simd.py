"""The SIMD ALU array against tcu_hw.alu with a sequential model of registers and tables."""

from __future__ import annotations

import math

import numpy as np
import pyrtl
import pytest

from sim.pyrtl_sim import ArraySimulation
from tcu_hw import alu, numeric
from tcu_hw.arch import Architecture
from tcu_hw.blocks import lanes
from tcu_hw.blocks.simd import SimdArray
from tcu_hw.isa import SimdOp

from ...conftest import requires_gcc

pytestmark = requires_gcc

BASE = dict(data_type="FP16BP8", array_size=4, dram0_depth=64, dram1_depth=64,
            local_depth=64, accumulator_depth=64, simd_registers_depth=3, stride0_depth=1,
            stride1_depth=1)


def run(arch, steps):
    """steps: dicts with op/left/right/dest/input (an ALU step) or lut=(table, index, data)."""
    n, w, tw = arch.array_size, arch.dtype.accumulator.width, arch.dtype.width
    count = len(steps)
    abits = max(1, (count - 1).bit_length())
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        simd = SimdArray.from_arch(arch, name="simd")
        addr = pyrtl.Register(abits, "addr")
        addr.next <<= addr + 1
        cmd = simd.command.payload
        fields = {}
        for f, width in (("valid", 1), ("op", cmd.op.bitwidth), ("left", cmd.left.bitwidth),
                         ("right", cmd.right.bitwidth), ("dest", cmd.dest.bitwidth),
                         ("input", n * w), ("lut_valid", 1), ("lut_table", 4),
                         ("lut_index", 4)):
            fields[f] = pyrtl.MemBlock(width, abits, f"in_{f}")[addr]
        names = ("op", "left", "right", "dest", "input")
        simd.command.drive(fields["valid"], **{f: fields[f] for f in names})
        if arch.lut_count:
            entries = fields["input"] if tw == w else \
                lanes.join([lane[:tw] for lane in lanes.split(fields["input"], n)])
            simd.lut.drive(fields["lut_valid"], table=fields["lut_table"],
                           index=fields["lut_index"], data=entries)
        out = pyrtl.MemBlock(n * w, abits, "out")
        out[addr] <<= simd.out
    sim = ArraySimulation(block=block)
    for f in ("valid", "op", "left", "right", "dest", "lut_valid", "lut_table", "lut_index"):
        if sim.has_memory(f"in_{f}"):
            sim.memory(f"in_{f}")[:count, 0] = [s.get(f, 0) for s in steps]
    sim.memory("in_input")[:count] = lanes.pack(np.array([s["input"] for s in steps]), w)
    sim.run_cycles(count)
    return lanes.unpack(sim.memory("out")[:count], n, w)


def model(arch, steps):
    dt, n = arch.dtype.accumulator, arch.array_size
    regs = np.zeros((arch.simd_registers_depth + 1, n), np.int64)
    tables = np.zeros((arch.lut_count + 1, max(arch.lut_depth, 1)), np.int64)
    outs = []
    for s in steps:
        inp = np.array(s["input"])
        if s.get("lut_valid"):
            k = s["lut_index"] * n
            part = inp[:max(0, min(n, arch.lut_depth - k))]
            tables[s["lut_table"], k:k + len(part)] = part
            outs.append(None)
            continue
        left = inp if s["left"] == 0 else regs[s["left"]].copy()
        right = inp if s["right"] == 0 else regs[s["right"]].copy()
        op = s["op"]
        if op == SimdOp.NOOP:
            out = inp
        elif op == SimdOp.REQUANTIZE:
            out = numeric.requantize(left, right, regs[s["right"] + 1], arch.dtype)
        elif op == SimdOp.LOOKUP:
            out, values = alu.lookup(left, tables, dt)
            for t in range(arch.lut_count):
                regs[s["dest"] + 1 + t] = values[t]
        else:
            out = alu.simd_result(op, left, right, dt)
        if s["dest"] and op != SimdOp.NOOP:
            regs[s["dest"]] = out
        outs.append(np.array(out))
    return outs


def random_steps(arch, count, rng, ops):
    n, dt, depth = arch.array_size, arch.dtype.accumulator, arch.simd_registers_depth
    edges = [dt.min_raw, -1, 0, 1, dt.max_raw, 256, -256, 128]
    spread = 700 if dt.width <= 18 else 1 << (dt.width - 2)     # integer lanes: wide values
    steps = []
    for _ in range(count):
        vec = [int(rng.choice(edges)) if rng.random() < 0.3 else
               int(rng.integers(-spread, spread)) for _ in range(n)]
        op = int(rng.choice(ops))
        top = depth - (arch.lut_count if op == SimdOp.LOOKUP else 0)
        right = int(rng.integers(1, depth)) if op == SimdOp.REQUANTIZE else \
            int(rng.integers(0, depth + 1))
        if op == SimdOp.REQUANTIZE and rng.random() < 0.5:     # load real parameters first
            f = numeric.requantize_fields(arch.dtype)
            params = numeric.pack_requantize(
                rng.integers(0, 1 << f.multiplier_bits, n), rng.integers(0, 64, n),
                rng.integers(arch.dtype.min_raw, arch.dtype.max_raw + 1, n), arch.dtype)
            steps.append(dict(valid=1, op=int(SimdOp.MOVE), left=0, right=0, dest=right,
                              input=params.tolist()))
        steps.append(dict(valid=1, op=op, left=int(rng.integers(0, depth + 1)), right=right,
                          dest=int(rng.integers(0, top + 1)), input=vec))
    return steps


def check(arch, steps):
    got = run(arch, steps)
    for k, want in enumerate(model(arch, steps)):
        if want is not None:
            assert got[k].tolist() == want.tolist(), (k, steps[k])


def test_all_ops_with_registers():
    arch = Architecture(**BASE)
    rng = np.random.default_rng(0)
    check(arch, random_steps(arch, 600, rng, list(range(16))))


def test_no_registers():
    arch = Architecture(**{**BASE, "simd_registers_depth": 0})
    rng = np.random.default_rng(1)
    check(arch, random_steps(arch, 200, rng, list(range(16))))


@pytest.mark.parametrize("depth", [6, 8])
def test_lookup_tables(depth):
    arch = Architecture(**{**BASE, "lut_count": 2, "lut_depth": depth})
    n = arch.array_size
    rng = np.random.default_rng(depth)
    keys = sorted(rng.choice(np.arange(-600, 600), depth, replace=False).tolist())
    steps = []
    for t, table in enumerate([keys, rng.integers(-500, 500, depth).tolist(),
                               rng.integers(-500, 500, depth).tolist()]):
        padded = table + [0] * (math.ceil(depth / n) * n - depth)
        for j in range(math.ceil(depth / n)):
            steps.append(dict(lut_valid=1, lut_table=t, lut_index=j,
                              input=padded[j * n:(j + 1) * n]))
    steps += random_steps(arch, 300, rng, [SimdOp.LOOKUP, SimdOp.MOVE, SimdOp.ADD])
    check(arch, steps)


@pytest.mark.parametrize("depth", [3, 5, 7, 16])
def test_lookup_with_keys_in_any_order(depth):
    """The priority encoder (a balanced tree) picks the highest k with key[k] <= x for keys
    in any order, repeated keys included, at depths that are not powers of two."""
    arch = Architecture(**{**BASE, "lut_count": 1, "lut_depth": depth})
    n = arch.array_size
    rng = np.random.default_rng(depth + 100)
    keys = rng.integers(-300, 300, depth).tolist()
    keys[-1] = keys[0]
    steps = []
    for t, table in enumerate([keys, rng.integers(-500, 500, depth).tolist()]):
        padded = table + [0] * (math.ceil(depth / n) * n - depth)
        for j in range(math.ceil(depth / n)):
            steps.append(dict(lut_valid=1, lut_table=t, lut_index=j,
                              input=padded[j * n:(j + 1) * n]))
    steps += random_steps(arch, 300, rng, [SimdOp.LOOKUP, SimdOp.MOVE])
    check(arch, steps)


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_integer_lanes_and_requantize(dtype):
    """INT8/INT16: every op on INT32/INT48 lanes, Multiply with its right operand clipped to
    the lane multiplier, Requantize from random parameter and bias registers (random shifts
    0..63, multipliers and zero points), all against tcu_hw.alu / tcu_hw.numeric."""
    arch = Architecture(**{**BASE, "data_type": dtype})
    rng = np.random.default_rng(7)
    ops = list(range(16)) + [int(SimdOp.REQUANTIZE)] * 6
    check(arch, random_steps(arch, 800, rng, ops))


def test_integer_lookup_compares_wide_values_with_narrow_keys():
    arch = Architecture(**{**BASE, "data_type": "INT8", "lut_count": 1, "lut_depth": 8})
    rng = np.random.default_rng(8)
    keys = [-128, -90, -40, -1, 0, 30, 64, 127]
    steps = [dict(lut_valid=1, lut_table=t, lut_index=j, input=table[4 * j:4 * j + 4])
             for t, table in enumerate([keys, rng.integers(-128, 128, 8).tolist()])
             for j in range(2)]
    steps += random_steps(arch, 300, rng, [SimdOp.LOOKUP, SimdOp.MOVE, SimdOp.SUBTRACT])
    check(arch, steps)


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_requantize_ties_and_edges_on_the_lanes(dtype):
    """Exact ties at shifts 1..9 and at the widths' edges (31, 47, 48, 62, 63), M of 0 and
    its largest value, zero points and biases at their limits: round half to even, not
    half up, and saturation, lane for lane."""
    arch = Architecture(**{**BASE, "data_type": dtype, "simd_registers_depth": 3})
    dt, at, n = arch.dtype, arch.dtype.accumulator, arch.array_size
    mmax = (1 << numeric.requantize_fields(dt).multiplier_bits) - 1
    steps = []
    for s in list(range(0, 10)) + [31, 47, 48, 62, 63]:
        h = 1 << max(s - 1, 0)
        lefts = [h, 3 * h, -h, -3 * h] if s < at.width - 2 else [at.max_raw, at.min_raw, -1, 1]
        for m, zp, bias in ((1, 0, 0), (1, dt.max_raw, 0), (mmax, dt.min_raw, at.max_raw),
                            (0, -1, at.min_raw), (mmax, 0, at.min_raw)):
            params = numeric.pack_requantize([m] * n, [s] * n, [zp] * n, dt).tolist()
            steps += [dict(valid=1, op=SimdOp.MOVE, left=0, right=0, dest=1, input=params),
                      dict(valid=1, op=SimdOp.MOVE, left=0, right=0, dest=2, input=[bias] * n),
                      dict(valid=1, op=SimdOp.REQUANTIZE, left=0, right=1, dest=3,
                           input=lefts[:n])]
    check(arch, steps)
