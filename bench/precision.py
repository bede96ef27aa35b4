"""How close deep networks land to float, per data type: ours on the golden emulator next to
onnxruntime's own quantized models of the same network.

    python bench/precision.py [--models resnet50v2,yolov4_tiny,mobilenetv2] [-a ultra96v2]
                              [--types FP16BP8,FP18BP10,FP32BP16] [--samples 4]
                              [--calibration 8] [--size S]

Each network is built full size by ``bench/networks.py`` (He-scaled random weights, batch-norm
statistics measured on the float model; cached under ``~/.cache/tcu_hw/networks``). For every
output it prints rms(error) / std(float output) over ``--samples`` seeded N(0, 1) inputs:

- our data types: the model compiled for the architecture with that data type, run on the
  bit-accurate emulator;
- ``ort INT8`` / ``ort INT16``: onnxruntime's ``quantize_static`` QDQ model of the network
  after ``quant_pre_process`` (batch norms folded into the convolutions, as onnxruntime asks;
  per-channel symmetric weights, activations with zero points, MinMax calibration), run on
  onnxruntime's CPU kernels. The calibration set is the measured samples and
  ``--calibration`` more, so no measured value falls outside a calibrated range and the
  figure is the arithmetic's (``--held-out`` calibrates on the others only: then clipping
  of values beyond the calibrated ranges dominates INT16's error);

and top-1 agreement with float for classifiers. Our INT8 and INT16 rows are the same QDQ
models as onnxruntime's, compiled for the architecture with that data type and run on the
emulator. Runs take minutes (the emulator: about a minute per ResNet-50v2 image
on ultra96v2).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from compiler_lite.accuracy import compare_outputs
from compiler_lite.compile import compile_model
from compiler_lite.golden import onnxruntime_outputs
from compiler_lite.quantize import quantize_model
from sim.driver import Driver
from tcu_hw.arch import resolve_arch
from tcu_hw.errors import CompileError

HERE = Path(__file__).resolve().parent
OURS = ("FP16BP8", "FP18BP10", "FP32BP16", "INT8", "INT16")
ORT_TYPES = ("INT8", "INT16")


def networks():
    """bench/networks.py (this script's neighbour)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import networks as nets
    return nets


def cached_model(name: str, size: int | None) -> Path:
    """The network as an ONNX file (:func:`networks.cached_model`)."""
    return networks().cached_model(name, size)


def inputs(model: Path, count: int, seed: int) -> dict[str, np.ndarray]:
    import onnx
    shape = [d.dim_value for d in onnx.load(str(model)).graph.input[0].type.tensor_type
             .shape.dim]
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((count, *shape[1:])).astype(np.float32)}


def ort_quantized(model: Path, kind: str, calibration: dict, workdir: Path) -> Path:
    """onnxruntime's QDQ model of ``model`` for INT8 or INT16 (the compiler's own
    ``--quantize``: :func:`compiler_lite.quantize.quantize_model`), in ``workdir/kind``."""
    out = workdir / kind
    out.mkdir(exist_ok=True)
    return quantize_model(model, kind.lower(), calibration, out)


def ours(model: Path, arch, dtype: str, feeds: dict, workdir: Path) -> dict:
    """Outputs of ``model`` compiled for ``arch`` with ``dtype``, on the golden emulator
    (an integer type takes the QDQ model; its SIMD stage needs four registers)."""
    changes = {"data_type": dtype}
    if dtype in ORT_TYPES:
        changes["simd_registers_depth"] = max(4, arch.simd_registers_depth)
    a = arch.with_changes(f"--types {dtype}", **changes)
    c = compile_model(str(model), a)
    c.write(workdir)
    drv = Driver(a, "emulator")
    drv.load_model(workdir / f"{c.name}.tmodel")
    return drv.run(feeds).outputs


def figures(ref: dict, got: dict) -> dict:
    """{output: (rms/std, top-1 or None)}."""
    return {r.name: (r.rms_rel, r.top1) for r in compare_outputs(got, ref)}


def measure(name: str, args, arch) -> list[tuple[str, str, dict]]:
    """Rows (column, kind, {output: (rms/std, top-1)}) for one network."""
    model = cached_model(name, args.size)
    feeds = inputs(model, args.samples, seed=100)
    ref = onnxruntime_outputs(model, feeds)
    extra = inputs(model, args.calibration, seed=200)["x"]
    calibration = {"x": extra if args.held_out else np.concatenate([feeds["x"], extra])}
    rows = []
    with tempfile.TemporaryDirectory(prefix="precision_") as tmp:
        work = Path(tmp)
        for kind in ORT_TYPES:
            t = time.perf_counter()
            q = ort_quantized(model, kind, calibration, work)
            rows.append((f"ort {kind}", f"{time.perf_counter() - t:.0f} s",
                         figures(ref, onnxruntime_outputs(q, feeds))))
            if kind in args.types:
                rows.append(_our_row(kind, q, arch, feeds, work / kind, ref))
        for dtype in (t for t in args.types if t not in ORT_TYPES):
            rows.append(_our_row(dtype, model, arch, feeds, work, ref))
    return rows


def _our_row(dtype: str, model: Path, arch, feeds: dict, work: Path, ref: dict):
    """One row of ours; a model the architecture refuses gives a row with the reason (the
    others still print)."""
    t = time.perf_counter()
    try:
        got = ours(model, arch, dtype, feeds, work)
    except CompileError as e:
        print(f"  {dtype}: refused: {str(e).splitlines()[0]}", file=sys.stderr, flush=True)
        return dtype, "refused", None
    return dtype, f"{time.perf_counter() - t:.0f} s", figures(ref, got)


def print_table(name: str, rows: list) -> None:
    outputs = list(rows[0][2])
    print(f"\n{name}: rms(error)/std(float output) over the samples (top-1 agreement)")
    print(f"  {'type':<10} " + " ".join(f"{o[-22:]:>24}" for o in outputs) + "    time")
    for column, took, fig in rows:
        cells = []
        for o in outputs:
            rel, top1 = fig[o] if fig is not None else (None, None)
            cells.append("-" if rel is None else f"{100 * rel:.3g}%" +
                         (f" ({100 * top1:.0f}%)" if top1 is not None else ""))
        print(f"  {column:<10} " + " ".join(f"{c:>24}" for c in cells) + f"  {took:>6}")


def main(argv=None) -> int:
    nets = networks()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50v2,yolov4_tiny,mobilenetv2",
                   help=f"comma-separated, of {', '.join(nets.BUILDERS)}")
    p.add_argument("-a", "--arch", default="ultra96v2", help="architecture (preset or .tarch)")
    p.add_argument("--types", default=",".join(OURS), help="our data types to measure")
    p.add_argument("--samples", type=int, default=4, help="inputs measured (default 4)")
    p.add_argument("--calibration", type=int, default=8,
                   help="inputs onnxruntime's quantizer calibrates on besides the measured "
                        "ones (default 8)")
    p.add_argument("--held-out", action="store_true",
                   help="calibrate on the --calibration inputs only, not the measured ones")
    p.add_argument("--size", type=int, help="input size (default: each network's own)")
    args = p.parse_args(argv)
    args.types = [t.strip() for t in args.types.split(",") if t.strip()]
    arch = resolve_arch(args.arch)
    print(f"architecture {args.arch} ({arch.array_size}x{arch.array_size}); "
          f"{args.samples} samples; onnxruntime calibrated on "
          + (f"{args.calibration} others" if args.held_out
             else f"them and {args.calibration} others"))
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        if name not in nets.BUILDERS:
            p.error(f"--models: unknown network {name!r}; choose from "
                    f"{', '.join(nets.BUILDERS)}")
        print_table(name, measure(name, args, arch))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
