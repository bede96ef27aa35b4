"""SIMD ALU array (TCU.md §4.4–4.6): one ALU per lane, vector registers, lookup tables.

Each cycle with ``command.valid`` the array computes ``out = op(left, right)`` lane-wise,
where a source 0 is the command's ``input`` vector and source r is register r, and at the end
of the cycle writes register ``dest`` (if non-zero) with ``out``. Ops and their results are those of
:func:`tcu_hw.alu.simd_result` (NoOp passes the input through and writes nothing).

Lookup (op 16, only with ``lut_count = N ≥ 1``): k = the largest index with
``key[k] <= left`` (0 below the first key, a priority encoder); ``out = left - key[k]``
(saturating) goes to register ``dest`` (if non-zero) and ``value_t[k]`` to register
``dest + t`` for t = 1..N. The tables (one key table and N value tables of ``lut_depth``
scalars) are shared by all lanes and loaded a vector at a time: a transfer on ``lut`` writes
scalars ``index·n .. index·n + n-1`` of table ``table`` from ``data``.

Integer types (docs/integer.md): the lanes and registers are the accumulator type's (INT32,
INT48) and every op works at that width; the tables hold W-bit entries, compared and
returned sign-extended. One multiplier per lane (:func:`integer_lane`) serves Multiply (its
right operand clipped to W + 9 bits) and Requantize (op 17: ``zp + round_half_even((left +
B)·M / 2^s)``, saturated, with M, s, zp packed in register ``right`` and B in register
``right + 1``).

Undefined ops, registers beyond the depth and Lookups that would overflow the registers are
refused by the decoder before they get here (they give 0 and write nothing here).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import (SimdOp, clog2, lut_table_bits, lut_vectors, simd_op_bits,
                   simd_selector_bits)
from ..numeric import SHIFT_BITS, DataType, requantize_fields
from . import fixed, lanes
from .stream import SINK, Stream, Struct, named


def highest_set(flags: list) -> WireVector:
    """The index of the highest true flag (0 when none is), as a balanced tree: clog2(len)
    levels of 2:1 selects, where a chain of selects would take len − 1 (a 256-entry table's
    Lookup otherwise sets the clock)."""
    bits = max(clog2(len(flags)), 1)

    def tree(lo: int, hi: int):
        if hi - lo == 1:
            return flags[lo], Const(lo, bits)
        mid = (lo + hi + 1) // 2
        any_lo, at_lo = tree(lo, mid)
        any_hi, at_hi = tree(mid, hi)
        return any_lo | any_hi, pyrtl.select(any_hi, at_hi, at_lo)

    found, at = tree(0, len(flags))
    return pyrtl.select(found, at, Const(0, bits))


def integer_lane(a: WireVector, b: WireVector, bias: WireVector, op: WireVector,
                 dt: DataType) -> dict:
    """An integer type's Multiply and Requantize results for one lane (docs/integer.md),
    from one (A + 1) × (W + 9)-bit signed multiplier (A = the accumulator width)::

        Multiply:    a            × clip_{W+9}(b)    ─┐
        Requantize:  (a + bias)   × M (from b)       ─┴─ p ─▶ saturate_A          (mul)
                     p ─ +2^(s-1) ─ >> s ─ -1 on an odd tie ─ + zp ─ saturate_A (requantize)

    ``b`` is register ``right`` (for Requantize its packed M, s, zp) and ``bias`` register
    ``right + 1``."""
    at, f = dt.accumulator, requantize_fields(dt)
    aw, mw = at.width, at.multiplier_width
    requant = op == SimdOp.REQUANTIZE
    y = (a.sign_extended(aw + 1) + bias.sign_extended(aw + 1))[:aw + 1]
    m = b[:f.multiplier_bits].zero_extended(mw)
    lhs = pyrtl.select(requant, y, a.sign_extended(aw + 1))
    rhs = pyrtl.select(requant, m, fixed.saturate(b, mw))
    prod = pyrtl.signed_mult(lhs, rhs)                      # (aw + 1) + mw bits, exact
    pw = prod.bitwidth + 1
    s = b[f.shift_lo:f.shift_lo + SHIFT_BITS]
    # |prod| < 2^(pw-2): any shift of pw - 1 or more rounds it to 0, as pw - 1 itself does,
    # so the shifter is only pw bits wide
    if pw - 1 < (1 << SHIFT_BITS) - 1:
        s = pyrtl.select(s > pw - 1, Const(pw - 1, SHIFT_BITS), s)
    zp = b[f.zero_point_lo:f.zero_point_lo + f.zero_point_bits]
    half = pyrtl.shift_right_logical(pyrtl.shift_left_logical(Const(1, pw), s), Const(1, 1))
    mask = ~pyrtl.shift_left_logical(Const((1 << pw) - 1, pw), s)
    up = pyrtl.shift_right_arithmetic((prod.sign_extended(pw) + half)[:pw], s)
    tie = (s != 0) & ((prod.sign_extended(pw) & mask) == half)
    q = (up - (tie & up[0]).zero_extended(pw))[:pw]           # round half to even
    r = (q.sign_extended(pw + 1) + zp.sign_extended(pw + 1))[:pw + 1]
    return {"mul": fixed.saturate(prod, aw), "requantize": fixed.saturate(r, aw)}


class SimdArray:
    """n SIMD ALUs with ``registers`` vector registers and optional lookup tables.

    Args:
        n: lanes.
        dt: the fixed-point or integer data type (W = ``dt.accumulator.width``: ``dt.width``
            but for the integer types, 32 or 48; table entries are ``dt.width`` bits).
        registers: vector registers r = 1..registers (``simd_registers_depth``).
        lut_count: value tables N (0: no Lookup op and no ``lut`` port).
        lut_depth: scalars per table D.
        name: prefix of the wires.

    Ports:
        command: :class:`~tcu_hw.blocks.stream.Stream` sink, always ready: ``op`` (OPB =
            :func:`~tcu_hw.isa.simd_op_bits`), ``left``, ``right``, ``dest`` (R =
            :func:`~tcu_hw.isa.simd_selector_bits` each, at least 1), ``input`` (n·W).
        out: output (n·W), the result, combinational from ``command`` of the same cycle.
        lut (only with ``lut_count``): sink, always ready: ``table`` (clog2(N+1)), ``index``
            (clog2(ceil(D/n))), ``data`` (n·``dt.width``): scalars ``index·n .. index·n + n-1`` of table
            ``table`` (0 = keys).

    Latency: ``out`` in the cycle of the command; register and table writes take effect
    for the next cycle.
    """

    def __init__(self, n: int, dt: DataType, registers: int, lut_count: int = 0,
                 lut_depth: int = 0, name: str = "simd") -> None:
        if lut_count and lut_depth < 1:
            raise ValueError(f"SIMD array {name!r}: lookup tables need lut_depth >= 1")
        data_type = dt
        integer = dt.is_integer
        tw = dt.width                               # table entries
        dt = dt.accumulator                         # lanes and registers (INT32, INT48)
        w = dt.width
        depth, nlut, dlut = registers, lut_count, lut_depth
        op_bits = simd_op_bits(nlut, integer)
        rbits = max(simd_selector_bits(registers), 1)
        self.command = Stream(Struct(op=op_bits, left=rbits, right=rbits, dest=rbits,
                                     input=n * w), f"{name}_command", SINK, always_ready=True)
        cmd = self.command.payload

        regs = [Register(n * w, f"{name}_r{r}") for r in range(1, depth + 1)]

        def source(sel: WireVector) -> list[WireVector]:
            return lanes.split(pyrtl.mux(sel, cmd.input, *regs, default=Const(0, n * w))
                               if regs else cmd.input, n)

        left, right = source(cmd.left), source(cmd.right)
        bias = source((cmd.right + 1)[:rbits]) if integer else None    # Requantize's B
        one = Const(dt.one, w)
        zero = Const(0, w)

        def flag(c: WireVector) -> WireVector:
            return pyrtl.select(c, one, zero)

        inputs = lanes.split(cmd.input, n)
        op = cmd.op
        # one saturating adder and one comparator per lane serve several ops
        is_sub = (op == SimdOp.SUBTRACT) | (op == SimdOp.DECREMENT) | \
            ((op == SimdOp.LOOKUP) if nlut else Const(0, 1))
        use_one = (op == SimdOp.INCREMENT) | (op == SimdOp.DECREMENT)
        tables = None
        if nlut:
            tables = [[Register(tw, f"{name}_lut{t}_{k}") for k in range(dlut)]
                      for t in range(nlut + 1)]
        entries = tables                            # integer: W-bit entries, used wide
        if nlut and integer:
            entries = [[e.sign_extended(w) for e in t] for t in tables]
        results, lookup_values = [], []
        for i in range(n):
            a, b = left[i], right[i]
            a_true, b_true = a != 0, b != 0
            neg = (Const(0, w) - a)[:w]
            key, vals = None, None
            if nlut:
                # priority encoder: the highest k with key[k] <= a, else 0
                index = highest_set([pyrtl.signed_le(e, a) for e in entries[0]])
                key = pyrtl.mux(index, *entries[0], default=zero)
                vals = [pyrtl.mux(index, *entries[t], default=zero) for t in range(1, nlut + 1)]
                lookup_values.append(vals)
            operand = pyrtl.select(use_one, one, b)
            if nlut:
                operand = pyrtl.select(op == SimdOp.LOOKUP, key, operand)
            # a ± operand in one adder: {a, 1} + {operand ^ sub, sub}, then drop bit 0
            wide = w + 2
            flip = pyrtl.select(is_sub, Const((1 << wide) - 1, wide), Const(0, wide))
            lhs = pyrtl.concat(a.sign_extended(wide), Const(1, 1))
            rhs = pyrtl.concat(operand.sign_extended(wide) ^ flip, is_sub)
            sum_ = fixed.saturate((lhs + rhs)[1:wide + 1], w)
            gt = pyrtl.signed_gt(a, b)
            eq = a == b
            logic = pyrtl.select(op == SimdOp.NOT, ~a_true,
                                 pyrtl.select(op == SimdOp.AND, a_true & b_true, a_true | b_true))
            compare = gt | ((op == SimdOp.GREATER_THAN_EQUAL) & eq)
            # results by category, so ops that share hardware share one multiplexer input
            results.append({"input": inputs[i], "zero": zero, "move": a, "flag_logic": flag(logic),
                            "sum": sum_, "mul": fixed.mul(a, b, dt) if not integer else None,
                            "abs": pyrtl.select(a[-1], neg, a), "flag_cmp": flag(compare),
                            "minmax": pyrtl.select(gt ^ (op == SimdOp.MIN), a, b)})
            if integer:
                results[-1].update(integer_lane(a, b, bias[i], op, data_type))

        # lookup tables are loaded a vector at a time
        if nlut:
            self.lut = Stream(Struct(table=max(lut_table_bits(nlut), 1),
                                     index=max(clog2(lut_vectors(dlut, n)), 1), data=n * tw),
                              f"{name}_lut", SINK, always_ready=True)
            load = self.lut.payload
            data = lanes.split(load.data, n)
            for t in range(nlut + 1):
                for k in range(dlut):
                    hit = self.lut.valid & (load.table == t) & (load.index == k // n)
                    tables[t][k].next <<= pyrtl.select(hit, data[k % n], tables[t][k])

        category = {SimdOp.NOOP: "input", SimdOp.ZERO: "zero", SimdOp.MOVE: "move",
                    SimdOp.NOT: "flag_logic", SimdOp.AND: "flag_logic", SimdOp.OR: "flag_logic",
                    SimdOp.INCREMENT: "sum", SimdOp.DECREMENT: "sum", SimdOp.ADD: "sum",
                    SimdOp.SUBTRACT: "sum", SimdOp.MULTIPLY: "mul", SimdOp.ABS: "abs",
                    SimdOp.GREATER_THAN: "flag_cmp", SimdOp.GREATER_THAN_EQUAL: "flag_cmp",
                    SimdOp.MIN: "minmax", SimdOp.MAX: "minmax", SimdOp.LOOKUP: "sum",
                    SimdOp.REQUANTIZE: "requantize"}
        names = list(results[0])
        code = {nm: k for k, nm in enumerate(names)}
        cbits = max(clog2(len(names)), 1)
        count = SimdOp.defined_count(nlut)
        ops = set(range(count)) | ({int(SimdOp.REQUANTIZE)} if integer else set())
        sel = pyrtl.mux(op, *[Const(code[category[SimdOp(k)]] if k in ops else code["zero"],
                                    cbits) for k in range(1 << op_bits)])
        out = lanes.join([pyrtl.mux(sel, *[r[nm] for nm in names], default=zero)
                          for r in results])
        self.out = named(out, f"{name}_out")

        defined = (op != SimdOp.NOOP) & (op < count)
        if integer:
            defined = defined | (op == SimdOp.REQUANTIZE)
        is_lookup = (op == SimdOp.LOOKUP) if nlut else Const(0, 1)
        for r, reg in enumerate(regs, start=1):
            write = self.command.valid & defined & (cmd.dest == r)
            value = out
            if nlut:
                # a Lookup also writes value table t to register dest + t
                for t in range(1, nlut + 1):
                    if r - t < 0:
                        continue
                    hit = self.command.valid & is_lookup & (cmd.dest == r - t)
                    vt = lanes.join([lookup_values[i][t - 1] for i in range(n)])
                    value = pyrtl.select(hit, vt, value)
                    write = write | hit
            reg.next <<= pyrtl.select(write, value, reg)

    @classmethod
    def from_arch(cls, arch, name: str = "simd") -> "SimdArray":
        """The SIMD array of an :class:`~tcu_hw.arch.Architecture`."""
        return cls(arch.array_size, arch.dtype, arch.simd_registers_depth, arch.lut_count,
                   arch.lut_depth, name=name)
