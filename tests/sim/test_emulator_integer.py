"""The emulator on integer architectures (docs/integer.md): exact MatMul sums in INT32/INT48,
the shift-in move, the narrowing move to local memory, SIMD at the accumulator width and
Requantize; what other architectures refuse. Expected values are plain Python integers."""

from __future__ import annotations

import numpy as np
import pytest

from sim.emulator import Emulator
from tcu_hw import numeric
from tcu_hw.arch import Architecture
from tcu_hw.isa import SIMD, DataMove, DataMoveKind as K, LoadWeights, MatMul, SimdOp

N = 4
BASE = dict(data_type="INT8", array_size=N, dram0_depth=128, dram1_depth=128, local_depth=64,
            accumulator_depth=32, simd_registers_depth=3, stride0_depth=4, stride1_depth=4,
            number_of_threads=1, thread_queue_depth=8)


def make(**changes) -> Emulator:
    return Emulator(Architecture(**{**BASE, **changes}))


def digits(value: int, dt) -> list[int]:
    """``value`` as base-2^W digits, top (signed) first, the rest as W-bit two's complement."""
    w, k = dt.width, dt.accumulator.width // dt.width
    out = [(value >> (w * i)) & ((1 << w) - 1) for i in reversed(range(k))]
    return [d - ((d >> (w - 1)) << w) for d in out]


def load_wide(emu: Emulator, values, acc: int, local: int = 40) -> list:
    """Instructions that put accumulator-width lanes ``values`` at acc[acc] (0xD then 0xE)."""
    ds = np.array([digits(int(v), emu.dt) for v in values]).T         # (k, N)
    emu.write_local(local, ds)
    return [DataMove(K.LOCAL_TO_ACC, local, 0, acc, 0, 0)] + \
        [DataMove(K.LOCAL_TO_ACC_SHIFT, local + i, 0, acc, 0, 0) for i in range(1, len(ds))]


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_matmul_sums_are_exact_in_the_accumulator_width(dtype):
    emu = make(data_type=dtype)
    dt = emu.dt
    rng = np.random.default_rng(1)
    rows = np.full((N, N), dt.min_raw)
    bias = rng.integers(dt.min_raw, dt.max_raw, N)
    x = np.vstack([np.full(N, dt.min_raw), rng.integers(dt.min_raw, dt.max_raw, (2, N))])
    emu.write_local(0, np.vstack([bias, rows]))                  # [bias, row 0, .., row n-1]
    emu.write_local(10, x)
    emu.run([LoadWeights(0, 0, N), MatMul(local_address=10, size=2),
             MatMul(local_address=10, size=2, accumulate=True)])
    want = [[2 * (int(bias[i]) + sum(int(x[v, j]) * int(rows[j, i]) for j in range(N)))
             for i in range(N)] for v in range(3)]
    assert emu.acc[:3].tolist() == want
    assert want[0][0] > dt.max_raw ** 2                          # far beyond the data type
    assert emu.stats.total_saturations == 0


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_shift_in_builds_accumulator_width_values(dtype):
    emu = make(data_type=dtype)
    at = emu.at
    values = [at.min_raw, at.max_raw, -1, 123456789 % at.max_raw]
    emu.run(load_wide(emu, values, acc=5))
    assert emu.acc[5].tolist() == values and not emu.error


def test_move_to_local_saturates_to_the_data_type_and_counts():
    emu = make()
    emu.run(load_wide(emu, [300, -129, 127, -128], acc=2) +
            [DataMove(K.ACC_TO_LOCAL, 7, 0, 2, 0, 0)])
    assert emu.local[7].tolist() == [127, -128, 127, -128]
    assert emu.stats.saturations["acc_to_local"] == 2


def test_simd_works_at_the_accumulator_width():
    emu = make()
    big = [1 << 20, -(1 << 30), 5, 7]
    emu.run(load_wide(emu, big, acc=0) +
            [SIMD(SimdOp.MOVE, 0, 0, 1, read=True, read_address=0),          # R1 = big
             SIMD(SimdOp.MULTIPLY, 1, 0, 0, read=True, write=True, read_address=0,
                  write_address=1),                                          # big * big
             SIMD(SimdOp.ADD, 1, 1, 0, write=True, accumulate=True, write_address=0)])
    assert emu.acc[1].tolist() == [(1 << 31) - 1, (1 << 31) - 1, 25, 49]
    assert emu.acc[0].tolist() == [3 << 20, -(1 << 31), 15, 21]      # big + 2 big, saturated
    assert emu.stats.saturations["simd"] == 2
    assert emu.stats.saturations["simd_accumulate"] == 1


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_requantize_a_column_sum_into_local_memory(dtype):
    """MatMul → Requantize (parameters in R1, bias in R2) → move to local: the quantized
    layer output, exactly numeric.requantize's, narrowed to the data type."""
    emu = make(data_type=dtype)
    dt, at = emu.dt, emu.at
    rng = np.random.default_rng(4)
    rows = rng.integers(dt.min_raw, dt.max_raw, (N, N))
    x = rng.integers(dt.min_raw, dt.max_raw, (3, N))
    m, s = numeric.requantize_parameters(np.array([0.5, 1, 2, 0.25]) / (2 * dt.max_raw), dt)
    params = numeric.pack_requantize(m, s, [-3, 0, 5, dt.max_raw], dt)
    bias = np.array([3 * dt.max_raw ** 2, -12345, 0, 7])
    emu.write_local(0, np.vstack([np.zeros(N, np.int64), rows]))
    emu.write_local(10, x)
    program = load_wide(emu, params, acc=20) + load_wide(emu, bias, acc=21, local=50) + [
        SIMD(SimdOp.MOVE, 0, 0, 1, read=True, read_address=20),
        SIMD(SimdOp.MOVE, 0, 0, 2, read=True, read_address=21),
        LoadWeights(0, 0, N), MatMul(local_address=10, size=2)]
    program += [SIMD(SimdOp.REQUANTIZE, 0, 1, 0, read=True, write=True, read_address=v,
                     write_address=v) for v in range(3)]
    program += [DataMove(K.ACC_TO_LOCAL, 30, 0, 0, 0, 2)]
    emu.run(program)
    sums = x @ rows
    want = np.clip(numeric.requantize(sums, params, bias, dt), dt.min_raw, dt.max_raw)
    assert emu.local[30:33].tolist() == want.tolist() and not emu.error
    inside = (want > dt.min_raw) & (want < dt.max_raw)
    assert inside.sum() >= 6 and (~inside).any()             # most in range, some clamped


@pytest.mark.parametrize("right,depth", [(0, 3), (3, 3), (2, 2)])
def test_requantize_needs_two_registers(right, depth):
    emu = make(simd_registers_depth=depth)
    emu.run([SIMD(SimdOp.REQUANTIZE, 0, right, 0, read=True, read_address=0)])
    assert emu.error and "Requantize reads its parameters" in emu.events[0].message


def test_other_types_do_not_have_the_integer_instructions():
    emu = make(data_type="FP16BP8", lut_count=1, lut_depth=8)
    emu.run([SIMD(SimdOp.REQUANTIZE, 0, 1, 0, read=True, read_address=0),
             DataMove(K.LOCAL_TO_ACC_SHIFT, 0, 0, 0, 0, 0)])
    first, second = (e.message for e in emu.events)
    assert "SIMD op 17 is not defined (Requantize needs an integer data type)" == first
    assert "kind 0xe is reserved" in second and "local_to_acc_shift" not in second
    assert emu.layout.simd_op_bits == 5 and make().layout.simd_op_bits == 5
    assert make(data_type="FP16BP8").layout.simd_op_bits == 4          # Tensil's layout


def test_multiply_clips_its_right_operand_to_the_lane_multiplier():
    """INT8: right is clipped to 17 bits signed (the multiplier Requantize uses), left is not."""
    emu = make()
    emu.run(load_wide(emu, [1 << 20, -(1 << 20), 300, -7], acc=0) +
            load_wide(emu, [3, 1 << 16, -(1 << 20), 1000], acc=1, local=50) +
            [SIMD(SimdOp.MOVE, 0, 0, 1, read=True, read_address=1),
             SIMD(SimdOp.MULTIPLY, 0, 1, 0, read=True, write=True, read_address=0,
                  write_address=2)])
    # 1 << 16 clips to 65535 (then the product saturates INT32); -(1 << 20) to -65536
    assert emu.acc[2].tolist() == [3 << 20, -(1 << 31), 300 * -(1 << 16), -7000]
    assert emu.stats.saturations["simd"] == 1


def test_rectified_move_then_saturates():
    """Kind 0x4 on an integer type: max(x, 0) of the wide accumulator lane, then saturated
    to the data type as kind 0xC is (docs/isa_extensions.md)."""
    emu = make()
    emu.acc[5, :4] = [300, -300, 100_000, 7]
    emu.run([DataMove(K.ACC_TO_LOCAL_RELU, 3, 0, 5, 0, 0)])
    assert emu.local[3, :4].tolist() == [127, 0, 127, 7]
    assert emu.stats.saturations["acc_to_local"] == 2
