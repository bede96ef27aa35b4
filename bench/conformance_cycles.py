"""Cycle counts of the conformance programs on every hardware backend, each checked bit for bit.

    python bench/conformance_cycles.py [--json FILE] [--skip-verilator] [--skip-top]
                                       [--speech-inputs 0,1,2,3,4,5]

Runs Tensil's XOR programs (every run of every case) and Tensil's speech-commands program on:

- ``core``: the PyRTL core with DRAM models (read latency 20, one vector per cycle);
- ``top``: the PyRTL top behind Python AXI4 slaves (latency 20; XOR only: Python per cycle);
- ``verilator``: the generated Verilog top behind the C++ AXI4 slaves (read latency 20,
  write latency 10, 16 bursts outstanding; the widest AXI width that divides a vector).

Every run is compared with the golden emulator (DRAMs, error flag; on the core also local
memory, accumulators and the program counter) and with the recorded outputs. Prints one row
per program and backend; ``--json`` keeps the figures so that two versions can be compared.
Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.compare import compare  # noqa: E402
from sim.conformance import speech_case, xor_case, xor_names  # noqa: E402
from sim.pyrtl_backend import board_timing, cached_core  # noqa: E402
from tcu_hw.arch import Options  # noqa: E402


def on_core(arch, program, runs):
    core = cached_core(arch)
    cycles = []
    for run in runs:
        diffs, res = compare(program, run.images, core, board_timing(arch))
        got = core.read_dram0(run.output_base, len(run.expected)).tolist()
        if diffs or got != run.expected:
            raise SystemExit(f"core: mismatch: {diffs[:3]} {got} != {run.expected}")
        cycles.append(res.cycles)
    return cycles


def on_top(arch, program, runs):
    from sim.pyrtl_top import PyrtlTop
    top = PyrtlTop(arch, Options(axi_data_width=arch.vector_bytes * 8))
    cycles = []
    for run in runs:
        cycles.append(top.run(program, run.images.dram0, run.images.dram1, latency=20))
        got = top.read_dram(0, run.output_base, len(run.expected)).tolist()
        if got != run.expected or top.error:
            raise SystemExit(f"top: mismatch {got} != {run.expected} (error {top.error})")
    return cycles


def on_verilator(arch, program, runs, tops={}):
    from sim.verilator_backend import AxiTiming, VerilatorTop
    from tcu_hw.arch import board_axi_width
    width = board_axi_width(arch)
    key = (arch, width)
    if key not in tops:
        tops[key] = VerilatorTop(arch, Options(axi_data_width=width), arch_name="bench")
    top = tops[key]
    cycles = []
    for run in runs:
        diffs, res = compare(program, run.images, top,
                             AxiTiming(latency=20, write_latency=10, outstanding=16))
        got = top.read_dram0(run.output_base, len(run.expected)).tolist()
        if diffs or got != run.expected:
            raise SystemExit(f"verilator: mismatch: {diffs[:3]} {got} != {run.expected}")
        cycles.append(res.cycles)
    return cycles


def _indices(text: str) -> list[int]:
    try:
        out = [int(i) for i in text.split(",") if i.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give indices 0-5 separated by commas")
    bad = [i for i in out if not 0 <= i <= 5]
    if bad:
        raise argparse.ArgumentTypeError(f"speech inputs {bad} do not exist (0-5)")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--skip-verilator", action="store_true")
    parser.add_argument("--skip-top", action="store_true", help="skip the PyRTL top")
    parser.add_argument("--speech-inputs", default="0,1,2,3,4,5", type=_indices,
                        help="which of the six speech inputs to run (comma-separated, 0-5; "
                             "empty: none)")
    args = parser.parse_args(argv)
    cases = [xor_case(name) for name in xor_names()]
    if args.speech_inputs:
        cases.append(speech_case(args.speech_inputs))
    backends = [("core", on_core)]
    if not args.skip_top:
        backends.append(("top", on_top))
    if not args.skip_verilator:
        from sim.verilator_backend import find_verilator
        if find_verilator() is not None:
            backends.append(("verilator", on_verilator))
        else:
            print("Verilator not found: skipping the verilator backend", file=sys.stderr)
    figures: dict = {}
    print(f"{'program':38} {'backend':10} {'runs':>4} {'cycles (each run)':>40} {'s':>6}")
    for case in cases:
        name = case.name
        for backend, fn in backends:
            if backend == "top" and name == "speech_commands":
                continue
            t = time.perf_counter()
            cycles = fn(case.arch, case.program, case.runs)
            secs = time.perf_counter() - t
            figures.setdefault(name, {})[backend] = cycles
            text = ", ".join(f"{c:,}" for c in cycles)
            print(f"{name:38} {backend:10} {len(cycles):4} {text[-40:]:>40} {secs:6.1f}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
