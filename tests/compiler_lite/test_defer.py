"""Moving instructions later without changing what the program computes
(:mod:`compiler_lite.defer`): the footprints of each instruction, the rule for passing one,
and the emitter's use of it, the raw copy of a layer's output drained after the next layer
instead of beside the rectified copy that layer reads, with the same bits."""

from __future__ import annotations

import numpy as np
import pytest

import compiler_lite.emit as emit
from compiler_lite.compile import compile_model
from compiler_lite.defer import WEIGHTS, defer, footprint, independent
from compiler_lite.summary import estimate
from compiler_lite.golden import run_emulator
from tcu_hw.arch import beats_per_vector
from tcu_hw.isa import SIMD, DataMove, DataMoveKind as K, LoadWeights, MatMul, NoOp

from .helpers import rand, small_arch
from .test_ports import residual_model

C, H = 16, 12


DEPTHS = {"local": 1024, "acc": 256, "dram0": 1 << 16, "dram1": 1 << 16}


def fp(ins):
    return footprint(ins, DEPTHS)


def test_footprints_cover_strided_addresses_and_the_weight_chain():
    assert fp(MatMul(local_address=8, local_stride=1, accumulator_address=4,
                     accumulator_stride=2, size=3)) == \
        ([("local", 8, 14), WEIGHTS], [("acc", 4, 16)])
    assert fp(MatMul(accumulator_address=4, size=3, accumulate=True, zeroes=True)) == \
        ([WEIGHTS, ("acc", 4, 7)], [("acc", 4, 7)])
    assert fp(LoadWeights(local_address=2, size=4)) == ([("local", 2, 6)], [WEIGHTS])
    assert fp(DataMove(K.ACC_TO_LOCAL_RELU, 10, 0, 20, 0, 1)) == \
        ([("acc", 20, 21)], [("local", 10, 11)])
    assert fp(DataMove(K.LOCAL_TO_DRAM1, 10, 0, 20, 0, 1)) == \
        ([("local", 10, 11)], [("dram1", 20, 21)])
    assert fp(DataMove(K.LOCAL_TO_ACC_ACCUMULATE, 10, 0, 20, 0, 0)) == \
        ([("local", 10, 10), ("acc", 20, 20)], [("acc", 20, 20)])
    assert fp(NoOp()) == ([], [])
    assert fp(SIMD()) is None                           # not known here: never passed
    assert fp(DataMove(0x7, 0, 0, 0, 0, 0)) is None     # a reserved kind
    assert fp(DataMove(K.ACC_TO_LOCAL, 1020, 0, 0, 0, 7)) is None   # wraps past local 1023
    assert fp(DataMove(K.ACC_TO_LOCAL, 0, 0, 296, 0, 0)) == \
        ([("acc", 40, 40)], [("local", 0, 0)])                      # acc 296 is acc 40
    assert fp(DataMove(K.ACC_TO_LOCAL, 0, 3, 0, 0, 300)) is None    # local stride 8: wraps


RAW = DataMove(K.ACC_TO_LOCAL, 100, 0, 40, 0, 7)       # acc 40..47 → local 100..107


@pytest.mark.parametrize("ins, ok", [
    (MatMul(local_address=0, accumulator_address=0, size=7), True),
    (MatMul(local_address=0, accumulator_address=44, size=7), False),  # overwrites the source
    (MatMul(local_address=104, accumulator_address=0, size=1), False),  # reads the copy
    (DataMove(K.ACC_TO_LOCAL_RELU, 107, 0, 0, 0, 3), False),            # writes the copy
    (DataMove(K.ACC_TO_LOCAL_RELU, 108, 0, 40, 0, 3), True),            # reads the same source
    (LoadWeights(local_address=96, size=3), True),
    (SIMD(), False),
])
def test_an_instruction_passes_only_what_leaves_it_the_same(ins, ok):
    assert independent(fp(RAW), ins, DEPTHS) is ok


def test_a_matmul_never_passes_a_weight_load():
    """The weight chain orders them: a MatMul multiplies by the tile the last LoadWeights
    before it pushed, also with ``zeroes``."""
    for mm in (MatMul(local_address=0, accumulator_address=0, size=7),
               MatMul(accumulator_address=0, size=7, zeroes=True)):
        assert not independent(fp(mm), LoadWeights(local_address=500, size=3), DEPTHS)
        assert not independent(fp(LoadWeights(local_address=500, size=3)), mm, DEPTHS)


def test_defer_stops_at_the_first_conflict_or_the_limit():
    free = MatMul(local_address=0, accumulator_address=0, size=7)
    clash = MatMul(local_address=0, accumulator_address=40, size=0)
    out = [RAW, free, free, clash, free]
    assert defer(out, 0, 1, 5, DEPTHS) == 2
    assert out == [free, free, RAW, clash, free]
    out = [RAW, free, free, free]
    assert defer(out, 0, 1, 2, DEPTHS) == 1 and out == [free, RAW, free, free]
    out = [SIMD(), free]
    assert defer(out, 0, 1, 2, DEPTHS) == 0 and out == [SIMD(), free]


def layer_bounds(c):
    """Where each layer's instructions start, checking its figures follow moved ones."""
    bounds = np.cumsum([0] + [s.instructions for s in c.layers])
    assert bounds[-1] == len(c.program)
    for s, a, b in zip(c.layers, bounds, bounds[1:]):
        assert sum(s.by_kind.values()) == b - a
        assert s.cycles == max(estimate(c.program[a:b], c.arch, beats_per_vector(
            c.arch, c.axi_width)))
    return bounds


@pytest.mark.parametrize("arch", ["zcu104", "pynqz1"])
def test_the_raw_copy_drains_after_the_next_layer_with_the_same_bits(arch, monkeypatch):
    """The middle layer stores ReLU(s) for the third and s for the last Add: the copy of s
    goes after the third layer's MatMuls, which read ReLU(s)."""
    c = compile_model(residual_model(), arch)
    bounds = layer_bounds(c)
    monkeypatch.setattr(emit, "defer", lambda out, lo, hi, limit, depths: 0)
    plain = compile_model(residual_model(), arch)
    at = layer_bounds(plain)
    raw = [i for i in plain.program[at[1]:at[2]]
           if isinstance(i, DataMove) and i.kind == K.ACC_TO_LOCAL][-1]
    where = c.program.index(raw)
    assert bounds[2] <= where < bounds[3]               # in the third layer, ...
    assert any(isinstance(i, MatMul) for i in c.program[bounds[2]:where])  # ... after MatMuls
    assert sorted(map(repr, plain.program)) == sorted(map(repr, c.program))
    feeds = {"x": rand((1, C, H, H), 11)}
    np.testing.assert_array_equal(run_emulator(c, feeds).raw["y"],
                                  run_emulator(plain, feeds).raw["y"])


def test_deferred_copies_on_the_core(monkeypatch):
    from .test_hardware import check
    passed = []

    def spy(out, lo, hi, limit, depths):
        passed.append(defer(out, lo, hi, limit, depths))
        return passed[-1]

    monkeypatch.setattr(emit, "defer", spy)
    c = compile_model(residual_model(), small_arch(local_depth=4096))
    assert passed and passed[0] > 0
    check(c, {"x": rand((1, C, H, H), 12)})
