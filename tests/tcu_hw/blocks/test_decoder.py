"""The hardware decoder against the contract: for random instruction words of several
architectures, every field it slices (and :meth:`tcu_hw.isa.Layout.decode_word`'s) is where
TCU.md §3 puts it, its records carry what the instruction says, and its error flag and
classification equal the emulator's."""

from __future__ import annotations

import numpy as np
import pyrtl
import pytest

from sim.emulator import Emulator
from sim.pyrtl_sim import ArraySimulation
from tcu_hw.arch import Architecture, preset
from tcu_hw.blocks.decoder import (A2L, L2A, LUT, LW, MM, SIMD_CLS, Decoder, compute_struct,
                                   dram_struct)
from tcu_hw.isa import (SIMD, Configure, DataMove, DataMoveKind, Illegal, LoadLUT, LoadWeights,
                        MatMul, NoOp, Opcode, SimdOp)

from ...conftest import requires_gcc

pytestmark = requires_gcc

ARCHS = {
    "pynqz1": preset("pynqz1"),
    "zcu104": preset("zcu104"),
    "lut_odd_depths": Architecture("FP8BP4", 4, dram0_depth=100, dram1_depth=128,
                                   local_depth=60, accumulator_depth=24,
                                   simd_registers_depth=4, stride0_depth=8, stride1_depth=2,
                                   lut_count=2, lut_depth=6),
    "no_strides": Architecture("FP16BP8", 2, dram0_depth=64, dram1_depth=64, local_depth=64,
                               accumulator_depth=32, simd_registers_depth=1, stride0_depth=1,
                               stride1_depth=1),
    "int8_lut": Architecture("INT8", 4, dram0_depth=64, dram1_depth=64, local_depth=60,
                             accumulator_depth=24, simd_registers_depth=3, stride0_depth=4,
                             stride1_depth=2, lut_count=1, lut_depth=8),
    "int16_d2": Architecture("INT16", 2, dram0_depth=64, dram1_depth=64, local_depth=64,
                             accumulator_depth=32, simd_registers_depth=2, stride0_depth=2,
                             stride1_depth=2),
}
WORDS = 400


def random_words(arch: Architecture, count: int, rng) -> list[int]:
    """Words of every opcode (mostly defined ones), with operands that are often small (so
    that some instructions are in range) and flags that are often valid."""
    lay = arch.layout
    f = lay.fields
    codes = [int(op) for op in Opcode] * 3 + list(range(16))
    words = []
    for _ in range(count):
        word = int(rng.integers(0, 1 << 62)) | (int(rng.integers(0, 1 << 62)) << 62)
        word &= f.operands.mask
        if rng.random() < 0.6:                   # small addresses and sizes
            for fld in (f.address0, f.address1, f.size):
                word &= ~(fld.mask << fld.shift)
                word |= int(rng.integers(0, 8)) << fld.shift
        opcode = int(rng.choice(codes))
        flags = int(rng.integers(0, 16))
        if opcode == Opcode.DATA_MOVE and rng.random() < 0.7:
            flags = int(rng.choice([int(k) for k in DataMoveKind]))
        if opcode == Opcode.SIMD and lay.integer and rng.random() < 0.3:   # Requantize
            at = f.operand2.shift + 3 * lay.R
            word = (word & ~(0x1F << at)) | (int(SimdOp.REQUANTIZE) << at)
        words.append(word | (opcode << f.opcode.shift) | (flags << f.flags.shift))
    return words


def hardware(arch: Architecture, words: list[int]) -> dict:
    lay = arch.layout
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        word = pyrtl.Input(8 * lay.instruction_bytes, "word")
        dec = Decoder(lay, word)
        outs = {f"field_{k}": v for k, v in vars(dec.fields).items()}
        outs.update(compute=dec.compute, dram=dec.dram, error=dec.error,
                    to_compute=dec.to_compute, to_dram=dec.to_dram, drop=dec.drop,
                    is_configure=dec.is_configure)
        for name, wire in outs.items():
            o = pyrtl.Output(wire.bitwidth, name)
            o <<= wire
    return ArraySimulation(block=block).run_trace(len(words), {"word": words})


def emulator_error(arch: Architecture, instr) -> bool:
    emu = Emulator(arch)
    emu.run([instr])
    return bool(emu.error)


@pytest.mark.parametrize("name", list(ARCHS))
def test_decoder_fields_equal_the_contract(name):
    arch = ARCHS[name]
    lay = arch.layout
    rng = np.random.default_rng(len(name))
    words = random_words(arch, WORDS, rng)
    hw = hardware(arch, words)
    comp, dram = compute_struct(lay), dram_struct(lay)
    kinds = {t: 0 for t in (MatMul, DataMove, LoadWeights, SIMD, LoadLUT, Configure, NoOp,
                            Illegal)}
    for k, word in enumerate(words):
        instr = lay.decode_word(word)
        kinds[type(instr)] += 1
        where = f"{name} word {word:#x} ({instr})"
        # every field, sliced by the hardware where TCU.md §3 puts it
        spec = spec_fields(lay, word)
        for fld in lay.fields.all():
            assert int(hw[f"field_{fld.name}"][k]) == spec[fld.name], (where, fld.name)
            assert fld.get(word) == spec[fld.name], (where, fld.name)
        # the decoded instruction's attributes are those fields
        if not isinstance(instr, Illegal):
            for fld_name, attr in type(instr).FIELDS:
                assert int(getattr(instr, attr)) == spec[fld_name], (where, attr)
        # classification and the error conditions of TCU.md §4.8
        error = emulator_error(arch, instr)
        assert bool(hw["error"][k]) == error, where
        if error:
            continue
        is_dram = isinstance(instr, DataMove) and DataMoveKind(instr.kind).memory != "acc"
        assert bool(hw["to_dram"][k]) == is_dram, where
        assert bool(hw["is_configure"][k]) == isinstance(instr, Configure), where
        if is_dram:
            rec = _unpack(dram, hw["dram"][k])
            assert rec["port"] == int(DataMoveKind(instr.kind).memory == "dram1"), where
            assert rec["to_local"] == int(DataMoveKind(instr.kind).to_local), where
            assert rec["size"] == instr.size, where
            assert rec["laddr"] == instr.local_address % (1 << lay.L), where
            bits = lay.D1 if rec["port"] else lay.D0
            assert rec["daddr"] == instr.other_address % (1 << bits), where
            assert rec["ds"] == instr.other_stride, where
        elif hw["to_compute"][k]:
            rec = _unpack(comp, hw["compute"][k])
            assert rec == {**rec, **compute_record(lay, instr)}, where
        elif not isinstance(instr, Configure):
            assert bool(hw["drop"][k]), where          # NoOps and SIMD NoOps retire at once
    assert all(kinds[t] for t in (MatMul, DataMove, LoadWeights, SIMD, Configure, NoOp,
                                  Illegal)), kinds


def spec_fields(lay, word: int) -> dict:
    """The fields of an instruction word computed from TCU.md §3 and the layout's widths
    alone (an oracle independent of :attr:`Layout.fields`)::

        MSB [ opcode:4 | flags:4 | operand2 | operand1 | operand0 ] LSB
        operand0/1 = [ pad | stride : S0/S1 | address : op0/op1_addr_bits ]
        operand2 = [ pad | size : op2_addr_bits ], or a SIMD sub-instruction
                   [ op : OPB | left : R | right : R | dest : R ]
        Configure: the low 32 bits of the operand area = (value << 4) | register
    """
    def m(bits):
        return (1 << bits) - 1
    o0 = word & m(lay.operand0_bits)
    o1 = (word >> lay.operand0_bits) & m(lay.operand1_bits)
    o2 = (word >> (lay.operand0_bits + lay.operand1_bits)) & m(lay.operand2_bits)
    area = word & m(lay.operand_bits)
    r = lay.R
    return {"opcode": (word >> (lay.operand_bits + 4)) & 0xF,
            "flags": (word >> lay.operand_bits) & 0xF, "operands": area,
            "operand0": o0, "operand1": o1, "operand2": o2,
            "address0": o0 & m(lay.op0_addr_bits),
            "stride0": (o0 >> lay.op0_addr_bits) & m(lay.S0),
            "address1": o1 & m(lay.op1_addr_bits),
            "stride1": (o1 >> lay.op1_addr_bits) & m(lay.S1),
            "size": o2 & m(lay.op2_addr_bits), "simd_dest": o2 & m(r),
            "simd_right": (o2 >> r) & m(r), "simd_left": (o2 >> 2 * r) & m(r),
            "simd_op": (o2 >> 3 * r) & m(4 + (lay.lut_count > 0 or lay.integer)),
            "config_register": area & 0xF, "config_value": (area >> 4) & m(28)}


def compute_record(lay, instr) -> dict:
    """What the compute record of a valid instruction must hold (addresses modulo their
    memory, counts − 1, flags)."""
    def mod(addr, bits):
        return addr % (1 << bits)
    if isinstance(instr, MatMul):
        return dict(laddr=mod(instr.local_address, lay.L), ls=instr.local_stride,
                    oaddr=mod(instr.accumulator_address, lay.A), os=instr.accumulator_stride,
                    size=instr.size, zeroes=instr.zeroes, accumulate=instr.accumulate, cls=MM)
    if isinstance(instr, LoadWeights):        # read top-down: from the run's last address
        step = 1 << instr.local_stride if instr.local_stride < lay.L else 0
        return dict(laddr=mod(instr.local_address + instr.size * step, lay.L),
                    ls=instr.local_stride, size=instr.size, zeroes=instr.zeroes, cls=LW)
    if isinstance(instr, LoadLUT):
        return dict(laddr=mod(instr.local_address, lay.L), ls=instr.local_stride,
                    table=instr.table, size=lay.lut_vectors - 1, cls=LUT)
    if isinstance(instr, SIMD):
        return dict(op=int(instr.op), left=instr.left, right=instr.right, dest=instr.dest,
                    read=instr.read, write=instr.write, accumulate=instr.accumulate,
                    raddr=mod(instr.read_address, lay.A), oaddr=mod(instr.write_address, lay.A),
                    cls=SIMD_CLS)
    kind = DataMoveKind(instr.kind)                # local <-> accumulators
    return dict(laddr=mod(instr.local_address, lay.L), ls=instr.local_stride,
                oaddr=mod(instr.other_address, lay.A), os=instr.other_stride, size=instr.size,
                accumulate=int(kind == DataMoveKind.LOCAL_TO_ACC_ACCUMULATE),
                cls=A2L if kind.to_local else L2A,
                **({"shift": int(kind == DataMoveKind.LOCAL_TO_ACC_SHIFT)}
                   if lay.integer else {}))


def _unpack(struct, value) -> dict:
    value = int(value)
    return {k: (value >> struct.offsets[k]) & ((1 << w) - 1) for k, w in struct.widths.items()}
