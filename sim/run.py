"""``python -m sim.run``: run a compiled model on a backend and report outputs and cycles.

    python -m sim.run --backend pyrtl -m MODEL.tmodel -i in.csv[,in2.csv] [-o out.csv]
                      [--raw] [--stats stats.json] [--vcd waves.vcd --window PC_FROM:PC_TO]
                      [--latency 20] [-d BITS] [--cycles-per-vector N] [--stall-probability 0]
                      [--check]

Backends: ``emulator`` (the golden model, no cycles), ``pyrtl`` (the PyRTL core with DRAM
models, bit-exact, cycle counts and per-unit busy/stall counters) and ``verilator`` (the
generated Verilog top with AXI4 DRAM models that check the protocol, built with Verilator;
completion by the flush probe). Inputs and outputs are the
emulator's CSV form (see ``python -m sim.emulate``). ``--check`` also runs the emulator and
fails (exit 1) if any output differs. ``--vcd`` writes the waveform of the cycles while the
program counter is in the window (plus a GTKWave save file next to it that groups signals by
block; verilator: the generated top's signals, FST for a ``.fst`` name).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from tcu_hw.cli import (add_axi_width, add_inputs, add_model, add_quiet, pc_around, pc_window,
                        plain)
from tcu_hw.errors import ArtifactError, run_cli
from tcu_hw.files import check_writable, write_atomic
from tcu_hw.progress import Progress

from .backends import SIMULATED as BACKENDS
from .backends import SimOptions, SimulatedBackend, waveform_window
from .model import (check_output_paths, emulate, format_outputs, load_model, read_input_csvs,
                    split_paths, write_output_csvs)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sim.run", description=plain(__doc__.splitlines()[0]))
    p.add_argument("--backend", choices=BACKENDS, default="pyrtl",
                   help="emulator (golden, no cycles), pyrtl (the cycle-accurate PyRTL core; "
                        "default) or verilator (the generated Verilog top)")
    add_model(p, ".tmodel", "the compiled model's manifest")
    add_inputs(p, "IN.csv[,IN2.csv]", "one CSV per model input, in the manifest's input "
               "order", required=True)
    p.add_argument("-o", "--outputs", metavar="OUT.csv[,...]",
                   help="one CSV per output (default: print to standard output)")
    p.add_argument("--raw", action="store_true", help="raw fixed-point integers")
    p.add_argument("--stats", metavar="STATS.json", help="write cycles and counters as JSON")
    p.add_argument("--vcd", metavar="WAVES.vcd|fst",
                   help="write the waveform and a GTKWave save file next to it (pyrtl: VCD of "
                        "the core's signals; verilator: every signal of the top, FST if the "
                        "name ends in .fst)")
    p.add_argument("--window", type=pc_window, metavar="PC_FROM:PC_TO",
                   help="program-counter window of the waveform (default: whole program)")
    p.add_argument("--around", type=pc_around, metavar="PC[:RADIUS]",
                   help="waveform window around one instruction (default radius 4)")
    p.add_argument("--latency", type=int, default=20, metavar="CYCLES",
                   help="DRAM read latency (default 20)")
    p.add_argument("--cycles-per-vector", type=int, default=None, metavar="N",
                   help="pyrtl: one vector every N cycles on each DRAM port (default: the "
                        "AXI width's beats per vector)")
    p.add_argument("--stall-probability", type=float, default=0.0, metavar="P",
                   help="random DRAM back-pressure per cycle, 0 <= P < 1 (default 0)")
    add_axi_width(p, "the board's memory port in bits: the verilator top's AXI width, and the "
                  "pyrtl core's vector time (default: a preset's board width, pynqz1 64, "
                  "ultra96v2 128, ...; else 128, 64 or 32, the widest that divides a vector)",
                  aliases=("--axi-width",))
    p.add_argument("--outstanding", type=int, default=16, metavar="N",
                   help="verilator backend: bursts the AXI slave accepts per direction "
                        "(default 16)")
    p.add_argument("--check", action="store_true",
                   help="also run the emulator and fail if any output differs")
    p.add_argument("--plot", metavar="FILE.png|svg",
                   help="also profile the run on the PyRTL core with the sampler and draw "
                        "its timeline of the units (needs matplotlib)")
    add_quiet(p, "no progress or summary on standard error")
    return p


def run(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    outputs = split_paths(args.outputs)
    raw_inputs, sats = read_input_csvs(model, split_paths(args.inputs))
    check_output_paths(model, outputs, "-o")
    for path, flag in ((args.stats, "--stats"), (args.vcd, "--vcd"), (args.plot, "--plot")):
        if path:
            check_writable(path, flag, ArtifactError)
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ArtifactError(f"--plot {args.plot}: give a .png, .svg or .pdf file")
    window = waveform_window(args.window, args.around)
    options = SimOptions(latency=args.latency, cycles_per_vector=args.cycles_per_vector,
                         stall_probability=args.stall_probability,
                         axi_width=args.axi_data_width,
                         outstanding=args.outstanding)
    backend = SimulatedBackend(model.arch, args.backend, options)
    if window and not args.vcd:
        raise ArtifactError("--window and --around choose the cycles of a waveform: add --vcd")
    stats: dict = {"backend": args.backend, "model": model.name, "input_saturations": sats}
    progress, what = Progress(args.quiet), f"running {model.name} on {args.backend}"
    if args.backend == "pyrtl":
        with progress.bar(what, unit="instructions dispatched") as update:
            outs, measured = backend.run(model, raw_inputs, vcd=args.vcd, window=window,
                                         progress=update)
    else:
        with progress.step(what):
            outs, measured = backend.run(model, raw_inputs, vcd=args.vcd, window=window)
    stats.update(measured)
    if args.plot:
        from .profile import plot_profile, profile_model
        with Progress(args.quiet).step("profiling on the PyRTL core (with the sampler)"):
            prof = profile_model(model, raw_inputs, args.latency, measured.get("cycles", 0))
        plot_profile(args.plot, f"{model.name}, {prof.result.cycles:,} cycles",
                     samples=prof.samples, interval=prof.interval,
                     first_sample=prof.first_sample)
        stats["plot"] = {"file": args.plot, "samples": len(prof.samples),
                         "interval": prof.interval}

    status = 0
    if args.check:
        golden = emulate(model, raw_inputs, raw=True).outputs
        bad = [name for name in model.output_names
               if not np.array_equal(golden[name], outs[name])]
        stats["bit_exact_vs_emulator"] = not bad
        if bad:
            status = 1
            print(f"MISMATCH: outputs {', '.join(bad)} differ from the emulator",
                  file=sys.stderr)
    write_output_csvs(model, outs, outputs, args.raw)
    if not outputs:
        sys.stdout.write(format_outputs(model, outs, 1, args.raw))
    if args.stats:
        write_atomic(args.stats, json.dumps(stats, indent=2, default=int) + "\n", ArtifactError)
    if not args.quiet:
        err = sys.stderr
        print(f"RUN SUMMARY ({args.backend})", file=err)
        print(f"  model:          {model.name}", file=err)
        print(f"  saturations:    inputs {sats} (values outside {model.arch.data_type}'s range, "
              f"clamped)", file=err)
        if "axi" in stats:
            a = stats["axi"]
            print(f"  cycles:         {stats['cycles']:,} (AXI {stats['axi_data_width']} bits, "
                  f"{stats['simulated_cycles_per_second']:,.0f} cycles/s)", file=err)
            print(f"  DRAM0 bursts:   {a['dram0']['read_bursts']:,} read, "
                  f"{a['dram0']['write_bursts']:,} write; DRAM1 {a['dram1']['read_bursts']:,} read",
                  file=err)
            print(f"  error flag:     {stats['error']}", file=err)
        elif "cycles" in stats:
            c = stats["counters"]
            per = (f"a vector every {stats['cycles_per_vector']} cycle(s), set by "
                   f"--cycles-per-vector" if args.cycles_per_vector is not None else
                   f"AXI {stats['axi_data_width']} bits: a vector every "
                   f"{stats['cycles_per_vector']} cycle(s)")
            print(f"  cycles:         {stats['cycles']:,} (DRAM latency "
                  f"{stats['dram_latency']}, {per})", file=err)
            print(f"  compute:        {c['compute_issue']:,} issuing, {c['compute_stall']:,} "
                  f"stalled; MatMul vectors {c['matmul_vectors']:,}; weight vectors pushed "
                  f"{c.get('weight_pushes', 0):,} (waited for {c.get('weight_wait', 0):,})",
                  file=err)
            print(f"  DRAM engine:    {c['dram_busy']:,} moving, {c['dram_stall']:,} stalled; "
                  f"hazard waits {c['hazard_stall']:,}, chained reads waiting "
                  f"{c.get('chain_stall', 0):,}", file=err)
            print(f"  error flag:     {stats['error']}"
                  + (f" (first at pc {stats['error_pc']})" if stats["error"] else ""), file=err)
        else:
            print(f"  instructions:   {stats['instructions']:,}", file=err)
        if "vcd" in stats:
            v = stats["vcd"]
            print(f"  waveform:       {v['file']} ({v['signals']} signals, {v['cycles']:,} "
                  f"cycles from {v['first_cycle']:,}); open with gtkwave {v['gtkw']}", file=err)
        if args.check:
            print(f"  bit-exact vs emulator: {stats['bit_exact_vs_emulator']}", file=err)
        if "plot" in stats:
            print(f"  plot:           {args.plot} ({stats['plot']['samples']:,} samples every "
                  f"{stats['plot']['interval']} cycles)", file=err)
        print(f"  wall time (s):  {stats['seconds']:.2f}", file=err)
    return status


def main(argv=None) -> int:
    return run_cli(build_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
