"""A standalone 4×4 systolic array with its own controller, simulated with a waveform.

Imports one block, :class:`tcu_hw.blocks.systolic_array.SystolicArray`, and drives it with a
small controller of its own: it pushes one weight tile ``[bias, row 0 … row 3]`` from a ROM
(the last row first: each push shifts the chain, so the bias, pushed last, ends in the bias
slot), then streams the input vectors from a second ROM, one per cycle, and stores each
result in a RAM when it leaves the array n cycles later. The results are checked against
:func:`tcu_hw.numeric.matmul`, the bit-exact reference (every processing element rounds half
to even and saturates).

::

    weights ROM ──load_valid/load_data──▶ ┌──────────────┐
    inputs  ROM ──in_valid/in_data/tag──▶ │ SystolicArray │──out_valid/data/tag──▶ results RAM
    controller: LOAD (n+1) → RUN (m) → DRAIN (n) → done

    python examples/systolic_array_4x4.py [--vcd systolic.vcd] [--vectors 12]
"""

from __future__ import annotations

import argparse

import numpy as np
import pyrtl

from sim.waves import memory_vectors, simulate_until
from tcu_hw.blocks.lanes import to_int
from tcu_hw.blocks.systolic_array import SystolicArray
from tcu_hw.numeric import data_type, matmul

N = 4
DT = data_type("FP16BP8")


def build(tile: np.ndarray, x: np.ndarray) -> tuple[pyrtl.Block, SystolicArray]:
    """The design: array + controller + ROMs + a result RAM (outputs ``done``, ``cycle``)."""
    w = DT.width
    m = len(x)
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        tag_bits = max(1, (m - 1).bit_length())
        array = SystolicArray(N, DT, tag_width=tag_bits)
        # push order: row n-1, …, row 0, bias
        pushes = [to_int(tile[r], w) for r in range(N, -1, -1)]
        wrom = pyrtl.RomBlock(N * w, 3, pushes, name="weights_rom", asynchronous=True,
                              pad_with_zeros=True)
        xrom = pyrtl.RomBlock(N * w, tag_bits, [to_int(v, w) for v in x], name="inputs_rom",
                              asynchronous=True, pad_with_zeros=True)
        results = pyrtl.MemBlock(N * w, tag_bits, name="results", asynchronous=True)

        LOAD, RUN, DRAIN, DONE = 0, 1, 2, 3
        state = pyrtl.Register(2, "ctl_state")
        count = pyrtl.Register(max(tag_bits, 3) + 1, "ctl_count")
        with pyrtl.conditional_assignment:
            with state == LOAD:
                with count == N:
                    state.next |= RUN
                    count.next |= 0
                with pyrtl.otherwise:
                    count.next |= count + 1
            with state == RUN:
                with count == m - 1:
                    state.next |= DRAIN
                    count.next |= 0
                with pyrtl.otherwise:
                    count.next |= count + 1
            with state == DRAIN:
                with count == N:
                    state.next |= DONE
                with pyrtl.otherwise:
                    count.next |= count + 1

        array.load_valid <<= state == LOAD
        array.load_data <<= wrom[count[:3]]
        array.in_valid <<= state == RUN
        array.in_data <<= xrom[count[:tag_bits]]
        array.in_tag <<= count[:tag_bits]
        array.in_pass <<= 0
        results[array.out_tag] <<= pyrtl.MemBlock.EnabledWrite(array.out_data,
                                                               array.out_valid)
        done = pyrtl.Output(1, "done")
        done <<= state == DONE
        probe = pyrtl.Output(1, "out_valid")
        probe <<= array.out_valid
    return block, array


def run(m: int = 12, vcd: str | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray,
                                                                     int]:
    """Simulate; returns (hardware results, reference, cycles)."""
    rng = np.random.default_rng(seed)
    tile = rng.integers(-300, 300, (N + 1, N))          # raw FP16BP8: value × 256
    x = rng.integers(-400, 400, (m, N))
    block, _ = build(tile, x)
    sim, cycles = simulate_until(block, "done", 10 * (m + 2 * N + 4), vcd=vcd)
    got = memory_vectors(sim, block, "results", m, N, DT.width)
    ref = matmul(x, tile[1:], tile[0], DT)
    return got, ref, cycles


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vcd", help="write the waveform here (open with gtkwave or surfer)")
    p.add_argument("--vectors", type=int, default=12)
    args = p.parse_args(argv)
    got, ref, cycles = run(args.vectors, args.vcd)
    ok = np.array_equal(got, ref)
    print(f"{args.vectors} vectors through a {N}x{N} {DT.name} array in {cycles} cycles "
          f"({N + 1} weight pushes, {N}-cycle latency); bit-exact with tcu_hw.numeric.matmul: "
          f"{ok}")
    if args.vcd:
        print(f"waveform: {args.vcd}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
