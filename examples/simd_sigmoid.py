"""The SIMD ALU array with lookup tables computing a sigmoid, simulated with a waveform.

Imports one block, :class:`tcu_hw.blocks.simd.SimdArray`, for a 4-lane FP16BP8 architecture
with two value tables of 16 entries and three registers (``SimdArray.from_arch``). A small
controller drives the array's two sink streams (always ready: the array takes one transfer
per cycle) with ``stream.drive(valid, **fields)``::

                                                             ┌───────────┐
    tables ROM ─▶ lut     (table, index, data) ────────────▶ │ SimdArray │
    inputs ROM ─▶ command (op, left, right, dest, input) ──▶ │           │ ─ out ─▶ results RAM
                                                             └───────────┘
    controller: LOAD (12 table vectors) → RUN (3 ops a vector) → done

It first loads the key, value and slope tables through ``lut`` (a vector at a time), then
issues three SIMD operations per input vector through ``command``, the piecewise-linear
evaluation ``compiler_lite`` emits::

    Lookup(input) → R1 = x − key[k], R2 = value[k], R3 = slope[k]
    Multiply(R1, R3) → R1
    Add(R1, R2) → out, written to the results RAM

The tables come from :func:`compiler_lite.ops.lut.tables`; the results are checked bit for
bit against :func:`compiler_lite.ops.lut.evaluate` (the reference of the same arithmetic) and
their error against the exact sigmoid is printed.

    python examples/simd_sigmoid.py [--vcd sigmoid.vcd] [--vectors 8]
"""

from __future__ import annotations

import argparse

import numpy as np
import pyrtl

from compiler_lite.ops.lut import evaluate, tables
from sim.waves import memory_vectors, simulate_until
from tcu_hw import numeric
from tcu_hw.arch import Architecture, preset
from tcu_hw.blocks.lanes import to_int
from tcu_hw.blocks.simd import SimdArray
from tcu_hw.isa import SimdOp, lut_vectors


def arch() -> Architecture:
    return preset("cmoda7").with_changes("example", lut_count=2, lut_depth=16,
                                         simd_registers_depth=3)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def build(a: Architecture, tabs_raw: np.ndarray, x: np.ndarray) -> pyrtl.Block:
    n, w = a.array_size, a.dtype.width
    per = lut_vectors(a.lut_depth, n)               # vectors per table
    m = len(x)
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        simd = SimdArray.from_arch(a)
        table_vectors = [to_int(tabs_raw[t][i * n:(i + 1) * n], w)
                         for t in range(len(tabs_raw)) for i in range(per)]
        trom = pyrtl.RomBlock(n * w, 4, table_vectors, name="tables_rom", asynchronous=True,
                              pad_with_zeros=True)
        abits = max(1, (m - 1).bit_length())
        xrom = pyrtl.RomBlock(n * w, abits, [to_int(v, w) for v in x], name="inputs_rom",
                              asynchronous=True, pad_with_zeros=True)
        results = pyrtl.MemBlock(n * w, abits, name="results", asynchronous=True)
        loading = pyrtl.Register(1, "ctl_loading", reset_value=1)
        t_index = pyrtl.Register(4, "ctl_table_vector")
        vector = pyrtl.Register(abits + 1, "ctl_vector")
        phase = pyrtl.Register(2, "ctl_phase")
        running = ~loading & (vector < m)
        last_table = t_index == len(table_vectors) - 1
        loading.next <<= loading & ~last_table
        t_index.next <<= pyrtl.select(loading, t_index + 1, t_index)
        phase.next <<= pyrtl.select(running, pyrtl.select(phase == 2, 0, phase + 1), phase)
        vector.next <<= pyrtl.select(running & (phase == 2), vector + 1, vector)

        # table vector t_index = (table, index within the table); per is a power of two here
        pb = per.bit_length() - 1
        simd.lut.drive(loading, table=t_index[pb:], index=t_index[:max(pb, 1)],
                       data=trom[t_index])
        ops = [(SimdOp.LOOKUP, 0, 0, 1), (SimdOp.MULTIPLY, 1, 3, 1), (SimdOp.ADD, 1, 2, 0)]
        widths = simd.command.fields.widths

        def by_phase(k: int, field: str) -> pyrtl.WireVector:
            return pyrtl.mux(phase, *[pyrtl.Const(o[k], widths[field]) for o in ops], default=0)

        simd.command.drive(running, op=by_phase(0, "op"), left=by_phase(1, "left"),
                           right=by_phase(2, "right"), dest=by_phase(3, "dest"),
                           input=xrom[vector[:abits]])
        results[vector[:abits]] <<= pyrtl.MemBlock.EnabledWrite(simd.out,
                                                                running & (phase == 2))
        done = pyrtl.Output(1, "done")
        done <<= ~loading & (vector == m)
    return block


def run(m: int = 8, vcd: str | None = None, seed: int = 0):
    """Simulate; returns (hardware raw results, reference raw, inputs float, cycles)."""
    a = arch()
    dt, n = a.dtype, a.array_size
    tabs = tables(sigmoid, "linear", -8.0, 8.0, a, pwl=True)
    tabs_raw = np.stack([numeric.to_fixed(t, dt)[0] for t in tabs])
    xf = np.random.default_rng(seed).uniform(-6, 6, (m, n))
    x = numeric.to_fixed(xf, dt)[0]
    block = build(a, tabs_raw, x)
    sim, cycles = simulate_until(block, "done", 20 * m + 100, vcd=vcd)
    got = memory_vectors(sim, block, "results", m, n, dt.width)
    ref = evaluate(tabs, x, a, pwl=True)
    return got, ref, xf, cycles


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vcd", help="write the waveform here")
    p.add_argument("--vectors", type=int, default=8)
    args = p.parse_args(argv)
    got, ref, xf, cycles = run(args.vectors, args.vcd)
    ok = np.array_equal(got, ref)
    err = np.abs(numeric.to_float(got, arch().dtype) - sigmoid(xf)).max()
    print(f"sigmoid of {args.vectors} vectors in {cycles} cycles (tables loaded, then 3 SIMD "
          f"ops per vector); bit-exact with the reference: {ok}; max error vs exact "
          f"sigmoid {err:.4f}")
    if args.vcd:
        print(f"waveform: {args.vcd}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
