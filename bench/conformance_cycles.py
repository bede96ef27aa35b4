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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.compare import Images, compare  # noqa: E402
from sim.model import consts_images, load_model, load_program  # noqa: E402
from sim.pyrtl_backend import DramTiming, cached_core  # noqa: E402
from tcu_hw import numeric  # noqa: E402
from tcu_hw.arch import Architecture, Options  # noqa: E402

SHARED = ROOT.parent / "shared" / "conformance"
XOR = sorted(p.stem for p in (SHARED / "xor").glob("*.json"))


def xor_cases():
    """(name, arch, program, [(images, output base, expected raw)])."""
    for name in XOR:
        case = json.loads((SHARED / "xor" / f"{name}.json").read_text())
        arch = Architecture.from_dict(case["arch"])
        program = arch.layout.decode_program(bytes.fromhex(case["program_hex"]))
        consts = numeric.decode_vectors(bytes.fromhex(case["consts_hex"]), arch.dtype,
                                        arch.array_size)
        (inp,), (out,) = case["input_dram0"], case["output_dram0"]
        runs = [(Images(dram0={inp["base"]: np.array(r["input_raw"])}, dram1={0: consts}),
                 out["base"], out["size"], r["output_raw"]) for r in case["runs"]]
        yield name, arch, program, runs


def speech_case(indices):
    d = SHARED / "speech_robot"
    model = load_model(d / "speech_commands_onnx_speech_robot.tmodel")
    expected = json.loads((d / "expected.json").read_text())
    (base, consts), = consts_images(model)
    runs = []
    for i in indices:
        entry = expected["inputs"][i]
        raw = np.frombuffer((d / entry["files"]["raw_le_int16"]).read_bytes(), "<i2")
        images = Images(dram0={0: raw.reshape(-1, 8).astype(np.int64)}, dram1={base: consts})
        runs.append((images, 0, 2, entry["expected_output_raw"]))
    return "speech_commands", model.arch, load_program(model), runs


def on_core(arch, program, runs):
    core = cached_core(arch)
    cycles = []
    for images, base, size, want in runs:
        diffs, res = compare(program, images, core, DramTiming(latency=20))
        got = core.read_dram0(base, size).tolist()
        if diffs or got != want:
            raise SystemExit(f"core: mismatch: {diffs[:3]} {got} != {want}")
        cycles.append(res.cycles)
    return cycles


def on_top(arch, program, runs):
    from sim.pyrtl_top import PyrtlTop
    top = PyrtlTop(arch, Options(axi_data_width=arch.vector_bytes * 8))
    cycles = []
    for images, base, size, want in runs:
        cycles.append(top.run(program, images.dram0, images.dram1, latency=20))
        got = top.read_dram(0, base, size).tolist()
        if got != want or top.error:
            raise SystemExit(f"top: mismatch {got} != {want} (error {top.error})")
    return cycles


def on_verilator(arch, program, runs, tops={}):
    from sim.verilator_backend import AxiTiming, VerilatorTop, default_axi_width
    width = default_axi_width(arch)
    key = (arch, width)
    if key not in tops:
        tops[key] = VerilatorTop(arch, Options(axi_data_width=width), arch_name="bench")
    top = tops[key]
    cycles = []
    for images, base, size, want in runs:
        diffs, res = compare(program, images, top,
                             AxiTiming(latency=20, write_latency=10, outstanding=16))
        got = top.read_dram0(base, size).tolist()
        if diffs or got != want:
            raise SystemExit(f"verilator: mismatch: {diffs[:3]} {got} != {want}")
        cycles.append(res.cycles)
    return cycles


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--skip-verilator", action="store_true")
    parser.add_argument("--skip-top", action="store_true", help="skip the PyRTL top")
    parser.add_argument("--speech-inputs", default="0,1,2,3,4,5",
                        help="which of the six speech inputs to run (comma-separated)")
    args = parser.parse_args(argv)
    indices = [int(i) for i in args.speech_inputs.split(",") if i != ""]
    cases = list(xor_cases()) + ([speech_case(indices)] if indices else [])
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
    for name, arch, program, runs in cases:
        for backend, fn in backends:
            if backend == "top" and name == "speech_commands":
                continue
            t = time.perf_counter()
            cycles = fn(arch, program, runs)
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
