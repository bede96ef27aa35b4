"""Instruction decoder (TCU.md §3–4.8): fields, class, error conditions, address runs.

Combinational: given one instruction word it slices every field with the same
:class:`~tcu_hw.isa.Layout` the encoder uses, classifies the instruction, checks the error
conditions of §4.8 and produces the packed record for the unit that will execute it:

- ``compute`` record (:data:`COMPUTE` classes: MatMul, LoadWeights, SIMD, local↔accumulator
  moves, LoadLUT) for the compute unit;
- ``dram`` record (DataMoves between local memory and DRAM0/DRAM1) for the DRAM engine;
- Configure fields for the configuration registers.

Address runs follow :func:`tcu_hw.isa.address_run` (tested against it): a run that wraps
around its memory is tracked as the whole memory.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import (DataMoveKind, Field, Layout, LoadWeightsFlag, MatMulFlag, Opcode, SimdFlag,
                   SimdOp, clog2)
from .stream import Struct, name_ports

# compute classes
MM, LW, SIMD_CLS, L2A, A2L, LUT = range(6)

#: bits of the compute unit's weight-group counters (more than the LoadWeights and
#: bank-switching MatMuls that can be in flight at once)
TOKEN_BITS = 3


def field(word: WireVector, f: Field) -> WireVector:
    """The bits of instruction field ``f`` (:attr:`tcu_hw.isa.Layout.fields`) of ``word``;
    a zero-width field reads as a 1-bit 0."""
    return word[f.shift:f.end] if f.width else Const(0, 1)


def compute_struct(layout: Layout) -> Struct:
    """Packed record of one compute instruction (widths: ``layout.hardware``). The decoder
    leaves ``switch`` and ``token`` 0; the compute unit fills them in for a MatMul (the
    first after LoadWeights switches weight tiles once ``token`` LoadWeights are pushed)."""
    h = layout.hardware
    shift = dict(shift=1) if layout.integer else {}        # a local→acc shift-in (0xE)
    return Struct(cls=3, zeroes=1, accumulate=1, read=1, write=1, relu=1,
                  laddr=h.L, ls=h.S0, oaddr=h.A, os=h.S1, raddr=h.A, size=h.size,
                  op=h.op, left=h.R, right=h.R, dest=h.R, table=h.table,
                  uses=1, writes=1, lo=h.L, hi=h.L, wraps=1, switch=1, token=TOKEN_BITS,
                  **shift)


def dram_struct(layout: Layout) -> Struct:
    """Packed record of one DRAM↔local move (widths: ``layout.hardware``)."""
    h = layout.hardware
    return Struct(port=1, to_local=1, laddr=h.L, ls=h.S0, daddr=h.D, ds=h.S1, size=h.size,
                  uses=1, writes=1, lo=h.L, hi=h.L, wraps=1)


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


def local_conflict(new, e, chained: bool = False) -> WireVector:
    """Local-memory hazard between a new instruction's range ``new`` and an in-flight one's
    ``e`` (records with ``uses``, ``writes``, ``lo``, ``hi``): the ranges overlap and at least
    one of the two writes; with ``chained``, only where the new one writes (its reads wait
    per word instead, see :func:`pending`). ``new.uses`` is left to the caller."""
    overlap = (new.lo <= e.hi) & (e.lo <= new.hi)
    return e.uses & overlap & (new.writes if chained else new.writes | e.writes)


def pending(addr: WireVector, ranges) -> WireVector:
    """1 when ``addr`` lies in one of the valid ``ranges`` (records with ``valid``, ``lo`` and
    ``hi``: local words an earlier instruction has still to write), for chained reads."""
    hit = Const(0, 1)
    for r in ranges:
        hit = hit | (r.valid & (r.lo <= addr) & (addr <= r.hi))
    return hit


class ActiveInstruction:
    """The instruction a sequencing unit runs one micro-op (one vector) at a time, taking the
    next from its queue in the cycle the last micro-op issues (no bubble between them).

    Args:
        record: the :class:`~tcu_hw.blocks.stream.Struct` of the queued records (fields
            ``size``, ``laddr``, ``ls`` at least).
        deq: the queue's ``deq`` stream (its ``ready`` is driven by :meth:`advance`).
        hardware: the layout's ``hardware`` widths.
        name: prefix of the registers (``<name>_act_valid``, ``<name>_act``,
            ``<name>_index``, ``<name>_laddr``, ``<name>_lstep``).

    Attributes: ``valid`` (1), ``bits`` (the record), ``fields`` (unpacked), ``index``
    (micro-op of the instruction), ``last`` (1 on its last micro-op), ``laddr`` (the local
    address of this micro-op), ``lstep`` (the local stride's step).
    """

    def __init__(self, record, deq, hardware, name: str) -> None:
        f = hardware
        self._deq, self._f = deq, f
        self.valid = Register(1, f"{name}_act_valid")
        self.bits = Register(record.width, f"{name}_act")
        self.fields = record.unpack(self.bits)
        self.index = Register(f.size, f"{name}_index")
        self.laddr = Register(f.L, f"{name}_laddr")
        self.lstep = Register(f.L, f"{name}_lstep")
        self.last = self.index == self.fields.size

    def advance(self, issue: WireVector, down) -> tuple[WireVector, WireVector]:
        """Wire the next state given ``issue`` (a micro-op issues this cycle) and ``down``
        (the local address steps down, as LoadWeights read); returns ``(load, finishing)``:
        the next instruction is taken, the last micro-op issues. Call once."""
        f, deq = self._f, self._deq
        finishing = issue & self.last
        deq.ready <<= ~self.valid | finishing
        load = deq.fire
        head = deq.payload
        self.valid.next <<= load | (self.valid & ~finishing)
        self.bits.next <<= pyrtl.select(load, deq.data, self.bits)
        self.index.next <<= pyrtl.select(load, Const(0, f.size), pyrtl.select(
            issue, (self.index + 1)[:f.size], self.index))
        self.lstep.next <<= pyrtl.select(load, stride_step(head.ls, f.L), self.lstep)
        laddr, lstep = self.laddr, self.lstep
        step = pyrtl.select(down, (laddr - lstep)[:f.L], (laddr + lstep)[:f.L])
        laddr.next <<= pyrtl.select(load, head.laddr, pyrtl.select(issue, step, laddr))
        return load, finishing


def stride_step(code: WireVector, bits: int) -> WireVector:
    """The address step of a stride code: 2^code modulo 2^bits (0 when code >= bits)."""
    amount_bits = max((bits).bit_length(), 1)
    small = code < bits
    amount = pyrtl.select(small, code.zero_extended(max(code.bitwidth, amount_bits))[:amount_bits],
                          Const(0, amount_bits))
    shifted = pyrtl.shift_left_logical(Const(1, bits + 1), amount)[:bits]
    return pyrtl.select(small, shifted, Const(0, bits))


def _beyond(run: SimpleNamespace, depth: int, bits: int) -> WireVector:
    """1 when the run visits an address ≥ depth (only possible for non-power-of-2 depths)."""
    if depth >= 1 << bits:
        return Const(0, 1)
    return run.highest >= depth


class Decoder:
    """Decodes one instruction word (combinational, latency 0).

    Args:
        layout: the instruction :class:`~tcu_hw.isa.Layout` (its fields, depths and
            ``hardware`` widths).
        word: the instruction (8 × ``layout.instruction_bytes`` bits); no handshake: the
            core holds it until it dispatches the instruction.
        name: prefix of the output wires.

    Ports (outputs, all combinational from ``word``; latency 0):
        fields: every :class:`~tcu_hw.isa.Fields` field as sliced (``opcode`` (4),
            ``flags`` (4), ``address0`` ... ``config_register`` (4), ``config_value``;
            zero-width fields are a 1-bit 0).
        to_compute, to_dram, is_configure, error: the class of the instruction (1 bit each).
            With an integer data type (``layout.integer``, docs/integer.md) SIMD op 17
            (Requantize) is defined when its ``right`` is 1..registers-1, and DataMove 0xE
            (local → accumulators, shift in) is a compute move; elsewhere both are errors.
        drop: 1 bit, the instruction retires without a unit: a NoOp, a SIMD NoOp, an error.
        compute, dram: the packed records for the compute unit and the DRAM engine
            (:func:`compute_struct`, :func:`dram_struct`; with an integer type the compute
            record also carries ``shift``).
        local: ``uses``, ``writes`` (1 bit each), ``lo``, ``hi`` (L bits): the local-memory
            range the instruction touches, for hazard checks.
    """

    def __init__(self, layout: Layout, word: WireVector, name: str = "decoder") -> None:
        lay = layout
        if lay.lut_count and not lay.lut_vectors:
            raise ValueError(f"decoder {name!r}: a layout with lookup tables needs lut_depth "
                             f"and array_size (a LoadLUT reads ceil(lut_depth / n) vectors)")
        f = lay.hardware
        self.widths = f
        fl = lay.fields
        self.fields = SimpleNamespace(**{x.name: field(word, x) for x in fl.all()})
        x = self.fields
        flags = x.flags
        a0, s0, a1, s1, size = x.address0, x.stride0, x.address1, x.stride1, x.size
        lw_size = a1
        is_op = {op: x.opcode == int(op) for op in Opcode}
        is_mm, is_move, is_lw = is_op[Opcode.MATMUL], is_op[Opcode.DATA_MOVE], \
            is_op[Opcode.LOAD_WEIGHTS]
        is_simd, is_lut, is_cfg = is_op[Opcode.SIMD], is_op[Opcode.LOAD_LUT], \
            is_op[Opcode.CONFIGURE]
        is_noop = is_op[Opcode.NOOP]
        illegal = ~(is_noop | is_mm | is_move | is_lw | is_simd | is_cfg |
                    (is_lut if lay.lut_count else Const(0, 1)))

        # DataMove kinds
        kind = {k: flags == int(k) for k in lay.data_move_kinds}
        dram_kind = kind[DataMoveKind.DRAM0_TO_LOCAL] | kind[DataMoveKind.LOCAL_TO_DRAM0] | \
            kind[DataMoveKind.DRAM1_TO_LOCAL] | kind[DataMoveKind.LOCAL_TO_DRAM1]
        relu = kind[DataMoveKind.ACC_TO_LOCAL_RELU]
        acc_kind = kind[DataMoveKind.ACC_TO_LOCAL] | kind[DataMoveKind.LOCAL_TO_ACC] | \
            kind[DataMoveKind.LOCAL_TO_ACC_ACCUMULATE] | relu
        if lay.integer:
            acc_kind = acc_kind | kind[DataMoveKind.LOCAL_TO_ACC_SHIFT]
        reserved = is_move & ~(dram_kind | acc_kind)
        to_local = kind[DataMoveKind.DRAM0_TO_LOCAL] | kind[DataMoveKind.DRAM1_TO_LOCAL] | \
            kind[DataMoveKind.ACC_TO_LOCAL] | relu
        port = kind[DataMoveKind.DRAM1_TO_LOCAL] | kind[DataMoveKind.LOCAL_TO_DRAM1]

        # address runs and depth checks (§4.8)
        lut_last = max(lay.lut_vectors - 1, 0)                  # a LoadLUT's vectors - 1
        local_size = pyrtl.select(is_lw, lw_size.zero_extended(f.size),
                                  pyrtl.select(is_lut, Const(lut_last, f.size),
                                               size.zero_extended(f.size)))
        count = pyrtl.select(is_simd, Const(0, f.size), local_size)   # vectors - 1
        local = address_run(a0, s0, local_size, lay.L)
        acc_run = address_run(a1, s1, size, lay.A)
        d0_run = address_run(a1, s1, size, lay.D0)
        d1_run = address_run(a1, s1, size, lay.D1)
        local_bad = _beyond(local, lay.local_depth, lay.L)
        acc_bad = _beyond(acc_run, lay.accumulator_depth, lay.A)
        dram_bad = pyrtl.select(port, _beyond(d1_run, lay.dram1_depth, lay.D1),
                                _beyond(d0_run, lay.dram0_depth, lay.D0))

        mm_zeroes, mm_acc = flags[MatMulFlag.ZEROES.bit], flags[MatMulFlag.ACCUMULATE.bit]
        lw_zeroes = flags[LoadWeightsFlag.ZEROES.bit]
        err_mm = is_mm & ((~mm_zeroes & local_bad) | acc_bad)
        err_move = is_move & (reserved | local_bad |
                              (acc_kind & acc_bad) | (dram_kind & dram_bad))
        err_lw = is_lw & ~lw_zeroes & local_bad

        # SIMD (§4.4): sub-instruction fields, registers, Lookup, addresses
        r = lay.R
        dest, right, left, sop = x.simd_dest, x.simd_right, x.simd_left, x.simd_op
        s_read, s_write, s_acc = (flags[SimdFlag.READ.bit], flags[SimdFlag.WRITE.bit],
                                  flags[SimdFlag.ACCUMULATE.bit])
        simd_flags = flags[:max(SimdFlag).bit + 1]
        s_noop = sop == int(SimdOp.NOOP)
        s_defined = (sop < lay.simd_op_count) if lay.simd_op_count < 1 << lay.simd_op_bits \
            else Const(1, 1)                            # a 4-bit op without LUTs: all defined
        depth = lay.simd_registers_depth
        if lay.integer:                                 # Requantize reads R[right], R[right+1]
            is_requant = sop == int(SimdOp.REQUANTIZE)
            s_defined = s_defined | is_requant
            s_defined = s_defined & ~(is_requant & ((right == 0) | (right >= depth)))
        regs_bad = Const(0, 1)
        if r and (1 << r) - 1 > depth:                  # a selector can name a missing register
            regs_bad = (left > depth) | (right > depth) | (dest > depth)
        lookup_bad = Const(0, 1)
        if lay.lut_count:
            lookup_bad = (sop == int(SimdOp.LOOKUP)) & \
                ((dest.zero_extended(r + 5) + lay.lut_count) > depth)
        rd_run = address_run(a1, Const(0, 1), Const(0, 1), lay.A)
        wr_run = address_run(a0, Const(0, 1), Const(0, 1), lay.A)
        rd_bad = s_read & _beyond(rd_run, lay.accumulator_depth, lay.A)
        wr_bad = s_write & _beyond(wr_run, lay.accumulator_depth, lay.A)
        simd_flagged_noop = s_noop & (simd_flags != 0)
        err_simd = is_simd & (simd_flagged_noop | ~s_defined | regs_bad | lookup_bad |
                              rd_bad | wr_bad)
        simd_nothing = is_simd & s_noop & (simd_flags == 0)

        # LoadLUT (§4.6)
        err_lut = Const(0, 1)
        if lay.lut_count:
            table = a1
            err_lut = is_lut & ((table > lay.lut_count) | local_bad)
        else:
            table = Const(0, 1)

        self.error = illegal | err_mm | err_move | err_lw | err_simd | err_lut
        ok = ~self.error
        self.is_configure = is_cfg
        self.to_dram = ok & is_move & dram_kind
        compute_kinds = is_mm | (is_move & acc_kind) | is_lw | (is_simd & ~simd_nothing)
        if lay.lut_count:
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
        shift = dict(shift=is_move & kind[DataMoveKind.LOCAL_TO_ACC_SHIFT]) \
            if lay.integer else {}
        self.compute = compute_struct(lay).pack(
            cls=cls, zeroes=zeroes, accumulate=accumulate, read=s_read, write=s_write,
            relu=is_move & relu, laddr=laddr, ls=s0, oaddr=oaddr, os=s1, raddr=rd_run.first,
            size=count, op=sop, left=left, right=right, dest=dest, table=table,
            uses=self.local.uses, writes=writes_local, lo=local.lo, hi=local.hi,
            wraps=local.wraps, **shift)
        daddr = pyrtl.select(port, d1_run.first.zero_extended(f.D),
                             d0_run.first.zero_extended(f.D))
        self.dram = dram_struct(lay).pack(
            port=port, to_local=to_local, laddr=local.first, ls=s0, daddr=daddr, ds=s1,
            size=size.zero_extended(f.size), uses=Const(1, 1), writes=to_local,
            lo=local.lo, hi=local.hi, wraps=local.wraps)

        name_ports(self, name)
