"""Compiler figures next to Tensil's: ResNet-20 v2 (CIFAR) for pynqz1 and ultra96v2, the
speech-commands model for its architecture, the digits CNN.

    python bench/compile_report.py [--hardware] [--json OUT.json]

Prints compile time, instructions, constant vectors, true MACs and estimated cycles per
model, with Tensil's published figures (COMPILER.md) and Tensil's program for the speech
model. ``--hardware`` also runs each program on the cycle-accurate PyRTL core (DRAM latency
20) and reports measured cycles and MAC utilization; for the speech model Tensil's own
program is run too. ResNet is compiled up to its logits (``-o dense/BiasAdd:0``): its final
Softmax needs lookup tables, which these boards do not have. Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

from compiler_lite.compile import compile_model  # noqa: E402
from compiler_lite.summary import figures  # noqa: E402
from tcu_hw import numeric  # noqa: E402

SPEECH = SHARED / "conformance" / "speech_robot"
MODELS = [
    ("resnet20v2", SHARED / "models" / "resnet20v2_cifar.onnx", "pynqz1", ["dense/BiasAdd:0"],
     {"instructions": 258_037, "consts_vectors": 71_341, "seconds": 25.5, "layers": 23}),
    ("resnet20v2", SHARED / "models" / "resnet20v2_cifar.onnx", "ultra96v2",
     ["dense/BiasAdd:0"], {"instructions": 102_741, "consts_vectors": 35_743,
                           "seconds": 71.6, "layers": 23}),
    ("speech", SPEECH / "speech_commands.onnx", str(SPEECH / "speech_robot.tarch"), None,
     {"instructions": 80_308, "consts_vectors": 93_937, "cycles_tensil_rtl": 1_678_969}),
    ("digits", SHARED / "models" / "digits_cnn_opset10.onnx", "pynqz1", None, {}),
]


def _inputs(c, name):
    rng = np.random.default_rng(0)
    if name == "speech":
        raw = np.fromfile(SPEECH / "input0_tensil_models_csv.bin", dtype="<i2")
        return {"input_1": (raw.reshape(-1, 8)[:, 0] / 256.0).reshape(1, 1, 124, 129)}
    if name == "digits":
        return {"x": np.load(SHARED / "models" / "digits_test_x.npy")[:1]}
    return {t.name: rng.standard_normal(t.shape) * 0.25 for t in c.inputs}


def measure(c, feeds):
    """Cycles of the program on the PyRTL core (DRAM read latency 20)."""
    from sim.pyrtl_backend import DramTiming, cached_core, program_bits_for
    core = cached_core(c.arch, program_bits=max(17, program_bits_for(len(c.program))))
    n = c.arch.array_size
    dram0 = {t.base: numeric.to_fixed(t.to_vectors(feeds[t.name], n), c.arch.dtype)[0]
             for t in c.inputs}
    res = core.run(c.program, dram0=dram0, dram1={0: c.consts}, timing=DramTiming(latency=20))
    return res.cycles


def tensil_speech_cycles():
    from sim.model import load_model, load_program
    from sim.pyrtl_backend import DramTiming, cached_core, program_bits_for
    from tcu_hw.artifacts import read_tdata
    m = load_model(SPEECH / "speech_commands_onnx_speech_robot.tmodel")
    prog = load_program(m)
    core = cached_core(m.arch, program_bits=max(17, program_bits_for(len(prog))))
    raw = np.fromfile(SPEECH / "input0_tensil_models_csv.bin", dtype="<i2").reshape(-1, 8)
    consts = read_tdata(m.path(m.consts[0].file_name), m.arch)
    return core.run(prog, dram0={0: raw}, dram1={0: consts},
                    timing=DramTiming(latency=20)).cycles


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hardware", action="store_true", help="measure cycles on the PyRTL core")
    p.add_argument("--json", metavar="OUT.json", help="write the figures as JSON")
    args = p.parse_args()
    rows = []
    head = (f"{'model':<11} {'arch':<12} {'compile s':>9} {'instr':>8} {'Tensil':>8} "
            f"{'consts':>7} {'Tensil':>7} {'MACs M':>7} {'est. cycles':>11}"
            + (f" {'cycles':>10} {'MAC util':>8}" if args.hardware else ""))
    print(head)
    for name, path, arch, outs, tensil in MODELS:
        t = time.perf_counter()
        c = compile_model(path, arch, outputs=outs)
        seconds = time.perf_counter() - t
        f = figures(c)
        row = {"model": name, "arch": Path(arch).stem, "compile_seconds": round(seconds, 3),
               "instructions": f["instructions"], "consts_vectors": f["consts_vectors"],
               "macs": f["macs"], "estimated_cycles": f["cycles"], "layers": f["layers"],
               "by_kind": f["by_kind"], "tensil": tensil}
        line = (f"{name:<11} {row['arch']:<12} {seconds:>9.2f} {f['instructions']:>8,} "
                f"{tensil.get('instructions', 0):>8,} {f['consts_vectors']:>7,} "
                f"{tensil.get('consts_vectors', 0):>7,} {f['macs'] / 1e6:>7.2f} "
                f"{f['cycles']:>11,}")
        if args.hardware:
            cycles = measure(c, _inputs(c, name))
            n = c.arch.array_size
            row["cycles"] = cycles
            row["mac_utilization"] = f["macs"] / (n * n * cycles)
            line += f" {cycles:>10,} {100 * row['mac_utilization']:>7.1f}%"
        print(line, flush=True)
        rows.append(row)
    if args.hardware:
        t_cycles = tensil_speech_cycles()
        print(f"Tensil's speech program on the same core: {t_cycles:,} cycles; on Tensil's "
              f"RTL (TENSIL_MEASURED.md): 1,678,969")
        rows.append({"model": "speech (Tensil's program)", "cycles": t_cycles})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
