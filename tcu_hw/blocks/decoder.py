"""Instruction decoder (TCU.md §3–4.8): fields, class, error conditions, address runs.

Combinational: given one instruction word it slices every field with the same
:class:`~tcu_hw.isa.Layout` the encoder uses, classifies the instruction, checks the error
conditions of §4.8 and produces the packed record for the unit that will execute it:

- ``compute`` record (:data:`COMPUTE` classes: MatMul, LoadWeights, SIMD, local↔accumulator
  moves, LoadLUT) for the compute unit;
- ``dram`` record (DataMoves between local memory and DRAM0/DRAM1) for the DRAM engine;
- Configure fields for the configuration registers.

Input: ``word`` (8 × ``arch.layout.instruction_bytes`` bits), one instruction. Outputs
(attributes, all combinational from ``word``, latency 0): ``opcode`` (4), ``flags`` (4);
classification ``to_compute``, ``to_dram``, ``is_configure``, ``drop`` (NoOp, or an error),
``error`` (1 bit each); ``compute`` / ``dram`` (packed records, widths
``compute_struct(arch).width`` / ``dram_struct(arch).width``); ``cfg_register`` (4),
``cfg_value`` (up to :data:`tcu_hw.isa.CONFIG_VALUE_BITS`); ``local`` = the local-memory
range (``uses``, ``writes``: 1 bit; ``lo``, ``hi``: L address bits) for hazard checks. No
handshake: the core holds ``word`` until it dispatches the instruction.

Address runs follow :func:`tcu_hw.isa.address_run` (tested against it): a run that wraps
around its memory is tracked as the whole memory.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pyrtl
from pyrtl import Const, WireVector

from ..arch import Architecture
from ..isa import DataMoveKind, Opcode, SimdOp, clog2
from .stream import Struct, name_ports

# compute classes
MM, LW, SIMD_CLS, L2A, A2L, LUT = range(6)


def field_widths(arch: Architecture) -> SimpleNamespace:
    """Widths shared by the decoder and the units."""
    lay = arch.layout
    L, A = max(lay.L, 1), max(lay.A, 1)
    d = max(lay.D0, lay.D1, 1)
    lut_vectors = math.ceil(arch.lut_depth / arch.array_size) if arch.lut_count else 1
    size = max(lay.op2_addr_bits, lay.op1_addr_bits, clog2(lut_vectors), 1)
    return SimpleNamespace(L=L, A=A, D=d, S0=max(lay.S0, 1), S1=max(lay.S1, 1), size=size,
                           R=max(lay.R, 1), op=lay.simd_op_bits,
                           table=max(clog2(arch.lut_count + 1), 1))


def compute_struct(arch: Architecture) -> Struct:
    """Packed record of one compute instruction."""
    f = field_widths(arch)
    return Struct(cls=3, zeroes=1, accumulate=1, read=1, write=1,
                  laddr=f.L, ls=f.S0, oaddr=f.A, os=f.S1, raddr=f.A, size=f.size,
                  op=f.op, left=f.R, right=f.R, dest=f.R, table=f.table,
                  uses=1, writes=1, lo=f.L, hi=f.L)


def dram_struct(arch: Architecture) -> Struct:
    """Packed record of one DRAM↔local move."""
    f = field_widths(arch)
    return Struct(port=1, to_local=1, laddr=f.L, ls=f.S0, daddr=f.D, ds=f.S1, size=f.size,
                  uses=1, writes=1, lo=f.L, hi=f.L)


def address_run(base: WireVector, stride: WireVector, size: WireVector, bits: int
                ) -> SimpleNamespace:
    """Hardware :func:`tcu_hw.isa.address_run`: ``lo``, ``hi``, ``highest`` (``bits`` wide),
    ``wraps`` and ``first`` (the run's start, base mod 2^bits) / ``last`` (its end address)."""
    base, stride, size = (pyrtl.as_wires(w) for w in (base, stride, size))
    b = base[:bits] if base.bitwidth >= bits else base.zero_extended(bits)
    amount_bits = max(clog2(bits), 1)
    small = stride < bits
    amount = pyrtl.select(small, stride[:amount_bits] if stride.bitwidth >= amount_bits
                          else stride.zero_extended(amount_bits), Const(0, amount_bits))
    k = size.bitwidth + bits
    shifted = pyrtl.shift_left_logical(size.zero_extended(k), amount)
    end = (b.zero_extended(k + 1) + shifted.zero_extended(k + 1))[:k + 1]
    same = (size == 0) | ~small
    fits = end[bits:] == 0
    step = pyrtl.shift_left_logical(Const(1, bits + 1), amount)[:bits + 1]
    mod = Const(1 << bits, bits + 1)
    wrap_top = ((mod - step)[:bits]) | (b & (step - 1)[:bits])
    top = Const((1 << bits) - 1, bits)
    return SimpleNamespace(
        lo=pyrtl.select(same | fits, b, Const(0, bits)),
        hi=pyrtl.select(same, b, pyrtl.select(fits, end[:bits], top)),
        highest=pyrtl.select(same, b, pyrtl.select(fits, end[:bits], wrap_top)),
        wraps=~same & ~fits, first=b, last=pyrtl.select(same, b, end[:bits]))


def _beyond(run: SimpleNamespace, depth: int, bits: int) -> WireVector:
    """1 when the run visits an address ≥ depth (only possible for non-power-of-2 depths)."""
    if depth >= 1 << bits:
        return Const(0, 1)
    return run.highest >= depth


class Decoder:
    def __init__(self, arch: Architecture, word: WireVector) -> None:
        lay = arch.layout
        f = field_widths(arch)
        self.widths = f
        self.opcode = opcode = word[lay.opcode_shift:lay.opcode_shift + 4]
        self.flags = flags = word[lay.flags_shift:lay.flags_shift + 4]
        op0 = word[:lay.operand0_bits]
        op1 = word[lay.operand1_shift:lay.operand1_shift + lay.operand1_bits]
        op2 = word[lay.operand2_shift:lay.operand2_shift + lay.operand2_bits]
        a0 = op0[:lay.op0_addr_bits]
        s0 = op0[lay.op0_addr_bits:lay.op0_addr_bits + lay.S0] if lay.S0 else Const(0, 1)
        a1 = op1[:lay.op1_addr_bits]
        s1 = op1[lay.op1_addr_bits:lay.op1_addr_bits + lay.S1] if lay.S1 else Const(0, 1)
        size = op2[:lay.op2_addr_bits]
        lw_size = a1

        is_op = {op: opcode == int(op) for op in Opcode}
        is_mm, is_move, is_lw = is_op[Opcode.MATMUL], is_op[Opcode.DATA_MOVE], \
            is_op[Opcode.LOAD_WEIGHTS]
        is_simd, is_lut, is_cfg = is_op[Opcode.SIMD], is_op[Opcode.LOAD_LUT], \
            is_op[Opcode.CONFIGURE]
        is_noop = is_op[Opcode.NOOP]
        illegal = ~(is_noop | is_mm | is_move | is_lw | is_simd | is_cfg |
                    (is_lut if arch.lut_count else Const(0, 1)))

        # DataMove kinds
        kind = {k: flags == int(k) for k in DataMoveKind}
        dram_kind = kind[DataMoveKind.DRAM0_TO_LOCAL] | kind[DataMoveKind.LOCAL_TO_DRAM0] | \
            kind[DataMoveKind.DRAM1_TO_LOCAL] | kind[DataMoveKind.LOCAL_TO_DRAM1]
        acc_kind = kind[DataMoveKind.ACC_TO_LOCAL] | kind[DataMoveKind.LOCAL_TO_ACC] | \
            kind[DataMoveKind.LOCAL_TO_ACC_ACCUMULATE]
        reserved = is_move & ~(dram_kind | acc_kind)
        to_local = kind[DataMoveKind.DRAM0_TO_LOCAL] | kind[DataMoveKind.DRAM1_TO_LOCAL] | \
            kind[DataMoveKind.ACC_TO_LOCAL]
        port = kind[DataMoveKind.DRAM1_TO_LOCAL] | kind[DataMoveKind.LOCAL_TO_DRAM1]

        # address runs and depth checks (§4.8)
        local_size = pyrtl.select(is_lw, lw_size.zero_extended(f.size),
                                  pyrtl.select(is_lut, Const(self._lut_vectors(arch) - 1, f.size),
                                               size.zero_extended(f.size)))
        count = pyrtl.select(is_simd, Const(0, f.size), local_size)   # vectors - 1
        local = address_run(a0, s0, local_size, lay.L)
        acc_run = address_run(a1, s1, size, lay.A)
        d0_run = address_run(a1, s1, size, lay.D0)
        d1_run = address_run(a1, s1, size, lay.D1)
        local_bad = _beyond(local, arch.local_depth, lay.L)
        acc_bad = _beyond(acc_run, arch.accumulator_depth, lay.A)
        dram_bad = pyrtl.select(port, _beyond(d1_run, arch.dram1_depth, lay.D1),
                                _beyond(d0_run, arch.dram0_depth, lay.D0))

        mm_zeroes, mm_acc = flags[1], flags[0]
        lw_zeroes = flags[0]
        err_mm = is_mm & ((~mm_zeroes & local_bad) | acc_bad)
        err_move = is_move & (reserved | local_bad |
                              (acc_kind & acc_bad) | (dram_kind & dram_bad))
        err_lw = is_lw & ~lw_zeroes & local_bad

        # SIMD (§4.4): sub-instruction fields, registers, Lookup, addresses
        r = lay.R
        sub = op2[:lay.simd_bits]
        dest = sub[:r] if r else Const(0, 1)
        right = sub[r:2 * r] if r else Const(0, 1)
        left = sub[2 * r:3 * r] if r else Const(0, 1)
        sop = sub[3 * r:3 * r + lay.simd_op_bits]
        s_read, s_write, s_acc = flags[0], flags[1], flags[2]
        s_noop = sop == int(SimdOp.NOOP)
        s_defined = (sop < 17) if arch.lut_count else Const(1, 1)   # 4-bit op: all defined
        depth = arch.simd_registers_depth
        regs_bad = Const(0, 1)
        if r and (1 << r) - 1 > depth:                  # a selector can name a missing register
            regs_bad = (left > depth) | (right > depth) | (dest > depth)
        lookup_bad = Const(0, 1)
        if arch.lut_count:
            lookup_bad = (sop == int(SimdOp.LOOKUP)) & \
                ((dest.zero_extended(r + 5) + arch.lut_count) > depth)
        rd_run = address_run(a1, Const(0, 1), Const(0, 1), lay.A)
        wr_run = address_run(a0, Const(0, 1), Const(0, 1), lay.A)
        rd_bad = s_read & _beyond(rd_run, arch.accumulator_depth, lay.A)
        wr_bad = s_write & _beyond(wr_run, arch.accumulator_depth, lay.A)
        simd_flagged_noop = s_noop & (flags[:3] != 0)
        err_simd = is_simd & (simd_flagged_noop | ~s_defined | regs_bad | lookup_bad |
                              rd_bad | wr_bad)
        simd_nothing = is_simd & s_noop & (flags[:3] == 0)

        # LoadLUT (§4.6)
        err_lut = Const(0, 1)
        if arch.lut_count:
            table = a1
            err_lut = is_lut & ((table > arch.lut_count) | local_bad)
        else:
            table = Const(0, 1)

        self.error = illegal | err_mm | err_move | err_lw | err_simd | err_lut
        ok = ~self.error
        self.is_configure = is_cfg
        self.to_dram = ok & is_move & dram_kind
        compute_kinds = is_mm | (is_move & acc_kind) | is_lw | (is_simd & ~simd_nothing)
        if arch.lut_count:
            compute_kinds = compute_kinds | is_lut
        self.to_compute = ok & compute_kinds
        self.drop = is_noop | simd_nothing | self.error

        # local range for hazard checks
        reads_local = (is_mm & ~mm_zeroes) | (is_lw & ~lw_zeroes) | is_lut | \
            (is_move & ~to_local)
        writes_local = is_move & to_local
        self.local = SimpleNamespace(uses=reads_local | writes_local, writes=writes_local,
                                     lo=local.lo, hi=local.hi)

        cls = pyrtl.select(is_mm, Const(MM, 3), pyrtl.select(
            is_lw, Const(LW, 3), pyrtl.select(
                is_simd, Const(SIMD_CLS, 3), pyrtl.select(
                    is_lut, Const(LUT, 3), pyrtl.select(to_local, Const(A2L, 3),
                                                        Const(L2A, 3))))))
        accumulate = pyrtl.select(is_mm, mm_acc, pyrtl.select(
            is_simd, s_acc, kind[DataMoveKind.LOCAL_TO_ACC_ACCUMULATE]))
        zeroes = pyrtl.select(is_mm, mm_zeroes, is_lw & lw_zeroes)
        # LoadWeights reads top-down: start at the run's last address and step down
        laddr = pyrtl.select(is_lw, local.last, local.first)
        oaddr = pyrtl.select(is_simd, wr_run.first, acc_run.first)
        self.compute = compute_struct(arch).pack(
            cls=cls, zeroes=zeroes, accumulate=accumulate, read=s_read, write=s_write,
            laddr=laddr, ls=s0, oaddr=oaddr, os=s1, raddr=rd_run.first, size=count,
            op=sop, left=left, right=right, dest=dest, table=table,
            uses=self.local.uses, writes=writes_local, lo=local.lo, hi=local.hi)
        daddr = pyrtl.select(port, d1_run.first.zero_extended(f.D),
                             d0_run.first.zero_extended(f.D))
        self.dram = dram_struct(arch).pack(
            port=port, to_local=to_local, laddr=local.first, ls=s0, daddr=daddr, ds=s1,
            size=size.zero_extended(f.size), uses=Const(1, 1), writes=to_local,
            lo=local.lo, hi=local.hi)

        # Configure (§4.7): the low 32 bits of the operand area
        area = word[:min(lay.operand_bits, 32)]
        self.cfg_register = area[:4]
        self.cfg_value = area[4:] if area.bitwidth > 4 else Const(0, 1)
        name_ports(self, "decoder")

    @staticmethod
    def _lut_vectors(arch: Architecture) -> int:
        return math.ceil(arch.lut_depth / arch.array_size) if arch.lut_count else 1
