"""The blocks' common vocabulary: streams, connect, FIFOs, and the design rules every block
keeps (named output wires, no VALID that depends on READY); the AXI master against a slave
that waits for AWVALID before WREADY and for WVALID before AWREADY."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pyrtl
import pytest

from sim.pyrtl_sim import ArraySimulation
from tcu_hw.arch import Options, preset
from tcu_hw.blocks.acc_drain import AccDrain
from tcu_hw.blocks.accumulator import Accumulator
from tcu_hw.blocks.axi import AXI_INPUTS, AxiMaster
from tcu_hw.blocks.axis import InstructionStream
from tcu_hw.blocks.compute import ComputeUnit
from tcu_hw.blocks.config_registers import ConfigRegisters
from tcu_hw.blocks.decoder import Decoder
from tcu_hw.blocks.dram_engine import DramEngine
from tcu_hw.blocks.lanes import to_int, unpack
from tcu_hw.blocks.local_memory import LocalMemory
from tcu_hw.blocks.sampler import Sampler
from tcu_hw.blocks.simd import SimdArray
from tcu_hw.blocks.stream import (SINK, SOURCE, ConnectError, DramPort, Interface, RamPort,
                                  RegFifo, RingFifo, SharedRead, SharedWrite, Stream, Struct,
                                  combinational_inputs, connect, handshakes, ports, queue)
from tcu_hw.blocks.systolic_array import SystolicArray
from tcu_hw.blocks.weight_loader import WeightLoader
from tcu_hw.isa import Layout
from tcu_hw.numeric import FP16BP8
from tcu_hw.top import Top

from ...conftest import requires_gcc

LAYOUT = Layout(local_depth=100, accumulator_depth=60, dram0_depth=1 << 12, dram1_depth=512,
                stride0_depth=4, stride1_depth=8, simd_registers_depth=2, lut_count=2,
                lut_depth=6, array_size=4)

#: every block, built from its own parameters (no Architecture), in a fresh working block
BLOCKS = {
    "systolic_array": lambda: SystolicArray(4, FP16BP8, tag_width=3),
    "accumulator": lambda: Accumulator(60, 4, FP16BP8),
    "simd": lambda: SimdArray(4, FP16BP8, registers=2, lut_count=2, lut_depth=6),
    "simd_no_lut": lambda: SimdArray(3, FP16BP8, registers=1),
    "local_memory": lambda: LocalMemory(100, 64),
    "config_registers": lambda: ConfigRegisters(100),
    "sampler": lambda: Sampler(4),
    "instruction_stream": lambda: InstructionStream(9, 64),
    "decoder": lambda: Decoder(LAYOUT, pyrtl.WireVector(8 * LAYOUT.instruction_bytes, "word")),
    "compute": lambda: ComputeUnit(LAYOUT, FP16BP8),
    "dram_engine": lambda: DramEngine(LAYOUT, 64),
    "dram_engine_guest": lambda: DramEngine(LAYOUT, 64, guest=True, writer=True),
    "acc_drain": lambda: AccDrain(LAYOUT, FP16BP8),
    "compute_without_loader": lambda: ComputeUnit(LAYOUT, FP16BP8, weight_loader=False),
    "weight_loader": lambda: WeightLoader(LAYOUT, 64),
    "axi_master": lambda: AxiMaster(12, 10, lanes=4, lane_bits=16, data_width=32),
    "axi_master_slots": lambda: AxiMaster(12, 10, lanes=2, lane_bits=18, slot_bits=32,
                                          data_width=64, max_burst=16, max_outstanding=4),
    "reg_fifo": lambda: RegFifo(Struct(a=3, b=5), 3, "fifo"),
    "ring_fifo": lambda: RingFifo(Struct(a=3, b=5), 3, "fifo"),
}


def _build(make):
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        obj = make()
    return block, obj


def _streams(obj):
    """Every Stream a block exposes, directly or in its interfaces."""
    out = []
    for _, value in handshakes(obj):
        members = value.members().values() if isinstance(value, Interface) else [value]
        out += [m for m in members if isinstance(m, Stream)]
    return out


@pytest.mark.parametrize("name", list(BLOCKS))
def test_every_port_is_a_named_wire_of_its_own(name):
    block, obj = _build(BLOCKS[name])
    found = ports(obj)
    assert found, name
    for path, wire, _ in found:
        assert type(wire) is pyrtl.WireVector, f"{name}.{path} is a {type(wire).__name__}"
        assert not wire.name.startswith("tmp"), f"{name}.{path} has no stable name"
    names = [w.name for _, w, _ in found]
    assert len(set(names)) == len(set(map(id, (w for _, w, _ in found))))


@pytest.mark.parametrize("name", list(BLOCKS))
def test_no_valid_depends_on_its_own_ready(name):
    block, obj = _build(BLOCKS[name])
    for s in _streams(obj):
        if s.role == SOURCE and not s.always_ready:
            assert s.ready not in combinational_inputs(s.valid, block), s.name


def test_axi_valids_never_depend_on_readys():
    """AXI4 A3.3.1: no VALID waits for a READY, on the master and on the whole top."""
    block, m = _build(BLOCKS["axi_master"])
    sig = m.signals()
    readys = {sig[s] for s in AXI_INPUTS if s.endswith("ready")}
    for s in ("awvalid", "wvalid", "arvalid"):
        assert not readys & combinational_inputs(sig[s], block), s
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        Top(preset("pynqz1"), Options())
    pins = {w.name: w for w in block.wirevector_set}
    for k in (0, 1):
        readys = {pins[f"m_axi_dram{k}_{s}"] for s in ("awready", "wready", "arready")}
        for s in ("awvalid", "wvalid", "arvalid"):
            assert not readys & combinational_inputs(pins[f"m_axi_dram{k}_{s}"], block), s


def test_the_tops_readies_do_not_look_inside_the_core():
    """Issue 30: the instruction stream's TREADY and the DRAM ports' RREADY/BREADY come from
    the registers of the FIFO at the port (the gearbox and the core's skid, the AXI
    master's read vectors), never from the dispatcher, the compute unit or the DRAM
    channels (a chain of readies through them set the clock before)."""
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        Top(preset("pynqz1"), Options())
    pins = {w.name: w for w in block.wirevector_set}
    inside = ("dec_", "cu_", "wl_", "drain_", "dram_c", "dram_port_b", "array_", "acc_")
    outputs = ["instruction_tready"] + [f"m_axi_dram{k}_{s}ready" for k in (0, 1)
                                        for s in ("r", "b")]
    for name in outputs:
        cone = {w.name for w in combinational_inputs(pins[name], block)}
        assert not [w for w in cone if w.startswith(inside)], (name, sorted(cone))
        assert len(cone) < 30, (name, len(cone))


# --------------------------------------------------------------------------- connect

def test_connect_checks_directions_widths_and_back_pressure():
    with pyrtl.set_working_block(pyrtl.Block()):
        src = Stream(Struct(a=3, b=4), "src", SOURCE)
        sink = Stream(Struct(a=3, b=4), "sink", SINK)
        with pytest.raises(ConnectError, match="first stream must be a source"):
            connect(sink, src)
        with pytest.raises(ConnectError, match=r"payloads differ.*b: 4 vs 5 bits"):
            connect(src, Stream(Struct(a=3, b=5), "wide", SINK))
        with pytest.raises(ConnectError, match=r"c: - vs 1 bits"):
            connect(src, Stream(Struct(a=3, b=4, c=1), "more", SINK))
        eager = Stream(Struct(a=3, b=4), "eager", SOURCE, always_ready=True)
        with pytest.raises(ConnectError, match="cannot wait"):
            connect(eager, sink)
        with pytest.raises(ConnectError, match="two streams or two interfaces"):
            connect(src, DramPort(4, 3, 8, "d", side="core"))
        with pytest.raises(ConnectError, match="not twins"):
            connect(DramPort(4, 3, 8, "c1", side="core"), DramPort(4, 3, 8, "c2", side="core"))
        with pytest.raises(ConnectError,
                           match=r"c3_req → m3_req\): payloads differ.*addr: 4 vs 5"):
            connect(DramPort(4, 3, 8, "c3", side="core"), DramPort(5, 3, 8, "m3", side="memory"))
        connect(src, sink)
        connect(Stream(8, "x", SOURCE), Stream(8, "y", SINK, always_ready=True))
        connect(RamPort(4, 8, "u", side="user"), RamPort(4, 8, "m", side="memory"))
        with pytest.raises(ValueError, match="may not be named"):
            Stream(Struct(valid=2), "clash", SOURCE)
        with pytest.raises(ConnectError, match=r"unknown fields \['dat'\]"):
            Stream(8, "typo", SOURCE).drive(1, dat=3)
        with pytest.raises(ConnectError, match="300 does not fit 3 bits"):
            Stream(Struct(a=3), "narrow", SOURCE).drive(1, a=300)
        with pytest.raises(ValueError, match="side must be one of"):
            DramPort(4, 3, 8, "bad", side="cpu")


def test_connecting_interfaces_is_all_or_nothing():
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        core = DramPort(4, 3, 8, "c", side="core")
        before = len(block.logic)
        with pytest.raises(ConnectError, match="rdata"):
            connect(core, DramPort(4, 3, 16, "m", side="memory"))    # rdata/wdata differ
        assert len(block.logic) == before
        twin = core.twin("m2")
        assert twin.side == "memory"
        connect(core, twin)
        assert len(block.logic) > before


@requires_gcc
@pytest.mark.parametrize("kind, depth, pipe", [(RegFifo, 3, True), (RingFifo, 3, True),
                                               (RingFifo, 1, True), (RingFifo, 4, True),
                                               (RegFifo, 2, False), (RingFifo, 2, False),
                                               (RegFifo, 1, False)])
def test_queue_keeps_order_under_random_back_pressure(kind, depth, pipe):
    """Every value once and in order; ``count``/``full`` follow the transfers; with
    ``pipe=False`` the FIFO takes nothing while full, even in a cycle its head leaves."""
    rng = np.random.default_rng(3 + depth)
    cycles = 600
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        src = Stream(Struct(value=10, tag=2), "src", SOURCE)
        count = pyrtl.Register(10, "count")
        src.drive(pyrtl.Input(1, "v"), value=count, tag=count[:2])
        count.next <<= count + src.fire
        fifo = kind(src.fields, depth, "q1", pipe=pipe)
        connect(src, fifo.enq)
        out = queue(fifo.deq, 1, "q2")
        out.ready <<= pyrtl.Input(1, "r")
        for nm, wire in (("ov", out.valid), ("ox", out.payload.value), ("ot", out.payload.tag),
                         ("sr", src.ready), ("in", src.fire), ("mid", fifo.deq.fire),
                         ("held", fifo.count), ("full", fifo.full)):
            o = pyrtl.Output(wire.bitwidth, nm)
            o <<= wire
    v_in = rng.integers(0, 2, cycles)
    r_in = rng.integers(0, 2, cycles)
    tr = ArraySimulation(block=block).run_trace(cycles, {"v": v_in.tolist(),
                                                         "r": r_in.tolist()})
    out_fire = [k for k in range(cycles) if tr["ov"][k] and r_in[k]]
    taken = [int(tr["ox"][k]) for k in out_fire]
    assert len(taken) > 100
    assert taken == list(range(len(taken)))                     # every value once, in order
    assert [int(tr["ot"][k]) for k in out_fire] == [t % 4 for t in taken]
    accepted = sum(1 for k in range(cycles) if v_in[k] and tr["sr"][k])
    assert 0 <= accepted - len(taken) <= depth + 1              # at most the queues' entries
    # the first FIFO's count and full flag follow its transfers, and it does fill up
    held = np.concatenate([[0], np.cumsum(tr["in"].astype(int) - tr["mid"].astype(int))])
    assert tr["held"].tolist() == held[:cycles].tolist()
    assert tr["full"].tolist() == (held[:cycles] == depth).astype(int).tolist()
    assert tr["full"].any()
    through = [k for k in range(cycles) if tr["full"][k] and tr["mid"][k] and v_in[k]]
    assert through                                        # the case arises in the trace
    assert {int(tr["sr"][k]) for k in through} == {int(pipe)}   # taken only with pipe


def test_ring_fifo_keeps_its_entries_in_a_memory():
    """RingFifo's storage is one memory with a combinational read (distributed RAM in
    synthesis), written once per entry: no entry registers."""
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        RingFifo(Struct(a=60, b=70), 3, "skid")
    mems = {net.op_param[1] for net in block.logic if net.op in "m@"}
    assert [m.name for m in mems] == ["skid_mem"]
    mem = next(iter(mems))
    assert mem.asynchronous and mem.bitwidth == 130 and mem.addrwidth == 2
    regs = sum(r.bitwidth for r in block.wirevector_subset(pyrtl.Register))
    assert regs < 10                                     # pointers and count only


# ---------------------------------------------------------- AXI: a slave that waits

def _waiting_slave(m: AxiMaster, beat_bits: int, name: str = "slave"):
    """A PyRTL AXI4 slave memory that takes AW and the first W beat of a burst together:
    AWREADY waits for WVALID and WREADY waits for AWVALID (both allowed to a slave). It
    also checks WLAST against AWLEN (sticky ``violation``)."""
    sig = m.signals()
    mem = pyrtl.MemBlock(m.w.payload.data.bitwidth, beat_bits, f"{name}_mem",
                         asynchronous=True, max_read_ports=2)
    shift = (m.w.payload.data.bitwidth // 8 - 1).bit_length()
    unstable = []
    in_burst = pyrtl.Register(1, f"{name}_in_burst")
    waddr = pyrtl.Register(beat_bits, f"{name}_waddr")
    wleft = pyrtl.Register(8, f"{name}_wleft")
    bpending = pyrtl.Register(1, f"{name}_bpending")
    violation = pyrtl.Register(1, f"{name}_violation")
    # a VALID that drops, or a payload that changes, before its READY is a violation too
    for ch in ("aw", "w", "ar"):
        pay = pyrtl.concat_list([sig[s] for s in sig if s.startswith(ch) and
                                 s not in (f"{ch}valid", f"{ch}ready")])
        held_v = pyrtl.Register(1, f"{name}_{ch}_held")
        held_p = pyrtl.Register(pay.bitwidth, f"{name}_{ch}_payload")
        waiting = sig[f"{ch}valid"] & ~sig[f"{ch}ready"]
        held_v.next <<= waiting
        held_p.next <<= pay
        unstable.append(held_v & (~sig[f"{ch}valid"] | (pay != held_p)))
    first = sig["awvalid"] & sig["wvalid"] & ~in_burst & ~bpending
    sig["awready"] <<= first
    sig["wready"] <<= first | in_burst
    wfire = sig["wvalid"] & (first | in_burst)
    at = pyrtl.select(first, sig["awaddr"][shift:shift + beat_bits], waddr)
    left = pyrtl.select(first, sig["awlen"], wleft)
    last = wfire & (left == 0)
    mem[at] <<= pyrtl.MemBlock.EnabledWrite(sig["wdata"], wfire)
    waddr.next <<= pyrtl.select(wfire, at + 1, waddr)
    wleft.next <<= pyrtl.select(wfire, left - 1, wleft)
    in_burst.next <<= (in_burst | first) & ~last
    violation.next <<= violation | (wfire & (sig["wlast"] != (left == 0))) | \
        pyrtl.rtl_any(*unstable)
    bpending.next <<= last | (bpending & ~sig["bready"])
    sig["bvalid"] <<= bpending
    sig["bid"] <<= 0
    sig["bresp"] <<= 0
    r_active = pyrtl.Register(1, f"{name}_r_active")
    raddr = pyrtl.Register(beat_bits, f"{name}_raddr")
    rleft = pyrtl.Register(8, f"{name}_rleft")
    sig["arready"] <<= ~r_active
    ar = sig["arvalid"] & ~r_active
    rfire = r_active & sig["rready"]
    rlast = rleft == 0
    sig["rvalid"] <<= r_active
    sig["rdata"] <<= mem[raddr]
    sig["rlast"] <<= rlast
    sig["rid"] <<= 0
    sig["rresp"] <<= 0
    r_active.next <<= ar | (r_active & ~(rfire & rlast))
    raddr.next <<= pyrtl.select(ar, sig["araddr"][shift:shift + beat_bits],
                                pyrtl.select(rfire, raddr + 1, raddr))
    rleft.next <<= pyrtl.select(ar, sig["arlen"], pyrtl.select(rfire, rleft - 1, rleft))
    return violation


@requires_gcc
@pytest.mark.parametrize("max_burst, base", [(1, 100), (3, 100), (256, 100), (256, 500)])
def test_axi_master_with_a_slave_that_waits_for_awvalid_and_wvalid(max_burst, base):
    """Write 40 vectors (2 beats each) and read them back through a slave that accepts an AW
    only with its first W beat: a master whose W waits for AWREADY would deadlock. Vector 500
    starts at byte 4000, so its bursts split at 4 KiB. The slave also checks WLAST and that
    no VALID drops or payload changes before its READY."""
    m_vectors, n, w, dw = 40, 4, 16, 32
    rng = np.random.default_rng(max_burst)
    x = rng.integers(-2000, 2000, (m_vectors, n))
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        axi = AxiMaster(12, 8, lanes=n, lane_bits=w, data_width=dw, max_burst=max_burst,
                        max_outstanding=2, name="m")
        violation = _waiting_slave(axi, beat_bits=11)
        axi.offset <<= 0
        axi.cache <<= 0
        ctl = DramPort(12, 8, n * w, "ctl", side="core")
        connect(ctl, axi.core)
        rom = pyrtl.RomBlock(n * w, 6, [to_int(v, w) for v in x], name="rom",
                             asynchronous=True, pad_with_zeros=True)
        got_mem = pyrtl.MemBlock(n * w, 6, "readback", asynchronous=True)
        step = pyrtl.Register(2, "step")            # 0: write request, 1: read request
        sent = pyrtl.Register(7, "sent")
        got = pyrtl.Register(7, "got")
        ctl.req.drive(step < 2, write=step == 0, addr=base, len=m_vectors - 1)
        step.next <<= step + ctl.req.fire
        ctl.wdata.drive(sent < m_vectors, data=rom[sent[:6]])
        sent.next <<= sent + ctl.wdata.fire
        ctl.rdata.ready <<= 1
        got_mem[got[:6]] <<= pyrtl.MemBlock.EnabledWrite(ctl.rdata.payload.data, ctl.rdata.valid)
        got.next <<= got + ctl.rdata.fire
        for nm, wire in (("done", got == m_vectors), ("violation", violation),
                         ("idle", axi.idle)):
            o = pyrtl.Output(1, nm)
            o <<= wire
    sim = ArraySimulation(block=block)
    out = None
    for cycle in range(2000):
        out = sim.run_cycles(1, {})
        if out["done"]:
            break
    assert out["done"], "deadlock: the master waits for the slave"
    assert not out["violation"]
    out = sim.run_cycles(20, {})
    assert out["idle"] and not out["violation"]
    assert np.array_equal(unpack(sim.memory("readback")[:m_vectors], n, w), x)


@requires_gcc
def test_axi_master_sends_w_from_the_offered_vector_and_runs_aw_ahead_by_writes_ahead():
    """Six one-vector write bursts (two beats each) with AWREADY always high: before the core
    offers any data the master presents exactly ``writes_ahead`` AWs; then W beats are the
    offered vector's halves, low half first, and the core's vector is taken exactly with its
    last beat (the master keeps no copy), under a WREADY that comes and goes."""
    n, w, dw, vectors, ahead = 4, 16, 32, 6, 2
    x = np.random.default_rng(4).integers(-2000, 2000, (vectors, n))
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        axi = AxiMaster(12, 8, lanes=n, lane_bits=w, data_width=dw, max_burst=2,
                        writes_ahead=ahead, name="m")
        axi.offset <<= 0
        axi.cache <<= 0
        sig = axi.signals()
        go, wready = pyrtl.Input(1, "go"), pyrtl.Input(1, "wready_in")
        for s_, v in (("awready", 1), ("wready", wready), ("arready", 0), ("rvalid", 0),
                      ("rdata", 0), ("rlast", 0), ("rid", 0), ("rresp", 0), ("bid", 0),
                      ("bresp", 0)):
            sig[s_] <<= v
        w_fire = sig["wvalid"] & sig["wready"]
        owed = pyrtl.Register(4, "owed")                  # B responses owed
        owed.next <<= owed + (w_fire & sig["wlast"]) - (sig["bvalid"] & sig["bready"])
        sig["bvalid"] <<= owed != 0
        ctl = DramPort(12, 8, n * w, "ctl", side="core")
        connect(ctl, axi.core)
        ctl.rdata.ready <<= 1
        rom = pyrtl.RomBlock(n * w, 3, [to_int(v, w) for v in x], name="rom",
                             asynchronous=True, pad_with_zeros=True)
        asked = pyrtl.Register(1, "asked")
        ctl.req.drive(~asked, write=1, addr=0, len=vectors - 1)
        asked.next <<= asked | ctl.req.fire
        sent = pyrtl.Register(3, "sent")
        ctl.wdata.drive(go & (sent < vectors), data=rom[sent])
        sent.next <<= sent + ctl.wdata.fire
        for nm, wire in (("aw_fire", sig["awvalid"] & sig["awready"]), ("w_fire", w_fire),
                         ("wdata", sig["wdata"]), ("wlast", sig["wlast"]),
                         ("taken", ctl.wdata.fire), ("idle", axi.idle),
                         ("writes_done", ctl.writes_done), ("b_owed", owed)):
            o = pyrtl.Output(wire.bitwidth, nm)
            o <<= wire
    sim = ArraySimulation(block=block)
    trace = [sim.run_cycles(1, {"go": 0, "wready_in": 1}) for _ in range(30)]
    assert sum(t["aw_fire"] for t in trace) == ahead and not any(t["w_fire"] for t in trace)
    assert not any(t["writes_done"] for t in trace[1:])     # a write request is queued
    rng = np.random.default_rng(5)
    beats, taken_at = [], []
    for cycle in range(200):
        t = sim.run_cycles(1, {"go": 1, "wready_in": int(rng.random() < 0.6)})
        trace.append(t)
        if t["w_fire"]:
            beats.append(t["wdata"])
            assert t["wlast"] == (len(beats) % 2 == 0)     # one-vector bursts: 2 beats
        assert t["taken"] == (t["w_fire"] and len(beats) % 2 == 0)
        if t["taken"]:
            taken_at.append(len(beats))
    assert trace[-1]["idle"] and trace[-1]["writes_done"]
    # writes_done rises only once every burst is answered (no B owed), and stays
    first = min(k for k, t in enumerate(trace) if k > 0 and t["writes_done"])
    assert first > max(k for k, t in enumerate(trace) if t["b_owed"])
    assert all(t["writes_done"] for t in trace[first:])
    assert sum(t["aw_fire"] for t in trace) == vectors
    assert taken_at == [2 * (k + 1) for k in range(vectors)]
    got = [(hi << dw) | lo for lo, hi in zip(beats[0::2], beats[1::2])]
    assert got == [to_int(v, w) for v in x]


# ---------------------------------------------------------------------- documentation

def _section(doc: str, title: str) -> str:
    """The text of a docstring section (``Args:``/``Ports:``) up to the next blank line."""
    found = re.search(rf"^{title}( \(.*\))?:", doc, re.M)
    assert found, f"no {title}: section"
    start = found.start()
    end = doc.find("\n\n", start)
    return doc[start:end if end > 0 else None]


DOCUMENTED = {"DramPort": lambda: DramPort(4, 3, 8, "x", side="core"),
              "RamPort": lambda: RamPort(4, 8, "x", side="memory"),
              "SharedRead": lambda: SharedRead(4, 8, "x", side="client"),
              "SharedWrite": lambda: SharedWrite(4, 8, "x", side="client"),
              **{name: make for name, make in BLOCKS.items() if name in (
                  "systolic_array", "accumulator", "simd", "local_memory", "config_registers",
                  "sampler", "instruction_stream", "decoder", "compute", "dram_engine",
                  "axi_master", "reg_fifo", "ring_fifo", "weight_loader", "acc_drain")}}


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_help_is_enough(name):
    """Every constructor argument is in the class docstring's ``Args:`` and every port in its
    ``Ports:``, so ``help(Block)`` tells how to use it."""
    block, obj = _build(DOCUMENTED[name])
    doc = inspect.getdoc(type(obj)) or ""
    args, ports_doc = _section(doc, "Args"), _section(doc, "Ports")
    params = [p for p in inspect.signature(type(obj).__init__).parameters if p != "self"]
    missing = [p for p in params if not re.search(rf"^\s*{p}\b", args, re.M)]
    assert not missing, f"{name}: arguments not documented: {missing}"
    tops = {path.split(".")[0].split("[")[0] for path, _, _ in ports(obj, block)}
    missing = [t for t in tops if not re.search(rf"^\s*(\w+, )*{t}\b", ports_doc, re.M)]
    assert not missing, f"{name}: ports not documented: {missing}"


def test_blocks_refuse_parameters_that_do_not_fit_together():
    with pyrtl.set_working_block(pyrtl.Block()):
        with pytest.raises(ValueError, match=r"AXI master 'm': data width 24 must be 8 · a "
                                             r"power of two dividing a vector of 4 × 16 bits"):
            AxiMaster(12, 8, lanes=4, lane_bits=16, data_width=24, name="m")
        with pytest.raises(ValueError, match="data width 128 .* vector of 4 × 16 bits"):
            AxiMaster(12, 8, lanes=4, lane_bits=16, data_width=128, name="m")
        with pytest.raises(ValueError, match="max_burst must be 1..256"):
            AxiMaster(12, 8, lanes=4, lane_bits=16, data_width=32, max_burst=300)
        with pytest.raises(ValueError, match="max_outstanding and writes_ahead at least 1"):
            AxiMaster(12, 8, lanes=4, lane_bits=16, data_width=32, writes_ahead=0)
        with pytest.raises(ValueError, match="lookup tables need lut_depth >= 1"):
            SimdArray(4, FP16BP8, registers=2, lut_count=1)
        no_depth = Layout(local_depth=64, accumulator_depth=32, dram0_depth=64, dram1_depth=64,
                          stride0_depth=2, stride1_depth=2, simd_registers_depth=2, lut_count=1)
        with pytest.raises(ValueError, match="layout with lookup tables needs lut_depth"):
            Decoder(no_depth, pyrtl.WireVector(8 * no_depth.instruction_bytes, "w"))
        with pytest.raises(ValueError, match="role must be SOURCE or SINK"):
            Stream(8, "s", "input")
        with pytest.raises(ValueError, match="depth must be at least 1"):
            RegFifo(8, 0, "f")
        with pytest.raises(ValueError, match="depth must be at least 1"):
            RingFifo(8, 0, "f")
        with pytest.raises(ValueError, match="too deep for the 3-bit weight counters"):
            ComputeUnit(LAYOUT, FP16BP8, queue_depth=6)
        for depth in (0, 6):
            with pytest.raises(ValueError, match="queue depth .* is not allowed; use 1 to 5"):
                WeightLoader(LAYOUT, 64, queue_depth=depth)
