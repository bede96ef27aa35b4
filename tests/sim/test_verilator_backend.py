"""The generated Verilog top under Verilator, against the emulator, with AXI4 slave DRAM
models that check the protocol (random latency and back-pressure), completion by the flush
probe: XOR programs, random programs, Tensil's speech-commands program."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sim.compare import Images, compare
from sim.conformance import speech_case, xor_case
from sim.verilator_backend import AxiTiming, VerilatorError, VerilatorTop
from tcu_hw.arch import Architecture, Options

from ..conftest import requires_gcc, requires_verilator, shared_path
from .programs import probe_safe, programs, soak_case, soak_check

pytestmark = [requires_gcc, requires_verilator]

TENSIL_SPEECH_CYCLES = 1_678_969
_TOPS: dict = {}


def top_for(arch: Architecture, width: int) -> VerilatorTop:
    key = (arch, width)
    if key not in _TOPS:
        _TOPS[key] = VerilatorTop(arch, Options(axi_data_width=width), arch_name="test")
    return _TOPS[key]


def check(arch, width, program, images, timing):
    diffs, result = compare(program, images, top_for(arch, width), timing)
    assert not diffs, "\n".join(diffs)
    return result


XOR_NAMES = ["xor_2x2_memory256", "xor_2x2_memory256_batch16", "xor_4x4_memory256",
             "xor_2x2_memory64K", "xor4_2x2_memory128_stride2_batch4"]


@pytest.mark.parametrize("name", XOR_NAMES)
def test_xor_program(name):
    case = xor_case(name, shared_path("conformance"))
    arch = case.arch
    width = arch.vector_bytes * 8
    for k, run in enumerate(case.runs):
        for timing in (AxiTiming(latency=20), AxiTiming(latency=3, stall_probability=0.4,
                                                        feed_stall=0.3, seed=k + 1)):
            check(arch, width, case.program, run.images, timing)
            got = top_for(arch, width).read_dram0(run.output_base, len(run.expected)).tolist()
            assert got == run.expected


RANDOM_ARCHS = {
    "n2_fp16_axi32": (Architecture("FP16BP8", 2, 128, 64, 64, 32, 2, 4, 4), 32),
    "n4_fp8_lut_odd": (Architecture("FP8BP4", 4, 100, 128, 60, 24, 4, 8, 2, lut_count=2,
                                    lut_depth=6), 32),
    "n8_fp16_axi64": (Architecture("FP16BP8", 8, 64, 64, 64, 32, 1, 2, 2), 64),
    "n4_int8_lut_axi32": (Architecture("INT8", 4, 64, 64, 64, 32, 3, 4, 4, lut_count=1,
                                       lut_depth=8), 32),
    "n2_int16_axi32": (Architecture("INT16", 2, 64, 64, 48, 16, 2, 2, 4), 32),
}


@pytest.mark.parametrize("arch_name", list(RANDOM_ARCHS))
def test_random_programs(arch_name):
    arch, width = RANDOM_ARCHS[arch_name]
    top_for(arch, width)                                 # build outside hypothesis's timing

    @settings(max_examples=40, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(programs(arch), st.sampled_from([0.0, 0.3, 0.7]), st.sampled_from([1, 4, 16]))
    def run(case, stall, outstanding):
        program, images, timing = case
        program = probe_safe(arch, program)
        d0 = images.dram0[0][:arch.dram0_depth - 2]      # the probe owns the last two vectors
        images = Images(dram0={0: d0}, dram1=images.dram1)
        axi = AxiTiming(latency=timing.latency, stall_probability=stall,
                        outstanding=outstanding, feed_stall=stall / 2, seed=timing.seed)
        check(arch, width, program, images, axi)

    run()


@pytest.mark.slow
@pytest.mark.parametrize("arch_name", list(RANDOM_ARCHS))
def test_hundreds_of_random_programs(arch_name):
    """A soak run of the generated Verilog: 600 random programs per architecture (every
    kind, error conditions, hazard-heavy windows) under random AXI timing up to 90%
    back-pressure and outstanding limits, each against the emulator; none may hang or
    differ. A failure prints the program to reproduce."""
    arch, width = RANDOM_ARCHS[arch_name]
    top = top_for(arch, width)
    rng = np.random.default_rng(10 + list(RANDOM_ARCHS).index(arch_name))
    for k in range(600):
        program, images, timing = soak_case(arch, rng)
        program = probe_safe(arch, program)
        images = Images(dram0={0: images.dram0[0][:arch.dram0_depth - 2]},
                        dram1=images.dram1)
        stall = float(rng.choice([0.0, 0.3, 0.7, 0.9]))
        axi = AxiTiming(latency=timing.latency, stall_probability=stall,
                        outstanding=int(rng.choice([1, 4, 16])), feed_stall=stall / 2,
                        seed=timing.seed)
        soak_check(k, program, axi, top, images, VerilatorError)


@pytest.fixture(scope="module")
def speech():
    return speech_case(range(6), shared_path("conformance"))


@pytest.mark.parametrize("index", [0, 2])
def test_speech_program(speech, index):
    """Tensil's setting: AXI read latency 20, one beat per cycle (128-bit), 16 outstanding."""
    run = speech.runs[index]
    result = check(speech.arch, 128, speech.program, run.images,
                   AxiTiming(latency=20, write_latency=10, outstanding=16))
    assert top_for(speech.arch, 128).read_dram0(0, 2).tolist() == run.expected
    assert result.cycles <= 0.6 * TENSIL_SPEECH_CYCLES
    assert not result.error


def test_protocol_checker_fails_the_run(tmp_path):
    """The testbench's slave refuses an access outside its memory (exit 3, named port)."""
    arch, width = RANDOM_ARCHS["n2_fp16_axi32"]
    top = top_for(arch, width)
    run_dir = tmp_path
    lay = arch.layout
    (run_dir / "prog.bin").write_bytes(lay.encode_program([]))
    (run_dir / "dram0.bin").write_bytes(bytes(arch.dram0_depth * arch.vector_bytes))
    (run_dir / "dram1.bin").write_bytes(bytes(8))                      # far too small
    from tcu_hw.isa import DataMove, DataMoveKind
    (run_dir / "prog.bin").write_bytes(lay.encode_program(
        [DataMove(DataMoveKind.DRAM1_TO_LOCAL, 0, 0, 10, 0, 0)]))
    from sim.model import probe_pattern
    cfg = {"program": run_dir / "prog.bin", "dram0_in": run_dir / "dram0.bin",
           "dram1_in": run_dir / "dram1.bin", "dram0_out": run_dir / "o0",
           "dram1_out": run_dir / "o1", "beat_bytes": width // 8,
           "vector_bytes": arch.vector_bytes, "probe_src": arch.dram0_depth - 1,
           "probe_dst": arch.dram0_depth - 2, "latency": 2, "write_latency": 2,
           "outstanding": 4, "stall": 0, "feed_stall": 0, "seed": 1, "max_cycles": 10000,
           "stall_cycles": 10000,
           "pattern": probe_pattern(arch).hex()}
    (run_dir / "c.txt").write_text("".join(f"{k} {v}\n" for k, v in cfg.items()))
    run = subprocess.run([str(top.binary), str(run_dir / "c.txt")], capture_output=True,
                         text=True)
    assert run.returncode == 3
    assert "dram1" in run.stderr and "outside" in run.stderr


def test_run_stops_when_nothing_moves():
    """A slave that never answers is a hang once no instruction word, AXI burst or beat
    moves for ``stall_cycles``; ``max_cycles`` caps a run; slow but moving DRAM is not a
    hang."""
    from tcu_hw.isa import DataMove, DataMoveKind
    arch, width = RANDOM_ARCHS["n2_fp16_axi32"]
    top = top_for(arch, width)
    program = [DataMove(DataMoveKind.DRAM0_TO_LOCAL, 0, 0, 0, 0, 15)]
    with pytest.raises(VerilatorError, match="nothing moved for 500 cycles"):
        top.run(program, timing=AxiTiming(stall_probability=1.0), stall_cycles=500)
    with pytest.raises(VerilatorError, match="did not finish in 40 cycles"):
        top.run(program, max_cycles=40)
    assert top.run(program, timing=AxiTiming(stall_probability=0.9),
                   stall_cycles=500).cycles > 0


def test_bad_width_is_refused():
    arch, _ = RANDOM_ARCHS["n2_fp16_axi32"]
    with pytest.raises(Exception, match="cannot carry a 32-bit vector"):
        VerilatorTop(arch, Options(axi_data_width=64))
    assert issubclass(VerilatorError, Exception)
