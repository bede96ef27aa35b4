"""``python -m sim.emulate``: run a compiled model on the golden emulator (Tensil-compatible CLI).

    python -m sim.emulate -m MODEL.tmodel -i in1.csv[,in2.csv] [-o out.csv[,...]] [-r RUNS]
                          [-c expected.csv[,...]] [--raw] [--local-consts] [--stats stats.json]

One CSV per model input (in the order of the manifest's input names), one vector per line,
``array_size`` values per line; with ``-r RUNS`` each CSV holds RUNS inputs one after another
and the outputs of all runs are written one after another. Outputs go to the ``-o`` CSVs (one
per output name) or to standard output; ``--raw`` writes raw fixed-point integers instead of
floats. ``-c`` compares the outputs with expected CSVs (tolerance one LSB) and exits with 1 on a
mismatch. A summary (time, instructions, saturations, error conditions with their program
counter) goes to standard error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from tcu_hw import numeric
from tcu_hw.artifacts import read_csv
from tcu_hw.cli import add_inputs, add_model, add_quiet
from tcu_hw.errors import ArtifactError, run_cli
from tcu_hw.files import check_writable, write_atomic

from .emulator import Emulator
from .model import (check_output_paths, format_outputs, gather, load_model, load_program,
                    place_input, prepare, read_input_csvs, split_paths, write_images,
                    write_output_csvs)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sim.emulate",
        description="Run a compiled TCU model (.tmodel) on the bit-accurate golden emulator.")
    add_model(p, ".tmodel", "model manifest; its .tprog and .tdata are found next to it")
    add_inputs(p, "IN.csv[,IN2.csv]", "one CSV per model input, in the manifest's input "
               "order", required=True)
    p.add_argument("-o", "--outputs", metavar="OUT.csv[,OUT2.csv]",
                   help="one CSV per model output (default: print to standard output)")
    p.add_argument("-c", "--compare", metavar="EXPECTED.csv[,...]",
                   help="compare outputs with these CSVs (tolerance one LSB); exit 1 on mismatch")
    p.add_argument("-r", "--number-of-runs", type=int, default=1, metavar="RUNS",
                   help="run the program RUNS times, each on the next block of input vectors")
    p.add_argument("--raw", action="store_true",
                   help="write and print outputs as raw fixed-point integers")
    p.add_argument("--local-consts", action="store_true",
                   help="preload the constants into local memory (as load_consts_to_local)")
    p.add_argument("--stats", metavar="STATS.json", help="write run statistics as JSON")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first error condition (reserved kind, bad address, ...)")
    add_quiet(p, "no summary on standard error")
    return p


def run(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    arch, dt, n = model.arch, model.arch.dtype, model.arch.array_size
    runs = args.number_of_runs
    if runs < 1:
        raise ArtifactError(f"--number-of-runs must be at least 1, got {runs}")
    inputs, outputs, compare = (split_paths(a) for a in (args.inputs, args.outputs, args.compare))
    names, out_names = model.input_names, model.output_names
    raw_inputs, in_sats = read_input_csvs(model, inputs, runs)
    check_output_paths(model, outputs, "-o")
    check_output_paths(model, compare, "-c", writes=False)
    if args.stats:
        check_writable(args.stats, "--stats", ArtifactError)
    expected = {}
    for name, path in zip(out_names, compare):
        values = read_csv(path, n)
        want = model.vectors(name, outputs=True) * runs
        if len(values) != want:
            raise ArtifactError(f"{path}: {len(values)} vectors (lines), expected {want} for "
                                f"output {name!r}")
        expected[name] = values

    program = load_program(model)
    emu = Emulator(arch, strict=args.strict)
    prepare(emu, model, True if args.local_consts else None)
    results = {name: [] for name in out_names}
    start = time.perf_counter()
    for r in range(runs):
        for name in names:
            size = model.vectors(name)
            placed, copies = place_input(model, name, raw_inputs[name][r * size:(r + 1) * size])
            write_images(emu, (dict(placed), dict(copies), {}))
        emu.run(program)
        for name in out_names:
            results[name].append(gather(model, name, emu.read_dram0))
    elapsed = time.perf_counter() - start
    outs = {name: np.concatenate(v) for name, v in results.items()}

    status = 0
    write_output_csvs(model, outs, outputs, args.raw)
    if not outputs:
        sys.stdout.write(format_outputs(model, outs, runs, args.raw))
    for name, want in expected.items():
        got = numeric.to_float(outs[name], dt)
        bad = np.abs(got - want) > dt.error * (1 + 1e-9)
        if bad.any():
            status = 1
            vec, lane = map(int, np.argwhere(bad)[0])
            print(f"MISMATCH {name}: {int(bad.sum())} value(s) differ by more than one LSB; "
                  f"first at vector {vec} lane {lane}: got {got[vec, lane]}, expected "
                  f"{want[vec, lane]}", file=sys.stderr)
        else:
            print(f"COMPARE {name}: all {want.size} values within one LSB", file=sys.stderr)

    stats = emu.stats
    if args.stats:
        d = stats.to_dict()
        d.update(seconds=elapsed, runs=runs, input_saturations=in_sats,
                 events=[str(e) for e in emu.events])
        write_atomic(args.stats, json.dumps(d, indent=2) + "\n", ArtifactError)
    if not args.quiet:
        err = sys.stderr
        print("EMULATOR SUMMARY", file=err)
        print(f"  model:                {model.name} ({arch.data_type}, {n}x{n})", file=err)
        print(f"  runs:                 {runs}", file=err)
        print(f"  instructions:         {stats.instructions:,}", file=err)
        print(f"  execution time (s):   {elapsed:.3f} "
              f"({stats.instructions / max(elapsed, 1e-9):,.0f} instructions/s)", file=err)
        print(f"  MACs:                 {stats.macs:,}", file=err)
        print(f"  saturations:          {stats.total_saturations} "
              f"(inputs {in_sats}; {', '.join(f'{k} {v}' for k, v in stats.saturations.items())})",
              file=err)
        print(f"  error conditions:     {len(emu.events)}", file=err)
        for e in emu.events[:20]:
            print(f"warning: {e}", file=err)
        if len(emu.events) > 20:
            print(f"warning: ... and {len(emu.events) - 20} more", file=err)
    return status


def main(argv=None) -> int:
    return run_cli(build_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
