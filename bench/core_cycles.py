"""Cycle counts of the PyRTL core on micro-benchmarks and on Tensil's speech-commands program.

    python bench/core_cycles.py [--arch ARCH] [--latency 20] [--skip-speech]

Prints, for each case, the cycles, the ideal (one vector per cycle) and the overhead. Every
run is also checked bit for bit against the emulator. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.compare import Images, compare  # noqa: E402
from sim.model import consts_images, load_model, load_program  # noqa: E402
from sim.pyrtl_backend import DramTiming, PyrtlCore  # noqa: E402
from tcu_hw.arch import resolve_arch  # noqa: E402
from tcu_hw.isa import SIMD, DataMove, DataMoveKind as K, LoadWeights, MatMul, SimdOp  # noqa: E402

SPEECH = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "speech_robot"
TENSIL_SPEECH = 1_678_969


def cases(n: int):
    """(name, program, ideal cycles of work)."""
    tile = [LoadWeights(0, 0, n)]
    yield ("MatMul: 64 back-to-back instructions of 16 vectors",
           tile + [MatMul(100 + 16 * (k % 8), 0, 16 * (k % 8), 0, 15, accumulate=True)
                   for k in range(64)], (n + 1) + 64 * 16)
    yield ("MatMul: 512 single-vector instructions",
           tile + [MatMul(100 + k % 64, 0, k % 64, 0, 0) for k in range(512)], (n + 1) + 512)
    yield ("tile switch: 200 x (LoadWeights n+1, MatMul 1 vector)",
           [i for k in range(200) for i in (LoadWeights((k % 4) * (n + 1), 0, n),
                                            MatMul(100 + k % 32, 0, k % 32, 0, 0))],
           200 * (n + 2))
    yield ("SIMD: 512 ReLUs on distinct addresses",
           [SIMD(SimdOp.ZERO, 0, 0, 1)] +
           [SIMD(SimdOp.MAX, 0, 1, 0, read_address=k % 256, write_address=256 + k % 256,
                 read=True, write=True) for k in range(512)], 513)
    yield ("SIMD: 256 accumulate-multiplies",
           [SIMD(SimdOp.MULTIPLY, 0, 1, 0, read_address=k % 128, write_address=128 + k % 64,
                 read=True, write=True, accumulate=True) for k in range(256)], 256)
    yield ("DRAM0 -> local: 16 moves of 64 vectors", [
        DataMove(K.DRAM0_TO_LOCAL, 64 * k, 0, 64 * k, 0, 63) for k in range(16)], 1024)
    yield ("local -> DRAM0: 16 moves of 64 vectors", [
        DataMove(K.LOCAL_TO_DRAM0, 64 * k, 0, 2048 + 64 * k, 0, 63) for k in range(16)], 1024)
    yield ("overlap: 1024-vector DRAM load beside 64 MatMuls of 16 vectors on other addresses",
           tile + [DataMove(K.DRAM0_TO_LOCAL, 2048, 0, 0, 0, 1023)] +
           [MatMul(100 + 16 * (k % 8), 0, 16 * (k % 8), 0, 15, accumulate=True)
            for k in range(64)], max(1024, (n + 1) + 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="pynqz1")
    parser.add_argument("--latency", type=int, default=20)
    parser.add_argument("--skip-speech", action="store_true")
    args = parser.parse_args()
    arch = resolve_arch(args.arch)
    timing = DramTiming(latency=args.latency)
    t = time.perf_counter()
    core = PyrtlCore(arch)
    print(f"{arch.array_size}x{arch.array_size} core ({args.arch}) built and compiled in "
          f"{time.perf_counter() - t:.1f} s; DRAM latency {args.latency}, one vector/cycle")
    rng = np.random.default_rng(0)
    n = arch.array_size
    images = Images(dram0={0: rng.integers(-300, 300, (4096, n))},
                    local={0: rng.integers(-300, 300, (4096, n))})
    print(f"{'case':<84} {'cycles':>8} {'ideal':>7} {'extra':>6}")
    for name, program, ideal in cases(n):
        diffs, result = compare(program, images, core, timing)
        status = "" if not diffs else "  MISMATCH: " + diffs[0]
        print(f"{name:<84} {result.cycles:>8,} {ideal:>7,} {result.cycles - ideal:>6,}{status}")
    if args.skip_speech:
        return
    model = load_model(SPEECH / "speech_commands_onnx_speech_robot.tmodel")
    score = PyrtlCore(model.arch)
    raw = np.frombuffer((SPEECH / "input0_tensil_models_csv.bin").read_bytes(), "<i2")
    (base, consts), = consts_images(model)
    t = time.perf_counter()
    result = score.run(load_program(model), dram0={0: raw.reshape(-1, 8)}, dram1={base: consts},
                       timing=timing)
    seconds = time.perf_counter() - t
    ok = score.read_dram0(0, 2).ravel()[:12].tolist()
    c = result.counters
    print(f"\nspeech commands (Tensil's program, 80,308 instructions, input0): "
          f"{result.cycles:,} cycles = {result.cycles / TENSIL_SPEECH:.3f} x Tensil's "
          f"{TENSIL_SPEECH:,}; floor 463,728 (MatMul vectors)")
    print(f"  compute issue {c['compute_issue']:,}, compute stall {c['compute_stall']:,}, "
          f"DRAM busy {c['dram_busy']:,}, DRAM stall {c['dram_stall']:,}, "
          f"hazard stall {c['hazard_stall']:,}, decoder stall {c['decoder_stall']:,}")
    print(f"  logits {ok}")
    print(f"  simulated in {seconds:.2f} s = {result.cycles / seconds:,.0f} cycles/s")


if __name__ == "__main__":
    main()
