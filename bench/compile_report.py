"""Compiler figures next to Tensil's: ResNet-20 v2 (CIFAR) for pynqz1 and ultra96v2, the
speech-commands model for its architecture, the digits CNN.

    python bench/compile_report.py [--hardware] [--json OUT.json]

Prints compile time, instructions, constant vectors, true MACs and estimated cycles per
model, the process wall time of compiling ResNet-20 from the command line, with Tensil's
published figures (COMPILER.md) and Tensil's program for the speech
model. ``--hardware`` also runs each program on the cycle-accurate PyRTL core (DRAM latency
20, the board's AXI width: a vector every vector-bits / width cycles, as the generated top
moves it; within 0.1% of the top under Verilator on ResNet-20) and reports measured cycles
and MAC utilization; for the speech model Tensil's own
program is run too. ResNet is compiled up to its logits (``-o dense/BiasAdd:0``): its final
Softmax needs lookup tables, which these boards do not have. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

from compiler_lite.compile import compile_model  # noqa: E402
from compiler_lite.summary import figures, mac_utilization  # noqa: E402
from tcu_hw import numeric  # noqa: E402

SPEECH = SHARED / "conformance" / "speech_robot"
MODELS = [
    ("resnet20v2", SHARED / "models" / "resnet20v2_cifar.onnx", "pynqz1", ["dense/BiasAdd:0"],
     {"instructions": 258_037, "consts_vectors": 71_341, "seconds": 25.5, "layers": 23}),
    ("resnet20v2", SHARED / "models" / "resnet20v2_cifar.onnx", "ultra96v2",
     ["dense/BiasAdd:0"], {"instructions": 102_741, "consts_vectors": 35_743,
                           "seconds": 71.6, "layers": 23}),
    ("resnet20v2", SHARED / "models" / "resnet20v2_cifar.onnx", "zcu104",
     ["dense/BiasAdd:0"], {"instructions": 50_171, "cycles_tensil_rtl": 748_738}),
    ("speech", SPEECH / "speech_commands.onnx", str(SPEECH / "speech_robot.tarch"), None,
     {"instructions": 80_308, "consts_vectors": 93_937, "cycles_tensil_rtl": 1_678_969}),
    ("digits", SHARED / "models" / "digits_cnn_opset10.onnx", "pynqz1", None, {}),
]


def speech_input_raw(arch):
    """Tensil's recorded speech input (TCU.md §5 vectors) as raw fixed-point vectors."""
    data = (SPEECH / "input0_tensil_models_csv.bin").read_bytes()
    return numeric.decode_vectors(data, arch.dtype, arch.array_size)


def model_inputs(c, name):
    """Inputs (by name, in the model's layout) for one run of the compiled model ``c`` of
    :data:`MODELS` entry ``name``: Tensil's recorded speech input, the first digits test image,
    or seeded random values (std 0.25) for the others."""
    rng = np.random.default_rng(0)
    if name == "speech":
        lane0 = numeric.to_float(speech_input_raw(c.arch)[:, 0], c.arch.dtype)
        return {"input_1": lane0.reshape(1, 1, 124, 129)}
    if name == "digits":
        return {"x": np.load(SHARED / "models" / "digits_test_x.npy")[:1]}
    return {t.name: rng.standard_normal(t.shape) * 0.25 for t in c.inputs}


def core_run(model, inputs, raw=False):
    """One run of a `.tmodel` on the PyRTL core through the host driver (DRAM read latency
    20, the board's AXI width): the driver's result (cycles, array MACs, ``stats`` with
    the width) and the seconds it took."""
    from sim.driver import Driver
    from sim.model import load_model
    m = load_model(model)
    drv = Driver(m.arch, "pyrtl", latency=20)
    drv.load_model(m)
    t = time.perf_counter()
    res = drv.run(inputs, raw=raw)
    return res, time.perf_counter() - t


def measure(c, feeds):
    """A compiled model on the PyRTL core: (driver result, seconds)."""
    with tempfile.TemporaryDirectory() as d:
        c.write(d)
        return core_run(Path(d) / f"{c.name}.tmodel", feeds)


def tensil_speech_run():
    """Tensil's own speech program on the PyRTL core: (driver result, seconds)."""
    from sim.model import load_model
    m = load_model(SPEECH / "speech_commands_onnx_speech_robot.tmodel")
    return core_run(m, {"input_1": speech_input_raw(m.arch)}, raw=True)


def cli_wall_seconds(runs: int = 3) -> list[float]:
    """Process wall times of compiling ResNet-20 for pynqz1 with the command line, start-up
    and file writing included (what a user waits for)."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "compiler_lite", "-q", "-a", "pynqz1", "-m",
               str(SHARED / "models" / "resnet20v2_cifar.onnx"), "-o", "dense/BiasAdd:0",
               "-t", tmp]
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
            out.append(time.perf_counter() - t)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hardware", action="store_true", help="measure cycles on the PyRTL core")
    p.add_argument("--json", metavar="OUT.json", help="write the figures as JSON")
    args = p.parse_args()
    rows = []
    head = (f"{'model':<11} {'arch':<12} {'compile s':>9} {'instr':>8} {'Tensil':>8} "
            f"{'consts':>7} {'Tensil':>7} {'MACs M':>7} {'est. cycles':>11}"
            + (f" {'AXI':>4} {'cycles':>10} {'MAC util':>8}" if args.hardware else ""))
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
            res = measure(c, model_inputs(c, name))[0]
            cycles, width = res.cycles, res.stats[0]["axi_data_width"]
            row.update(cycles=cycles, axi_data_width=width, dram_latency=20,
                       mac_utilization=mac_utilization(f["macs"], cycles, c.arch))
            line += f" {width:>4} {cycles:>10,} {100 * row['mac_utilization']:>7.1f}%"
        print(line, flush=True)
        rows.append(row)
    wall = cli_wall_seconds()
    cache = "off (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") \
        else "on"
    print(f"ResNet-20 for pynqz1 to its logits from the command line (python -m compiler_lite, "
          f"process wall time, best of {len(wall)}, bytecode cache {cache}): "
          f"{min(wall):.2f} s (target < 2 s; Tensil: 25.5 s)")
    rows.append({"model": "resnet20 (CLI)", "arch": "pynqz1",
                 "process_wall_seconds": round(min(wall), 3)})
    if args.hardware:
        t_cycles = tensil_speech_run()[0].cycles
        print(f"Tensil's speech program on the same core: {t_cycles:,} cycles; on Tensil's "
              f"RTL (TENSIL_MEASURED.md): 1,678,969")
        rows.append({"model": "speech (Tensil's program)", "cycles": t_cycles})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
