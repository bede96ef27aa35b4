"""The PyRTL core against the golden emulator, bit for bit, on every memory.

Conformance XOR programs, directed programs for every opcode, flag, DataMove kind, SIMD op
and stride, random programs from a hypothesis strategy on four architectures (data types,
odd array sizes, non-power-of-two depths, lookup tables), DRAM timing changes (cycles change,
results do not), and Tensil's speech-commands program.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from sim.compare import Images, compare
from sim.conformance import speech_case, xor_case
from sim.pyrtl_backend import DramTiming, SimulationHang, cached_core
from tcu_hw.arch import Architecture, Options
from tcu_hw.isa import (SIMD, Configure, ConfigRegister, DataMove, DataMoveKind as K, Illegal,
                        LoadLUT, LoadWeights, MatMul, NoOp, SimdOp, flush_probe)

from ..conftest import requires_gcc, shared_path
from .programs import make_images, programs, soak_case, soak_check, window_programs

pytestmark = requires_gcc

ARCHS = {
    "n2_fp16": Architecture("FP16BP8", 2, 128, 64, 64, 32, 2, 4, 4),
    "n4_fp8_odd_depths_lut": Architecture("FP8BP4", 4, 100, 128, 60, 24, 4, 8, 2,
                                          lut_count=2, lut_depth=6),
    "n3_fp32": Architecture("FP32BP16", 3, 64, 64, 32, 16, 1, 2, 4),
    "n2_fp18": Architecture("FP18BP10", 2, 64, 64, 40, 16, 3, 4, 4),
    "n8_fp16": Architecture("FP16BP8", 8, 64, 64, 64, 32, 1, 2, 2),
    "n4_int8_lut": Architecture("INT8", 4, 64, 64, 64, 32, 3, 4, 4, lut_count=1,
                                lut_depth=8),
    "n2_int16": Architecture("INT16", 2, 64, 64, 48, 16, 2, 2, 4),
}
XOR_NAMES = ["xor_2x2_memory256", "xor_2x2_memory256_batch4", "xor_2x2_memory256_batch16",
             "xor_4x4_memory256", "xor_2x2_memory64K", "xor4_4x4_memory256",
             "xor4_2x2_memory128_stride2", "xor4_2x2_memory128_stride2_batch4",
             "xor4_2x2_memory128_stride2_batch16"]
TENSIL_SPEECH_CYCLES = 1_678_969


def check(arch, program, images, timing=None):
    diffs, result = compare(program, images, cached_core(arch), timing)
    assert not diffs, "\n".join(diffs)
    return result


@pytest.mark.parametrize("name", XOR_NAMES)
def test_xor_program(name):
    case = xor_case(name, shared_path("conformance"))
    for run in case.runs:
        check(case.arch, case.program, run.images)
        core = cached_core(case.arch)
        assert core.read_dram0(run.output_base, len(run.expected)).tolist() == run.expected


# ------------------------------------------------------------------------ directed programs

A = ARCHS["n4_fp8_odd_depths_lut"]
TILE = [LoadWeights(0, 0, 4)]


def directed_programs():
    """(name, architecture, program) for every opcode, flag, kind, SIMD op and stride."""
    a2 = ARCHS["n2_fp16"]
    yield "dram_moves_all_kinds_and_strides", a2, [
        DataMove(K.DRAM0_TO_LOCAL, 0, 0, 3, 0, 9), DataMove(K.DRAM1_TO_LOCAL, 20, 1, 5, 2, 4),
        DataMove(K.LOCAL_TO_DRAM0, 0, 2, 100, 0, 3), DataMove(K.LOCAL_TO_DRAM1, 20, 0, 40, 1, 5),
        DataMove(K.DRAM0_TO_LOCAL, 40, 0, 100, 3, 3), DataMove(K.DRAM0_TO_LOCAL, 50, 0, 120, 0, 12)]
    yield "acc_moves_and_accumulate", a2, [
        DataMove(K.LOCAL_TO_ACC, 0, 0, 0, 0, 7), DataMove(K.LOCAL_TO_ACC_ACCUMULATE, 8, 1, 0, 0, 7),
        DataMove(K.LOCAL_TO_ACC_ACCUMULATE, 8, 0, 2, 0, 0),
        DataMove(K.LOCAL_TO_ACC_ACCUMULATE, 9, 0, 2, 0, 0), DataMove(K.ACC_TO_LOCAL, 30, 0, 0, 0, 7),
        DataMove(K.LOCAL_TO_ACC_ACCUMULATE, 0, 0, 16, 3, 5)]      # wraps: repeated addresses
    yield "weights_and_matmul_forms", a2, [
        LoadWeights(0, 0, 2), MatMul(10, 0, 0, 0, 5), MatMul(10, 1, 8, 1, 3, accumulate=True),
        LoadWeights(3, 0, 1), LoadWeights(0, 0, 0, zeroes=True), MatMul(16, 0, 4, 0, 2),
        MatMul(0, 0, 12, 0, 3, zeroes=True), LoadWeights(20, 2, 2), MatMul(30, 0, 20, 2, 2),
        LoadWeights(0, 0, 5), MatMul(40, 0, 24, 0, 7, accumulate=True)]
    yield "tile_switch_every_vector", a2, [
        inst for k in range(8) for inst in (LoadWeights(3 * k, 0, 2), MatMul(40 + k, 0, k, 0, 0))]
    for op in list(SimdOp)[:16]:
        yield f"simd_{op.label}", A, [
            SIMD(SimdOp.MOVE, 0, 0, 1, read_address=3, read=True),
            SIMD(SimdOp.MOVE, 0, 0, 2, read_address=5, read=True),
            DataMove(K.LOCAL_TO_ACC, 0, 0, 0, 0, 15),
            SIMD(op, 0, 1, 3, read_address=4, write_address=6, read=True, write=True),
            SIMD(op, 2, 0, 0, read_address=7, write_address=7, read=True, write=True,
                 accumulate=True),
            SIMD(op, 1, 2, 4, write_address=8, write=True),
            SIMD(SimdOp.MOVE, 3, 0, 0, write_address=9, write=True),
            SIMD(SimdOp.MOVE, 4, 0, 0, write_address=10, write=True)]
    yield "lookup_tables", A, [
        LoadLUT(0, 0, 0), LoadLUT(2, 0, 1), LoadLUT(4, 0, 2),
        DataMove(K.LOCAL_TO_ACC, 10, 0, 0, 0, 3),
        SIMD(SimdOp.LOOKUP, 0, 0, 1, read_address=1, write_address=2, read=True, write=True),
        SIMD(SimdOp.MULTIPLY, 1, 3, 1), SIMD(SimdOp.ADD, 1, 2, 0, write_address=3, write=True),
        SIMD(SimdOp.LOOKUP, 0, 0, 2, read_address=3, read=True),
        SIMD(SimdOp.MOVE, 4, 0, 0, write_address=4, write=True)]
    yield "error_conditions", A, [
        DataMove(5, 0, 0, 0, 0, 0), Illegal(0x9, 0, 0), SIMD(SimdOp.NOOP, read=True),
        DataMove(K.DRAM0_TO_LOCAL, 58, 0, 0, 0, 3),                 # local 60, 61 do not exist
        MatMul(0, 0, 22, 0, 3), SIMD(SimdOp.MOVE, 0, 0, 1, read_address=30, read=True),
        DataMove(K.DRAM0_TO_LOCAL, 0, 0, 98, 0, 4),                 # DRAM0 has 100 vectors
        SIMD(SimdOp.LOOKUP, 0, 0, 3), LoadLUT(0, 0, 3), SIMD(20, 0, 0, 0),
        DataMove(K.DRAM0_TO_LOCAL, 0, 0, 0, 0, 3)]
    yield "configure_and_pc", A, [
        Configure(ConfigRegister.PROGRAM_COUNTER, 1000), NoOp(), Configure(7, 5),
        Configure(ConfigRegister.DRAM0_OFFSET, 0x123), DataMove(K.DRAM0_TO_LOCAL, 0, 0, 0, 0, 1),
        Configure(ConfigRegister.TRACEPOINT, 1004), Illegal(0xC, 0, 0), NoOp()]
    yield "hazards_between_units", a2, [
        DataMove(K.DRAM0_TO_LOCAL, 0, 0, 0, 0, 20), MatMul(5, 0, 0, 0, 3),   # RAW on local
        DataMove(K.LOCAL_TO_DRAM0, 2, 0, 60, 0, 5),
        DataMove(K.ACC_TO_LOCAL, 4, 0, 0, 0, 3),                         # WAR vs the store
        DataMove(K.DRAM1_TO_LOCAL, 6, 1, 0, 0, 8), LoadWeights(6, 1, 2),
        DataMove(K.LOCAL_TO_DRAM1, 8, 0, 30, 0, 2), DataMove(K.DRAM1_TO_LOCAL, 40, 0, 30, 0, 2)]
    yield "flush_probe", a2, flush_probe(a2)


@pytest.mark.parametrize("name, arch, program", list(directed_programs()),
                         ids=[d[0] for d in directed_programs()])
def test_directed_program(name, arch, program):
    check(arch, program, make_images(arch, seed=len(name)))


# --------------------------------------------------------------------------- random programs

def _check_examples(arch, strategy, examples: int, options=None) -> None:
    """``examples`` (program, images, timing) cases drawn from ``strategy`` (derandomized),
    each on the core against the emulator on every memory."""
    core = cached_core(arch, options)                   # compile outside hypothesis's timing

    @settings(max_examples=examples, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(strategy)
    def run(case):
        program, images, timing = case
        diffs, _ = compare(program, images, core, timing)
        assert not diffs, "\n".join(diffs)

    run()


@pytest.mark.parametrize("arch_name", list(ARCHS))
def test_random_programs(arch_name):
    arch = ARCHS[arch_name]
    _check_examples(arch, programs(arch), 75)


@pytest.mark.parametrize("arch_name", ["n2_fp16", "n4_fp8_odd_depths_lut", "n8_fp16"])
def test_random_chained_programs(arch_name):
    """Loads on both ports read while they run, stores of what acc→local moves still write,
    runs that wrap around local memory: every read chained behind a write sees it."""
    arch = ARCHS[arch_name]
    _check_examples(arch, window_programs(arch), 60)


@pytest.mark.parametrize("options", [Options(weight_loader=False),
                                     Options(chained_hazards=False)],
                         ids=["no_weight_loader", "loader_unchained"])
def test_random_programs_other_options(options):
    """LoadWeights through the sequencer (``weight_loader=False``), and the loader with
    every hazard waiting at dispatch (``chained_hazards=False``): bit-exact too."""
    arch = ARCHS["n4_fp8_odd_depths_lut"]
    _check_examples(arch, window_programs(arch), 40, options)


@pytest.mark.slow
@pytest.mark.parametrize("arch_name", list(ARCHS))
def test_thousands_of_random_programs(arch_name):
    """A soak run: 2,000 random programs per architecture (every kind, error conditions,
    hazard-heavy windows) under random DRAM timing up to 90% back-pressure, each against
    the emulator on every memory; none may hang (progress rule) or differ. A failure
    prints the program to reproduce."""
    arch = ARCHS[arch_name]
    core = cached_core(arch)
    rng = np.random.default_rng(list(ARCHS).index(arch_name))
    for k in range(2_000):
        program, images, timing = soak_case(arch, rng)
        soak_check(k, program, timing, core, images, SimulationHang)


def _run(arch, program, images, options=None, timing=DramTiming(latency=20)):
    diffs, result = compare(program, images, cached_core(arch, options), timing)
    assert not diffs, "\n".join(diffs)
    return result


def _cycles(arch, program, images, options=None, timing=DramTiming(latency=20)):
    return _run(arch, program, images, options, timing).cycles


def test_reads_stream_behind_the_load_that_fills_them():
    """A MatMul over a 200-vector load starts with the load's first vectors (chained), not
    after its last; a store follows the acc→local move that fills it. Without chaining the
    same program is bit-exact and waits for each whole move."""
    arch = THROUGHPUT_ARCH
    n = arch.array_size
    program = [LoadWeights(0, 0, n), DataMove(K.DRAM0_TO_LOCAL, 100, 0, 0, 0, 199),
               MatMul(100, 0, 0, 0, 199), DataMove(K.ACC_TO_LOCAL, 400, 0, 0, 0, 199),
               DataMove(K.LOCAL_TO_DRAM1, 400, 0, 0, 0, 199)]
    rng = np.random.default_rng(2)
    images = Images(local={0: rng.integers(-300, 300, (1024, n))},
                    dram0={0: rng.integers(-300, 300, (2048, n))})
    chained = _run(arch, program, images)
    waiting = _run(arch, program, images, Options(chained_hazards=False))
    assert chained.cycles < 3 * 200 + 100 < waiting.cycles
    # the counters say why: chained reads wait inside the compute unit, not at dispatch
    assert chained.counters["chain_stall"] > 0 and chained.counters["hazard_stall"] < 20
    assert waiting.counters["chain_stall"] == 0 and waiting.counters["hazard_stall"] > 150


def test_both_dram_ports_load_at_once():
    """Strided weights from DRAM1 and inputs from DRAM0 (Tensil's dense layers) arrive
    together: with each DRAM at half the rate of local port B, the two loads take about as
    long as the longer one."""
    arch = THROUGHPUT_ARCH
    n = arch.array_size
    weights = DataMove(K.DRAM1_TO_LOCAL, 0, 0, 0, 1, 119)            # one-vector transfers
    inputs = DataMove(K.DRAM0_TO_LOCAL, 400, 0, 0, 0, 99)
    rng = np.random.default_rng(3)
    images = Images(dram0={0: rng.integers(-300, 300, (2048, n))},
                    dram1={0: rng.integers(-300, 300, (256, n))})
    slow = DramTiming(latency=20, cycles_per_vector=2)          # each DRAM: half of port B
    alone = _cycles(arch, [weights], images, timing=slow)
    both = _cycles(arch, [weights, inputs], images, timing=slow)
    assert both <= alone + 10


def test_stores_to_both_ports_run_at_once_and_dram0_waits_for_dram1():
    """A layer's output stored to DRAM0 and its copy to DRAM1 (compiler_lite.ports) go out
    together: with each DRAM at half the rate of port B, the pair takes about as long as one
    (241 cycles against 207 alone; 412 when a DRAM1 store waited for DRAM0's too).
    A DRAM0 store after a DRAM1 store waits until the DRAM1 store has landed (the host's
    flush probe is a DRAM0 store), so that order takes the two one after the other."""
    arch = THROUGHPUT_ARCH
    n = arch.array_size
    out = DataMove(K.LOCAL_TO_DRAM0, 0, 0, 0, 0, 99)
    copy = DataMove(K.LOCAL_TO_DRAM1, 200, 0, 0, 0, 99)
    rng = np.random.default_rng(5)
    images = Images(local={0: rng.integers(-300, 300, (1024, n))})
    slow = DramTiming(latency=20, cycles_per_vector=2)
    alone = _cycles(arch, [out], images, timing=slow)
    assert _cycles(arch, [out, copy], images, timing=slow) < alone + alone // 4
    assert _cycles(arch, [copy, out], images, timing=slow) >= 2 * 2 * 100


def test_dram_write_waits_for_compute_reads():
    """A fast DRAM load into the range a long MatMul is still reading must wait (WAR), and a
    compute read of a range a DRAM load is still writing must wait (RAW)."""
    arch = ARCHS["n2_fp16"]
    program = [LoadWeights(0, 0, 2), MatMul(10, 0, 0, 0, 30),
               DataMove(K.DRAM0_TO_LOCAL, 25, 0, 0, 0, 4),          # WAR: MatMul reads 10..40
               DataMove(K.DRAM0_TO_LOCAL, 50, 0, 8, 0, 9), MatMul(50, 0, 0, 0, 9, True),  # RAW
               DataMove(K.ACC_TO_LOCAL, 60, 0, 0, 0, 3),
               DataMove(K.LOCAL_TO_DRAM1, 60, 0, 0, 0, 3)]          # RAW on acc→local
    for latency in (0, 1, 3):
        check(arch, program, make_images(arch, seed=3), DramTiming(latency=latency))


def test_weight_bank_reuse_waits_for_vectors_in_flight():
    """n = 8: a push into a bank that vectors still flowing through the array use must wait."""
    arch = ARCHS["n8_fp16"]
    program = []
    for k in range(6):
        program += [MatMul(20, 0, 0, 0, 4, accumulate=True), LoadWeights(k, 0, 0),
                    MatMul(30, 0, 8, 0, 0, accumulate=True), LoadWeights(k + 1, 0, 0)]
    check(arch, program, make_images(arch, seed=4))


def test_a_long_move_under_heavy_stalls_is_progress_not_a_hang():
    """One 8,192-vector DRAM1→local move with 90% DRAM stalls: far longer than the old
    budget of 200 cycles per instruction + 100,000, yet it keeps moving, so it finishes,
    bit-exact; a DRAM that never answers is a hang once nothing moves for ``stall_cycles``;
    ``max_cycles`` still caps a run."""
    arch = Architecture("FP16BP8", 2, 64, 8192, 8192, 32, 1, 2, 2)
    rng = np.random.default_rng(8)
    images = Images(dram1={0: rng.integers(-300, 300, (8192, 2))})
    program = [DataMove(K.DRAM1_TO_LOCAL, 0, 0, 0, 0, 8191)]
    slow = DramTiming(latency=20, cycles_per_vector=2, stall_probability=0.9, seed=3)
    assert check(arch, program, images, slow).cycles > 200 * 1 + 100_000
    core = cached_core(arch)
    with pytest.raises(SimulationHang, match=r"nothing moved for [\d,]+ cycles \(the limit "
                                             r"is 2,000\)"):
        core.run(program, dram1=images.dram1, stall_cycles=2_000,
                 timing=DramTiming(latency=20, stall_probability=1.0))
    with pytest.raises(SimulationHang, match="did not finish in 5,000 cycles"):
        core.run(program, dram1=images.dram1, max_cycles=5_000, timing=slow)


def test_dram_timing_changes_cycles_never_results():
    arch = ARCHS["n2_fp16"]
    rng_program = [inst for _, _, prog in list(directed_programs())[:4] for inst in prog]
    images = make_images(arch, seed=11)
    cycles = [check(arch, rng_program, images, timing).cycles
              for timing in (DramTiming(latency=1), DramTiming(latency=40),
                             DramTiming(latency=7, cycles_per_vector=3),
                             DramTiming(latency=20, stall_probability=0.4, seed=5),
                             DramTiming(latency=3, stall_probability=0.8, seed=9))]
    # every slower DRAM costs cycles (the results are the same: check compares them)
    assert cycles[0] < min(cycles[1:]) and len(set(cycles)) >= 4, cycles


# ------------------------------------------------------------------------------ speech model

@pytest.fixture(scope="module")
def speech():
    return speech_case(range(6), shared_path("conformance"))


@pytest.mark.parametrize("index", range(6))
def test_speech_program_on_the_core(speech, index):
    run = speech.runs[index]
    result = check(speech.arch, speech.program, run.images, DramTiming(latency=20))
    assert cached_core(speech.arch).read_dram0(0, 2).tolist() == run.expected
    assert result.cycles <= 0.6 * TENSIL_SPEECH_CYCLES


# ------------------------------------------------------------------------------- throughput

THROUGHPUT_ARCH = Architecture("FP16BP8", 4, 4096, 256, 1024, 256, 1, 4, 4)
FILL = (4 + 1) + 6    # array latency n + 1; skid, decode, queue, issue, read, accumulator stages


def _throughput_cases(n):
    tile = [LoadWeights(0, 0, n)]
    yield "matmul_runs", tile + [MatMul(100 + 16 * (k % 8), 0, 16 * (k % 8), 0, 15, True)
                                 for k in range(32)], (n + 1) + 32 * 16
    yield "single_vector_matmuls", tile + [MatMul(100 + k, 0, k, 0, 0) for k in range(200)], \
        (n + 1) + 200
    # n + 1 pushes a tile, and the next tile's first read comes as the switching vector
    # enters the array (a cycle after its issue: the loader does not look at the issue)
    yield "tile_switches", [i for k in range(60) for i in (LoadWeights((k % 4) * (n + 1), 0, n),
                                                           MatMul(100 + k, 0, k, 0, 0))], \
        60 * (n + 2)
    yield "simd_runs", [SIMD(SimdOp.ZERO, 0, 0, 1)] + [
        SIMD(SimdOp.MAX, 0, 1, 0, read_address=k, write_address=128 + k, read=True, write=True)
        for k in range(120)], 121 + 1                    # + 1: SIMD results enter from t2
    yield "simd_then_matmul", tile + [SIMD(SimdOp.MAX, 0, 1, 0, read_address=k,
                                           write_address=128 + k, read=True, write=True)
                                      for k in range(10)] + [MatMul(100, 0, 0, 0, 15)], \
        1 + 10 + 1 + 16          # LoadWeights dispatched (pushes hidden), one bubble at the seam
    yield "simd_accumulate", [SIMD(SimdOp.MULTIPLY, 0, 1, 0, read_address=k, write_address=200,
                                   read=True, write=True, accumulate=True)
                              for k in range(100)], 100 + 1


@pytest.mark.parametrize("name, program, ideal", list(_throughput_cases(4)),
                         ids=[c[0] for c in _throughput_cases(4)])
def test_one_vector_per_cycle_without_bubbles(name, program, ideal):
    arch = THROUGHPUT_ARCH
    rng = np.random.default_rng(1)
    images = Images(local={0: rng.integers(-300, 300, (1024, 4))},
                    dram0={0: rng.integers(-300, 300, (2048, 4))})
    result = check(arch, program, images, DramTiming(latency=20))
    assert result.cycles == ideal + FILL


@pytest.mark.parametrize("latency", [8, 20])
def test_small_moves_keep_requests_in_flight(latency):
    """A column read two vectors at a time (48 moves whose local ranges follow each other,
    DRAM addresses four apart) streams at one vector a cycle: the moves wait in the DRAM
    channel's run-ahead ring with their requests out, so the latency is paid once, not per
    move (two moves in flight would take about 11 cycles a move at latency 20)."""
    arch = THROUGHPUT_ARCH
    moves = [DataMove(K.DRAM0_TO_LOCAL, 2 * k, 0, 4 * k, 0, 1) for k in range(48)]
    rng = np.random.default_rng(4)
    images = Images(dram0={0: rng.integers(-300, 300, (256, arch.array_size))})
    result = check(arch, moves, images, DramTiming(latency=latency))
    assert result.cycles == 2 * 48 + latency + 4     # + skid, dispatch, request, last write


def test_weight_pushes_hide_behind_matmuls():
    """The weight loader pushes the next tile while this tile's MatMuls stream: ten tiles of
    64 MatMul vectors cost the first tile's pushes only; through the sequencer (without the
    loader) every tile's n + 1 pushes add up. Both bit-exact."""
    arch = THROUGHPUT_ARCH
    n = arch.array_size
    program = []
    for k in range(10):
        program += [LoadWeights((k % 4) * (n + 1), 0, n)] + [
            MatMul(100 + 16 * j, 0, 16 * j, 0, 15, True) for j in range(4)]
    rng = np.random.default_rng(5)
    images = Images(local={0: rng.integers(-300, 300, (1024, n))})
    beside = _run(arch, program, images)
    assert beside.cycles == (n + 1) + 640 + FILL
    inside = _run(arch, program, images, Options(weight_loader=False))
    assert inside.cycles == 10 * (n + 1) + 640 + FILL
    # the counters say so: every vector pushed, and only the first tile's pushes waited for
    for r in (beside, inside):
        assert r.counters["weight_pushes"] == 10 * (n + 1)
    assert 0 < beside.counters["weight_wait"] <= n + 2
    assert inside.counters["weight_wait"] == 0


@pytest.mark.parametrize("vectors", [1, 2, 4])
def test_compiler_estimate_follows_the_weight_loader(vectors):
    """The compiler's cycle estimate (:func:`compiler_lite.summary.estimate`) models pushes
    beside the slot, started once the LoadWeights reaches the loader: within 5% of the
    core for tiles of short MatMuls (pushes partly exposed) and long ones (hidden)."""
    from compiler_lite.summary import estimate
    arch = THROUGHPUT_ARCH
    n = arch.array_size
    program = []
    for k in range(12):
        program += [LoadWeights((k % 4) * (n + 1), 0, n)] + [
            MatMul(100 + vectors * j, 0, vectors * j, 0, vectors - 1, True) for j in range(8)]
    rng = np.random.default_rng(6)
    images = Images(local={0: rng.integers(-300, 300, (1024, n))})
    measured = _cycles(arch, program, images) - FILL
    assert abs(estimate(program, arch)[0] - measured) <= 0.05 * measured


@pytest.mark.parametrize("arch_name", ["n4_fp8_odd_depths_lut", "n8_fp16"])
def test_weight_loader_keeps_program_order(arch_name):
    """LoadWeights run beside the sequencer yet see what it wrote before them and not what
    it writes after them: a tile read from words an acc→local move fills, then overwritten
    by the next acc→local move while the first tile may still be loading; a tile loaded
    while DRAM still writes it; tiles whose MatMuls wait for their pushes; a tile that waits
    for a bank switch while the acc→local move behind the switching MatMul overwrites its
    words. (Without the dispatcher's holds in either direction this test fails.)"""
    arch = ARCHS[arch_name]
    n = arch.array_size
    program = [                                          # local depth ≥ 60, ≥ 24 accumulators
        DataMove(K.LOCAL_TO_ACC, 40, 0, 0, 0, n), DataMove(K.ACC_TO_LOCAL, 10, 0, 0, 0, n),
        LoadWeights(10, 0, n), MatMul(30, 0, 8, 0, 3),                   # RAW through A2L
        DataMove(K.LOCAL_TO_ACC, 50, 0, 0, 0, n), DataMove(K.ACC_TO_LOCAL, 10, 0, 0, 0, n),
        LoadWeights(10, 0, n), MatMul(30, 0, 12, 0, 3, True),             # WAR, then RAW
        DataMove(K.DRAM1_TO_LOCAL, 20, 0, 0, 1, n), LoadWeights(20, 0, 2),
        LoadWeights(22, 0, 1), MatMul(31, 0, 16, 0, 0),                   # chained on DRAM1
        LoadWeights(0, 0, 1, zeroes=True), MatMul(32, 0, 20, 0, 1),
        DataMove(K.ACC_TO_LOCAL, 44, 0, 8, 0, 15), DataMove(K.LOCAL_TO_DRAM0, 44, 0, 0, 0, 15),
        # a tile that may only load once the one-vector MatMul before it has switched banks,
        # and an acc→local move right behind that MatMul overwriting the tile's words (WAR)
        LoadWeights(0, 0, n), MatMul(33, 0, 4, 0, 0), LoadWeights(10, 0, n),
        DataMove(K.ACC_TO_LOCAL, 10, 0, 16, 0, n), MatMul(34, 0, 21, 0, 1),
        DataMove(K.ACC_TO_LOCAL, 44, 0, 0, 0, 15),
        LoadWeights(0, 0, n), MatMul(30, 0, 8, 0, 0), LoadWeights(10, 0, n),
        DataMove(K.ACC_TO_LOCAL, 10, 0, 0, 0, n), MatMul(31, 0, 12, 0, 0),
        DataMove(K.ACC_TO_LOCAL, 44, 0, 8, 0, 15)]
    for timing in (DramTiming(latency=0), DramTiming(latency=20),
                   DramTiming(latency=3, stall_probability=0.6, seed=2)):
        for options in (None, Options(weight_loader=False)):
            _run(arch, program, make_images(arch, seed=7), options, timing)


@pytest.mark.parametrize("arch_name", ["n4_fp8_odd_depths_lut", "n8_fp16", "n4_int8_lut"])
def test_drain_keeps_program_order(arch_name):
    """Acc→local moves run in the drain beside the sequencer yet keep program order: a move
    right behind the MatMul that fills its accumulators (RAW), and the next MatMul writing
    them again before the move has read them all (WAR); a MatMul that reads the words a
    move writes (chained) and overwrites the accumulators it has still to read; a SIMD in
    place behind a move and sharing its read port; a rectified move (kind 0x4) and the
    store behind it; a move that overwrites words a MatMul in flight reads and a tile a
    LoadWeights will read; a DRAM load into words a move wrote."""
    arch = ARCHS[arch_name]
    n = arch.array_size
    program = [                                          # local depth ≥ 60, ≥ 24 accumulators
        LoadWeights(0, 0, n), MatMul(20, 0, 0, 0, 7), MatMul(21, 0, 0, 0, 0, True),
        DataMove(K.ACC_TO_LOCAL, 32, 0, 0, 0, 7), MatMul(24, 0, 0, 0, 7),
        MatMul(20, 0, 0, 0, 7), DataMove(K.ACC_TO_LOCAL, 40, 0, 0, 0, 7),
        MatMul(40, 0, 0, 0, 3, True),
        SIMD(SimdOp.MAX, 0, 1, 0, read_address=5, write_address=5, read=True, write=True),
        DataMove(K.ACC_TO_LOCAL_RELU, 48, 0, 0, 0, 7), DataMove(K.LOCAL_TO_DRAM0, 48, 0, 0, 0, 7),
        MatMul(48, 0, 8, 0, 7), DataMove(K.ACC_TO_LOCAL, 50, 0, 8, 0, 3),
        DataMove(K.DRAM0_TO_LOCAL, 40, 0, 8, 0, 7),
        DataMove(K.ACC_TO_LOCAL, 0, 0, 16, 0, n), LoadWeights(0, 0, n),
        MatMul(20, 0, 16, 0, 3), DataMove(K.ACC_TO_LOCAL_RELU, 56, 0, 16, 0, 3),
        DataMove(K.LOCAL_TO_DRAM1, 56, 0, 4, 0, 3)]
    for timing in (DramTiming(latency=0), DramTiming(latency=20),
                   DramTiming(latency=3, stall_probability=0.6, seed=2)):
        for options in (None, Options(weight_loader=False)):
            _run(arch, program, make_images(arch, seed=8), options, timing)


def test_drain_overlaps_the_next_matmuls():
    """A block's acc→local move runs beside the next block's MatMuls: two blocks of 128
    vectors cost their MatMuls and the last move, not both moves."""
    arch = THROUGHPUT_ARCH
    n = arch.array_size
    images = Images(local={0: np.ones((1024, n), np.int64)})
    matmuls = [LoadWeights(0, 0, n), MatMul(100, 0, 0, 0, 127), MatMul(100, 0, 128, 0, 127)]
    drained = [LoadWeights(0, 0, n), MatMul(100, 0, 0, 0, 127),
               DataMove(K.ACC_TO_LOCAL, 400, 0, 0, 0, 127), MatMul(100, 0, 128, 0, 127),
               DataMove(K.ACC_TO_LOCAL_RELU, 600, 0, 128, 0, 127)]
    alone = _cycles(arch, matmuls, images)
    assert _cycles(arch, drained, images) <= alone + 128 + 16


def test_dram_load_overlaps_independent_compute():
    arch = THROUGHPUT_ARCH
    n = arch.array_size
    compute = [LoadWeights(0, 0, n)] + [MatMul(100 + 16 * (k % 8), 0, 16 * (k % 8), 0, 15, True)
                                         for k in range(32)]
    load = [DataMove(K.DRAM0_TO_LOCAL, 512, 0, 0, 0, 255)]
    images = Images(local={0: np.ones((1024, n), np.int64)},
                    dram0={0: np.full((2048, n), 3, np.int64)})
    alone = check(arch, compute, images, DramTiming(latency=20)).cycles
    both = check(arch, load + compute, images, DramTiming(latency=20)).cycles
    assert both <= alone + 2


def test_counters_at_marks():
    """``marks`` records the counters when dispatch reaches each instruction count: they
    only grow, the total cycles are those of a plain run, and a mark past the program's end
    is None."""
    arch = ARCHS["n2_fp16"]
    program = [inst for _, _, prog in list(directed_programs())[:4] for inst in prog]
    images = make_images(arch, seed=11)
    core = cached_core(arch)
    timing = DramTiming(latency=20)
    marks = [0, len(program) // 3, 2 * len(program) // 3, len(program), len(program) + 5]
    marked = core.run(program, dram0=images.dram0, dram1=images.dram1, local=images.local,
                      timing=timing, marks=marks)
    got = marked.marks
    assert got[-1] is None and all(m is not None for m in got[:-1])
    for a, b in zip(got[:-2], got[1:-1]):
        assert all(b[k] >= a[k] for k in a)
        assert b["dispatched"] > a["dispatched"] and b["cycles"] > a["cycles"]
    assert got[-2]["cycles"] <= marked.cycles
    diffs, plain = compare(program, images, core, timing)
    assert not diffs and plain.cycles == marked.cycles
    with pytest.raises(ValueError, match="increasing"):
        core.run(program, timing=timing, marks=[3, 1])


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_integer_layer_on_the_core(dtype):
    """An integer layer as the compiler will emit it: wide parameters and bias shifted into
    the accumulators, moved to registers, MatMul column sums, Requantize in place, the move
    to local memory that narrows, a store; on the core, every memory as the emulator's."""
    from tcu_hw import numeric
    from .test_emulator_integer import load_wide, make
    emu = make(data_type=dtype, array_size=4)
    arch = emu.arch
    dt = arch.dtype
    rng = np.random.default_rng(9)
    m, s = numeric.requantize_parameters(rng.uniform(0.2, 2, 4) / (4 * dt.max_raw), dt)
    params = numeric.pack_requantize(m, s, rng.integers(-5, 5, 4), dt)
    bias = rng.integers(-dt.max_raw ** 2, dt.max_raw ** 2, 4)
    emu.write_local(0, np.vstack([np.zeros(4, np.int64),
                                  rng.integers(dt.min_raw, dt.max_raw + 1, (4, 4))]))
    emu.write_local(10, rng.integers(dt.min_raw, dt.max_raw + 1, (6, 4)))
    program = load_wide(emu, params, acc=20) + load_wide(emu, bias, acc=21, local=50) + [
        SIMD(SimdOp.MOVE, 0, 0, 1, read=True, read_address=20),
        SIMD(SimdOp.MOVE, 0, 0, 2, read=True, read_address=21),
        LoadWeights(0, 0, 4), MatMul(10, 0, 0, 0, 5)]
    program += [SIMD(SimdOp.REQUANTIZE, 0, 1, 0, read=True, write=True, read_address=v,
                     write_address=v) for v in range(6)]
    program += [DataMove(K.ACC_TO_LOCAL, 30, 0, 0, 0, 5), DataMove(K.LOCAL_TO_DRAM0, 30, 0, 8, 0, 5)]
    images = Images(local={0: emu.local.copy()})
    result = check(arch, program, images)
    out = cached_core(arch).read_dram0(8, 6)
    assert len(set(out.ravel().tolist())) > 8 and result.cycles > 0
