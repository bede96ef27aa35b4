"""Figures about a compiled model: Tensil's COMPILER SUMMARY fields, a per-layer table and the
estimated cycle count.

The cycle estimate is a model, not a measurement: the compute unit takes one cycle per vector
(MatMul, LoadWeights push, SIMD, moves between local memory and the accumulators), each DRAM
port as many cycles per vector as the board's AXI port takes beats to carry it (vector bits /
AXI width; the width is ``compile_model``'s ``axi_width``, by default the board's), the two
ports at once (sharing local port B), and compute and DRAM overlap within a layer. Cycle
counts that matter come from the cycle-accurate simulators (``python -m sim.run``).
"""

from __future__ import annotations

import numpy as np

from tcu_hw.arch import COMPUTE_QUEUE_DEPTH
from tcu_hw.isa import SIMD, DataMove, DataMoveKind, LoadLUT, LoadWeights, MatMul, lut_vectors

RULE = "-" * 94

#: ops whose constant inputs are model parameters (counted as "true consts")
PARAM_OPS = {"Conv", "Gemm", "MatMul", "BatchNormalization", "PRelu", "Add", "Sub", "Mul", "Div",
             "Concat", "Max", "Min"}
DRAM_KINDS = {k for k in DataMoveKind if k.memory != "acc"}
#: acc→local moves, which the compute unit's accumulator drain runs beside the sequencer
DRAIN_KINDS = {DataMoveKind.ACC_TO_LOCAL, DataMoveKind.ACC_TO_LOCAL_RELU}


#: Compute instructions queued in the compute unit, plus the one it runs: a LoadWeights
#: reaches the weight loader only once all but these many of the instructions before it
#: have been taken (dispatch is in program order).
COMPUTE_LOOKAHEAD = COMPUTE_QUEUE_DEPTH + 1
#: Cycles from a LoadWeights reaching the loader to its first push (queue, then active:
#: the loader's latency, see :class:`tcu_hw.blocks.weight_loader.WeightLoader`).
LOADER_START = 2
#: Cycles from a switching MatMul's issue to the next tile's first read: the loader reads
#: once the switching vector has entered the array.
SWITCH_TO_READ = 1


def estimate(instrs, arch, beats: int = 1) -> tuple[int, int]:
    """(compute-unit cycles, DRAM-unit cycles) of a run of instructions, ``beats`` DRAM
    cycles per vector moved on each port. The two ports run at once and share local port B
    (a vector a cycle), so the DRAM unit takes the longer port's beats or all the vectors,
    whichever is more.

    The compute unit issues one vector per cycle (MatMul, local→acc moves, LoadLUT) or one
    SIMD instruction; its weight loader pushes LoadWeights beside it, and its accumulator
    drain the acc→local moves, one vector a cycle from when the work before them is issued.
    A tile's pushes start when the previous tile has switched in and the LoadWeights has
    reached the loader (behind at most :data:`COMPUTE_LOOKAHEAD` instructions still to
    run), so a switching MatMul waits for the pushes that the work still ahead of it did
    not cover."""
    compute = drained = 0
    ports = [0, 0]                          # vectors moved on DRAM0, DRAM1
    pushes = cover = 0
    recent: list[int] = []                  # slot work of the latest instructions since a switch
    lut = lut_vectors(arch.lut_depth, arch.array_size)
    for ins in instrs:
        work = 0
        if isinstance(ins, LoadWeights):
            if not pushes:                  # the first of a tile: what still runs ahead of it
                cover = sum(recent[-COMPUTE_LOOKAHEAD:])
            pushes += ins.size + 1
            continue
        if isinstance(ins, MatMul):
            if pushes:
                compute += max(0, pushes + LOADER_START + SWITCH_TO_READ - cover)
                pushes = cover = 0
                recent = []
            work = ins.size + 1
        elif isinstance(ins, DataMove):
            if ins.kind in DRAM_KINDS:
                ports[ins.kind.memory == "dram1"] += ins.size + 1
                continue
            if ins.kind in DRAIN_KINDS:
                drained = max(drained, compute) + ins.size + 1
                continue
            work = ins.size + 1
        elif isinstance(ins, SIMD):
            work = 1
        elif isinstance(ins, LoadLUT):
            work = lut
        else:
            continue
        compute += work
        if pushes:
            cover += work
        else:
            recent.append(work)
    return max(compute, drained), max(max(ports) * beats, sum(ports))


def true_consts(graph) -> int:
    """Scalars of the model's parameters (weights, biases, normalization, slopes)."""
    seen, total = set(), 0
    for node in graph.nodes:
        if node.op not in PARAM_OPS:
            continue
        for name in node.inputs:
            if name and name in graph.consts and name not in seen:
                a = np.asarray(graph.consts[name])
                if a.dtype.kind == "f" and a.size > 1:
                    seen.add(name)
                    total += a.size
    return total


def _mem(depth: int, n: int, bits: int) -> str:
    return f"{depth:,} {depth * n:,} {bits}"


def mac_utilization(macs: int, cycles: int, arch) -> float:
    """The fraction of the array's n² multiply-accumulators doing ``macs`` in ``cycles``
    (0 for no cycles): the utilization every report of the project quotes."""
    n = arch.array_size
    return macs / (n * n * cycles) if cycles else 0.0


def figures(c) -> dict:
    """The summary's numbers (also used by the benchmark)."""
    arch = c.arch
    cycles = sum(s.cycles for s in c.layers)
    macs = sum(s.macs for s in c.layers)
    consts_vectors = len(c.consts)
    tc = true_consts(c.graph)
    util = [s.const_util for s in c.layers if s.const_util is not None]
    return {
        "model": c.name, "instructions": len(c.program), "layers": len(c.layers),
        "max_partitions": max((s.partitions for s in c.layers), default=0),
        "max_stages": max((s.stages for s in c.layers), default=0),
        "cycles": cycles, "macs": macs, "true_consts": tc,
        "consts_vectors": consts_vectors,
        "consts_utilization": float(np.mean(util)) * 100 if util else 0.0,
        "mac_efficiency": 100.0 * mac_utilization(macs, cycles, arch),
        "dram0_max": c.plan.dram0_used,
        "dram0_aggregate": c.plan.dram0_aggregate,
        "local_max": max((s.local_used for s in c.layers), default=0),
        "acc_max": max((s.acc_used for s in c.layers), default=0),
        "seconds": c.seconds, "saturated_consts": c.plan.saturated_consts,
        "by_kind": _by_kind(c.program),
    }


def _by_kind(program) -> dict:
    out: dict = {}
    for ins in program:
        out[ins.name] = out.get(ins.name, 0) + 1
    return out


def compiler_summary(c) -> str:
    """Tensil's COMPILER SUMMARY table (same fields and meanings) plus our extras."""
    arch = c.arch
    lay = arch.layout
    n = arch.array_size
    f = figures(c)
    rows = [("Model", c.name), ("Data type", arch.data_type), ("Array size", n),
            ("Consts memory size (vectors/scalars/bits)", _mem(arch.dram1_depth, n, lay.D1)),
            ("Vars memory size (vectors/scalars/bits)", _mem(arch.dram0_depth, n, lay.D0)),
            ("Local memory size (vectors/scalars/bits)", _mem(arch.local_depth, n, lay.L)),
            ("Accumulator memory size (vectors/scalars/bits)",
             _mem(arch.accumulator_depth, n, lay.A)),
            ("Stride #0 size (bits)", lay.S0), ("Stride #1 size (bits)", lay.S1),
            ("Operand #0 size (bits)", lay.operand0_bits),
            ("Operand #1 size (bits)", lay.operand1_bits),
            ("Operand #2 size (bits)", lay.operand2_bits),
            ("Instruction size (bytes)", lay.instruction_bytes),
            ("Consts memory maximum usage (vectors/scalars)",
             f"{f['consts_vectors']:,} {f['consts_vectors'] * n:,}"),
            ("Vars memory maximum usage (vectors/scalars)",
             f"{f['dram0_max']:,} {f['dram0_max'] * n:,}"),
            ("Consts memory aggregate usage (vectors/scalars)",
             f"{f['consts_vectors']:,} {f['consts_vectors'] * n:,}"),
            ("Vars memory aggregate usage (vectors/scalars)",
             f"{f['dram0_aggregate']:,} {f['dram0_aggregate'] * n:,}"),
            ("Local memory maximum usage (vectors/scalars)",
             f"{f['local_max']:,} {f['local_max'] * n:,}"),
            ("Accumulator memory maximum usage (vectors/scalars)",
             f"{f['acc_max']:,} {f['acc_max'] * n:,}"),
            ("Number of layers", f["layers"]),
            ("Maximum number of stages", f["max_stages"]),
            ("Maximum number of partitions", f["max_partitions"]),
            ("Execution time (cycles, estimated)", f"{f['cycles']:,}"),
            ("Total number of instructions", f"{f['instructions']:,}"),
            ("Compilation time (seconds)", f"{f['seconds']:.3f}"),
            ("True consts scalar size", f"{f['true_consts']:,}"),
            ("Consts utilization (%)", f"{f['consts_utilization']:.3f}"),
            ("True MACs (M)", f"{f['macs'] / 1e6:.3f}"),
            ("MAC efficiency (%)", f"{f['mac_efficiency']:.3f}"),
            ("Memory strategy", c.strategy),
            ("AXI data width of the estimate (bits)", c.axi_width)]
    start, end = c.plan.dram1_scratch
    if end > start:
        rows.append(("Vars in DRAM1 above the consts (vectors, from vector)",
                     f"{end - start:,} {start:,}"))
    rows.append(("Saturated consts (scalars)", f"{f['saturated_consts']:,}"))
    for s in c.layers:
        if s.saturated:
            rows.append((f"  in layer {s.name} (nodes {', '.join(s.nodes)})",
                         f"{s.saturated:,}"))
    lines = [RULE, "COMPILER SUMMARY", RULE] + [f"{k}: {v}" for k, v in rows]
    if c.notes:
        lines.append("Notes:")
        lines += [f"  {note}" for note in c.notes]
    return "\n".join(lines + [RULE])


def layers_summary(c) -> str:
    """One line per layer: nodes, stages, partitions (``/g``: in g channel groups,
    :mod:`compiler_lite.groups`), instructions, cycles, MACs, utilization."""
    head = f"{'#':>3} {'layer':<34} {'stg':>3} {'part':>8} {'instr':>8} {'cycles':>10} " \
           f"{'MACs':>12} {'util %':>6}  nodes"
    lines = [RULE, "LAYERS SUMMARY", RULE, head]
    for k, s in enumerate(c.layers):
        util = 100.0 * mac_utilization(s.macs, s.cycles, c.arch)
        name = s.name if len(s.name) <= 34 else "…" + s.name[-33:]
        part = f"{s.partitions}" + (f"/{s.groups}" if s.groups > 1 else "")
        lines.append(f"{k:>3} {name:<34} {s.stages:>3} {part:>8} "
                     f"{s.instructions:>8,} {s.cycles:>10,} {s.macs:>12,} {util:>6.1f}  "
                     f"{', '.join(s.nodes)}")
    return "\n".join(lines + [RULE])


def artifacts_table(paths) -> str:
    labels = {".tmodel": "Manifest", ".tdata": "Constants", ".tprog": "Program",
              ".tasm": "Assembly", ".json": "I/O layout", ".npz": "Golden outputs"}
    lines = [RULE, "ARTIFACTS", RULE]
    for p in paths:
        label = next((v for k, v in labels.items() if str(p).endswith(k)), "File")
        lines.append(f"{label}: {p}")
    return "\n".join(lines + [RULE])
