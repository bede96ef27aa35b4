"""Logic depth of a design mapped by Yosys ``synth_ecp5``: the deepest combinational path
between registers, block RAM and top-level ports, counted in logic levels, with the nets it
passes through. A fast stand-in for place and route (seconds after synthesis, against 10 to
90 minutes of nextpnr) that moves with the clock: each level costs a LUT's delay and a hop of
routing.

    python bench/logic_depth.py [--arch pynqz1] [--axi 64] [--json syn.json]

Levels (per cell on the path): ``LUT4``, ``PFUMX``, ``L6MUX21`` and a carry cell entered
through its LUT inputs 1; along a carry chain (``CIN``) 0; a combinational ``MULT18X18D`` 3;
a distributed RAM's read (``RAD`` → ``DO``) 1. Registers (``TRELLIS_FF``), block RAM
(``DP16KD``) and the writes of distributed RAM start and end paths, as do the top's ports.
Used by ``tests/tcu_hw/test_synth.py`` (a budget on a small architecture's top) and printed
by ``bench/synth_report.py``. Not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

#: cell type -> (input ports, output ports, levels); ports as regular expressions
COMBINATIONAL = {
    "LUT4": (r"[ABCD]", r"Z", 1),
    "PFUMX": (r"ALUT|BLUT|C0", r"Z", 1),
    "L6MUX21": (r"D0|D1|SD", r"Z", 1),
    "CCU2C": (r"[ABCD][01]", r"S[01]|COUT", 1),
    "MULT18X18D": (r"[ABC]\d+|SIGNED[AB]|SOURCE[AB]", r"P\d+", 3),
    "TRELLIS_DPR16X4": (r"RAD", r"DO", 1),
}
#: paths along a carry chain cost nothing more than the cell that entered it
CARRY = {"CCU2C": (r"CIN", r"S[01]|COUT", 0)}
#: cells whose outputs start paths and whose inputs end them (nothing combinational through)
SEQUENTIAL = {"TRELLIS_FF", "DP16KD", "$scopeinfo"}
#: net names synthesis derives from the cells it maps (not the design's)
MAPPED = re.compile(r"_(LUT4|CCU2C|PFUMX|L6MUX21|TRELLIS_\w+|MULT18X18D|DP16KD)_")


@dataclass
class DeepestPath:
    """The deepest path: its ``levels`` and the named nets along it, from start to end."""
    levels: int
    nets: list[str]


def _edges(module: dict) -> dict[int, list[tuple[int, int]]]:
    """Combinational edges bit -> [(bit, levels)] of a mapped module; an unknown cell type is
    an error (its timing would be guessed)."""
    edges: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for name, cell in module["cells"].items():
        kind = cell["type"]
        if kind in SEQUENTIAL:
            continue
        if kind not in COMBINATIONAL:
            raise ValueError(f"logic_depth: cell {name!r} has type {kind!r}, whose timing is "
                             f"not known (known: {', '.join(sorted(COMBINATIONAL))})")
        conn = cell["connections"]
        for ins, outs, levels in (COMBINATIONAL[kind], CARRY.get(kind, (None, None, 0))):
            if ins is None:
                continue
            srcs = [b for p, bits in conn.items() if re.fullmatch(ins, p) for b in bits]
            dsts = [b for p, bits in conn.items() if re.fullmatch(outs, p) for b in bits]
            for s in srcs:
                if isinstance(s, int):
                    edges[s].extend((d, levels) for d in dsts if isinstance(d, int))
    return edges


def deepest_paths(module: dict, count: int = 1) -> list[DeepestPath]:
    """The ``count`` deepest combinational paths of a mapped module (``write_json``'s module
    dict) to different ends (named nets), deepest first."""
    depth, before = _longest(_edges(module))
    names = _bit_names(module)
    paths: dict[str, DeepestPath] = {}
    for end in sorted(depth, key=depth.get, reverse=True):
        chain = [end]
        while chain[-1] in before:
            chain.append(before[chain[-1]])
        nets = []
        for b in reversed(chain):
            n = names.get(b)
            if n and (not nets or nets[-1] != n):
                nets.append(n)
        key = nets[-1] if nets else str(end)
        if key not in paths and not any(key in p.nets for p in paths.values()):
            paths[key] = DeepestPath(depth[end], nets)
            if len(paths) == count:
                break
    return list(paths.values()) or [DeepestPath(0, [])]


def _longest(edges) -> tuple[dict[int, int], dict[int, int]]:
    """Levels of the deepest path to each bit and the bit before it on that path."""
    indegree: dict[int, int] = defaultdict(int)
    for outs in edges.values():
        for d, _ in outs:
            indegree[d] += 1
    depth: dict[int, int] = defaultdict(int)
    before: dict[int, int] = {}
    ready = [b for b in edges if indegree[b] == 0]
    while ready:
        b = ready.pop()
        for d, levels in edges.get(b, ()):
            if d not in before or depth[b] + levels > depth[d]:
                depth[d], before[d] = depth[b] + levels, b
            indegree[d] -= 1
            if indegree[d] == 0:
                ready.append(d)
    if any(v > 0 for v in indegree.values()):
        raise ValueError("logic_depth: the design has a combinational loop")
    return dict(depth), before


def _bit_names(module: dict) -> dict[int, str]:
    """A readable name per bit: the design's net it is named after (synthesis names a mapped
    net after a net of the design next to its cell: ``x_LUT4_A_Z`` drives a LUT whose input
    ``A`` is ``x``), the shortest such."""
    names: dict[int, str] = {}
    for name, net in module["netnames"].items():
        if net.get("hide_name"):
            continue
        base = MAPPED.split(name)[0]
        for i, b in enumerate(net["bits"]):
            label = base if len(net["bits"]) == 1 or base != name else f"{name}[{i}]"
            if isinstance(b, int) and (b not in names or len(label) < len(names[b])):
                names[b] = label
    return names


def synth_ecp5(verilog: str, top: str, workdir: Path) -> dict:
    """``verilog`` through Yosys ``synth_ecp5``; the mapped top module (``write_json``)."""
    from synth_report import yosys  # noqa: PLC0415  (bench/ on the path)
    (workdir / f"{top}.v").write_text(verilog)
    run = subprocess.run(yosys() + ["-q", "-p", f"read_verilog {top}.v; synth_ecp5 -top {top} "
                                    f"-json {top}.json"], cwd=workdir, capture_output=True,
                         text=True)
    if run.returncode:
        raise RuntimeError(f"synth_ecp5 failed for {top}:\n{run.stderr[-2000:]}")
    return json.loads((workdir / f"{top}.json").read_text())["modules"][top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="pynqz1", help="preset name or .tarch file")
    parser.add_argument("--axi", type=int, default=64, help="AXI data width")
    parser.add_argument("--json", help="a synth_ecp5 write_json netlist instead (its top)")
    parser.add_argument("--paths", type=int, default=1,
                        help="paths to print, to different ends, deepest first")
    args = parser.parse_args()
    try:
        module = netlist_top(Path(args.json)) if args.json else _synthesized(args.arch,
                                                                             args.axi)
        paths = deepest_paths(module, args.paths)
    except (ValueError, RuntimeError) as e:
        sys.exit(f"error: {e}")
    for path in paths:
        print(f"{path.levels} levels: " + " > ".join(path.nets))


def netlist_top(path: Path) -> dict:
    """The top module of a ``write_json`` netlist file (the module marked ``top``); a
    ``ValueError`` naming the file when it cannot be read or has no top."""
    try:
        modules = json.loads(path.read_text())["modules"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a Yosys write_json netlist ({e})") from None
    tops = [m for m in modules.values() if isinstance(m, dict) and
            str(m.get("attributes", {}).get("top", "0")).strip("0")]
    if len(tops) != 1:
        raise ValueError(f"{path}: {len(tops)} modules are marked top; a netlist written "
                         f"after synth_ecp5 -top has exactly one")
    return tops[0]


def _synthesized(arch: str, axi: int) -> dict:
    """The generated top of ``arch`` (preset or ``.tarch``) at ``axi`` bits through
    ``synth_ecp5``; errors in the architecture or the width as ``ValueError``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from synth_report import top_name  # noqa: PLC0415
    from tcu_hw.arch import Options, resolve_arch  # noqa: PLC0415
    from tcu_hw.verilog import verilog  # noqa: PLC0415
    name = top_name(arch)
    text = verilog(resolve_arch(arch), Options(axi_data_width=axi), name)
    with tempfile.TemporaryDirectory() as d:
        return synth_ecp5(text, f"top_{name}", Path(d))


if __name__ == "__main__":
    main()
