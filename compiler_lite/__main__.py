"""``python -m compiler_lite``: compile an ONNX model for a TCU architecture.

Flags follow Tensil's compiler (``-a``, ``-m``, ``-o``, ``-t``, ``-s``, ``--layers-summary``,
``--strategy``, ``-i``); ``--tasm`` writes an assembly listing, ``--golden IN.npz`` the expected
outputs computed by the golden emulator, ``--resize-mode tensil`` Tensil's Resize rule.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tcu_hw.arch import PRESETS
from tcu_hw.cli import boolean
from tcu_hw.errors import run_cli

from .compile import RESIZE_MODES, compile_model
from .frontend import parse_input_shapes
from .plan import STRATEGIES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m compiler_lite",
        description="Compile an ONNX model for a TCU architecture into .tprog (program), "
                    ".tdata (constants) and .tmodel (manifest), plus the model's I/O layout "
                    "(.tio.json).")
    p.add_argument("-a", "--arch", required=True, metavar="ARCH",
                   help=f"a .tarch file or a preset ({', '.join(PRESETS)})")
    p.add_argument("-m", "--model", required=True, metavar="MODEL.onnx", help="ONNX model")
    p.add_argument("-o", "--output", metavar="OUTPUT[,OUTPUT]",
                   help="tensors to compute (comma-separated); default: the graph outputs")
    p.add_argument("-t", "--target", "--target-dir", dest="target", default=".",
                   metavar="TARGET_DIR", help="where to write the artifacts (default .)")
    p.add_argument("-s", "--summary", nargs="?", const=True, default=False, type=boolean,
                   metavar="true|false", help="print the COMPILER SUMMARY")
    p.add_argument("--layers-summary", nargs="?", const=True, default=False, type=boolean,
                   metavar="true|false", help="print a table of the layers")
    p.add_argument("--strategy", choices=STRATEGIES, default="local-vars",
                   help="memory strategy (default local-vars: activations stay in local "
                        "memory between layers when they fit; Tensil's default is "
                        "local-isolated)")
    p.add_argument("-i", "--input-shapes", action="append", metavar='"NAME [d0,d1,...]"',
                   help="shape of an input with dynamic dimensions (repeat, or separate with ;)")
    p.add_argument("--resize-mode", choices=RESIZE_MODES, default="onnx",
                   help="onnx: Resize follows the model's opset semantics (default); tensil: "
                        "linear Resize always uses half-pixel centres, as Tensil's compiler")
    p.add_argument("--tasm", action="store_true", help="also write an assembly listing")
    p.add_argument("--golden", metavar="IN.npz",
                   help="inputs (arrays keyed by input name, in the model's layout): write the "
                        "expected outputs computed by the golden emulator to <name>.golden.npz")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on standard error")
    return p


def run(args, out=None) -> int:
    out = out or sys.stdout
    t0 = time.perf_counter()

    def progress(what: str) -> None:
        if not args.quiet:
            print(f"  [{time.perf_counter() - t0:6.2f} s] {what}", file=sys.stderr, flush=True)

    from .summary import artifacts_table, compiler_summary, layers_summary
    outputs = [o.strip() for o in args.output.split(",") if o.strip()] if args.output else None
    shapes = parse_input_shapes(args.input_shapes)
    golden_inputs = None
    if args.golden:
        from .golden import read_inputs
        golden_inputs = read_inputs(args.golden)
    c = compile_model(args.model, args.arch, outputs=outputs, input_shapes=shapes,
                      strategy=args.strategy, resize_mode=args.resize_mode, progress=progress)
    for note in c.graph.assumed_dims:
        print(f"note: {note}", file=sys.stderr)
    files = c.files(asm=args.tasm)
    if golden_inputs is not None:
        from .golden import golden_npz, run_emulator
        progress("running the golden emulator")
        run_ = run_emulator(c, golden_inputs)
        files[f"{c.name}.golden.npz"] = golden_npz(c, run_, golden_inputs)
        if run_.input_saturations:
            print(f"warning: {run_.input_saturations} input value(s) saturated in "
                  f"{c.arch.data_type}", file=sys.stderr)
        sat = {k: v.count for k, v in run_.stats.sat.items() if v.count}
        if sat:
            means = any(n.op in ("AveragePool", "GlobalAveragePool", "ReduceMean",
                                 "LayerNormalization") for n in c.graph.nodes)
            why = ("the model's values exceed the data type's range, or an average's exact "
                   "sums saturated (it then uses its full-range estimate, so those are "
                   "harmless)") if means else "the model's values exceed the data type's range"
            print(f"warning: the golden run saturated {sum(sat.values()):,} result(s) in "
                  f"{c.arch.data_type} (" + ", ".join(f"{k}: {v:,}" for k, v in sat.items())
                  + f"); {why}", file=sys.stderr)
    from .compile import write_all
    paths = write_all(Path(args.target), files)
    if args.summary:
        print(compiler_summary(c), file=out)
    if args.layers_summary:
        print(layers_summary(c), file=out)
    if c.plan.saturated_consts:
        print(f"warning: {c.plan.saturated_consts} constant value(s) saturated in "
              f"{c.arch.data_type} (see the summary, -s)", file=sys.stderr)
    print(artifacts_table(paths), file=out)
    return 0


def main(argv=None) -> int:
    return run_cli(build_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
