"""PyRTL simulation speed of the core (cycles per second) for n = 8 and n = 16.

    python bench/pyrtl_speed.py [--archs pynqz1,ultra96v2] [--opt -O1]

Builds the core with its testbench, compiles it (ArraySimulation), then runs a synthetic
program that keeps every unit busy (DRAM loads and stores, weight loads, MatMuls, SIMD) and
prints build/compile time, cycles and simulated cycles per second. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.pyrtl_backend import DramTiming, PyrtlCore  # noqa: E402
from tcu_hw.arch import resolve_arch  # noqa: E402
from tcu_hw.isa import SIMD, DataMove, DataMoveKind as K, LoadWeights, MatMul, SimdOp  # noqa: E402


def workload(n: int, repeats: int):
    prog = [SIMD(SimdOp.ZERO, 0, 0, 1)]
    for r in range(repeats):
        a = 1024 * (r % 2)
        prog += [DataMove(K.DRAM0_TO_LOCAL, a, 0, 256 * (r % 8), 0, 255),
                 LoadWeights(a, 0, n)]
        prog += [MatMul(a + 16 + 16 * k, 0, 16 * k, 0, 15, accumulate=bool(k % 2))
                 for k in range(12)]
        prog += [SIMD(SimdOp.MAX, 0, 1, 0, read_address=k, write_address=k, read=True,
                      write=True) for k in range(64)]
        prog += [DataMove(K.ACC_TO_LOCAL, a + 512, 0, 0, 0, 63),
                 DataMove(K.LOCAL_TO_DRAM0, a + 512, 0, 4096 + 64 * (r % 16), 0, 63)]
    return prog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="pynqz1,ultra96v2")
    parser.add_argument("--opt", default="-O1")
    parser.add_argument("--repeats", type=int, default=600)
    args = parser.parse_args()
    print(f"{'arch':<12} {'n':>3} {'build+compile s':>16} {'cycles':>10} {'run s':>7} "
          f"{'cycles/s':>10}")
    for name in args.archs.split(","):
        arch = resolve_arch(name)
        t = time.perf_counter()
        core = PyrtlCore(arch, opt=args.opt)
        build = time.perf_counter() - t
        n = arch.array_size
        rng = np.random.default_rng(0)
        dram = rng.integers(-200, 200, (4096, n))
        program = workload(n, args.repeats)
        t = time.perf_counter()
        result = core.run(program, dram0={0: dram}, timing=DramTiming(latency=20))
        run = time.perf_counter() - t
        print(f"{name:<12} {n:>3} {build:>16.1f} {result.cycles:>10,} {run:>7.2f} "
              f"{result.cycles / run:>10,.0f}")


if __name__ == "__main__":
    main()
