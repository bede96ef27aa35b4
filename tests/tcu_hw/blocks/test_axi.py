"""AXI4 masters and the AXI-Stream instruction input, through the whole top in PyRTL with
Python AXI slave memories that enforce the protocol (sim.axi_model)."""

from __future__ import annotations

import numpy as np
import pyrtl
import pytest

from sim.axi_model import AxiSlaveModel, AxiViolation
from sim.emulator import Emulator
from sim.pyrtl_backend import SimulationHang
from sim.pyrtl_sim import ArraySimulation
from sim.pyrtl_top import PyrtlTop
from tcu_hw.arch import Architecture, Options
from tcu_hw.blocks.axis import InstructionStream
from tcu_hw.isa import SIMD, DataMove, DataMoveKind as K, LoadWeights, MatMul, SimdOp

from ...conftest import requires_gcc

pytestmark = requires_gcc


def program(n):
    return [DataMove(K.DRAM1_TO_LOCAL, 0, 0, 0, 0, n),                      # one burst
            DataMove(K.DRAM0_TO_LOCAL, 20, 0, 3, 1, 5),                     # strided: 6 bursts
            DataMove(K.DRAM0_TO_LOCAL, 40, 0, 100, 0, 60),                  # crosses 4 KiB?
            LoadWeights(0, 0, n), MatMul(20, 0, 0, 0, 5), MatMul(40, 0, 8, 0, 60, True),
            SIMD(SimdOp.ZERO, 0, 0, 1),
            SIMD(SimdOp.MAX, 0, 1, 0, read_address=3, write_address=3, read=True, write=True),
            DataMove(K.ACC_TO_LOCAL, 120, 0, 0, 0, 68),
            DataMove(K.LOCAL_TO_DRAM0, 120, 0, 200, 0, 68),                 # write bursts
            DataMove(K.LOCAL_TO_DRAM1, 120, 1, 7, 2, 3),                    # strided writes
            DataMove(K.DRAM0_TO_LOCAL, 300, 0, 200, 0, 68),                 # read after write
            DataMove(K.LOCAL_TO_DRAM0, 300, 0, 400, 0, 68)]


@pytest.mark.parametrize("arch, width, stall", [
    (Architecture("FP16BP8", 4, 512, 64, 512, 128, 1, 4, 4), 64, 0.0),      # 1 beat/vector
    (Architecture("FP16BP8", 4, 512, 64, 512, 128, 1, 4, 4), 32, 0.3),      # 2 beats/vector
    (Architecture("FP18BP10", 2, 512, 64, 512, 128, 1, 4, 4), 32, 0.2),     # 32-bit slots
    (Architecture("FP8BP4", 8, 512, 64, 512, 128, 1, 4, 4), 32, 0.5),       # AXI narrower
])
def test_top_matches_the_emulator_through_axi(arch, width, stall):
    rng = np.random.default_rng(width)
    n = arch.array_size
    d0 = rng.integers(-100, 100, (512 - 2, n))
    d1 = rng.integers(-100, 100, (64, n))
    prog = program(n)
    emu = Emulator(arch)
    emu.write_dram0(0, d0)
    emu.write_dram1(0, d1)
    emu.run(prog)
    top = PyrtlTop(arch, Options(axi_data_width=width))
    top.run(prog, dram0={0: d0}, dram1={0: d1}, latency=5, stall=stall, seed=3)
    assert not top.error
    assert np.array_equal(top.read_dram(0, 0, 512), emu.read_dram0(0, 512))
    assert np.array_equal(top.read_dram(1, 0, 64), emu.read_dram1(0, 64))
    assert top.drams[0].bursts["write"] >= 2 and top.drams[1].bursts["write"] == 4


def test_bursts_split_at_4kib_and_256_beats():
    """Vectors of 24 bytes (n = 3, FP32BP16) with a 64-bit bus: bursts never cross 4 KiB."""
    arch = Architecture("FP32BP16", 2, 2048, 64, 1024, 64, 1, 2, 2)
    prog = [DataMove(K.DRAM0_TO_LOCAL, 0, 0, 250, 0, 700),
            DataMove(K.LOCAL_TO_DRAM0, 0, 0, 1200, 0, 700)]
    rng = np.random.default_rng(1)
    d0 = rng.integers(-1000, 1000, (2046, 2))
    top = PyrtlTop(arch, Options(axi_data_width=64))
    top.run(prog, dram0={0: d0}, latency=2)
    emu = Emulator(arch)
    emu.write_dram0(0, d0)
    emu.run(prog)
    assert np.array_equal(top.read_dram(0, 0, 2046), emu.read_dram0(0, 2046))
    assert top.drams[0].bursts["read"] >= 3          # 701 × 8-byte vectors: 4 KiB boundaries


def test_flush_probe_follows_a_dram1_store():
    """The flush probe is a DRAM0 store: it completes only after an earlier DRAM1 store has
    landed, however the DRAM1 slave stalls (before the fix the probe overtook the last
    DRAM1 writes under 90% back-pressure)."""
    arch = Architecture("FP16BP8", 2, 128, 64, 64, 32, 2, 4, 4)
    d1 = np.arange(1, 129).reshape(64, 2)
    prog = [DataMove(K.LOCAL_TO_DRAM1, 0, 0, 20, 1, 5)]          # zeros to DRAM1 20, 22 .. 30
    top = PyrtlTop(arch, Options(axi_data_width=32))
    for seed in range(1, 9):
        top.run(prog, dram1={0: d1}, latency=0, stall=0.9, seed=seed)
        assert not top.read_dram(1, 20, 11)[::2].any(), seed


def test_top_run_stops_when_nothing_moves():
    """A slave that never answers is a hang once no handshake happens on the instruction
    stream or either AXI port for ``stall_cycles``; ``max_cycles`` caps a run."""
    arch = Architecture("FP16BP8", 2, 512, 64, 512, 128, 1, 4, 4)
    prog = [DataMove(K.DRAM0_TO_LOCAL, 0, 0, 0, 0, 15)]
    top = PyrtlTop(arch, Options(axi_data_width=32))
    with pytest.raises(SimulationHang, match="nothing moved for 300 cycles"):
        top.run(prog, stall=1.0, stall_cycles=300)
    with pytest.raises(SimulationHang, match="did not complete in 20 cycles"):
        top.run(prog, max_cycles=20)
    assert top.run(prog, stall=0.9, stall_cycles=300) > 0       # slow, but it moves


def test_slave_model_catches_violations():
    s = AxiSlaveModel(1 << 16, 64, latency=1)
    base = dict(arvalid=0, araddr=0, arlen=0, arsize=3, arburst=1, awvalid=0, awaddr=0,
                awlen=0, awsize=3, awburst=1, wvalid=0, wdata=0, wstrb=0xFF, wlast=0,
                rready=1, bready=1)
    s.outputs()
    with pytest.raises(AxiViolation, match="crosses 4 KiB"):
        s.sample({**base, "arvalid": 1, "araddr": 4096 - 8, "arlen": 1})
    s = AxiSlaveModel(1 << 16, 64)
    s.outputs()
    with pytest.raises(AxiViolation, match="not INCR"):
        s.sample({**base, "awvalid": 1, "awburst": 0})
    s = AxiSlaveModel(1 << 16, 64)
    s.outputs()
    s.sample({**base, "awvalid": 1, "awlen": 1})
    s.outputs()
    with pytest.raises(AxiViolation, match="WLAST before"):
        s.out["wready"] = 1
        s.sample({**base, "wvalid": 1, "wlast": 1})


@pytest.mark.parametrize("ib, width", [(8, 64), (9, 64), (9, 128), (4, 32), (13, 32), (8, 256)])
def test_instruction_stream_width_conversion(ib, width):
    """Stream words → whole instructions, first instruction in the low bytes, with gaps on
    both sides."""
    rng = np.random.default_rng(ib * width)
    data = bytes(rng.integers(0, 256, ib * 50, dtype=np.uint8))
    data += bytes((-len(data)) % (width // 8))
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        s = InstructionStream(ib, width, name="axis")
        tdata, tvalid, ready = (pyrtl.Input(width, "tdata"), pyrtl.Input(1, "tvalid"),
                                pyrtl.Input(1, "ready"))
        s.words.drive(tvalid, data=tdata)
        s.instructions.ready <<= ready
        for name, wire in (("tready", s.words.ready), ("ovalid", s.instructions.valid),
                           ("odata", s.instructions.payload.data)):
            o = pyrtl.Output(wire.bitwidth, name)
            o <<= wire
    sim = ArraySimulation(block=block)
    fed, got = 0, []
    wb = width // 8
    for _ in range(2000):
        valid = int(fed < len(data) and rng.random() < 0.7)
        ready = int(rng.random() < 0.6)
        out = sim.run_cycles(1, {"tdata": int.from_bytes(data[fed:fed + wb], "little"),
                                 "tvalid": valid, "ready": ready})
        if valid and out["tready"]:
            fed += wb
        if out["ovalid"] and ready:
            got.append(out["odata"].to_bytes(ib, "little"))
    whole = len(data) // ib
    assert b"".join(got[:whole]) == data[:whole * ib]
