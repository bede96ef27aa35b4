"""Faults at the top's ports (issue 12 item 4, issue 15): error responses, DRAM slaves that
stop answering, an instruction stream cut inside an instruction. The top raises ``error``
or ``timeout`` (``dram_timeout`` names the port), the runners say which, and after reset the
top is idle with every flag down and runs the program bit-exact. On the PyRTL top and on
the generated Verilog under Verilator."""

from __future__ import annotations

import numpy as np
import pytest

from sim.axi_model import AxiFault
from sim.emulator import Emulator
from sim.pyrtl_backend import SimulationHang
from sim.pyrtl_top import PyrtlTop
from sim.verilator_backend import VerilatorHang, VerilatorTop
from tcu_hw.arch import Architecture, Options
from tcu_hw.isa import ConfigRegister, Configure, DataMove, DataMoveKind as K, MatMul, \
    LoadWeights

from ..conftest import requires_gcc, requires_verilator

pytestmark = requires_gcc

ARCH = Architecture("FP16BP8", 2, 256, 64, 256, 64, 1, 4, 4)
WIDTH = 32                                    # 4-byte words: a word is part of an instruction
#: a program that reads and writes both DRAM ports; its first word is not all zero
PROGRAM = [DataMove(K.DRAM0_TO_LOCAL, 3, 0, 0, 0, 7),
           DataMove(K.DRAM1_TO_LOCAL, 20, 0, 0, 0, 2),
           LoadWeights(20, 0, 2), MatMul(3, 0, 0, 0, 7),
           DataMove(K.ACC_TO_LOCAL, 40, 0, 0, 0, 7),
           DataMove(K.LOCAL_TO_DRAM0, 40, 0, 100, 0, 7),
           DataMove(K.LOCAL_TO_DRAM1, 40, 0, 30, 0, 7)]
RNG = np.random.default_rng(12)
DRAM0 = RNG.integers(-300, 300, (64, 2))
DRAM1 = RNG.integers(-300, 300, (8, 2))
#: (fault, feed_bytes, what the top says: error, dram_timeout, words in the hang message)
CASES = {"slverr_dram1": (AxiFault(1, "slverr"), None, (1, 0, None)),
         "decerr_dram0_writes": (AxiFault(0, "decerr", after=1), None, (1, 0, None)),
         "dram1_never_answers_a_read": (AxiFault(1, "no_read_data"), None,
                                        (0, 0b10, "DRAM1 slave stopped answering")),
         "dram0_never_answers_a_write": (AxiFault(0, "no_write_response"), None,
                                         (0, 0b01, "DRAM0 slave stopped answering")),
         "stream_cut_mid_instruction": (None, 16, (0, 0, "stopped inside an instruction"))}


def expected() -> tuple[np.ndarray, np.ndarray]:
    emu = Emulator(ARCH)
    emu.write_dram0(0, DRAM0)
    emu.write_dram1(0, DRAM1)
    emu.run(PROGRAM)
    return emu.read_dram0(0, 256), emu.read_dram1(0, 64)


def test_the_cut_is_inside_an_instruction():
    size = ARCH.layout.instruction_bytes
    cut = CASES["stream_cut_mid_instruction"][1]
    assert cut % size and cut % (WIDTH // 8) == 0
    assert any(ARCH.layout.encode_program(PROGRAM)[cut - cut % size:cut])


@pytest.fixture(scope="module")
def pyrtl_top() -> PyrtlTop:
    return PyrtlTop(ARCH, Options(axi_data_width=WIDTH))


@pytest.mark.parametrize("case", CASES)
def test_pyrtl_top_reports_the_fault_and_recovers(pyrtl_top, case):
    fault, feed, (error, stuck, words) = CASES[case]
    top = pyrtl_top
    if words is None:                              # error responses: the run ends, error high
        top.run(PROGRAM, dram0={0: DRAM0}, dram1={0: DRAM1}, latency=3, fault=fault)
        assert top.status["error"] == 1 and top.status["dram_timeout"] == 0
    else:
        with pytest.raises(SimulationHang, match=words) as hang:
            top.run(PROGRAM, dram0={0: DRAM0}, dram1={0: DRAM1}, latency=3, fault=fault,
                    feed_bytes=feed, stall_cycles=400)
        status = hang.value.status
        assert status["timeout"] == 1 and status["dram_timeout"] == stuck
        assert status["error"] == error
        assert status["idle"] == (stuck == 0)         # a cut stream leaves nothing in flight
    # reset (a fresh run) clears every flag; the same program then runs bit-exact
    top.run(PROGRAM, dram0={0: DRAM0}, dram1={0: DRAM1}, latency=3)
    assert {k: top.status[k] for k in ("error", "timeout", "dram_timeout")} == \
        {"error": 0, "timeout": 0, "dram_timeout": 0}
    want0, want1 = expected()
    assert np.array_equal(top.read_dram(0, 0, 256), want0)
    assert np.array_equal(top.read_dram(1, 0, 64), want1)


def test_a_longer_timeout_register_waits_longer(pyrtl_top):
    """The DRAM watchdog counts against the Configure timeout register: at 1,000 cycles a
    slave silent for 400 quiet cycles has not yet raised ``dram_timeout``."""
    program = [Configure(ConfigRegister.TIMEOUT, 1000)] + PROGRAM
    with pytest.raises(SimulationHang) as hang:
        pyrtl_top.run(program, dram0={0: DRAM0}, dram1={0: DRAM1}, latency=3,
                      fault=AxiFault(1, "no_read_data"), stall_cycles=400)
    assert hang.value.status["dram_timeout"] == 0
    with pytest.raises(SimulationHang) as hang:
        pyrtl_top.run(program, dram0={0: DRAM0}, dram1={0: DRAM1}, latency=3,
                      fault=AxiFault(1, "no_read_data"), stall_cycles=1200)
    assert hang.value.status["dram_timeout"] == 0b10


def test_a_slow_slave_is_not_a_fault(pyrtl_top):
    """Heavy but legal back-pressure never holds ``dram_timeout`` at the end and the run is
    bit-exact (the watchdog restarts at every handshake)."""
    pyrtl_top.run(PROGRAM, dram0={0: DRAM0}, dram1={0: DRAM1}, latency=30, stall=0.8, seed=5)
    assert pyrtl_top.status["timeout"] == 0 and pyrtl_top.status["error"] == 0
    want0, _ = expected()
    assert np.array_equal(pyrtl_top.read_dram(0, 0, 256), want0)


def test_bad_faults_are_refused():
    with pytest.raises(ValueError, match="kind one of"):
        AxiFault(0, "flaky")
    with pytest.raises(ValueError, match="port must be 0 or 1"):
        AxiFault(2, "slverr")


@pytest.fixture(scope="module")
def verilator_top() -> VerilatorTop:
    return VerilatorTop(ARCH, Options(axi_data_width=WIDTH), arch_name="faults")


@requires_verilator
@pytest.mark.parametrize("case", CASES)
def test_generated_top_reports_the_fault_and_recovers_after_reset(verilator_top, case):
    """The faulty run, then ``reset`` held low: idle, every flag down; then the program
    again with good slaves, bit-exact."""
    fault, feed, (error, stuck, words) = CASES[case]
    result = verilator_top.run(PROGRAM, dram0={0: DRAM0}, dram1={0: DRAM1}, fault=fault,
                               feed_bytes=feed, recover=True, stall_cycles=400)
    first = result.stats["first"]
    assert first["error"] == error
    assert first["done"] == (words is None)
    if words is not None:
        assert first["timeout_flag"] == 1 and first["dram_timeout"] == stuck
    assert result.stats["after_reset"] == {"error": 0, "timeout_flag": 0, "dram_timeout": 0,
                                           "idle": 1}
    assert not result.error and result.stats["timeout_flag"] == 0
    want0, want1 = expected()
    assert np.array_equal(verilator_top.read_dram0(0, 256), want0)
    assert np.array_equal(verilator_top.read_dram1(0, 64), want1)


@requires_verilator
@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][2][2] is not None])
def test_generated_top_hang_names_the_port(verilator_top, case):
    fault, feed, (_, stuck, words) = CASES[case]
    with pytest.raises(VerilatorHang, match=words) as hang:
        verilator_top.run(PROGRAM, dram0={0: DRAM0}, dram1={0: DRAM1}, fault=fault,
                          feed_bytes=feed, stall_cycles=400)
    assert hang.value.stats["dram_timeout"] == stuck and hang.value.stats["timeout_flag"] == 1
