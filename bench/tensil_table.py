"""Tensil's published benchmark table, measured cycle by cycle on our generated hardware.

    python bench/tensil_table.py [--networks resnet20v2,yolov4_tiny_192,yolov4_tiny_416,
                                  resnet50v2] [--boards arty,pynqz1,ultra96v2]
                                 [--backend verilator|pyrtl|estimate] [--latency 20]
                                 [--check] [--size NETWORK=S ...] [--json FILE]

Tensil publishes (docs, "Benchmarks") the latency of ResNet-20v2, YOLOv4-tiny and ResNet-50v2
on three boards, from its compiler's latency model: Arty A7-35 (8×8 array, 150 MHz), Pynq Z1
(12×12, 150 MHz), Ultra96-V2 (16×16, 300 MHz). This script builds the networks (ResNet-20v2
is the shared trained model, to its logits; the others come from ``bench/networks.py`` with
He-scaled weights and measured batch-norm statistics: timing does not depend on the
weights), compiles each for an architecture of each board (FP16BP8, the preset memories,
DRAM of 2^23 vectors so that ResNet-50v2 fits: Tensil's benchmark architectures were larger
than its tutorials'), runs it on the generated top under Verilator at the board's AXI width
(Arty's DDR3 controller and Ultra96's HP ports 128 bits, Pynq Z1's HP ports 64; DRAM read
latency ``--latency`` cycles) and prints per row: cycles, MAC utilization (true MACs /
(cycles · n²)), the latency at Tensil's clock, Tensil's published latency and the ratio.
YOLOv4-tiny runs to its two heads at 192 (670.35 M MACs, the count of Tensil's model) beside
Tensil's figure, and at 416 without one.
``--check`` also runs the golden emulator and says whether the outputs are bit-exact
(minutes per ResNet-50v2 image). ``--backend estimate`` prints the compiler's estimate only
(seconds; what the tests run on reduced networks).

A full table takes about half an hour on one core (ResNet-50v2 on 8×8: 70 M cycles).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import networks  # noqa: E402

from compiler_lite.compile import compile_model  # noqa: E402
from compiler_lite.plan import add_port_options  # noqa: E402
from compiler_lite.unfold import INPUT_LAYOUTS  # noqa: E402
from compiler_lite.summary import figures, mac_utilization  # noqa: E402
from sim.driver import Driver  # noqa: E402
from tcu_hw.arch import Architecture, resolve_arch  # noqa: E402
from tcu_hw.errors import CompileError, TcuError  # noqa: E402


@dataclass(frozen=True)
class Board:
    """One of Tensil's benchmark boards: its array, clock, memory port and our preset whose
    memories it takes."""

    name: str
    array: int
    mhz: int
    axi: int
    preset: str


BOARDS = {"arty": Board("Arty A7-35", 8, 150, 128, "artya7100t"),
          "pynqz1": Board("Pynq Z1", 12, 150, 64, "pynqz1"),
          "ultra96v2": Board("Ultra96-V2", 16, 300, 128, "ultra96v2")}

#: Tensil's published latency (ms) per network and board (its docs, "Benchmarks")
TENSIL_MS = {"resnet20v2": {"arty": 21, "pynqz1": 14, "ultra96v2": 4},
             "yolov4_tiny": {"arty": 175, "pynqz1": 112, "ultra96v2": 36},
             "resnet50v2": {"arty": 1969, "pynqz1": 833, "ultra96v2": 260}}

#: the table's rows: (builder in bench/networks.py, input size, Tensil published this size)
NETWORKS = {"resnet20v2": ("resnet20v2", 32, True), "yolov4_tiny_192": ("yolov4_tiny", 192, True),
            "yolov4_tiny_416": ("yolov4_tiny", 416, False),
            "resnet50v2": ("resnet50v2", 224, True)}

SHARED_RESNET20 = ROOT.parent / "shared" / "models" / "resnet20v2_cifar.onnx"

#: DRAM depths of the benchmark architectures (vectors)
DRAM_DEPTH = 1 << 23


def board_arch(key: str) -> Architecture:
    """The architecture of board ``key``: its array on its preset's memories, big DRAM."""
    b = BOARDS[key]
    return resolve_arch(b.preset).with_changes(
        f"the {b.name} benchmark architecture", array_size=b.array, dram0_depth=DRAM_DEPTH,
        dram1_depth=DRAM_DEPTH)


def network(row: str, size: int | None):
    """(ONNX model or path, outputs to compute or None, size) of a table row."""
    builder, default, _ = NETWORKS[row]
    size = size or default
    if builder == "resnet20v2" and size == 32 and SHARED_RESNET20.is_file():
        return str(SHARED_RESNET20), ["dense/BiasAdd:0"], size
    return str(networks.cached_model(builder, size)), None, size


def measure(row: str, key: str, args) -> dict:
    """Compile the row's network for board ``key`` and run it; the row's figures."""
    model, outputs, size = network(row, args.size.get(NETWORKS[row][0]))
    arch, board = board_arch(key), BOARDS[key]
    t = time.perf_counter()
    c = compile_model(model, arch, outputs=outputs, axi_width=board.axi,
                      input_layout=args.input_layout, consts_ports=args.consts_ports,
                      input_ports=args.input_ports)
    seconds = time.perf_counter() - t
    f = figures(c)
    out = {"network": row, "size": size, "board": board.name, "array": board.array,
           "axi": board.axi, "macs": f["macs"], "instructions": len(c.program),
           "compile_s": round(seconds, 1), "estimate": f["cycles"]}
    if args.backend == "estimate":
        out["cycles"] = f["cycles"]
    else:
        out.update(run(c, args))
    floor = f["macs"] / board.array ** 2
    out["mac_floor"] = int(np.ceil(floor))
    out["utilization"] = mac_utilization(f["macs"], out["cycles"], c.arch)
    out["ms"] = out["cycles"] / (board.mhz * 1000)
    builder, full, published = NETWORKS[row]
    tensil = TENSIL_MS[builder][key] if published and size == full else None
    out["tensil_ms"] = tensil
    out["speedup"] = tensil / out["ms"] if tensil else None
    return out


def run(c, args) -> dict:
    """The compiled model on the cycle-accurate backend (and the emulator with --check)."""
    rng = np.random.default_rng(0)
    feeds = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in c.inputs}
    with tempfile.TemporaryDirectory(prefix="tensil_table_") as tmp:
        c.write(Path(tmp))
        tmodel = Path(tmp) / f"{c.name}.tmodel"
        hw = Driver(c.arch, args.backend, latency=args.latency, axi_width=c.axi_width)
        hw.load_model(tmodel)
        t = time.perf_counter()
        got = hw.run(feeds)
        out = {"cycles": int(got.cycles), "run_s": round(time.perf_counter() - t, 1)}
        if args.check:
            emu = Driver(c.arch, "emulator")
            emu.load_model(tmodel)
            gold = emu.run(feeds)
            out["bit_exact"] = all(np.array_equal(got.raw[k], v) for k, v in gold.raw.items())
    return out


def print_table(rows: list[dict], backend: str, latency: int, layout: str,
                ports: str = "") -> None:
    where = "compiler estimate" if backend == "estimate" else \
        f"{backend}, DRAM read latency {latency}"
    print(f"Tensil's benchmark networks, cycles on our hardware ({where}; each board's AXI "
          f"width; inputs {layout}{ports})")
    head = f"{'network':<18}{'size':>5} {'board':<12}{'array':>6}{'AXI':>5}{'cycles':>13}" \
           f"{'MAC floor':>12}{'util':>7}{'ms':>9}{'Tensil ms':>10}{'faster':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        if "error" in r:
            print(f"{r['network']:<18}{'':>5} {r['board']:<12}  {r['error']}")
            continue
        faster = f"{r['speedup']:.2f}×" if r["speedup"] else "-"
        exact = {True: "  bit-exact", False: "  NOT bit-exact"}.get(r.get("bit_exact"), "")
        print(f"{r['network']:<18}{r['size']:>5} {r['board']:<12}{r['array']:>5}²{r['axi']:>5}"
              f"{r['cycles']:>13,}{r['mac_floor']:>12,}{100 * r['utilization']:>6.1f}%"
              f"{r['ms']:>9.2f}{r['tensil_ms'] or '-':>10}{faster:>8}{exact}")


def parse_sizes(items: list[str]) -> dict[str, int]:
    """``NETWORK=S`` options: a builder's input size."""
    sizes = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in networks.BUILDERS or not value.isdigit() or int(value) < 1:
            raise SystemExit(f"--size {item!r}: expected NETWORK=SIZE with NETWORK one of "
                             f"{', '.join(sorted(networks.BUILDERS))}")
        sizes[name] = int(value)
    return sizes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--networks", default=",".join(NETWORKS),
                   help=f"rows, comma-separated (default all: {', '.join(NETWORKS)})")
    p.add_argument("--boards", default=",".join(BOARDS),
                   help=f"columns, comma-separated (default all: {', '.join(BOARDS)})")
    p.add_argument("--backend", default="verilator", choices=["verilator", "pyrtl", "estimate"])
    p.add_argument("--latency", type=int, default=20, help="DRAM read latency (cycles)")
    p.add_argument("--check", action="store_true", help="compare with the golden emulator")
    p.add_argument("--size", action="append", default=[], metavar="NETWORK=S",
                   help="build a network at another input size (reduced runs)")
    p.add_argument("--input-layout", choices=INPUT_LAYOUTS, default="unfolded",
                   help="how the host stores the input image (default unfolded: the stem's "
                        "kernel taps in the channels; pixels: Tensil's, a pixel per vector)")
    add_port_options(p)
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args(argv)
    if args.check and args.backend == "estimate":
        raise SystemExit("--check needs a simulated backend (verilator or pyrtl), not estimate")
    args.size = parse_sizes(args.size)
    rows_wanted = [n.strip() for n in args.networks.split(",") if n.strip()]
    boards = [b.strip() for b in args.boards.split(",") if b.strip()]
    for name, known in (("network", NETWORKS), ("board", BOARDS)):
        bad = [x for x in (rows_wanted if name == "network" else boards) if x not in known]
        if bad:
            raise SystemExit(f"unknown {name}(s) {', '.join(bad)}; choose from "
                             f"{', '.join(known)}")
    rows = []
    for row in rows_wanted:
        for key in boards:
            print(f"… {row} on {BOARDS[key].name}", file=sys.stderr, flush=True)
            try:
                rows.append(measure(row, key, args))
            except CompileError as e:           # a network that does not fit: say so
                rows.append({"network": row, "board": BOARDS[key].name, "error": str(e)})
            except TcuError as e:               # the simulator itself: nothing to measure
                raise SystemExit(f"{row} on {BOARDS[key].name}: {e}") from None
    ports = "".join(f"; {what} on both ports" for what, value in
                    (("constants", args.consts_ports), ("inputs", args.input_ports))
                    if value == "both")
    print_table(rows, args.backend, args.latency, args.input_layout, ports)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r.get("bit_exact", True) and "error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
