"""Generate ``docs/blocks/*.md``: a page per hardware block, from the code itself.

Each page has the block's summary and behaviour (its module docstring), how to build it
(constructor and parameters), its ports (found on an instance: name, wire, direction, width)
and a timing diagram simulated from a short stimulus, so the pages cannot drift from the
blocks. Blocks that only make sense inside the core (decoder, compute unit, DRAM engine) get
their diagram from a small program on :class:`sim.pyrtl_backend.PyrtlCore` with probes.

    python docs/make_blocks.py            # rewrite docs/blocks/
    python docs/make_blocks.py --check    # exit 1 if a page is out of date (tests use this)
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyrtl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tcu_hw.arch import preset  # noqa: E402
from tcu_hw.blocks.lanes import to_int  # noqa: E402
from tcu_hw.numeric import data_type  # noqa: E402

OUT = ROOT / "docs" / "blocks"
DT = data_type("FP16BP8")
HIGH, LOW = "‾", "_"


# ------------------------------------------------------------------------------ rendering

def diagram(trace: dict, rows: list[tuple], cycles: int, first: int = 0) -> str:
    """A text timing diagram: one line per signal, one 5-character column per cycle.
    ``rows``: (label, signal name, kind) with kind "bit", "int", "hex" or "lane0"."""
    width = 5
    label_w = max(len(r[0]) for r in rows) + 2
    head = "cycle".ljust(label_w) + "".join(str(first + c).rjust(width - 1).ljust(width)
                                            for c in range(cycles))
    lines = [head]
    for label, name, kind in rows:
        values = list(trace[name])[:cycles]
        cells = []
        for v in values:
            v = int(v)
            if kind == "bit":
                cells.append((HIGH if v else LOW) * width)
            else:
                if kind == "lane0":
                    v &= (1 << DT.width) - 1
                    v = v - (1 << DT.width) if v >> (DT.width - 1) else v
                text = "." if v == 0 and kind != "lane0" else (hex(v)[2:] if kind == "hex"
                                                               else str(v))
                cells.append(text[-(width - 1):].rjust(width - 1) + " ")
        lines.append(label.ljust(label_w) + "".join(cells))
    return "\n".join(lines)


def ports(instance, block: pyrtl.Block, prefix: str = "") -> list[tuple]:
    """(attribute, wire name, direction, width) of the WireVectors an instance exposes."""
    driven = {net.dests[0] for net in block.logic if net.dests}
    out = []
    for attr, value in sorted(vars(instance).items()):
        if attr.startswith("_"):
            continue
        if isinstance(value, SimpleNamespace):
            out += ports(value, block, f"{prefix}{attr}.")
        elif isinstance(value, pyrtl.WireVector) and not isinstance(value, pyrtl.Const):
            kind = "state" if isinstance(value, pyrtl.Register) else \
                ("output" if value in driven else "input")
            out.append((prefix + attr, value.name, kind, value.bitwidth))
    return out


def ports_table(rows: list[tuple]) -> str:
    lines = ["| port | wire | direction | bits |", "|---|---|---|---|"]
    lines += [f"| `{a}` | `{w}` | {d} | {b} |" for a, w, d, b in rows]
    return "\n".join(lines)


def simulate(build, steps: list[dict], track: list[str]) -> dict:
    """Build a design (``build()`` returns {port: wire} inputs to drive), run ``steps`` (one
    dict of input values per cycle) and return the traces of ``track``."""
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        inputs = build()
        names = {}
        for port, wire in inputs.items():
            i = pyrtl.Input(wire.bitwidth, f"tb_{port}")
            wire <<= i
            names[port] = i.name
        wires = [w for w in block.wirevector_set
                 if not w.name.startswith(("tmp", "const")) and not isinstance(w, pyrtl.Const)]
        trace = pyrtl.SimulationTrace(wires_to_track=wires)
        sim = pyrtl.Simulation(tracer=trace, block=block)
        for step in steps:
            sim.step({names[p]: step.get(p, 0) for p in inputs})
    LAST_BLOCK[0] = block
    return trace.trace


#: the block of the last simulate() (for the ports table of the page being built)
LAST_BLOCK: list = [None]


def vec(values) -> int:
    return to_int(values, DT.width)


# ------------------------------------------------------------------------------ stimuli

def systolic_array():
    from tcu_hw.blocks.systolic_array import SystolicArray
    n = 4
    rng = np.random.default_rng(1)
    tile = rng.integers(-256, 256, (n + 1, n))
    x = rng.integers(-256, 256, (3, n))
    holder = {}

    def build():
        a = SystolicArray(n, DT, tag_width=2)
        holder["a"] = a
        return {p: getattr(a, p) for p in ("in_valid", "in_data", "in_pass", "in_tag",
                                          "load_valid", "load_data")}
    steps = [{"load_valid": 1, "load_data": vec(tile[r])} for r in range(n, -1, -1)]
    steps += [{"in_valid": 1, "in_data": vec(x[k]), "in_tag": k} for k in range(3)]
    steps += [{}] * 6
    track = ["array_load_valid", "array_pending", "array_bank", "array_in_valid",
             "array_in_tag", "array_s3_valid", "array_s3_tag", "array_out_data"]
    t = simulate(build, steps, track)
    rows = [("load_valid", "array_load_valid", "bit"), ("pending", "array_pending", "bit"),
            ("bank", "array_bank", "bit"), ("in_valid", "array_in_valid", "bit"),
            ("in_tag", "array_in_tag", "int"), ("out_valid", "array_s3_valid", "bit"),
            ("out_tag", "array_s3_tag", "int"), ("out_data lane 0", "array_out_data", "lane0")]
    note = ("Five pushes load `[bias, rows]` (row 3 first, bias last); the first vector that "
            "enters after them switches to the loaded bank (`pending` falls); each result "
            "leaves n = 4 cycles after its vector entered, with its tag.")
    return ("SystolicArray", "tcu_hw.blocks.systolic_array", holder["a"],
            "SystolicArray(n=4, dt=FP16BP8, tag_width=2)", diagram(t, rows, len(steps)), note,
            lambda: SystolicArray(n, DT, tag_width=2))


def accumulator():
    from tcu_hw.blocks.accumulator import Accumulator
    holder = {}

    def build():
        a = Accumulator(16, 4, DT)
        holder["a"] = a
        return {p: getattr(a, p) for p in ("w_valid", "w_addr", "w_data", "w_accumulate",
                                          "r_addr")}
    one = 256
    steps = [{"w_valid": 1, "w_addr": 3, "w_data": vec([one, 0, 0, 0])},
             {"w_valid": 1, "w_addr": 3, "w_data": vec([2 * one, 0, 0, 0]), "w_accumulate": 1},
             {"w_valid": 1, "w_addr": 3, "w_data": vec([3 * one, 0, 0, 0]), "w_accumulate": 1},
             {"r_addr": 3}, {"r_addr": 3}, {"r_addr": 3}, {}]
    track = ["acc_w_valid", "acc_w_addr", "acc_w_accumulate", "acc_w_data", "acc_q_valid",
             "acc_r_addr", "acc_r_data"]
    t = simulate(build, steps, track)
    a = holder["a"]
    rows = [("w_valid", "acc_w_valid", "bit"), ("w_addr", "acc_w_addr", "int"),
            ("w_accumulate", "acc_w_accumulate", "bit"), ("w_data lane 0", "acc_w_data", "lane0"),
            ("busy", "acc_q_valid", "bit"), ("r_addr", "acc_r_addr", "int"),
            ("r_data lane 0", a.r_data.name, "lane0")]
    note = ("A write of 1.0 then two back-to-back accumulates (2.0, 3.0) to the same address "
            "(raw values, ×256): each add sees the previous result (forwarded), so the read "
            "returns 6.0 (1536); a read presented at cycle t sees writes presented at t-2.")
    return ("Accumulator", "tcu_hw.blocks.accumulator", holder["a"],
            "Accumulator(depth=16, n=4, dt=FP16BP8)", diagram(t, rows, len(steps)), note,
            lambda: Accumulator(16, 4, DT))


def local_memory():
    from tcu_hw.blocks.local_memory import LocalMemory
    holder = {}

    def build():
        m = LocalMemory(16, 64)
        holder["m"] = m
        return {p: getattr(m, p) for p in ("a_addr", "a_write", "a_wdata", "b_addr", "b_write",
                                          "b_wdata")}
    steps = [{"a_addr": 2, "a_write": 1, "a_wdata": 0x11},
             {"a_addr": 2, "b_addr": 2},
             {"b_addr": 5, "b_write": 1, "b_wdata": 0x22},
             {"a_addr": 5}, {}]
    track = ["local_a_addr", "local_a_write", "local_b_addr", "local_b_write",
             "local_a_rdata", "local_b_rdata"]
    t = simulate(build, steps, track)
    m = holder["m"]
    rows = [("a_addr", "local_a_addr", "int"), ("a_write", "local_a_write", "bit"),
            ("a_rdata", m.a_rdata.name, "hex"), ("b_addr", "local_b_addr", "int"),
            ("b_write", "local_b_write", "bit"), ("b_rdata", m.b_rdata.name, "hex")]
    note = ("Port A writes 0x11 to address 2; both ports read it in the next cycle and get it "
            "one cycle later (registered reads); a write on port B is seen by port A a cycle "
            "after it commits.")
    return ("LocalMemory", "tcu_hw.blocks.local_memory", holder["m"],
            "LocalMemory(depth=16, width=64)", diagram(t, rows, len(steps)), note,
            lambda: LocalMemory(16, 64))


def ram():
    from tcu_hw.blocks.ram import Ram
    holder = {}

    def build():
        r = Ram("ram", "sdp", 16, 16, reads=2)
        holder["r"] = r
        return {"waddr": r.waddr, "write": r.write, "wdata": r.wdata, "raddr0": r.raddr[0],
                "raddr1": r.raddr[1]}
    steps = [{"waddr": 4, "write": 1, "wdata": 0x1234}, {"raddr0": 4, "raddr1": 4},
             {"raddr1": 7}, {}]
    track = ["ram_waddr", "ram_write", "ram_r0_addr", "ram_rdata0", "ram_r1_addr",
             "ram_rdata1"]
    t = simulate(build, steps, track)
    r = holder["r"]
    rows = [("waddr", "ram_waddr", "int"), ("write", "ram_write", "bit"),
            ("raddr[0]", "ram_r0_addr", "int"), ("rdata[0]", r.rdata[0].name, "hex"),
            ("raddr[1]", "ram_r1_addr", "int"), ("rdata[1]", r.rdata[1].name, "hex")]
    note = ("A simple dual-port (`sdp`) RAM with two read ports: the address is registered, "
            "the data follows one cycle later (block RAM timing).")
    return ("Ram", "tcu_hw.blocks.ram", holder["r"], 'Ram("ram", "sdp", width=16, depth=16, '
            'reads=2)', diagram(t, rows, len(steps)), note,
            lambda: Ram("ram", "sdp", 16, 16, reads=2))


def simd():
    from compiler_lite.ops.lut import tables
    from tcu_hw import numeric
    from tcu_hw.blocks.simd import SimdArray
    from tcu_hw.isa import SimdOp
    arch = preset("cmoda7").with_changes(lut_count=2, lut_depth=8, simd_registers_depth=3)
    tabs = [numeric.to_fixed(t_, arch.dtype)[0] for t_ in
            tables(lambda v: np.maximum(v, 0) * 0.5, "linear", -4, 4, arch, True)]
    holder = {}

    def build():
        s = SimdArray(arch)
        holder["s"] = s
        return {p: getattr(s, p) for p in ("valid", "op", "left", "right", "dest", "input",
                                          "lut_valid", "lut_table", "lut_index", "lut_data")}
    steps = []
    for t_ in range(3):
        for i in range(2):
            steps.append({"lut_valid": 1, "lut_table": t_, "lut_index": i,
                          "lut_data": vec(tabs[t_][4 * i:4 * i + 4])})
    x = vec([512, -256, 128, 0])
    steps += [{"valid": 1, "op": SimdOp.LOOKUP, "dest": 1, "input": x},
              {"valid": 1, "op": SimdOp.MULTIPLY, "left": 1, "right": 3, "dest": 1},
              {"valid": 1, "op": SimdOp.ADD, "left": 1, "right": 2}, {}]
    track = ["simd_lut_valid", "simd_lut_table", "simd_valid", "simd_op", "simd_dest",
             "simd_input", "simd_out", "simd_r1"]
    t = simulate(build, steps, track)
    rows = [("lut_valid", "simd_lut_valid", "bit"), ("lut_table", "simd_lut_table", "int"),
            ("valid", "simd_valid", "bit"), ("op", "simd_op", "int"),
            ("dest", "simd_dest", "int"), ("input lane 0", "simd_input", "lane0"),
            ("R1 lane 0", "simd_r1", "lane0"), ("out lane 0", "simd_out", "lane0")]
    note = ("Tables are loaded a vector at a time (keys, values, slopes), then "
            "`Lookup → Multiply(R1, R3) → Add(R1, R2)` evaluates a piecewise-linear function: "
            "here 0.5·relu(x) of x = 2.0 (512) gives 1.0 (256). `out` is combinational in the "
            "cycle of the op; registers change at the end of it.")
    return ("SimdArray", "tcu_hw.blocks.simd", holder["s"],
            "SimdArray(arch)  # n=4, FP16BP8, lut_count=2, lut_depth=8, 3 registers",
            diagram(t, rows, len(steps)), note, lambda: SimdArray(arch))


def axis():
    from tcu_hw.blocks.axis import InstructionStream
    holder = {}

    def build():
        s = InstructionStream(9, 64)
        holder["s"] = s
        return {"tdata": s.tdata, "tvalid": s.tvalid, "out_ready": s.out_ready}
    data = bytes(range(1, 1 + 9 * 4)) + bytes(4)
    words = [int.from_bytes(data[k:k + 8], "little") for k in range(0, len(data), 8)]
    steps, fed = [], 0
    pattern = [1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    for k, v in enumerate(pattern):
        if v and fed < len(words):
            steps.append({"tvalid": 1, "tdata": words[fed], "out_ready": int(k != 4)})
            fed += 1
        else:
            steps.append({"out_ready": int(k != 4)})
    track = ["instr_tvalid", "instr_tready", "instr_out_ready", "instr_out_valid",
             "instr_out_data"]
    t = simulate(build, steps, track)
    # tready is a combinational output: advance the feed only when accepted (re-simulate)
    rows = [("tvalid", "instr_tvalid", "bit"), ("tready", "instr_tready", "bit"),
            ("out_valid", "instr_out_valid", "bit"), ("out_ready", "instr_out_ready", "bit"),
            ("out_data (byte 0)", "instr_out_data", "int")]
    t = {k: (v if k != "instr_out_data" else [x & 0xFF for x in v]) for k, v in t.items()}
    note = ("9-byte instructions from a 64-bit stream: words are accepted while they fit; an "
            "instruction leaves each cycle one is complete and `out_ready` is high "
            "(`out_data` byte 0 shown: 1, 10, 19, … are the first bytes of instructions 0, "
            "1, 2).")
    return ("InstructionStream", "tcu_hw.blocks.axis", holder["s"],
            "InstructionStream(instruction_bytes=9, data_width=64)",
            diagram(t, rows, len(steps)), note, lambda: InstructionStream(9, 64))


def sampler():
    from tcu_hw.blocks.sampler import Sampler
    holder = {}

    def build():
        s = Sampler(2)
        holder["s"] = s
        return {p: getattr(s, p) for p in ("interval", "pc", "pairs", "tready")}
    steps = [{"interval": 3, "pc": k, "pairs": 0b01, "tready": int(k not in (6, 7, 8))}
             for k in range(13)]
    track = ["sample_interval", "sample_pc", "sample_valid", "sample_tready", "sample_last",
             "sample_data"]
    t = simulate(build, steps, track)
    t = {k: (v if k != "sample_data" else [x & 0xFFFFFFFF for x in v]) for k, v in t.items()}
    rows = [("interval", "sample_interval", "int"), ("pc", "sample_pc", "int"),
            ("tvalid", "sample_valid", "bit"), ("tready", "sample_tready", "bit"),
            ("tlast", "sample_last", "bit"), ("tdata pc", "sample_data", "int")]
    note = ("Every 3 cycles a word (pc in bits 31:0) is offered; `tlast` on every second "
            "word; while the consumer is not ready the word holds and newer samples are "
            "dropped.")
    return ("Sampler", "tcu_hw.blocks.sampler", holder["s"], "Sampler(block_size=2)",
            diagram(t, rows, len(steps)), note, lambda: Sampler(2))


def config_registers():
    from tcu_hw.blocks.config_registers import ConfigRegisters
    from tcu_hw.isa import ConfigRegister
    holder = {}

    def build():
        c = ConfigRegisters(decoder_timeout=100)
        holder["c"] = c
        return {p: getattr(c, p) for p in ("write", "register", "value", "dispatched",
                                          "stalled")}
    steps = [{"write": 1, "register": ConfigRegister.TIMEOUT, "value": 3},
             {"dispatched": 1}, {"dispatched": 1},
             {"write": 1, "register": ConfigRegister.PROGRAM_COUNTER, "value": 40},
             {"dispatched": 1}, {"stalled": 1}, {"stalled": 1}, {"stalled": 1}, {"stalled": 1},
             {"dispatched": 1}, {}]
    track = ["cfg_write", "cfg_register", "cfg_value", "cfg_dispatched", "cfg_stalled",
             "cfg_program_counter", "cfg_timeout", "cfg_timeout_flag"]
    t = simulate(build, steps, track)
    rows = [("write", "cfg_write", "bit"), ("register", "cfg_register", "int"),
            ("value", "cfg_value", "int"), ("dispatched", "cfg_dispatched", "bit"),
            ("stalled", "cfg_stalled", "bit"), ("pc", "cfg_program_counter", "int"),
            ("timeout reg", "cfg_timeout", "int"), ("timeout flag", "cfg_timeout_flag", "bit")]
    note = ("Configure 0x8 sets the timeout to 3 cycles; the pc counts dispatched "
            "instructions and Configure 0xA sets it (40); the timeout flag rises after 3 "
            "consecutive stalled cycles.")
    return ("ConfigRegisters", "tcu_hw.blocks.config_registers", holder["c"],
            "ConfigRegisters(decoder_timeout=100)", diagram(t, rows, len(steps)), note,
            lambda: ConfigRegisters(decoder_timeout=100))


def axi():
    from sim.axi_model import AxiSlaveModel
    from tcu_hw.arch import Options
    from tcu_hw.blocks.axi import AXI_INPUTS, AXI_PORT_ORDER, AxiMaster
    sys.path.insert(0, str(ROOT / "examples"))
    import axi_memory as ex
    x = np.arange(56).reshape(14, 4) * 10
    block, master = ex.build(x)
    slave = AxiSlaveModel(1 << 14, ex.WIDTH, latency=3, stall=0.0, seed=0)
    outs = [s for s in AXI_PORT_ORDER if s not in AXI_INPUTS]
    names = {"req_valid": master.req_valid.name, "req_write": master.req_write.name,
             "req_ready": master.req_ready.name}
    for s in ("awvalid", "awlen", "wvalid", "wready", "wlast", "bvalid", "arvalid", "arlen",
              "rvalid", "rlast"):
        names[s] = getattr(master.axi, s).name
    names["rdata_valid"] = master.rdata_valid.name
    cycles = 48
    with pyrtl.set_working_block(block):
        wires = [w for w in block.wirevector_set if w.name in names.values()]
        trace = pyrtl.SimulationTrace(wires_to_track=wires)
        sim = pyrtl.Simulation(tracer=trace, block=block)
        for _ in range(cycles):
            sim.step({f"in_{k}": v for k, v in slave.outputs().items()})
            slave.sample({s: sim.inspect(getattr(master.axi, s).name) for s in outs})
    t = dict(trace.trace)
    for ch in ("aw", "ar"):                     # show the length only while valid
        t[names[f"{ch}len"]] = [v if ok else 0 for v, ok in
                                zip(t[names[f"{ch}len"]], t[names[f"{ch}valid"]])]
    rows = [(k, names[k], "int" if k.endswith("len") else "bit") for k in names]
    note = ("Fourteen 8-byte vectors written to vector 500 (byte 4000) over a 32-bit bus, "
            "two beats per vector: the write crosses 4 KiB at byte 4096, so it goes as a "
            "burst of 24 beats (`awlen` 23) and one of 4 (`awlen` 3); the read of the same "
            "vectors waits until both write responses are in. Read latency 3.")
    return ("AxiMaster", "tcu_hw.blocks.axi", master,
            "AxiMaster(arch, Options(axi_data_width=32), addr_bits=16, len_bits=12)",
            diagram(t, rows, cycles), note,
            lambda: AxiMaster(ex.ARCH, Options(axi_data_width=32), 16, 12))


def fixed():
    from tcu_hw import numeric
    from tcu_hw.blocks import fixed as fx
    sys.path.insert(0, str(ROOT / "tests" / "tcu_hw" / "blocks"))
    from harness import run_vectors
    cases = [(-26, 68, 0), (3, 128, 0), (1, 128, 0), (-1, 128, 0), (-3, 128, 0),
             (32767, 256, 32767), (-32768, 256, -1), (256, 256, 256)]
    xs, ys, zs = (np.array(c) for c in zip(*cases))
    got = run_vectors(lambda x, y, z: fx.mac(x, y, z, DT),
                      {"x": (16, xs), "y": (16, ys), "z": (16, zs)}, 16)
    ref = numeric.mac(xs, ys, zs, DT)
    lines = ["| x (raw) | y (raw) | z (raw) | hardware | `numeric.mac` | note |",
             "|---:|---:|---:|---:|---:|---|"]
    notes = ["Tensil's golden: −0.1016 × 0.2656 → −0.0273", "product 384 → 1.5 LSB → 2 (even)",
             "product 128: exactly half → 0 (even)", "−128 → 0 (even)", "−384 → −2 (even)",
             "saturates at the top", "saturates at the bottom", "1 × 1 + 1 = 2"]
    for (x, y, z), g, r, note in zip(cases, got, ref, notes):
        lines.append(f"| {x} | {y} | {z} | {g} | {r} | {note} |")
    return ("mac (function)", "tcu_hw.blocks.fixed", None, "fixed.mac(x, y, z, dt)",
            "\n".join(lines), "Combinational; results of the PyRTL MAC for FP16BP8 (bp = 8), "
            "simulated, next to the contract's reference.", None)


def core_pages() -> list:
    """Decoder, compute unit and DRAM engine: a small program on the core, with probes."""
    from sim.pyrtl_backend import DramTiming, PyrtlCore
    from tcu_hw.blocks.compute import ComputeUnit
    from tcu_hw.blocks.decoder import Decoder
    from tcu_hw.blocks.dram_engine import DramEngine
    from tcu_hw.blocks.local_memory import LocalMemory
    from tcu_hw.isa import SIMD, DataMove, DataMoveKind as K, LoadWeights, MatMul, SimdOp
    arch = preset("cmoda7")
    n = arch.array_size
    program = [DataMove(K.DRAM1_TO_LOCAL, 0, 0, 0, 0, n), DataMove(K.DRAM0_TO_LOCAL, 8, 0, 0, 0,
                                                                   3),
               LoadWeights(0, 0, n), MatMul(8, 0, 0, 0, 3), SIMD(SimdOp.ZERO, 0, 0, 1),
               SIMD(SimdOp.MAX, 0, 1, 0, read_address=1, write_address=1, read=True,
                    write=True),
               DataMove(K.ACC_TO_LOCAL, 16, 0, 0, 0, 3), DataMove(K.LOCAL_TO_DRAM0, 16, 0, 8, 0,
                                                                  3)]
    core = PyrtlCore(arch, program_bits=8, probes=True)
    rng = np.random.default_rng(0)
    core.run(program, dram0={0: rng.integers(-300, 300, (4, n))},
             dram1={0: rng.integers(-300, 300, (n + 1, n))}, timing=DramTiming(latency=4),
             window=(0, len(program)))
    first, signals = core.trace
    t = {k: v for k, (w, v) in signals.items()}
    cycles = min(46, max(len(v) for v in t.values()))
    listing = "\n".join(f"{pc}: {ins}" for pc, ins in enumerate(
        __import__("tcu_hw.asm", fromlist=["x"]).format_instruction(i) for i in program))

    def rows_of(names):
        return [(label, name, kind) for label, name, kind in names if name in t]

    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        word = pyrtl.WireVector(arch.layout.instruction_bytes * 8, "word")
        dec = Decoder(arch, word)
        local = LocalMemory(arch.local_depth, n * DT.width)
        cu = ComputeUnit(arch, local)
        de = DramEngine(arch, local)
    LAST_BLOCK[0] = block
    common = (f"The program (cmoda7: n = 4; DRAM latency 4):\n\n```\n{listing}\n```\n\n"
              "Cycles from the start of the run:")
    pages = [
        ("Decoder", "tcu_hw.blocks.decoder", dec, "Decoder(arch, word)", rows_of([
            ("instruction valid", "dec_valid", "bit"), ("opcode", "dec_opcode", "int"),
            ("dispatch", "dec_dispatch", "bit"), ("waits for compute", "dec_conflict_with_compute",
                                                  "bit"),
            ("waits for DRAM", "dec_conflict_with_dram", "bit"),
            ("pc", "cfg_program_counter", "int")]),
         common + " one instruction is dispatched per cycle unless its local-memory range "
         "overlaps a writer still in flight in the other unit (the MatMul waits for the "
         "DRAM0 load of its inputs; the final DRAM store waits for the acc→local move)."),
        ("ComputeUnit", "tcu_hw.blocks.compute", cu, "ComputeUnit(arch, local)", rows_of([
            ("queue enq", "cu_queue_enq_valid", "bit"), ("issue", "cu_issue", "bit"),
            ("index", "cu_index", "int"), ("local addr", "cu_laddr", "int"),
            ("acc/out addr", "cu_oaddr", "int"), ("stall: push", "cu_stall_push", "bit"),
            ("stall: acc", "cu_stall_acc", "bit"), ("array in", "array_in_valid", "bit"),
            ("weight push", "array_load_valid", "bit"), ("acc write", "acc_w_valid", "bit")]),
         common + " one micro-op (one vector) issues per cycle; the weight pushes, the 4 MatMul "
         "vectors and the SIMD and move vectors follow each other; results reach the "
         "accumulators n cycles after they enter the array."),
        ("DramEngine", "tcu_hw.blocks.dram_engine", de, "DramEngine(arch, local)", rows_of([
            ("queue enq", "dram_queue_enq_valid", "bit"),
            ("request gen active", "dram_rg_active", "bit"),
            ("read in flight", "dram_read_inflight", "int"),
            ("local side active", "dram_ls_active", "bit"),
            ("local addr", "dram_ls_addr", "int"), ("vectors left", "dram_ls_left", "int")]),
         common + " requests run ahead of the local side: the second load's request is out "
         "while the first one's data is still arriving; the store reads local memory "
         "(port B) and sends the vectors in order."),
    ]
    return [(title, mod, inst, ctor, diagram(t, rows, cycles, first), note,
             lambda inst=inst, block=block: (inst, block))
            for title, mod, inst, ctor, rows, note in pages]


PAGES = [systolic_array, accumulator, simd, local_memory, ram, fixed, axi, axis, sampler,
         config_registers]


# ------------------------------------------------------------------------------ pages

def page(title, module_name, instance, ctor, timing, note, block) -> str:
    mod = importlib.import_module(module_name)
    doc = inspect.getdoc(mod) or ""
    summary, _, rest = doc.partition("\n")
    cls = getattr(mod, title.split()[0], None) if instance is not None else None
    sig = f"{title.split()[0]}{inspect.signature(cls)}" if cls is not None else ctor
    parts = [f"# {title.split()[0]} — `{module_name}`", "", summary, "",
             "## Build it", "", "```python", f"from {module_name} import "
             f"{title.split()[0] if cls is not None else 'mac'}",
             f"# {sig}", f"{ctor}", "```", ""]
    if instance is not None:
        parts += ["## Ports", "", "Inputs are WireVectors to drive with `<<=`; outputs and "
                  "state are read. Widths for the example parameters above.", "",
                  ports_table(ports(*block())), ""]
    parts += ["## Timing" if instance is not None else "## Examples", ""]
    parts += ([timing] if instance is None else ["```", timing, "```"]) + ["", note, ""]
    parts += ["## Behaviour", "", rest.strip(), ""]
    return "\n".join(parts)


def fresh(make):
    """A callable giving (instance, block) of a new, unconnected instance (for its ports)."""
    def build():
        block = pyrtl.Block()
        with pyrtl.set_working_block(block):
            return make(), block
    return build


def render_all() -> dict[str, str]:
    entries = []
    for fn in PAGES:
        entry = fn()
        entries.append((*entry[:-1], fresh(entry[-1])))
    entries += core_pages()
    index = ["# Hardware blocks", "", "One page per block of `tcu_hw/blocks/`, generated by "
             "`python docs/make_blocks.py` from the code (ports found on an instance, timing "
             "simulated), so they stay true. Every block takes the architecture (or n and the "
             "data type) explicitly and exposes its ports as PyRTL wires; "
             "`tcu_hw.core.Core` composes them.", "", "| block | module | what it does |",
             "|---|---|---|"]
    out = {}
    for entry in entries:
        title, module_name = entry[0], entry[1]
        fname = f"{module_name.rsplit('.', 1)[1]}.md"
        out[fname] = page(*entry)
        summary = (inspect.getdoc(importlib.import_module(module_name)) or "").split("\n")[0]
        index.append(f"| [{title.split()[0]}]({fname}) | `{module_name}` | {summary} |")
    out["README.md"] = "\n".join(index) + "\n"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    pages = render_all()
    out = Path(args.out)
    stale = []
    for name, text in pages.items():
        path = out / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            out.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if args.check and stale:
        print("out of date: " + ", ".join(stale) + " (run python docs/make_blocks.py)")
        return 1
    print(f"{len(pages)} pages {'checked' if args.check else 'written'} in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
