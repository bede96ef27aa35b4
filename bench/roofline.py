"""Where each cycle goes, layer by layer: a roofline report of a compiled model on the PyRTL
core.

    python bench/roofline.py [-m MODEL.onnx] [-a ARCH] [-o OUTPUT ...] [--latency 20]
                             [--plot FILE.png|svg] [--json OUT.json]

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

``--plot`` draws the same split as stacked bars (needs matplotlib: ``pip install
matplotlib``). Not a test.
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
from compiler_lite.summary import DRAM_KINDS, figures  # noqa: E402
from tcu_hw.isa import SIMD, DataMove, LoadWeights, MatMul  # noqa: E402


def vector_split(program) -> dict:
    """Vectors (or instructions, for SIMD) of each kind of work in ``program``."""
    d = dict(matmul=0, weights=0, moves=0, simd=0, dram=0)
    for ins in program:
        if isinstance(ins, MatMul):
            d["matmul"] += ins.size + 1
        elif isinstance(ins, LoadWeights):
            d["weights"] += ins.size + 1
        elif isinstance(ins, DataMove):
            d["dram" if ins.kind in DRAM_KINDS else "moves"] += ins.size + 1
        elif isinstance(ins, SIMD):
            d["simd"] += 1
    return d


def run_marked(c, feeds, latency: int):
    """Run the compiled model ``c`` on the PyRTL core with a mark at every layer's first
    instruction: (result, [instruction bounds])."""
    from sim.pyrtl_backend import DramTiming, run_compiled
    bounds = np.cumsum([0] + [s.instructions for s in c.layers]).tolist()
    _, res = run_compiled(c, feeds, DramTiming(latency=latency), marks=bounds)
    return res, bounds


def report(c, res, bounds) -> list[dict]:
    n = c.arch.array_size
    beat = max(1, -(-n * c.arch.dtype.bytes_per_scalar * 8 // 128))
    rows = []
    marks = list(res.marks)
    marks[-1] = dict(res.counters)          # the last layer runs to the end of the program
    for i, st in enumerate(c.layers):
        d = vector_split(c.program[bounds[i]:bounds[i + 1]])
        a, b = marks[i], marks[i + 1]
        delta = {k: b[k] - a[k] for k in a}
        rows.append({"layer": st.name, "macs": st.macs, "floor": st.macs / n ** 2, **d,
                     "beats128": d["dram"] * beat, "est": st.cycles,
                     "cycles": delta["cycles"],
                     "idle": delta["cycles"] - delta["compute_issue"],
                     "hazard": delta["hazard_stall"], "chain": delta["chain_stall"],
                     "wwait": delta["weight_wait"],
                     "dram_stall": delta["dram_stall"],
                     "decoder": delta["decoder_stall"]})
    return rows


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


def plot(rows, path: str, title: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("error: --plot needs matplotlib: pip install matplotlib") from None
    names = [r["layer"] for r in rows]
    parts = [("MAC floor", [r["floor"] for r in rows]),
             ("padding", [max(0.0, r["matmul"] - r["floor"]) for r in rows]),
             ("acc↔local moves", [r["moves"] for r in rows]),
             ("SIMD", [r["simd"] for r in rows]),
             ("idle", [max(0, r["idle"]) for r in rows])]
    fig, ax = plt.subplots(figsize=(max(8, 0.3 * len(rows)), 5))
    bottom = np.zeros(len(rows))
    for label, values in parts:
        ax.bar(range(len(rows)), values, bottom=bottom, label=label)
        bottom += np.asarray(values, dtype=float)
    ax.plot(range(len(rows)), [r["cycles"] for r in rows], "k.", label="measured")
    ax.set_xticks(range(len(rows)), names, rotation=90, fontsize=6)
    ax.set_ylabel("cycles")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    print(f"plot: {path}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-m", "--model", default=str(SHARED / "models" / "resnet20v2_cifar.onnx"))
    p.add_argument("-a", "--arch", default="ultra96v2", help="preset name or .tarch file")
    p.add_argument("-o", "--outputs", nargs="*", default=None,
                   help="outputs to compile to (default for ResNet-20: its logits)")
    p.add_argument("--latency", type=int, default=20, help="DRAM read latency in cycles")
    p.add_argument("--plot", metavar="FILE", help="write the split as a PNG/SVG bar chart")
    p.add_argument("--json", metavar="OUT.json", help="write the rows as JSON")
    args = p.parse_args()
    outs = args.outputs
    if outs is None and Path(args.model).name == "resnet20v2_cifar.onnx":
        outs = ["dense/BiasAdd:0"]
    t = time.perf_counter()
    c = compile_model(args.model, args.arch, outputs=outs)
    print(f"compiled {Path(args.model).name} for {args.arch} in {time.perf_counter() - t:.1f} "
          f"s: {len(c.program):,} instructions, {len(c.layers)} layers", flush=True)
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal(i.shape) * 0.25 for i in c.inputs}
    t = time.perf_counter()
    res, bounds = run_marked(c, feeds, args.latency)
    print(f"ran on the PyRTL core in {time.perf_counter() - t:.1f} s\n", flush=True)
    rows = report(c, res, bounds)
    print_table(rows, res.cycles, figures(c)["macs"], c.arch.array_size)
    if args.plot:
        plot(rows, args.plot, f"{Path(args.model).stem} on {args.arch}: {res.cycles:,} cycles")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
