"""``python -m compiler_lite``: compile an ONNX model for a TCU architecture.

Flags follow Tensil's compiler (``-a``, ``-m``, ``-o``, ``-t``, ``-s``, ``--layers-summary``,
``--strategy``, ``--input-shapes``) and the tools' shared conventions (:mod:`tcu_hw.cli`);
``--tasm`` writes an assembly listing, ``-i/--inputs IN.npz`` the expected outputs computed
by the golden emulator for those inputs, ``--resize-mode tensil`` Tensil's Resize rule,
``--input-layout unfolded`` a stem convolution's taps in its input's channels.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tcu_hw.cli import (add_arch, add_axi_width, add_input_shapes, add_inputs, add_model,
                        add_quiet, add_target_dir, boolean)
from tcu_hw.errors import run_cli
from tcu_hw.progress import Progress

from .compile import RESIZE_MODES, compile_model
from .frontend import parse_input_shapes
from .plan import STRATEGIES, add_port_options
from .quantize import KINDS
from .unfold import add_input_layout


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m compiler_lite",
        description="Compile an ONNX model for a TCU architecture into .tprog (program), "
                    ".tdata (constants) and .tmodel (manifest), plus the model's I/O layout "
                    "(.tio.json).")
    add_arch(p)
    add_model(p, ".onnx", "the ONNX model")
    p.add_argument("-o", "--output", metavar="OUTPUT[,OUTPUT]",
                   help="tensors to compute (comma-separated); default: the graph outputs")
    add_target_dir(p, "where to write the artifacts (default .)", ".", aliases=("--target",))
    p.add_argument("-s", "--summary", nargs="?", const=True, default=False, type=boolean,
                   metavar="true|false", help="print the COMPILER SUMMARY")
    p.add_argument("--layers-summary", nargs="?", const=True, default=False, type=boolean,
                   metavar="true|false", help="print a table of the layers")
    p.add_argument("--strategy", choices=STRATEGIES, default="local-vars",
                   help="memory strategy (default local-vars: activations stay in local "
                        "memory between layers when they fit; Tensil's default is "
                        "local-isolated)")
    add_input_shapes(p)
    add_axi_width(p, "the board's memory port in bits, for the estimated cycles (default: a "
                  "preset's board width, pynqz1 64, ultra96v2 128, ...; else 128, 64 or 32, "
                  "the widest that divides a vector)")
    p.add_argument("--resize-mode", choices=RESIZE_MODES, default="onnx",
                   help="onnx: Resize follows the model's opset semantics (default); tensil: "
                        "linear Resize always uses half-pixel centres, as Tensil's compiler")
    add_input_layout(p)
    add_port_options(p)
    p.add_argument("--tasm", action="store_true", help="also write an assembly listing")
    add_inputs(p, "IN.npz", "inputs (arrays keyed by input name, in the model's layout): "
               "write the expected outputs computed by the golden emulator to "
               "<name>.golden.npz", aliases=("--golden",))
    p.add_argument("--calibrate", metavar="SAMPLES.npz",
                   help="representative inputs (arrays keyed by input name, samples stacked "
                        "on the batch axis): print how far the compiled model is from float "
                        "on them (max|err|, rms(error)/std(output), top-1/top-5 agreement; "
                        "the golden emulator against onnxruntime)")
    p.add_argument("--quantize", choices=sorted(KINDS), metavar="int8|int16",
                   help="quantize a float model first with onnxruntime's quantize_static "
                        "(QDQ: per-channel symmetric weights, activations with zero points, "
                        "calibrated on --calibrate's samples); the architecture's data type "
                        "must be INT8 or INT16 to match")
    add_quiet(p, "no progress on standard error")
    return p


def run(args, out=None) -> int:
    out = out or sys.stdout
    with Progress(args.quiet).stages() as progress:
        return _compile(args, out, progress)


def _compile(args, out, progress) -> int:
    from .summary import artifacts_table, compiler_summary, layers_summary
    outputs = [o.strip() for o in args.output.split(",") if o.strip()] if args.output else None
    shapes = parse_input_shapes(args.input_shapes)
    golden_inputs = calibration = None
    if args.inputs or args.calibrate:
        from .golden import read_inputs
        golden_inputs = read_inputs(args.inputs) if args.inputs else None
        calibration = read_inputs(args.calibrate) if args.calibrate else None
    with tempfile.TemporaryDirectory(prefix="quantize_") as scratch:
        model = args.model
        if args.quantize:
            model = _quantized(args, calibration, scratch, progress)
        c = compile_model(model, args.arch, outputs=outputs, input_shapes=shapes,
                          strategy=args.strategy, resize_mode=args.resize_mode,
                          model_file=args.model, progress=progress,
                          axi_width=args.axi_data_width, input_layout=args.input_layout,
                          consts_ports=args.consts_ports,
                          input_ports=args.input_ports)
    for note in c.graph.assumed_dims:
        print(f"note: {note}", file=sys.stderr)
    files = c.files(asm=args.tasm)
    if golden_inputs is not None:
        from .golden import golden_npz, result_saturations, run_emulator
        progress("running the golden emulator")
        run_ = run_emulator(c, golden_inputs)
        files[f"{c.name}.golden.npz"] = golden_npz(c, run_, golden_inputs)
        if run_.input_saturations:
            print(f"warning: {run_.input_saturations} input value(s) saturated in "
                  f"{c.arch.data_type}", file=sys.stderr)
        sat = result_saturations({k: v.count for k, v in run_.stats.sat.items()},
                                 c.arch.dtype)
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
    precision = None
    if calibration is not None:             # before writing: bad samples leave no files
        progress("measuring precision on the calibration samples")
        precision = precision_report(c, args.model, calibration)
    paths = write_all(Path(args.target_dir), files)
    if args.summary:
        print(compiler_summary(c), file=out)
    if args.layers_summary:
        print(layers_summary(c), file=out)
    if precision:
        print(precision, file=out)
    if c.plan.saturated_consts:
        print(f"warning: {c.plan.saturated_consts} constant value(s) saturated in "
              f"{c.arch.data_type} (see the summary, -s)", file=sys.stderr)
    print(artifacts_table(paths), file=out)
    return 0


def _quantized(args, calibration, scratch, progress) -> str:
    """The QDQ model of ``args.model`` (:func:`.quantize.quantize_model`), in ``scratch``."""
    from tcu_hw.arch import resolve_arch
    from tcu_hw.errors import CompileError
    from .quantize import quantize_model
    if calibration is None:
        raise CompileError(f"--quantize {args.quantize} needs --calibrate SAMPLES.npz "
                           f"(representative inputs for onnxruntime's calibration)")
    arch = resolve_arch(args.arch)
    if arch.data_type != KINDS[args.quantize]:
        raise CompileError(f"--quantize {args.quantize} needs an architecture of data type "
                           f"{KINDS[args.quantize]}; {args.arch} is {arch.data_type}")
    progress(f"quantizing to {args.quantize} with onnxruntime")
    return str(quantize_model(args.model, args.quantize, calibration, scratch))


def precision_report(c, model, samples) -> str:
    """The PRECISION table of ``c`` (compiled from ``model``) on ``samples``: the golden
    emulator (through :class:`sim.driver.Driver`, which runs a batch as runs, on the
    artifacts written to a scratch directory) against onnxruntime."""
    import tempfile

    from sim.driver import Driver

    from .accuracy import accuracy_table, compare_outputs
    from .golden import onnxruntime_outputs
    from .summary import RULE
    driver = Driver(c.arch, "emulator")
    with tempfile.TemporaryDirectory(prefix="calibrate_") as scratch:
        c.write(scratch)
        driver.load_model(Path(scratch) / f"{c.name}.tmodel")
        got = driver.run(samples)
    names = [t.name for t in c.outputs]
    ref = onnxruntime_outputs(model, samples, names)
    dt = c.arch.dtype
    rows = compare_outputs(got.outputs, ref, c.output_lsb, got.runs)
    lines = [RULE, f"PRECISION on {got.runs} calibration sample(s): {dt.name} against float "
             f"(onnxruntime)", RULE, accuracy_table(rows)]
    if got.input_saturations:
        lines.append(f"saturated inputs: {got.input_saturations} value(s)")
    return "\n".join(lines + [RULE])


def main(argv=None) -> int:
    return run_cli(build_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
