"""Decoder address runs, configuration registers and the sampler, block by block."""

from __future__ import annotations

import itertools

import numpy as np
import pyrtl
import pytest

from sim.pyrtl_backend import PyrtlCore
from sim.pyrtl_sim import ArraySimulation
from tcu_hw.arch import Architecture, Options
from tcu_hw.blocks.config_registers import ConfigRegisters
from tcu_hw.blocks.decoder import address_run
from tcu_hw.blocks.dram_engine import DramEngine, favor
from tcu_hw.blocks.sampler import Sampler
from tcu_hw.isa import SIMD, Configure, ConfigRegister, MatMul, LoadWeights, NoOp, SimdOp
from tcu_hw.isa import address_run as reference_run

from .harness import run_vectors

from ...conftest import requires_gcc

pytestmark = requires_gcc


@pytest.mark.parametrize("bits", [1, 3, 6, 7])
def test_decoder_address_run_matches_the_contract(bits):
    """Every (base, stride code, size) for small widths: lo, hi, highest and wrap."""
    cases = list(itertools.product(range(1 << (bits + 1)), range(9), range(0, 20, 3)))
    base, stride, size = (np.array(c) for c in zip(*cases))
    for field in ("lo", "hi", "highest", "wraps"):
        got = run_vectors(lambda b, s, z, f=field: getattr(address_run(b, s, z, bits), f),
                          {"b": (bits + 1, base), "s": (4, stride), "z": (5, size)},
                          1 if field == "wraps" else bits, signed=False)
        for k, (b, s, z) in enumerate(cases):
            run = reference_run(b, s, z, bits)
            want = int(getattr(run, field))
            if field in ("lo", "hi") and run.wraps:
                want = 0 if field == "lo" else (1 << bits) - 1
            assert got[k] == want, (field, b, s, z)


def test_favor_grants_the_client_a_reader_waits_for_and_keeps_it_first():
    """At most one grant, only to a client that wants; the client that alone was urgent in
    the cycle before comes first, and stays first until the other alone was urgent; the
    other takes every cycle the first does not want (a model, on random wants and
    urgencies)."""
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        wants = [pyrtl.Input(1, f"want{i}") for i in range(2)]
        urgent = [pyrtl.Input(1, f"urgent{i}") for i in range(2)]
        for i, g in enumerate(favor(wants, urgent, "fv")):
            out = pyrtl.Output(1, f"grant{i}")
            out <<= g
        sim = pyrtl.Simulation()
    rng = np.random.default_rng(5)
    prefer, firsts, was = 0, set(), [0, 0]
    for cycle in range(400):
        w = [int(x) for x in rng.random(2) < 0.7]
        u = [int(x) for x in rng.random(2) < (0.1 if cycle % 100 < 50 else 0.5)]
        sim.step({**{f"want{i}": w[i] for i in range(2)},
                  **{f"urgent{i}": u[i] for i in range(2)}})
        g = [sim.inspect(f"grant{i}") for i in range(2)]
        first = was[1] if was[0] != was[1] else prefer
        prefer, was = first, u
        firsts.add(first)
        want = [0, 0]
        if w[first]:
            want[first] = 1
        elif w[1 - first]:
            want[1 - first] = 1
        assert g == want, (cycle, w, u, g)
    assert firsts == {0, 1}


@pytest.mark.parametrize("kw", [dict(queue_depth=0), dict(run_ahead=-1)])
def test_dram_engine_refuses_an_empty_queue_or_a_negative_run_ahead(kw):
    arch = Architecture("FP16BP8", 4, 256, 256, 256, 64, 1, 4, 4)
    with pyrtl.set_working_block(pyrtl.Block()):
        with pytest.raises(ValueError, match="queue_depth must be at least 1 and run_ahead"):
            DramEngine.from_arch(arch, **kw)


def test_config_registers_pc_timeout_tracepoint():
    steps = [  # (write, register, value, dispatched, stalled)
        (0, 0, 0, 1, 0), (0, 0, 0, 1, 0),
        (1, int(ConfigRegister.TIMEOUT), 3, 1, 0),
        (1, int(ConfigRegister.TRACEPOINT), 12, 1, 0),
        (1, int(ConfigRegister.PROGRAM_COUNTER), 10, 0, 0),
        (0, 0, 0, 1, 0), (0, 0, 0, 0, 1), (0, 0, 0, 0, 1), (0, 0, 0, 0, 1), (0, 0, 0, 0, 1),
        (0, 0, 0, 1, 0), (1, 7, 99, 1, 0), (0, 0, 0, 1, 0)]
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        cfg = ConfigRegisters(decoder_timeout=100)
        w = cfg.write.payload
        for name, wire in (("cfg_write", cfg.write.valid), ("cfg_register", w.register),
                           ("cfg_value", w.value), ("cfg_dispatched", cfg.dispatched),
                           ("cfg_stalled", cfg.stalled)):
            i = pyrtl.Input(wire.bitwidth, f"i_{name}")
            wire <<= i
        for name, wire in (("pc", cfg.pc), ("timeout", cfg.timeout), ("trace", cfg.tracepoint_hit),
                           ("tvalue", cfg.timeout_cycles)):
            o = pyrtl.Output(wire.bitwidth, f"o_{name}")
            o <<= wire
    sim = ArraySimulation(block=block)
    names = ["cfg_write", "cfg_register", "cfg_value", "cfg_dispatched", "cfg_stalled"]
    tr = sim.run_trace(len(steps), {f"i_{n}": [s[k] for s in steps] for k, n in enumerate(names)})
    assert tr["o_pc"].tolist() == [0, 1, 2, 3, 4, 10, 11, 11, 11, 11, 11, 12, 13]
    assert tr["o_tvalue"].tolist()[:3] == [100, 100, 100] and tr["o_tvalue"][3] == 3
    assert tr["o_timeout"].tolist() == [0] * 9 + [1, 0, 0, 0]      # 4th stalled cycle >= 3
    assert tr["o_trace"].tolist() == [0] * 11 + [1, 0]              # while pc == 12


def test_sampler_period_blocks_and_drops():
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        s = Sampler(block_size=3)
        interval, tready = pyrtl.Input(16, "interval"), pyrtl.Input(1, "tready")
        s.interval <<= interval
        s.samples.ready <<= tready
        s.pc <<= pyrtl.Const(0xABCD, 32)
        s.pairs <<= pyrtl.Const(0x8001, 16)
        out = s.samples
        for name, wire in (("v", out.valid), ("d", out.payload.data), ("l", out.payload.last),
                           ("x", s.dropped)):
            o = pyrtl.Output(wire.bitwidth, name)
            o <<= wire
    sim = ArraySimulation(block=block)
    cycles = 60
    ready = [1] * 30 + [0] * 20 + [1] * 10
    tr = sim.run_trace(cycles, {"interval": 4, "tready": ready})
    accepted = [k for k in range(cycles) if tr["v"][k] and ready[k]]
    assert accepted[:6] == [4, 8, 12, 16, 20, 24]                   # one word every 4 cycles
    assert all(int(tr["d"][k]) == (0x8001 << 32) | 0xABCD for k in accepted)
    assert [int(tr["l"][k]) for k in accepted[:6]] == [0, 0, 1, 0, 0, 1]
    assert sum(int(x) for x in tr["x"]) >= 4                        # dropped while not ready
    held = [k for k in range(30, 50) if tr["v"][k]]
    assert held and len(held) == 20 - (held[0] - 30)                # valid held until ready


def test_sampler_interval_lowered_while_counting():
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        s = Sampler(block_size=1)
        interval = pyrtl.Input(16, "interval")
        s.interval <<= interval
        s.samples.ready <<= 1
        s.pc <<= pyrtl.Const(0, 32)
        s.pairs <<= pyrtl.Const(0, 16)
        o = pyrtl.Output(1, "v")
        o <<= s.samples.valid
    sim = ArraySimulation(block=block)
    intervals = [100] * 50 + [5] * 50                  # lowered at cycle 50, count at 50
    tr = sim.run_trace(100, {"interval": intervals})
    sampled = [k for k in range(100) if tr["v"][k]]
    assert sampled[:3] == [51, 56, 61]                  # at once, then every 5 cycles


def test_sampler_in_the_core():
    arch = Architecture("FP16BP8", 2, 64, 64, 64, 32, 1, 2, 2)
    core = PyrtlCore(arch, Options(sample_block_size=4))
    program = [Configure(ConfigRegister.SAMPLE_INTERVAL, 5), LoadWeights(0, 0, 2)] + \
        [MatMul(10, 0, k % 32, 0, 7, True) for k in range(40)] + \
        [SIMD(SimdOp.MAX, 0, 0, 0, read_address=k, write_address=k, read=True, write=True)
         for k in range(20)] + [NoOp()]
    result = core.run(program)
    count = result.counters["samples"]
    assert abs(count - result.cycles / 5) <= 2
    words = core.samples(count)
    pcs = [w & 0xFFFFFFFF for _, w in words]
    assert pcs == sorted(pcs) and pcs[-1] <= 63
    assert any((w >> 32) & 1 for _, w in words)                     # array valid seen
    assert any((w >> 44) & 1 for _, w in words)                     # local port A (MatMul)
    # SIMD ops use the dataflow (bit 36) but not local port A (bit 44)
    assert any((w >> 36) & 1 and not (w >> 44) & 1 for _, w in words)
    assert [t for t, _ in words][:8] == [0, 0, 0, 1, 0, 0, 0, 1]


def test_watch_counts_a_run_of_waiting_cycles_against_the_timeout_register():
    """ConfigRegisters.watch: high from the (timeout+1)-th consecutive waiting cycle, low in
    the first cycle without the wait, restarted by any gap; independent of the decoder's."""
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        cfg = ConfigRegisters(decoder_timeout=3)
        cfg.write.drive(pyrtl.Const(0, 1), register=0, value=0)
        cfg.dispatched <<= 0
        cfg.stalled <<= 0
        waiting = pyrtl.Input(1, "waiting")
        flag = pyrtl.Output(1, "flag")
        flag <<= cfg.watch(waiting, "dram0_timeout")
        decoder = pyrtl.Output(1, "decoder")
        decoder <<= cfg.timeout
    sim = ArraySimulation(block=block)
    wait = [1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1]
    tr = sim.run_trace(len(wait), {"waiting": wait})
    assert tr["flag"].tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    assert not tr["decoder"].any()


@pytest.mark.parametrize("stream, cut", [
    (b"\x11\x22\x33\x44", 1),                          # four bytes of a six-byte instruction
    (b"\x00\x00\x00\x00", 0),                          # zero bytes (could be padding)
    (b"\x01\x02\x03\x04\x05\x06\x00\x00", 0),          # an instruction, then padding
    (b"\x01\x02\x03\x04\x05\x06\x07\x00", 1),          # an instruction, then part of one
    (b"\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 0),  # two whole instructions
])
def test_instruction_stream_cut_inside_an_instruction(stream, cut):
    """InstructionStream.cut: a partial instruction held, not all zero bytes, and no word
    offered; never while a word is offered."""
    from tcu_hw.blocks.axis import InstructionStream
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        s = InstructionStream(6, 32, name="axis")
        tdata, tvalid = pyrtl.Input(32, "tdata"), pyrtl.Input(1, "tvalid")
        s.words.drive(tvalid, data=tdata)
        s.instructions.ready <<= 1
        o = pyrtl.Output(1, "cut")
        o <<= s.cut
    sim = ArraySimulation(block=block)
    words = [int.from_bytes(stream[k:k + 4], "little") for k in range(0, len(stream), 4)]
    idle = 4
    tr = sim.run_trace(len(words) + idle, {"tdata": words + [0] * idle,
                                           "tvalid": [1] * len(words) + [0] * idle})
    assert not tr["cut"][:len(words)].any()
    assert tr["cut"].tolist()[len(words) + 1:] == [cut] * (idle - 1)
