"""A standalone 4×4 systolic array with its own controller, simulated with a waveform.

Imports one block, :class:`tcu_hw.blocks.systolic_array.SystolicArray`, and wires it into a
small design of its own with :func:`tcu_hw.blocks.stream.connect`. The controller has two
output ports, ``push`` and ``feed`` (streams with the payloads of the array's ``weights`` and
``input`` sinks): it pushes one weight tile ``[bias, row 0 … row 3]`` from a ROM (the last
row first: each push shifts the chain, so the bias, pushed last, ends in the bias slot), then
feeds the input vectors from a second ROM, one per cycle, each tagged with its index. The
array's ``output`` stream goes to the result RAM's input port ``store``, which writes each
result at its tag when it leaves the array n cycles later. The results are checked against
:func:`tcu_hw.numeric.matmul`, the bit-exact reference (every processing element rounds half
to even and saturates).

::

    weights ROM ─▶ push ══connect══▶ weights ┌───────────────┐
    inputs  ROM ─▶ feed ══connect══▶ input   │ SystolicArray │ output ═connect═▶ store ─▶ RAM[tag]
                   (data, tag)               └───────────────┘                (data, tag)
    controller: LOAD (n+1) → RUN (m) → DRAIN (n) → done

Every stream here is always ready: the array takes a vector in every cycle and its output
cannot wait (``connect`` refuses a sink that could hold ``ready`` low), so the controller
never looks at a ``ready``.

    python examples/systolic_array_4x4.py [--vcd systolic.vcd] [--vectors 12]
"""

from __future__ import annotations

import argparse

import numpy as np
import pyrtl

from sim.waves import memory_vectors, simulate_until
from tcu_hw.blocks.lanes import to_int
from tcu_hw.blocks.stream import connect
from tcu_hw.blocks.systolic_array import SystolicArray
from tcu_hw.numeric import data_type, matmul

N = 4
DT = data_type("FP16BP8")


def build(tile: np.ndarray, x: np.ndarray) -> tuple[pyrtl.Block, SystolicArray]:
    """The design: array + controller + ROMs + a result RAM (outputs ``done``, ``out_valid``)."""
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

        # the controller's ports: sources that never wait, with the array's payloads
        push = array.weights.peer("ctl_push")
        feed = array.input.peer("ctl_feed")
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
        push.drive(state == LOAD, data=wrom[count[:3]])
        feed.drive(state == RUN, data=xrom[count[:tag_bits]], tag=count[:tag_bits])

        # the result RAM's port: a sink of the array's output payload, always ready
        store = array.output.peer("results_in")
        results[store.payload.tag] <<= pyrtl.MemBlock.EnabledWrite(store.payload.data,
                                                                   store.valid)

        connect(push, array.weights)
        connect(feed, array.input)
        connect(array.output, store)

        done = pyrtl.Output(1, "done")
        done <<= state == DONE
        probe = pyrtl.Output(1, "out_valid")
        probe <<= array.output.valid
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
