"""Golden emulator speed on Tensil's speech-commands program (80,308 instructions).

    python bench/emulator_speed.py [--runs N]

Prints decode time, seconds per run and instructions per second. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from sim.emulator import Emulator
from sim.model import emulate, load_model, prepare
from tcu_hw.isa import read_program

SPEECH = Path(__file__).resolve().parents[1].parent / "shared" / "conformance" / "speech_robot"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    model = load_model(SPEECH / "speech_commands_onnx_speech_robot.tmodel")
    t = time.perf_counter()
    program = read_program(model.path(model.prog.file_name), model.arch.layout)
    decode = time.perf_counter() - t
    raw = np.frombuffer((SPEECH / "input0_tensil_models_csv.bin").read_bytes(), "<i2")
    emu = Emulator(model.arch)
    prepare(emu, model)
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        emulate(model, {"input_1": raw.reshape(-1, 8)}, raw=True, emulator=emu)
        times.append(time.perf_counter() - t)
    best, median = min(times), statistics.median(times)
    print(f"program:              {len(program):,} instructions, decoded in {decode:.3f} s")
    print(f"run time (s):         best {best:.2f}, median {median:.2f} over {args.runs} runs")
    print(f"instructions/s:       {len(program) / best:,.0f} (best)")
    print(f"MACs/s:               {emu.stats.macs / sum(times):,.0f}")


if __name__ == "__main__":
    main()
