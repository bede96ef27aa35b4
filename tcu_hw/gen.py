"""``python -m tcu_hw.gen``: generate the TCU for an architecture.

    python -m tcu_hw.gen [-a ARCH] [-d AXI_WIDTH] [-t OUTDIR] [-s]
                         [--sample-block-size N] [--mem-impl bram|uram|regs]

ARCH is a `.tarch` path or a preset name (default ``pynqz1``). Writes ``architecture_params.h``
into OUTDIR and prints Tensil's RTL SUMMARY (``-s``) and an ARTIFACTS table. The Verilog
backend (``top_<arch>.v``, manifest, waiver) is not built yet: the command says so, and its
flags are final.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .arch import MEM_IMPLS, PRESETS, Architecture, Options, arch_stem, resolve_arch
from .artifacts import architecture_params_h
from .errors import OptionsError, run_cli
from .files import write_atomic

RULE = "-" * 70


def _bool(text: str) -> bool:
    t = text.lower()
    if t in ("true", "yes", "1", "on"):
        return True
    if t in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def rtl_summary(arch: Architecture) -> str:
    """Tensil's RTL SUMMARY table for an architecture."""
    lay = arch.layout
    n = arch.array_size

    def mem(depth: int, bits: int) -> str:
        return f"{depth:,} {depth * n:,} {bits}"

    rows = [("Data type", arch.data_type), ("Array size", n),
            ("Consts memory size (vectors/scalars/bits)", mem(arch.dram1_depth, lay.D1)),
            ("Vars memory size (vectors/scalars/bits)", mem(arch.dram0_depth, lay.D0)),
            ("Local memory size (vectors/scalars/bits)", mem(arch.local_depth, lay.L)),
            ("Accumulator memory size (vectors/scalars/bits)",
             mem(arch.accumulator_depth, lay.A)),
            ("Stride #0 size (bits)", lay.S0), ("Stride #1 size (bits)", lay.S1),
            ("Operand #0 size (bits)", lay.operand0_bits),
            ("Operand #1 size (bits)", lay.operand1_bits),
            ("Operand #2 size (bits)", lay.operand2_bits),
            ("Instruction size (bytes)", lay.instruction_bytes)]
    if arch.lut_count:
        rows.append(("Lookup tables (count/depth)", f"{arch.lut_count} {arch.lut_depth}"))
    return "\n".join([RULE, "RTL SUMMARY", RULE] + [f"{k}: {v}" for k, v in rows] + [RULE])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tcu_hw.gen",
        description="Generate the TCU for an architecture: Verilog top (drop-in for Tensil's "
                    "top_<arch>.v), architecture_params.h and a summary.")
    p.add_argument("-a", "--arch", default="pynqz1", metavar="ARCH",
                   help=f"a .tarch file or a preset ({', '.join(PRESETS)}); default pynqz1")
    p.add_argument("-d", "--axi-data-width", type=int, default=64, metavar="AXI_WIDTH",
                   help="AXI data width in bits, a power of two 32..1024 (default 64)")
    p.add_argument("-t", "--target-dir", default=".", metavar="OUTDIR",
                   help="output directory, created if missing (default .)")
    p.add_argument("-s", "--summary", nargs="?", const=True, default=False, type=_bool,
                   metavar="true|false", help="print the RTL SUMMARY table")
    p.add_argument("--sample-block-size", type=int, default=0, metavar="N",
                   help="build the performance sampler with N words per block (0: no sampler)")
    p.add_argument("--mem-impl", choices=MEM_IMPLS, default="bram",
                   help="local and accumulator memory implementation (default bram)")
    return p


def _prepare_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OptionsError(f"{path}: cannot create output directory: {e.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OptionsError(f"{path}: output directory is not writable")


def generate(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    arch = resolve_arch(args.arch)
    options = Options(axi_data_width=args.axi_data_width, mem_impl=args.mem_impl,
                      sample_block_size=args.sample_block_size)
    options.check_for(arch)
    target = Path(args.target_dir)
    _prepare_dir(target)
    params = target / "architecture_params.h"
    write_atomic(params, architecture_params_h(arch))
    if args.summary:
        print(rtl_summary(arch), file=out)
    print(f"note: the Verilog backend is not built yet; top_{arch_stem(args.arch)}.v is not "
          f"written (architecture, layout and options were checked)", file=out)
    print("\n".join([RULE, "ARTIFACTS", RULE, f"Driver parameters: {params}", RULE]), file=out)
    return 0


def main(argv=None) -> int:
    return run_cli(build_parser(), generate, argv)


if __name__ == "__main__":
    raise SystemExit(main())
