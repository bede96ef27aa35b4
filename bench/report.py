"""The figures the project reports about itself, in one table (and JSON).

    python bench/report.py [--json bench/results.json] [--synth] [--skip-verilator]

1. Models on the cycle-accurate PyRTL core (DRAM read latency 20, each board's AXI width:
   pynqz1 64, ultra96v2 and zcu104 128; the speech architecture 128): Tensil's compiled
   speech-commands program, ours, ResNet-20 v2 on pynqz1, ultra96v2 and zcu104 (to the
   logits: the final Softmax needs lookup tables these boards lack) and the digits CNN:
   instructions, cycles, MAC utilization, compile time; Tensil's published figures beside
   them.
2. Simulation speed: the golden emulator, the PyRTL core (n = 8 and 16) and the generated
   Verilog under Verilator (if installed), each on a whole program.
3. ResNet-20 v2 to the logits on the generated top under Verilator (unless
   ``--skip-verilator``), at each board's AXI width, DRAM read latency 20, inputs unfolded:
   pynqz1, ultra96v2, zcu104, and zcu104 with the constants and the input on both DRAM ports
   (``--consts-ports both --input-ports both``, for a host that writes the copies); each run
   checked bit for bit against the emulator.
4. With ``--synth``: Yosys synth_xilinx of pynqz1 (LUT, FF, DSP, BRAM; minutes).
5. The performance targets (issues 11 and 28) against those figures: met or not.

Not a test. ``bench/compile_report.py``, ``core_cycles.py``, ``pyrtl_speed.py``,
``emulator_speed.py``, ``gen_report.py`` and ``synth_report.py`` go into more detail.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compile_report import (MODELS, SPEECH, measure, model_inputs,  # noqa: E402
                            speech_input_raw, tensil_speech_run)
from tensil_table import SHARED_RESNET20, run as run_on_top  # noqa: E402

from compiler_lite.compile import compile_model  # noqa: E402
from compiler_lite.summary import figures, mac_utilization  # noqa: E402
from sim.model import load_model, load_program  # noqa: E402

SPEECH_TMODEL = load_model(SPEECH / "speech_commands_onnx_speech_robot.tmodel")

TENSIL_SPEECH_RTL_CYCLES = 1_678_969


def models() -> list[dict]:
    rows = []
    tensil_res, secs = tensil_speech_run()
    for name, path, arch, outs, tensil in MODELS:
        t = time.perf_counter()
        c = compile_model(path, arch, outputs=outs)
        seconds = time.perf_counter() - t
        f = figures(c)
        res, secs_ours = measure(c, model_inputs(c, name))
        if name == "speech":            # the same network: its true MACs serve both programs
            rows.append({"model": "speech (Tensil's program)", "arch": "speech_robot",
                         "instructions": len(load_program(SPEECH_TMODEL)),
                         "cycles": tensil_res.cycles,
                         "axi_data_width": tensil_res.stats[0]["axi_data_width"],
                         "mac_utilization": mac_utilization(f["macs"], tensil_res.cycles,
                                                            c.arch),
                         "sim_seconds": secs, "tensil_rtl_cycles": TENSIL_SPEECH_RTL_CYCLES})
        rows.append({"model": name, "arch": Path(arch).stem, "instructions": len(c.program),
                     "cycles": res.cycles, "axi_data_width": res.stats[0]["axi_data_width"],
                     "mac_utilization": mac_utilization(f["macs"], res.cycles, c.arch),
                     "compile_seconds": seconds, "consts_vectors": f["consts_vectors"],
                     "true_macs": f["macs"], "estimated_cycles": f["cycles"],
                     "sim_seconds": secs_ours, "tensil": tensil})
    return rows


def speeds(skip_verilator: bool) -> list[dict]:
    from sim.emulator import Emulator
    from sim.model import consts_images, emulate, load_model, load_program, prepare
    out = []
    m = load_model(SPEECH / "speech_commands_onnx_speech_robot.tmodel")
    prog = load_program(m)
    raw = speech_input_raw(m.arch)
    emu = Emulator(m.arch)
    prepare(emu, m)
    t = time.perf_counter()
    emulate(m, {"input_1": raw}, raw=True, emulator=emu)
    secs = time.perf_counter() - t
    out.append({"simulator": "emulator", "program": "speech (Tensil)",
                "seconds": secs, "rate": len(prog) / secs, "unit": "instructions/s"})
    from sim.pyrtl_backend import DramTiming, PyrtlCore
    for arch_name in ("pynqz1", "ultra96v2"):
        from tcu_hw.arch import resolve_arch
        arch = resolve_arch(arch_name)
        c = compile_model(ROOT.parent / "shared" / "models" / "resnet20v2_cifar.onnx", arch,
                          outputs=["dense/BiasAdd:0"])
        t = time.perf_counter()
        core = PyrtlCore(arch, program_bits=17)
        build = time.perf_counter() - t
        dram0 = {c.inputs[0].base: np.zeros((c.inputs[0].vectors, arch.array_size), int)}
        t = time.perf_counter()
        res = core.run(c.program, dram0=dram0, dram1={0: c.consts}, timing=DramTiming(20))
        secs = time.perf_counter() - t
        out.append({"simulator": f"pyrtl n={arch.array_size}", "program": "resnet20 (ours)",
                    "seconds": secs, "rate": res.cycles / secs, "unit": "cycles/s",
                    "build_seconds": build})
    if not skip_verilator:
        from sim.verilator_backend import AxiTiming, VerilatorTop, find_verilator
        if find_verilator() is None:
            out.append({"simulator": "verilator", "skipped": "verilator not installed"})
        else:
            from tcu_hw.arch import Options
            with tempfile.TemporaryDirectory():
                t = time.perf_counter()
                top = VerilatorTop(m.arch, Options(axi_data_width=128), arch_name="bench")
                build = time.perf_counter() - t
                images = dict(consts_images(m))
                res = top.run(prog, dram0={0: raw}, dram1=images, timing=AxiTiming(latency=20))
                secs = res.stats.get("sim_seconds", 0) or 1e-9
                out.append({"simulator": "verilator (AXI 128)", "program": "speech (Tensil)",
                            "seconds": secs, "rate": res.cycles / secs, "unit": "cycles/s",
                            "cycles": res.cycles, "build_seconds": build})
    return out


#: ResNet-20 on the generated top: (architecture, port options, issue 28's utilization target)
TOP_RUNS = (("pynqz1", "dram1", "dram0", 0.88), ("ultra96v2", "dram1", "dram0", 0.85),
            ("zcu104", "dram1", "dram0", 0.70), ("zcu104", "both", "both", 0.70))


def top_runs(skip_verilator: bool) -> list[dict]:
    """ResNet-20 on the generated top (see the module's item 3); [] when skipped or
    Verilator is missing."""
    from sim.verilator_backend import find_verilator
    if skip_verilator or find_verilator() is None:
        return []
    out = []
    for arch, consts, inputs, target in TOP_RUNS:
        c = compile_model(SHARED_RESNET20, arch, outputs=["dense/BiasAdd:0"],
                          input_layout="unfolded", consts_ports=consts, input_ports=inputs)
        got = run_on_top(c, argparse.Namespace(backend="verilator", latency=20, check=True))
        out.append({"arch": arch, "consts_ports": consts, "input_ports": inputs,
                    "axi_data_width": c.axi_width, "cycles": got["cycles"],
                    "bit_exact": got["bit_exact"], "target": target,
                    "mac_utilization": mac_utilization(figures(c)["macs"], got["cycles"],
                                                       c.arch)})
    return out


#: Tensil's ResNet-20 program for zcu104 on Tensil's RTL (cycles per image)
TENSIL_RESNET_ZCU104_CYCLES = 748_738
#: area today (Yosys synth_xilinx, pynqz1, AXI 64) that the targets allow 10% above
AREA_BASE = {"LUT": 8_181, "FF": 8_224, "DSP48E1": 72}


def targets(report: dict) -> list[dict]:
    """Each performance target with the measured figure (None where it was not measured)."""
    rows = {(r["model"], r["arch"]): r for r in report["models"]}
    speech = rows.get(("speech (Tensil's program)", "speech_robot"))
    top = next((r for r in report.get("simulation_speed", [])
                if r["simulator"].startswith("verilator") and "cycles" in r), None)
    out = [{"target": "Tensil's speech program, PyRTL core", "limit": 0.35, "kind": "≤ × Tensil",
            "value": speech and speech["cycles"] / TENSIL_SPEECH_RTL_CYCLES},
           {"target": "Tensil's speech program, Verilator top (AXI 128)", "limit": 0.40,
            "kind": "≤ × Tensil", "value": top and top["cycles"] / TENSIL_SPEECH_RTL_CYCLES}]
    z = rows.get(("resnet20v2", "zcu104"))
    out.append({"target": "ResNet-20 on zcu104 (our program) vs Tensil's", "limit": 0.40,
                "kind": "≤ × Tensil", "value": z and z["cycles"] / TENSIL_RESNET_ZCU104_CYCLES})
    for arch, limit in (("pynqz1", 0.80), ("ultra96v2", 0.70), ("zcu104", 0.50)):
        r = rows.get(("resnet20v2", arch))
        out.append({"target": f"ResNet-20 MAC utilization on {arch}", "limit": limit,
                    "kind": "≥", "value": r and r["mac_utilization"]})
    for r in report.get("generated_top", []):
        ports = " (both ports)" if r["consts_ports"] == "both" else ""
        out.append({"target": f"ResNet-20 on the generated top, {r['arch']}{ports}",
                    "limit": r["target"], "kind": "≥",
                    "value": r["mac_utilization"] if r["bit_exact"] else 0.0})
    synth = report.get("synthesis_pynqz1")
    for k, base in AREA_BASE.items():
        out.append({"target": f"area: {k} on pynqz1", "limit": round(1.1 * base),
                    "kind": "≤", "value": synth and synth.get(k)})
    for t in out:
        v = t["value"]
        t["met"] = None if v is None else (v >= t["limit"] if t["kind"] == "≥" else
                                           v <= t["limit"])
    return out


def print_targets(rows: list[dict]) -> None:
    print(f"\n{'target':<52} {'limit':>12} {'measured':>10}  verdict")
    for t in rows:
        fmt = (lambda x: f"{x:,}") if t["kind"] == "≤" else (lambda x: f"{x:.3f}")
        v = "not measured" if t["value"] is None else fmt(t["value"])
        verdict = "" if t["met"] is None else ("met" if t["met"] else "missed")
        print(f"{t['target']:<52} {t['kind'].split()[0] + ' ' + fmt(t['limit']):>12} "
              f"{v:>10}  {verdict}")


def synthesis() -> dict:
    from synth_report import xilinx
    with tempfile.TemporaryDirectory() as d:
        return xilinx("pynqz1", 64, Path(d))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=str(ROOT / "bench" / "results.json"),
                   help="where to write the figures (default bench/results.json)")
    p.add_argument("--synth", action="store_true", help="also run Yosys (minutes)")
    p.add_argument("--skip-verilator", action="store_true")
    args = p.parse_args()
    report = {"models": models()}
    print(f"{'model':<26} {'arch':<12} {'instr':>8} {'Tensil':>8} {'AXI':>4} {'cycles':>10} "
          f"{'MAC util':>8} {'compile s':>9} {'Tensil s':>8}")
    for r in report["models"]:
        t = r.get("tensil", {})
        ti = f"{t['instructions']:,}" if t.get("instructions") else ""
        ts = f"{t['seconds']}" if t.get("seconds") else ""
        cs = f"{r['compile_seconds']:.2f}" if "compile_seconds" in r else ""
        print(f"{r['model']:<26} {r['arch']:<12} {r['instructions']:>8,} {ti:>8} "
              f"{r['axi_data_width']:>4} {r['cycles']:>10,} {100 * r['mac_utilization']:>7.1f}% "
              f"{cs:>9} {ts:>8}")
    print(f"(PyRTL core, DRAM read latency 20, each board's AXI width in bits; Tensil's speech "
          f"program on Tensil's RTL: {TENSIL_SPEECH_RTL_CYCLES:,} cycles)")
    report["simulation_speed"] = speeds(args.skip_verilator)
    print(f"\n{'simulator':<22} {'program':<18} {'rate':>14} {'run s':>7} {'build s':>8}")
    for r in report["simulation_speed"]:
        if "skipped" in r:
            print(f"{r['simulator']:<22} skipped: {r['skipped']}")
            continue
        print(f"{r['simulator']:<22} {r['program']:<18} {r['rate']:>10,.0f} "
              f"{r['unit'].split('/')[0][:4]:<3} {r['seconds']:>7.2f} "
              f"{r.get('build_seconds', 0):>8.1f}")
    report["generated_top"] = top_runs(args.skip_verilator)
    if report["generated_top"]:
        print(f"\n{'ResNet-20, generated top':<26} {'ports':<14} {'AXI':>4} {'cycles':>10} "
              f"{'MAC util':>8}  bit-exact")
    for r in report["generated_top"]:
        ports = "both" if r["consts_ports"] == "both" else "default"
        print(f"{'':<26} {r['arch'] + ' ' + ports:<14} {r['axi_data_width']:>4} "
              f"{r['cycles']:>10,} {100 * r['mac_utilization']:>7.1f}%  "
              f"{'yes' if r['bit_exact'] else 'NO'}")
    if args.synth:
        s = report["synthesis_pynqz1"] = synthesis()
        print(f"\nYosys synth_xilinx pynqz1 (AXI 64): {s['LUT']:,} LUT, {s['FF']:,} FF, "
              f"{s['DSP48E1']} DSP48E1, {s['RAMB36']} RAMB36 + {s['RAMB18']} RAMB18 "
              f"(Tensil ≈ 10,900 LUT, 5,900 FF, 73 DSP, 60 + 15 BRAM)")
    report["targets"] = targets(report)
    print_targets(report["targets"])
    Path(args.json).write_text(json.dumps(report, indent=1, default=float) + "\n")
    print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
