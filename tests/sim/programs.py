"""Random TCU programs for comparing hardware backends with the emulator.

:func:`programs` is a hypothesis strategy: it draws a list of (instruction kind, seed) pairs
(so shrinking removes instructions and simplifies kinds) and builds each instruction from its
seed with fields that are mostly valid and in range, sometimes at the edges: wrapping address
runs, addresses beyond a non-power-of-two depth, reserved DataMove kinds, SIMD forms with flags
that do not match the op, unknown opcodes. Initial memories and the DRAM timing (latency,
bandwidth, random back-pressure) are random as well, so that units race each other.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from sim.compare import Images
from sim.pyrtl_backend import DramTiming
from tcu_hw.arch import Architecture
from tcu_hw.isa import (SIMD, Configure, ConfigRegister, DataMove, DataMoveKind, Illegal,
                        LoadLUT, LoadWeights, MatMul, NoOp, SimdOp)

KINDS = ("move", "move", "loadweights", "loadweights", "matmul", "matmul", "matmul", "simd",
         "simd", "simd", "move_acc", "move_acc", "configure", "noop", "loadlut", "odd")


def _vectors(rng, dt, count, n, big=0.15):
    small = rng.integers(max(dt.min_raw, -700), min(dt.max_raw, 700) + 1, (count, n))
    full = rng.integers(dt.min_raw, dt.max_raw + 1, (count, n))
    return np.where(rng.random((count, 1)) < big, full, small)


def _run(rng, depth, bits, max_count, stride_codes, edgy=True):
    """(base, stride, size) mostly inside the memory; when ``edgy``, sometimes wrapping or
    beyond the depth."""
    stride = int(rng.choice(stride_codes)) if rng.random() < 0.3 else 0
    size = int(rng.integers(0, max_count))
    r = rng.random()
    if r < 0.93 or not edgy:
        span = size * (1 << stride) + 1
        base = int(rng.integers(0, max(1, depth - span + 1)))
    else:                                       # anything the address width allows
        base = int(rng.integers(0, 1 << bits))
    return base, stride, size


def make_instruction(arch: Architecture, kind: str, seed: int, edgy: bool = True):
    """One instruction of ``kind``; without ``edgy`` it has no error condition."""
    rng = np.random.default_rng(seed)
    if not edgy and kind == "odd":
        kind = "simd"
    lay = arch.layout
    n = arch.array_size
    s0 = list(range(arch.stride0_depth))
    s1 = list(range(arch.stride1_depth))
    if kind == "noop":
        return NoOp()
    if kind == "move":
        k = [DataMoveKind.DRAM0_TO_LOCAL, DataMoveKind.LOCAL_TO_DRAM0,
             DataMoveKind.DRAM1_TO_LOCAL, DataMoveKind.LOCAL_TO_DRAM1][int(rng.integers(0, 4))]
        la, ls, size = _run(rng, arch.local_depth, lay.L, 10, s0, edgy)
        dram_depth = arch.dram0_depth if k.memory == "dram0" else arch.dram1_depth
        da, ds, _ = _run(rng, dram_depth, lay.D0 if k.memory == "dram0" else lay.D1, 10, s1,
                         edgy)
        return DataMove(k, la, ls, da, ds, size)
    if kind == "move_acc":
        kinds = [DataMoveKind.ACC_TO_LOCAL, DataMoveKind.LOCAL_TO_ACC,
                 DataMoveKind.LOCAL_TO_ACC_ACCUMULATE, DataMoveKind.ACC_TO_LOCAL_RELU]
        if lay.integer:
            kinds.append(DataMoveKind.LOCAL_TO_ACC_SHIFT)
        k = kinds[int(rng.integers(0, len(kinds)))]
        la, ls, size = _run(rng, arch.local_depth, lay.L, 10, s0, edgy)
        aa, as_, _ = _run(rng, arch.accumulator_depth, lay.A, 10, s1, edgy)
        return DataMove(k, la, ls, aa, as_, size)
    if kind == "loadweights":
        zeroes = rng.random() < 0.25
        la, ls, _ = _run(rng, arch.local_depth, lay.L, 2, s0, edgy)
        size = int(rng.choice([n, n, n - 1, 0, n + 2, int(rng.integers(0, n + 1))]))
        span = size * (1 << ls) + 1
        if rng.random() < 0.85 or not edgy:
            la = int(rng.integers(0, max(1, arch.local_depth - span + 1)))
        return LoadWeights(la if not zeroes else 0, ls if not zeroes else 0, size, zeroes)
    if kind == "matmul":
        la, ls, size = _run(rng, arch.local_depth, lay.L, 12, s0, edgy)
        aa, as_, _ = _run(rng, arch.accumulator_depth, lay.A, 12, s1, edgy)
        return MatMul(la, ls, aa, as_, size, bool(rng.random() < 0.5), bool(rng.random() < 0.1))
    regs = arch.simd_registers_depth
    if kind == "simd":
        ops = list(range(1, 16)) + ([16] * 3 if arch.lut_count else []) + \
            ([17] * 4 if lay.integer and regs >= 2 else [])
        op = int(rng.choice(ops)) if rng.random() < 0.95 or not edgy else 0
        top = regs - (arch.lut_count if op == 16 else 0)
        reg = lambda hi: int(rng.integers(0, max(hi, 0) + 1))   # noqa: E731
        read, write = bool(rng.random() < 0.8), bool(rng.random() < 0.7)
        right = int(rng.integers(1, regs)) if op == 17 and (rng.random() < 0.95 or not edgy) \
            else reg(regs)                      # Requantize: parameters and bias registers
        return SIMD(op, reg(regs), right, reg(top),
                    read_address=int(rng.integers(0, arch.accumulator_depth)),
                    write_address=int(rng.integers(0, arch.accumulator_depth)),
                    read=read, write=write, accumulate=bool(rng.random() < 0.3))
    if kind == "loadlut":
        if not arch.lut_count:
            return NoOp()
        vectors = math.ceil(arch.lut_depth / n)
        la = int(rng.integers(0, arch.local_depth - vectors + 1))
        return LoadLUT(la, 0, int(rng.integers(0, arch.lut_count + 1)))
    if kind == "configure":
        reg = [ConfigRegister.TIMEOUT, ConfigRegister.TRACEPOINT, ConfigRegister.SAMPLE_INTERVAL,
               ConfigRegister.PROGRAM_COUNTER, ConfigRegister.DRAM0_OFFSET,
               ConfigRegister.DRAM1_CACHE, 7][int(rng.integers(0, 7))]
        return Configure(reg, int(rng.integers(0, 1 << min(16, lay.config_value_bits))))
    # odd: forms with defined but unusual behaviour
    choice = int(rng.integers(0, 5))
    if choice == 0:
        return DataMove(int(rng.choice([4, 5, 8, 11, 14])), 0, 0, 0, 0, 0)
    if choice == 1:
        if not arch.lut_count and rng.random() < 0.3:
            return LoadLUT(0, 0, 0)          # opcode 5 without lookup tables: an error
        return Illegal(int(rng.integers(6, 15)), 0, 0)
    if choice == 2:
        return SIMD(SimdOp.NOOP, 0, 0, 0, read=True, write=bool(rng.random() < 0.5))
    if choice == 3:        # registers only, with a read flag whose value is unused
        return SIMD(SimdOp.ADD, 1 if regs else 0, 1 if regs else 0, 0, read=True, write=True,
                    write_address=int(rng.integers(0, arch.accumulator_depth)))
    return SIMD(SimdOp.MOVE, 0, 0, min(1, regs), read=False, write=True,
                write_address=int(rng.integers(0, arch.accumulator_depth)))


def make_images(arch: Architecture, seed: int) -> Images:
    rng = np.random.default_rng(seed)
    n, dt = arch.array_size, arch.dtype
    return Images(dram0={0: _vectors(rng, dt, min(arch.dram0_depth, 96), n)},
                  dram1={0: _vectors(rng, dt, min(arch.dram1_depth, 96), n)},
                  local={0: _vectors(rng, dt, arch.local_depth, n)})


@st.composite
def programs(draw, arch: Architecture, min_length: int = 8, max_length: int = 40):
    steps = draw(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 2 ** 32 - 1)),
                          min_size=min_length, max_size=max_length))
    edgy = draw(st.booleans())
    program = [make_instruction(arch, kind, seed, edgy) for kind, seed in steps]
    images = make_images(arch, draw(st.integers(0, 2 ** 32 - 1)))
    timing = DramTiming(latency=draw(st.sampled_from([0, 1, 2, 5, 20])),
                        cycles_per_vector=draw(st.sampled_from([1, 1, 2])),
                        stall_probability=draw(st.sampled_from([0.0, 0.0, 0.3, 0.7])),
                        seed=draw(st.integers(1, 1000)))
    return program, images, timing


def probe_safe(arch: Architecture, program):
    """Replace instructions that could touch the flush probe's vectors (DRAM0 depth-2 and
    depth-1, local depth-1), and Configures of the DRAM offsets (the host owns the address
    map), with NoOps: for backends that run like a board, through AXI."""
    from tcu_hw.isa import address_run
    lay = arch.layout

    def hits(base, stride, size, bits, first_reserved):
        run = address_run(base, stride, size, bits)
        return run.wraps or run.highest >= first_reserved

    out = []
    for ins in program:
        bad = False
        local_top = arch.local_depth - 1
        if isinstance(ins, (MatMul, LoadWeights, LoadLUT, DataMove)) and \
                not getattr(ins, "zeroes", False):
            size = ins.size if not isinstance(ins, LoadLUT) else \
                math.ceil(arch.lut_depth / arch.array_size) - 1
            bad |= hits(ins.local_address, ins.local_stride, size, lay.L, local_top)
        if isinstance(ins, DataMove) and ins.known_kind is not None and \
                ins.known_kind.memory == "dram0":
            bad |= hits(ins.other_address, ins.other_stride, ins.size, lay.D0,
                        arch.dram0_depth - 2)
        if isinstance(ins, Configure) and ins.register in (ConfigRegister.DRAM0_OFFSET,
                                                           ConfigRegister.DRAM1_OFFSET):
            bad = True
        out.append(NoOp() if bad else ins)
    return out


#: kinds of :func:`window_programs`: local-memory traffic between the two units
WINDOW_KINDS = ("load", "load", "load", "store", "store", "load_run", "store_run", "matmul",
                "matmul", "loadweights", "to_acc", "from_acc", "simd", "loadlut")


def window_instruction(arch: Architecture, kind: str, seed: int, window: int = 24):
    """One valid instruction of ``kind`` whose local run falls in the first ``window`` words
    (or, sometimes, wraps around the end of a power-of-two local memory), so that DRAM moves
    and compute instructions keep reading and writing each other's words."""
    rng = np.random.default_rng(seed)
    lay, n = arch.layout, arch.array_size
    depth = arch.local_depth

    def local_run(max_size):
        stride = int(rng.integers(0, min(arch.stride0_depth, 3)))
        size = int(rng.integers(0, max_size + 1))
        span = size * (1 << stride) + 1
        if depth == 1 << lay.L and rng.random() < 0.1:        # a run that wraps around
            return depth - int(rng.integers(1, span + 1)), stride, size
        size = min(size, max(0, (window - 1) >> stride))
        span = size * (1 << stride) + 1
        return int(rng.integers(0, max(1, window - span + 1))), stride, size

    def other_run(size, depth_other, stride_depth):
        stride = int(rng.integers(0, min(stride_depth, 3))) if rng.random() < 0.4 else 0
        span = size * (1 << stride) + 1
        return int(rng.integers(0, max(1, min(depth_other, 48) - span + 1))), stride

    if kind in ("load_run", "store_run"):
        # small moves whose local ranges follow each other (a DRAM column read or written
        # a few vectors at a time): they queue behind each other in the run-ahead ring
        port = int(rng.integers(0, 2))
        k = [[DataMoveKind.DRAM0_TO_LOCAL, DataMoveKind.DRAM1_TO_LOCAL],
             [DataMoveKind.LOCAL_TO_DRAM0, DataMoveKind.LOCAL_TO_DRAM1]][kind == "store_run"][port]
        la, moves = int(rng.integers(0, window // 2)), []
        for _ in range(int(rng.integers(2, 8))):
            size = int(rng.integers(0, 3))
            if la + size >= window:
                break
            da, ds = other_run(size, arch.dram1_depth if port else arch.dram0_depth,
                               arch.stride1_depth)
            moves.append(DataMove(k, la, 0, da, ds, size))
            la += size + 1
        return moves
    if kind in ("load", "store"):
        port = int(rng.integers(0, 2))
        k = [[DataMoveKind.DRAM0_TO_LOCAL, DataMoveKind.DRAM1_TO_LOCAL],
             [DataMoveKind.LOCAL_TO_DRAM0, DataMoveKind.LOCAL_TO_DRAM1]][kind == "store"][port]
        la, ls, size = local_run(12)
        da, ds = other_run(size, arch.dram1_depth if port else arch.dram0_depth,
                           arch.stride1_depth)
        return DataMove(k, la, ls, da, ds, size)
    if kind in ("to_acc", "from_acc"):
        k = [[DataMoveKind.LOCAL_TO_ACC, DataMoveKind.LOCAL_TO_ACC_ACCUMULATE],
             [DataMoveKind.ACC_TO_LOCAL, DataMoveKind.ACC_TO_LOCAL_RELU]][
            kind == "from_acc"][int(rng.integers(0, 2))]
        la, ls, size = local_run(8)
        aa, as_ = other_run(size, arch.accumulator_depth, arch.stride1_depth)
        return DataMove(k, la, ls, aa, as_, size)
    if kind == "matmul":
        la, ls, size = local_run(10)
        aa, as_ = other_run(size, arch.accumulator_depth, arch.stride1_depth)
        return MatMul(la, ls, aa, as_, size, bool(rng.random() < 0.5), bool(rng.random() < 0.1))
    if kind == "loadweights":
        la, ls, size = local_run(n)
        return LoadWeights(la, ls, size, bool(rng.random() < 0.15))
    if kind == "loadlut" and arch.lut_count:
        vectors = math.ceil(arch.lut_depth / n)
        la = int(rng.integers(0, max(1, window - vectors + 1)))
        return LoadLUT(la, 0, int(rng.integers(0, arch.lut_count)))
    regs = arch.simd_registers_depth
    return SIMD(int(rng.choice([2, 3, 5, 10, 15])), int(rng.integers(0, regs + 1)),
                int(rng.integers(0, regs + 1)), int(rng.integers(0, regs + 1)),
                read_address=int(rng.integers(0, min(arch.accumulator_depth, 48))),
                write_address=int(rng.integers(0, min(arch.accumulator_depth, 48))),
                read=True, write=bool(rng.random() < 0.8), accumulate=bool(rng.random() < 0.3))


def window_program(arch: Architecture, steps) -> list:
    """The instructions of (kind, seed) ``steps`` (:func:`window_instruction`; a run kind
    gives several)."""
    program = []
    for kind, seed in steps:
        made = window_instruction(arch, kind, seed)
        program += made if isinstance(made, list) else [made]
    return program


@st.composite
def window_programs(draw, arch: Architecture, min_length: int = 10, max_length: int = 50):
    """Programs whose instructions crowd a small local window (:func:`window_instruction`):
    loads on both DRAM ports that compute instructions read while they still run, stores of
    what acc→local moves still write, under random DRAM timing."""
    steps = draw(st.lists(st.tuples(st.sampled_from(WINDOW_KINDS), st.integers(0, 2 ** 32 - 1)),
                          min_size=min_length, max_size=max_length))
    program = window_program(arch, steps)
    images = make_images(arch, draw(st.integers(0, 2 ** 32 - 1)))
    timing = DramTiming(latency=draw(st.sampled_from([0, 1, 3, 8, 20])),
                        cycles_per_vector=draw(st.sampled_from([1, 1, 3])),
                        stall_probability=draw(st.sampled_from([0.0, 0.3, 0.7])),
                        seed=draw(st.integers(1, 1000)))
    return program, images, timing


def soak_check(k: int, program, timing, backend, images, hang=Exception) -> None:
    """Compare soak program ``k`` on ``backend`` with the emulator; a difference or a hang
    (``hang``, the backend's error) fails the test with the program listing to reproduce."""
    import pytest

    from sim.compare import compare
    from tcu_hw.asm import format_instruction
    try:
        diffs, _ = compare(program, images, backend, timing)
    except hang as e:
        diffs = [str(e)]
    if diffs:
        listing = "\n".join(format_instruction(i) for i in program)
        pytest.fail(f"program {k} ({timing}):\n{listing}\n" + "\n".join(diffs[:5]))


def soak_case(arch: Architecture, rng: np.random.Generator):
    """One random (program, images, timing) without hypothesis, for long soak runs of
    thousands of programs: half of them :func:`programs`-like (every kind, sometimes with
    error conditions), half :func:`window_programs`-like (hazard-heavy), under DRAM timing
    up to 90% back-pressure."""
    length = int(rng.integers(10, 60))
    seeds = rng.integers(0, 2 ** 32, length).tolist()
    if rng.random() < 0.5:
        edgy = bool(rng.random() < 0.5)
        kinds = rng.choice(KINDS, length).tolist()
        program = [make_instruction(arch, k, s, edgy) for k, s in zip(kinds, seeds)]
    else:
        kinds = rng.choice(WINDOW_KINDS, length).tolist()
        program = window_program(arch, zip(kinds, seeds))
    images = make_images(arch, int(rng.integers(0, 2 ** 32)))
    timing = DramTiming(latency=int(rng.choice([0, 1, 3, 8, 20])),
                        cycles_per_vector=int(rng.choice([1, 1, 3])),
                        stall_probability=float(rng.choice([0.0, 0.3, 0.7, 0.9])),
                        seed=int(rng.integers(1, 1000)))
    return program, images, timing
