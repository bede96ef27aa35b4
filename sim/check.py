"""``python -m sim.check``: one command from an ONNX model to a verified result.

    python -m sim.check -a ARCH -m MODEL.onnx [--backend emulator|pyrtl|verilator]
                        [-i in.npz] [-o OUT[,OUT]] [--input-shapes "NAME [d0,...]"] [-t DIR]

Compiles the model (``compiler_lite``), runs it in float on onnxruntime, on the golden
emulator and on the chosen hardware backend (through :class:`sim.driver.Driver`), and prints
per output how far the result is from float (the largest difference, also in units of the
data type's last place; rms(error)/std(output); top-1 and top-5 agreement for logits, see
:mod:`compiler_lite.accuracy`), whether the hardware agrees with the emulator bit for bit,
the cycles and the MAC utilization. Exit status 0 when the hardware is bit-exact (and, with
``--tolerance``, every error is within it), 1 otherwise. Inputs default to ``--samples``
seeded random values of each input's shape.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from compiler_lite.plan import STRATEGIES, add_port_options
from compiler_lite.unfold import add_input_layout
from tcu_hw.cli import (add_arch, add_axi_width, add_input_shapes, add_inputs, add_model,
                        add_quiet, add_target_dir, pc_around, pc_window, plain,
                        positive)
from tcu_hw.errors import ArtifactError, run_cli
from tcu_hw.files import check_writable
from tcu_hw.progress import Progress

from .backends import SIMULATED

RULE = "-" * 104


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sim.check",
                                description=plain(__doc__.splitlines()[0]))
    add_arch(p)
    add_model(p, ".onnx", "the ONNX model")
    p.add_argument("--backend", choices=SIMULATED, default="pyrtl",
                   help="hardware to check against the emulator (default pyrtl: the "
                        "cycle-accurate PyRTL core; verilator: the generated Verilog top)")
    add_inputs(p, "IN.npz", "inputs keyed by name, in the model's layout (default: seeded "
               "random values)")
    p.add_argument("-o", "--output", metavar="OUTPUT[,OUTPUT]",
                   help="tensors to compute (default: the graph outputs)")
    add_input_shapes(p)
    p.add_argument("--strategy", choices=STRATEGIES, default="local-vars",
                   help="the compiler's memory strategy (default local-vars)")
    add_input_layout(p)
    add_port_options(p)
    add_target_dir(p, "keep the compiled artifacts here (default: a temporary directory)",
                   aliases=("--target",))
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--samples", type=positive, default=1, metavar="N",
                   help="random inputs: N samples, run one after another (default 1); the "
                        "error figures and top-1/top-5 agreement are over all of them")
    p.add_argument("--latency", type=int, default=20, metavar="CYCLES",
                   help="DRAM read latency (default 20)")
    add_axi_width(p, "the board's memory port in bits: the verilator top's AXI width, and the "
                  "pyrtl core's vector time (default: a preset's board width, pynqz1 64, "
                  "ultra96v2 128, ...; else 128, 64 or 32, the widest that divides a vector)")
    p.add_argument("--tolerance", type=_tolerance,
                   help="also fail when an output differs from float by more than this")
    p.add_argument("--vcd", metavar="WAVES.vcd|fst",
                   help="write the waveform of the first run and a GTKWave save file next to it "
                        "(pyrtl: VCD of the core's signals; verilator: every signal of the "
                        "top, FST if the name ends in .fst)")
    p.add_argument("--window", type=pc_window, metavar="PC_FROM:PC_TO",
                   help="program-counter window of the waveform (default: whole program)")
    p.add_argument("--around", type=pc_around, metavar="PC[:RADIUS]",
                   help="waveform window around one instruction")
    p.add_argument("--plot", metavar="FILE.png|svg",
                   help="profile one run on the PyRTL core and draw its cycles per layer and "
                        "the sampler's timeline of the units (needs matplotlib)")
    add_quiet(p, "no progress on standard error")
    return p


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def check(args: argparse.Namespace, out=None) -> int:
    from .backends import trace_format, waveform_window
    out = out or sys.stdout
    window = waveform_window(args.window, args.around)
    if (args.vcd or window) and args.backend not in ("pyrtl", "verilator"):
        raise ArtifactError("--vcd, --window and --around need --backend pyrtl or verilator")
    if args.vcd and trace_format(args.vcd) == "fst" and args.backend != "verilator":
        raise ArtifactError(f"--vcd {args.vcd}: FST waveforms need --backend verilator; name "
                            f"a .vcd file")
    if args.inputs and args.samples != 1:
        raise ArtifactError("--samples draws random inputs: give it or -i/--inputs, not both")
    if window and not args.vcd:
        raise ArtifactError("--window and --around choose the cycles of a waveform: add --vcd")
    for path, flag in ((args.vcd, "--vcd"), (args.plot, "--plot")):
        if path:
            check_writable(path, flag, ArtifactError)
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ArtifactError(f"--plot {args.plot}: give a .png, .svg or .pdf file")
    with Progress(args.quiet).stages() as say:
        return _check(args, out, window, say)


def _check(args: argparse.Namespace, out, window, say) -> int:
    from compiler_lite.compile import compile_model
    from compiler_lite.frontend import parse_input_shapes
    from compiler_lite.golden import onnxruntime_outputs, read_inputs
    from compiler_lite.summary import figures, mac_utilization

    from .driver import Driver
    t0 = time.perf_counter()
    outputs = [o.strip() for o in args.output.split(",") if o.strip()] if args.output else None
    say("compiling")
    c = compile_model(args.model, args.arch, outputs=outputs,
                      input_shapes=parse_input_shapes(args.input_shapes),
                      strategy=args.strategy, progress=say,
                      axi_width=args.axi_data_width, input_layout=args.input_layout,
                      consts_ports=args.consts_ports,
                      input_ports=args.input_ports)
    t_compile = time.perf_counter() - t0
    tmp = None
    target = Path(args.target_dir) if args.target_dir else \
        Path(tmp := tempfile.mkdtemp(prefix="check_"))
    try:
        c.write(target)
        tmodel = target / f"{c.name}.tmodel"
        if args.inputs:
            feeds = read_inputs(args.inputs)
        else:
            rng = np.random.default_rng(args.seed)
            feeds = {t.name: rng.standard_normal((t.shape[0] * args.samples,
                                                  *t.shape[1:])).astype(np.float32)
                     for t in c.inputs}
        names = [t.name for t in c.outputs]
        emu = Driver(c.arch, "emulator")
        emu.load_model(tmodel)
        say("running the golden emulator")
        t = time.perf_counter()
        golden = emu.run(feeds)          # checks the inputs' names and shapes first
        t_emu = time.perf_counter() - t
        say("running onnxruntime")
        ref = onnxruntime_outputs(args.model, feeds, names)
        hw = None
        if args.backend != "emulator":
            say(f"building the {args.backend} simulation")
            drv = Driver(c.arch, args.backend, latency=args.latency,
                         axi_width=c.axi_width)
            drv.load_model(tmodel)
            say(f"running on {args.backend}")
            t = time.perf_counter()
            hw = drv.run(feeds, vcd=args.vcd, window=window)
            t_hw = time.perf_counter() - t
        prof = None
        if args.plot:
            from .profile import profile
            say("profiling on the PyRTL core (with the sampler)")
            one = {t.name: np.asarray(feeds[t.name])[:t.shape[0]] for t in c.inputs}
            prof = profile(c, one, args.latency)
        say("comparing")
    finally:
        if tmp:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)

    f = figures(c)
    ok, lines = _verdict(args, c, golden, {k: ref[k] for k in names}, hw)
    lines.append(f"instructions: {len(c.program):,}; true MACs: {f['macs']:,}; "
                 f"compile {t_compile:.2f} s; emulator {t_emu:.2f} s")
    if hw is not None:
        util = mac_utilization(f["macs"] * golden.runs, hw.cycles, c.arch)
        lines.append(f"cycles ({args.backend}, DRAM latency {args.latency}, AXI "
                     f"{hw.stats[0]['axi_data_width']} bits): {hw.cycles:,}; MAC utilization "
                     f"{100 * util:.1f}%; run {t_hw:.2f} s")
        if args.vcd:
            lines.append(f"waveform: {args.vcd}; open with gtkwave "
                         f"{hw.stats[0]['vcd']['gtkw']}")
    if prof is not None:
        from .profile import layer_rows, plot_profile
        rows = layer_rows(c, prof)
        plot_profile(args.plot, f"{c.name} on {c.arch.array_size}x{c.arch.array_size}, "
                     f"{prof.result.cycles:,} cycles", rows, prof.samples, prof.interval,
                     prof.layer_starts, prof.first_sample)
        lines.append(f"plot: {args.plot} ({len(rows)} layers, {len(prof.samples):,} samples "
                     f"every {prof.interval} cycles)")
    from compiler_lite.golden import result_saturations
    sats = sum(sum(result_saturations(s.get("saturations", {}), c.arch.dtype).values())
               for s in golden.stats)
    if golden.input_saturations or sats:
        lines.append(f"saturated: {golden.input_saturations} input value(s), {sats} result(s)")
    lines += [f"RESULT: {'PASS' if ok else 'FAIL'}", RULE]
    print("\n".join(lines), file=out)
    return 0 if ok else 1


def _verdict(args, c, golden, ref, hw) -> tuple[bool, list[str]]:
    """(pass?, the header and the per-output table): precision against float, and whether
    the hardware matched the emulator bit for bit."""
    from compiler_lite.accuracy import accuracy_table, compare_outputs
    rows = compare_outputs(golden.outputs, ref, c.output_lsb, golden.runs)
    exact = {name: "n/a" if hw is None else
             ("yes" if np.array_equal(hw.raw[name], golden.raw[name]) else "NO")
             for name in ref}
    ok = "NO" not in exact.values()
    if args.tolerance is not None:
        ok &= all(r.max_abs <= args.tolerance for r in rows)
    return ok, [RULE, f"CHECK {c.name}: {args.model} on {args.backend} "
                f"({c.arch.array_size}x{c.arch.array_size} {c.arch.dtype.name}), {golden.runs} "
                f"sample(s)", RULE, accuracy_table(rows, {"bit-exact": exact})]


def main(argv=None) -> int:
    return run_cli(build_parser(), check, argv)


if __name__ == "__main__":
    raise SystemExit(main())
