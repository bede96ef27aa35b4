"""Where each cycle goes, layer by layer: a roofline report of a compiled model on the PyRTL
core.

    python bench/roofline.py [-m MODEL.onnx] [-a ARCH] [-o OUTPUT ...] [--latency 20]
                             [--input-layout pixels|unfolded] [--plot FILE.png|svg]
                             [--json OUT.json]

Defaults: ResNet-20 (``../shared/models/resnet20v2_cifar.onnx``, to its logits) for
ultra96v2. For every layer of the compiled program it prints

* ``floor``: MAC-bound cycles, true MACs / n² (what a perfectly fed array needs);
* ``matmul``: MatMul vectors issued (the floor plus padding: channels that do not fill the
  array, frame columns, tap tiles with few rows);
* ``weights``: LoadWeights vectors (n + 1 per full tile), pushed by the weight loader beside
  the issue slot (``wwait``: measured cycles the slot waited for them, where a tile's
  MatMuls are shorter than the next tile's pushes);
* ``moves``/``simd``: accumulator ↔ local vectors and SIMD instructions, also in that slot;
* ``dram``: vectors moved between DRAM and local memory (the DRAM-bound cycles at one vector
  per cycle; ``beats128`` = 128-bit AXI beats for them);
* ``est``: the compiler's estimate (max of compute and DRAM cycles);
* ``cycles``: measured on the core, from the counters when dispatch reached the layer's
  first and next layer's first instruction (so a layer's queued work may shift a little
  into its neighbour; the total is exact);
* ``idle``: measured cycles in which the compute unit issued nothing, and the stall counters
  over the layer: waiting at dispatch on a local-memory hazard (``hazard``), a chained read
  waiting for a DRAM load to write its word (``chain``), DRAM, the decoder; ``wwait`` the
  compute unit waiting only for weight pushes.

``--plot`` draws the same split as stacked bars above the sampler's timeline
(:mod:`sim.profile`; needs matplotlib: ``pip install matplotlib``). Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

from compiler_lite.compile import compile_model  # noqa: E402
from compiler_lite.plan import add_port_options  # noqa: E402
from compiler_lite.summary import figures  # noqa: E402
from compiler_lite.unfold import INPUT_LAYOUTS  # noqa: E402
from sim.profile import layer_rows, plot_profile, profile  # noqa: E402


def print_table(rows, total: int, macs: int, n: int) -> None:
    cols = ["floor", "matmul", "weights", "moves", "simd", "dram", "beats128", "est",
            "cycles", "idle", "hazard", "chain", "wwait", "dram_stall", "decoder"]
    print(f"{'layer':<24}" + "".join(f"{c:>11}" for c in cols))
    for r in rows:
        print(f"{r['layer'][:24]:<24}" + "".join(f"{int(round(r[c])):>11,}" for c in cols))
    sums = {c: sum(r[c] for r in rows) for c in cols}
    print(f"{'total':<24}" + "".join(f"{int(round(sums[c])):>11,}" for c in cols))
    floor = macs / n ** 2
    print(f"\n{total:,} cycles for {macs / 1e6:.2f} M MACs on {n}×{n}: the MAC floor is "
          f"{floor:,.0f} cycles ({100 * floor / total:.1f}% of MAC peak). Beyond the floor: "
          f"padding {sums['matmul'] - floor:,.0f}, acc↔local moves {sums['moves']:,}, SIMD "
          f"{sums['simd']:,}, idle {sums['idle']:,} (hazard waits {sums['hazard']:,}, "
          f"chained reads waiting {sums['chain']:,}, waiting for weight pushes "
          f"{sums['wwait']:,}, DRAM {sums['dram_stall']:,}, decoder {sums['decoder']:,}). "
          f"The {sums['weights']:,} weight vectors are pushed beside the issue slot.")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-m", "--model", default=str(SHARED / "models" / "resnet20v2_cifar.onnx"))
    p.add_argument("-a", "--arch", default="ultra96v2", help="preset name or .tarch file")
    p.add_argument("-o", "--outputs", nargs="*", default=None,
                   help="outputs to compile to (default for ResNet-20: its logits)")
    p.add_argument("--latency", type=int, default=20, help="DRAM read latency in cycles")
    p.add_argument("--input-layout", choices=INPUT_LAYOUTS, default="pixels",
                   help="how the host stores the inputs (default pixels, Tensil's; unfolded: "
                        "the stem's kernel taps in the channels, as bench/report.py measures)")
    add_port_options(p)
    p.add_argument("--plot", metavar="FILE", help="write the split as a PNG/SVG bar chart")
    p.add_argument("--json", metavar="OUT.json", help="write the rows as JSON")
    args = p.parse_args()
    outs = args.outputs
    if outs is None and Path(args.model).name == "resnet20v2_cifar.onnx":
        outs = ["dense/BiasAdd:0"]
    t = time.perf_counter()
    c = compile_model(args.model, args.arch, outputs=outs, input_layout=args.input_layout,
                      consts_ports=args.consts_ports,
                      input_ports=args.input_ports)
    print(f"compiled {Path(args.model).name} for {args.arch} in {time.perf_counter() - t:.1f} "
          f"s: {len(c.program):,} instructions, {len(c.layers)} layers", flush=True)
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal(i.shape) * 0.25 for i in c.inputs}
    t = time.perf_counter()
    prof = profile(c, feeds, args.latency, sample=bool(args.plot))
    res = prof.result
    print(f"ran on the PyRTL core in {time.perf_counter() - t:.1f} s\n", flush=True)
    rows = layer_rows(c, prof)
    print_table(rows, res.cycles, figures(c)["macs"], c.arch.array_size)
    if args.plot:
        plot_profile(args.plot, f"{Path(args.model).stem} on {args.arch}: {res.cycles:,} "
                     f"cycles", rows, prof.samples, prof.interval, prof.layer_starts,
                     prof.first_sample)
        print(f"plot: {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
