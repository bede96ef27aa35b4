"""Directed tests of the emulator's semantics (TCU.md §4), one behaviour at a time.

Expected values are computed here from the spec with plain Python integers, not with the
emulator's own helpers.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.emulator import Emulator, EmulatorError
from tcu_hw.arch import Architecture
from tcu_hw.isa import (SIMD, Configure, ConfigRegister, DataMove, DataMoveKind as K, Illegal,
                        LoadLUT, LoadWeights, MatMul, NoOp, SimdOp)

N = 4
ONE = 256
BASE = dict(data_type="FP16BP8", array_size=N, dram0_depth=128, dram1_depth=128,
            local_depth=64, accumulator_depth=32, simd_registers_depth=4, stride0_depth=4,
            stride1_depth=4, number_of_threads=1, thread_queue_depth=8)


def make(**changes) -> Emulator:
    return Emulator(Architecture(**{**BASE, **changes}))


def vecs(count, seed=0, lo=-600, hi=600):
    return np.random.default_rng(seed).integers(lo, hi, (count, N))


def mac_ref(x: int, y: int, z: int, w: int = 16, bp: int = 8) -> int:
    m = x * y + (z << bp)
    q = m >> bp
    rem = m - (q << bp)
    if rem > 1 << (bp - 1) or (rem == 1 << (bp - 1) and q & 1):
        q += 1
    return max(-(1 << (w - 1)), min((1 << (w - 1)) - 1, q))


def sat(v: int) -> int:
    return max(-32768, min(32767, v))


# ------------------------------------------------------------------------------ DataMove

def test_dram_to_local_with_strides():
    emu = make()
    data = vecs(16)
    emu.write_dram0(0, data)
    emu.run([DataMove(K.DRAM0_TO_LOCAL, 5, 1, 2, 1, 3)])       # local 5,7,9,11 <- dram0 2,4,6,8
    assert np.array_equal(emu.local[[5, 7, 9, 11]], data[[2, 4, 6, 8]])
    assert not emu.local[[6, 8, 10]].any()
    assert emu.stats.moves["dram0->local"] == 4
    assert emu.stats.vectors_by_kind["DataMove.dram0_to_local"] == 4


def test_every_move_kind():
    emu = make()
    a, b, c = vecs(3, 1), vecs(3, 2), vecs(3, 3)
    emu.write_dram1(10, a)
    emu.run([DataMove(K.DRAM1_TO_LOCAL, 0, 0, 10, 0, 2),        # local 0..2 <- dram1 10..12
             DataMove(K.LOCAL_TO_DRAM0, 0, 0, 40, 0, 2),        # dram0 40..42 <- local 0..2
             DataMove(K.LOCAL_TO_DRAM1, 1, 0, 50, 1, 1),        # dram1 50, 52 <- local 1, 2
             DataMove(K.LOCAL_TO_ACC, 0, 0, 20, 0, 2)])         # acc 20..22 <- local 0..2
    assert np.array_equal(emu.read_dram0(40, 3), a)
    assert np.array_equal(emu.read_dram1(50, 3), [a[1], [0] * N, a[2]])
    assert np.array_equal(emu.acc[20:23], a)
    emu.write_local(10, b)
    emu.run([DataMove(K.LOCAL_TO_ACC_ACCUMULATE, 10, 0, 20, 0, 2),
             DataMove(K.ACC_TO_LOCAL, 30, 0, 20, 0, 2)])
    assert np.array_equal(emu.local[30:33], a + b)
    emu.write_local(10, c)
    assert not emu.error and emu.stats.instructions == 6


def test_accumulate_saturates_and_counts():
    emu = make()
    emu.write_local(0, [[32000, -32000, 100, -100]])
    emu.acc[3] = [1000, -1000, 5, 5]
    emu.run([DataMove(K.LOCAL_TO_ACC_ACCUMULATE, 0, 0, 3, 0, 0)])
    assert emu.acc[3].tolist() == [32767, -32768, 105, -95]
    assert emu.stats.saturations["accumulate"] == 2


def test_rectified_move_zeroes_negative_lanes():
    """Kind 0x4 (docs/isa_extensions.md): acc → local with max(x, 0) lane-wise."""
    emu = make()
    emu.acc[2:4] = [[5, -1, 0, -32768], [-7, 32767, 3, -2]]
    emu.run([DataMove(K.ACC_TO_LOCAL_RELU, 10, 0, 2, 0, 1)])
    assert emu.local[10:12].tolist() == [[5, 0, 0, 0], [0, 32767, 3, 0]]
    assert emu.acc[2].tolist() == [5, -1, 0, -32768]           # the accumulators keep theirs
    assert not emu.error and emu.stats.count_by_kind["DataMove.acc_to_local_relu"] == 1


@pytest.mark.parametrize("kind", [5, 6, 7, 8, 9, 10, 11, 14])
def test_reserved_kinds_do_nothing_and_set_the_error(kind):
    emu = make()
    emu.write_dram0(0, vecs(2))
    emu.write_local(0, vecs(2, 5))
    before = (emu.local.copy(), emu.acc.copy(), emu.read_dram0(0, 2))
    emu.run([NoOp(), DataMove(kind, 0, 0, 0, 0, 1), NoOp()])
    assert emu.error and len(emu.events) == 1
    assert emu.events[0].pc == 1 and emu.events[0].index == 1
    assert "reserved" in emu.events[0].message
    assert np.array_equal(emu.local, before[0]) and np.array_equal(emu.acc, before[1])
    assert np.array_equal(emu.read_dram0(0, 2), before[2])
    assert emu.pc == 3


def test_address_beyond_non_power_of_two_depth():
    emu = make(local_depth=60)                # 6 address bits, vectors 60..63 do not exist
    emu.write_dram0(0, vecs(4))
    emu.run([DataMove(K.DRAM0_TO_LOCAL, 58, 0, 0, 0, 3)])      # 58, 59, 60, 61
    assert emu.error and "local address 61 is beyond" in emu.events[0].message
    assert not emu.local.any()                # the instruction did nothing at all
    emu.run([DataMove(K.DRAM0_TO_LOCAL, 58, 0, 0, 0, 1)])      # 58, 59 are fine
    assert len(emu.events) == 1 and emu.local[58:60].any()
    emu.run([MatMul(61, 0, 0, 0, 0)])
    assert "local address 61" in emu.events[1].message


def test_addresses_wrap_modulo_the_address_width():
    emu = make()
    data = vecs(4)
    emu.write_local(0, data)
    emu.run([DataMove(K.LOCAL_TO_ACC, 0, 0, 30, 0, 3),        # acc 30, 31, 0, 1
             DataMove(K.LOCAL_TO_ACC, 0, 0, 32 + 5, 0, 0)])   # field value 37 -> acc 5
    assert np.array_equal(emu.acc[[30, 31, 0, 1]], data)
    assert np.array_equal(emu.acc[5], data[0])
    assert not emu.error


def test_repeated_accumulate_addresses_in_one_instruction_are_sequential():
    emu = make()
    data = vecs(6, 7, -50, 50)
    emu.write_local(0, data)
    # step 16 in a 32-vector memory: addresses 0, 16, 0, 16, 0, 16
    emu.run([DataMove(K.LOCAL_TO_ACC_ACCUMULATE, 0, 0, 0, 4, 5)])
    assert np.array_equal(emu.acc[0], data[0] + data[2] + data[4])
    assert np.array_equal(emu.acc[16], data[1] + data[3] + data[5])
    # overwrite with repeats: the last write wins
    emu.run([DataMove(K.LOCAL_TO_ACC, 0, 0, 8, 4, 3)])        # 8, 24, 8, 24
    assert np.array_equal(emu.acc[8], data[2]) and np.array_equal(emu.acc[24], data[3])


# --------------------------------------------------------------------- weights and MatMul

def chain_ref(x, bias, rows):
    """Output i = MAC(x[n-1], rows[n-1][i], ... MAC(x[0], rows[0][i], bias[i]))."""
    out = []
    for i in range(N):
        acc = int(bias[i])
        for j in range(N):
            acc = mac_ref(int(x[j]), int(rows[j][i]), acc)
        out.append(acc)
    return out


def test_full_weight_load_and_matmul():
    emu = make()
    tile = vecs(N + 1, 11, -300, 300)           # [bias, row 0 .. row n-1]
    x = vecs(3, 12)
    emu.write_local(0, tile)
    emu.write_local(20, x)
    emu.run([LoadWeights(0, 0, N), MatMul(20, 0, 4, 0, 2)])
    assert np.array_equal(emu.bias, tile[0]) and np.array_equal(emu.weights, tile[1:])
    for k in range(3):
        assert emu.acc[4 + k].tolist() == chain_ref(x[k], tile[0], tile[1:])
    assert emu.stats.macs == 3 * N * N


def test_matmul_accumulate_zeroes_and_strides():
    emu = make()
    tile = vecs(N + 1, 13, -300, 300)
    x = vecs(2, 14)
    emu.write_local(0, tile)
    emu.write_local(30, [x[0], [0] * N, x[1]])
    emu.acc[[10, 12]] = [[100] * N, [-100] * N]
    emu.run([LoadWeights(0, 0, N),
             MatMul(30, 1, 10, 1, 1, accumulate=True),      # local 30, 32 -> acc 10, 12 (+=)
             MatMul(0, 0, 20, 0, 1, zeroes=True)])           # acc 20, 21 = bias
    assert emu.acc[10].tolist() == [sat(100 + v) for v in chain_ref(x[0], tile[0], tile[1:])]
    assert emu.acc[12].tolist() == [sat(-100 + v) for v in chain_ref(x[1], tile[0], tile[1:])]
    assert np.array_equal(emu.acc[20:22], [tile[0], tile[0]])
    assert emu.stats.count_by_kind["MatMul+zeroes"] == 1


def test_partial_and_zero_weight_loads_shift_the_chain():
    emu = make()
    rows = vecs(N, 15)
    emu.write_local(0, rows)
    emu.chain[:] = 7
    emu.run([LoadWeights(0, 0, N - 1)])          # rows only: they become bias, row 0..n-2
    assert np.array_equal(emu.bias, rows[0]) and np.array_equal(emu.weights[:N - 1], rows[1:])
    assert np.array_equal(emu.weights[N - 1], [7] * N)        # the old bias shifted in
    emu.run([LoadWeights(0, 0, 0, zeroes=True)])  # push one zero vector: weights without bias
    assert not emu.bias.any() and np.array_equal(emu.weights, rows)
    emu.run([LoadWeights(9, 0, 2, zeroes=True)])  # zeroes ignores the address
    assert not emu.chain[:4].any()                # 3 pushed zeros, then the old (zero) bias
    assert np.array_equal(emu.chain[4], rows[0])


def test_long_and_strided_weight_loads():
    emu = make()
    data = vecs(16, 16)
    emu.write_local(0, data)
    emu.run([LoadWeights(0, 0, 9)])               # 10 pushes: only the last n+1 remain
    assert np.array_equal(emu.chain, data[:N + 1])
    emu.run([LoadWeights(1, 1, N)])               # local 1, 3, 5, 7, 9 -> bias first
    assert np.array_equal(emu.chain, data[[1, 3, 5, 7, 9]])
    assert emu.stats.vectors_by_kind["LoadWeights"] == 15


def test_matmul_chain_saturates_per_processing_element():
    emu = make()
    tile = np.zeros((N + 1, N), np.int64)
    tile[0] = [32000, 0, 0, 0]
    tile[1] = [ONE, 0, 0, 0]
    tile[2] = [-ONE, 0, 0, 0]
    emu.write_local(0, tile)
    emu.write_local(10, [[2000, 2000, 0, 0]])
    emu.run([LoadWeights(0, 0, N), MatMul(10, 0, 0, 0, 0)])
    # 32000 + 2000 saturates at PE 0, then -2000: 30767 (a wide accumulator would give 32000)
    assert emu.acc[0, 0] == 30767
    assert emu.stats.saturations["matmul"] == 1


# --------------------------------------------------------------------------------- SIMD

def op_ref(op: int, a: int, b: int) -> int:
    return {SimdOp.ZERO: lambda: 0, SimdOp.MOVE: lambda: a,
            SimdOp.NOT: lambda: ONE if a == 0 else 0,
            SimdOp.AND: lambda: ONE if a and b else 0, SimdOp.OR: lambda: ONE if a or b else 0,
            SimdOp.INCREMENT: lambda: sat(a + ONE), SimdOp.DECREMENT: lambda: sat(a - ONE),
            SimdOp.ADD: lambda: sat(a + b), SimdOp.SUBTRACT: lambda: sat(a - b),
            SimdOp.MULTIPLY: lambda: mac_ref(a, b, 0),
            SimdOp.ABS: lambda: a if a == -32768 else abs(a),
            SimdOp.GREATER_THAN: lambda: ONE if a > b else 0,
            SimdOp.GREATER_THAN_EQUAL: lambda: ONE if a >= b else 0,
            SimdOp.MIN: lambda: min(a, b), SimdOp.MAX: lambda: max(a, b)}[op]()


EDGE = np.array([[0, 1, -1, 32767], [-32768, 256, -256, 0], [300, -300, 128, -128],
                 [32767, -32768, -32768, 5]])


@pytest.mark.parametrize("op", [op for op in SimdOp if 1 <= op <= 15])
def test_simd_ops_with_input_and_register(op):
    emu = make()
    left, right = EDGE, np.roll(EDGE, 1, axis=1)
    for k in range(4):
        emu.acc[k] = left[k]
        emu.registers[2] = right[k]
        emu.run([SIMD(op, 0, 2, 3, read_address=k, write_address=8 + k, read=True, write=True)])
        want = [op_ref(op, int(a), int(b)) for a, b in zip(left[k], right[k])]
        assert emu.acc[8 + k].tolist() == want, (op, k)
        assert emu.registers[3].tolist() == want
    assert not emu.error


def test_simd_relu_sequence_in_place():
    emu = make()
    emu.acc[5] = [-3, 0, 7, -32768]
    emu.run([SIMD(SimdOp.ZERO, 0, 0, 1),                                  # R1 = 0, no flags
             SIMD(SimdOp.MAX, 0, 1, 0, read_address=5, write_address=5, read=True, write=True)])
    assert emu.acc[5].tolist() == [0, 0, 7, 0]


def test_simd_accumulate_and_unused_read():
    emu = make()
    emu.acc[1] = [10, 20, 30, 40]
    emu.acc[2] = [1, 2, 3, 32767]
    emu.registers[1] = [5, 5, 5, 5]
    # read flag but both sources are registers: the read value is discarded
    emu.run([SIMD(SimdOp.ADD, 1, 1, 0, read_address=1, write_address=2, read=True, write=True,
                  accumulate=True)])
    assert emu.acc[2].tolist() == [11, 12, 13, 32767]
    assert emu.stats.saturations["simd_accumulate"] == 1
    # source 0 without the read flag reads zero
    emu.run([SIMD(SimdOp.SUBTRACT, 1, 0, 0, write_address=3, write=True)])
    assert emu.acc[3].tolist() == [5, 5, 5, 5]
    assert not emu.error


def test_simd_noop():
    emu = make()
    emu.acc[0] = [1, 2, 3, 4]
    emu.run([SIMD(SimdOp.NOOP, 0, 0, 1)])                 # no flags: nothing at all
    assert not emu.error and not emu.registers.any()
    for flags in ({"read": True}, {"write": True}, {"accumulate": True}):
        emu.run([SIMD(SimdOp.NOOP, 0, 0, 0, read_address=0, write_address=1, **flags)])
    assert len(emu.events) == 3 and "NoOp with" in emu.events[0].message
    assert not emu.acc[1].any()


def test_simd_register_that_does_not_exist():
    emu = make(simd_registers_depth=2)                    # R = 2 bits: R3 encodable, absent
    emu.run([SIMD(SimdOp.MOVE, 3, 0, 1)])
    assert emu.error and "R3 does not exist" in emu.events[0].message


# ------------------------------------------------------------------------- lookup tables

def test_lookup_tables():
    emu = make(lut_count=2, lut_depth=6)                  # 2 vectors per table (n = 4)
    keys = [-256, -128, 0, 128, 256, 512]
    values = [10, 20, 30, 40, 50, 60]
    slopes = [-1, -2, -3, -4, -5, -6]
    for t, table in enumerate((keys, values, slopes)):
        emu.write_local(10 * t, np.array(table + [0, 0]).reshape(2, N))
    emu.run([LoadLUT(0, 0, 0), LoadLUT(10, 0, 1), LoadLUT(20, 0, 2)])
    assert emu.luts.tolist() == [keys, values, slopes]
    emu.acc[0] = [-1000, 0, 130, 600]
    emu.run([SIMD(SimdOp.LOOKUP, 0, 0, 1, read_address=0, write_address=1, read=True,
                  write=True)])
    # k = largest index with key[k] <= x (0 below the first key)
    assert emu.registers[1].tolist() == [-744, 0, 2, 88]           # x - key[k]
    assert emu.registers[2].tolist() == [10, 30, 40, 60]
    assert emu.registers[3].tolist() == [-1, -3, -4, -6]
    assert emu.acc[1].tolist() == [-744, 0, 2, 88]
    assert not emu.error
    emu.run([SIMD(SimdOp.LOOKUP, 0, 0, 3), LoadLUT(0, 0, 3), SIMD(17, 0, 0, 0)])
    assert [e.index for e in emu.events] == [4, 5, 6]
    assert "needs registers up to R5" in emu.events[0].message


def test_loadlut_without_tables_is_an_error():
    emu = make()
    emu.run([LoadLUT(0, 0, 0)])
    assert emu.error and "lut_count" in emu.events[0].message


# ---------------------------------------------------------------- Configure, PC, errors

def test_configure_registers_and_program_counter():
    emu = make()
    assert emu.config[ConfigRegister.TIMEOUT] == 100
    assert emu.config[ConfigRegister.TRACEPOINT] == 0xFFFFFFFF
    emu.run([Configure(ConfigRegister.TIMEOUT, 500), Configure(ConfigRegister.DRAM1_OFFSET, 0x123),
             Configure(ConfigRegister.TRACEPOINT, 1002), Configure(7, 99),
             Configure(ConfigRegister.PROGRAM_COUNTER, 1000), NoOp(), NoOp(), NoOp(),
             Illegal(0x9, 0, 0)])
    assert emu.config[ConfigRegister.TIMEOUT] == 500
    assert emu.config[ConfigRegister.DRAM1_OFFSET] == 0x123
    assert 7 not in emu.config
    assert emu.tracepoint_hits == [7]          # the instruction executed while PC == 1002
    assert emu.pc == 1004 and emu.index == 9
    (event,) = emu.events
    assert (event.pc, event.index) == (1003, 8)
    assert str(event).startswith("pc 1003 (instruction 8): opcode 0x9")


def test_strict_mode_raises_at_the_first_error():
    emu = Emulator(Architecture(**BASE), strict=True)
    with pytest.raises(EmulatorError, match="pc 1: DataMove kind 0x6 is reserved"):
        emu.run([NoOp(), DataMove(6), NoOp()])


def test_flush_probe_completes_and_touches_only_its_vectors():
    emu = make()
    data = vecs(8)
    emu.write_dram0(0, data)
    assert emu.probe()
    assert np.array_equal(emu.read_dram0(0, 8), data)
    assert emu.stats.count_by_kind["DataMove.dram0_to_local"] == 1


def test_host_access_is_checked():
    emu = make()
    with pytest.raises(IndexError):
        emu.write_dram0(127, vecs(2))
    with pytest.raises(ValueError, match="integers"):
        emu.write_dram0(0, np.ones((1, N)) * 0.5)
    with pytest.raises(ValueError, match="out of range"):
        emu.write_local(0, [[40000, 0, 0, 0]])
    with pytest.raises(ValueError, match="expected"):
        emu.write_local(0, np.zeros((2, 3), int))


def test_large_sparse_dram():
    emu = Emulator(Architecture(**{**BASE, "dram0_depth": 1 << 32, "dram1_depth": 1 << 32}))
    top = (1 << 32) - 3
    emu.write_dram0(top, vecs(3))
    emu.run([DataMove(K.DRAM0_TO_LOCAL, 0, 0, top, 0, 2),
             DataMove(K.LOCAL_TO_DRAM1, 0, 0, (1 << 32) - 1, 0, 1)])   # wraps to vector 0
    assert np.array_equal(emu.read_dram1(0, 1), vecs(3)[1:2])
    assert np.array_equal(emu.read_dram1((1 << 32) - 1, 1), vecs(3)[0:1])
    assert emu.probe()


def test_float32_architecture():
    emu = make(data_type="FLOAT32")
    tile = np.arange((N + 1) * N, dtype=np.float32).reshape(N + 1, N) / 4
    emu.write_local(0, tile)
    emu.write_local(10, np.array([[1, 2, 3, 4]], np.float32))
    emu.run([LoadWeights(0, 0, N), MatMul(10, 0, 0, 0, 0)])
    want = tile[0] + np.array([1, 2, 3, 4], np.float32) @ tile[1:]
    assert np.allclose(emu.acc[0], want)
