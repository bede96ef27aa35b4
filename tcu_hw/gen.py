"""``python -m tcu_hw.gen``: generate the TCU for an architecture.

    python -m tcu_hw.gen [-a ARCH] [-d AXI_WIDTH] [-t OUTDIR] [-s]
                         [--sample-block-size N] [--mem-impl bram|uram|regs]

ARCH is a `.tarch` path or a preset name (default ``pynqz1``). Writes into OUTDIR:

- ``top_<arch>.v``: the drop-in replacement for Tensil's top (same ports, active-low reset,
  plus ``error``, ``timeout``, ``tracepoint``, ``idle``, ``dram_timeout`` outputs) and its RAM modules;
- ``architecture_params.h``: the driver's architecture header;
- ``top_<arch>.json``: manifest (ports with widths and groups, memories, architecture,
  options, instruction layout);
- ``top_<arch>.vlt``: the Verilator waiver for ``verilator --lint-only -Wall``.

Everything is built in memory first and written at the end, so a failure leaves no partial
artifacts. Prints Tensil's RTL SUMMARY (``-s``) and an ARTIFACTS table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from .arch import MEM_IMPLS, Architecture, Options, arch_stem, board_axi_width, resolve_arch
from .artifacts import architecture_params_h
from .cli import add_arch, add_axi_width, add_quiet, add_target_dir, boolean
from .errors import OptionsError, run_cli
from .files import write_all_atomic
from .progress import Progress

RULE = "-" * 70


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
    add_arch(p, default="pynqz1")
    add_axi_width(p, "AXI data width in bits, a power of two 32..1024 (default: the board's "
                  "port for a preset: pynqz1 64, ultra96v2 128, zcu104 128, ...; else the "
                  "widest of 128, 64, 32 that divides a vector)")
    add_target_dir(p, "output directory, created if missing (default .)", ".")
    p.add_argument("-s", "--summary", nargs="?", const=True, default=False, type=boolean,
                   metavar="true|false", help="print the RTL SUMMARY table")
    p.add_argument("--sample-block-size", type=int, default=0, metavar="N",
                   help="build the performance sampler with N words per block (0: no sampler)")
    p.add_argument("--mem-impl", choices=MEM_IMPLS, default="bram",
                   help="local and accumulator memory implementation (default bram)")
    p.add_argument("--check-ports", metavar="THEIR_TOP.v",
                   help="write nothing: compare the ports of your existing top (e.g. "
                        "Tensil's top_<arch>.v) with the generated top's for -a and -d, and "
                        "list every difference (exit 1 if any)")
    add_quiet(p, "no progress on standard error")
    return p


def _prepare_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OptionsError(f"{path}: cannot create output directory: {e.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OptionsError(f"{path}: output directory is not writable")


def module_stem(spec: str) -> str:
    """``top_<stem>`` must be a Verilog identifier: other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", arch_stem(spec))


def manifest(arch: Architecture, options: Options, stem: str, rams: list) -> dict:
    """The JSON manifest of a generated top."""
    from . import __version__
    from .top import EXTRA_OUTPUTS, port_list
    extra = {name: meaning for name, _, meaning in EXTRA_OUTPUTS}
    ports = [{"name": name, "direction": d, "width": w, "group": g,
              **({"meaning": extra[name]} if name in extra else {})}
             for name, d, w, g in port_list(arch, options)]
    memories = [{"name": r.name, "kind": {"tdp": "true dual port", "sdp": "simple dual port"}[r.kind],
                 "depth": r.depth, "width": r.width,
                 "copies": r.reads if r.kind == "sdp" else 1,
                 "implementation": options.mem_impl} for r in rams]
    return {"module": f"top_{stem}", "generator": f"tcu_hw {__version__}",
            "architecture": arch.to_dict(),
            "options": {"axi_data_width": options.axi_data_width, "mem_impl": options.mem_impl,
                        "sample_block_size": options.sample_block_size,
                        "decoder_timeout": options.decoder_timeout, "reset": "active low" if options.reset_active_low
                        else "active high"},
            "layout": arch.layout.as_dict(), "ports": ports, "memories": memories}


def check_ports(path: str, arch: Architecture, options: Options, out) -> int:
    """``--check-ports``: the differences between the ports of the top in ``path`` and the
    generated top's (Tensil's ports; ours add status outputs, which are not differences)."""
    from .files import read_text
    from .top import EXTRA_OUTPUTS, port_list
    from .verilog import port_differences, verilog_ports
    module, theirs = verilog_ports(read_text(path, "Verilog file", OptionsError), source=path)
    ours = [(n, d, w) for n, d, w, _ in port_list(arch, options)]
    extras = {name for name, _, _ in EXTRA_OUTPUTS}
    names = {name for name, _, _ in theirs}
    diffs = port_differences(theirs, [p for p in ours if p[0] not in extras or p[0] in names])
    print(f"{path}: module {module}, {len(theirs)} ports; the generated top for "
          f"{args_label(arch, options)}: {len(ours)} ports (of which "
          f"{', '.join(sorted(extras))} are status outputs it adds)", file=out)
    for d in diffs:
        print(f"  DIFFERS {d}", file=out)
    print("PORTS MATCH" if not diffs else f"{len(diffs)} port(s) differ", file=out)
    return 1 if diffs else 0


def args_label(arch: Architecture, options: Options) -> str:
    return (f"{arch.array_size}x{arch.array_size} {arch.data_type}, AXI "
            f"{options.axi_data_width}")


def generate(args: argparse.Namespace, out=None) -> int:
    from .verilog import verilog_and_rams, waiver
    out = out or sys.stdout
    arch = resolve_arch(args.arch)
    options = Options(axi_data_width=board_axi_width(args.arch, args.axi_data_width),
                      mem_impl=args.mem_impl,
                      sample_block_size=args.sample_block_size)
    options.check_for(arch)
    if args.check_ports:
        return check_ports(args.check_ports, arch, options, out)
    target = Path(args.target_dir)
    stem = module_stem(args.arch)
    if args.summary:
        print(rtl_summary(arch), file=out)

    with Progress(args.quiet).step(f"building top_{stem} ({args_label(arch, options)})"):
        text, rams = verilog_and_rams(arch, options, stem)
    files = {f"top_{stem}.v": text,
             "architecture_params.h": architecture_params_h(arch),
             f"top_{stem}.json": json.dumps(manifest(arch, options, stem, rams), indent=2) + "\n",
             f"top_{stem}.vlt": waiver(stem)}
    _prepare_dir(target)
    write_all_atomic(target, files, OptionsError)
    rows = [("Verilog top", f"top_{stem}.v"), ("Driver parameters", "architecture_params.h"),
            ("Manifest", f"top_{stem}.json"), ("Verilator waiver", f"top_{stem}.vlt")]
    print("\n".join([RULE, "ARTIFACTS", RULE] +
                    [f"{label}: {target / name} ({len(files[name].encode()):,} bytes)"
                     for label, name in rows] + [RULE]), file=out)
    return 0


def main(argv=None) -> int:
    return run_cli(build_parser(), generate, argv)


if __name__ == "__main__":
    raise SystemExit(main())
