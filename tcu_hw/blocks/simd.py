"""SIMD ALU array (TCU.md §4.4–4.6): one ALU per lane, vector registers, lookup tables.

Each cycle with ``valid`` the array computes ``out = op(left, right)`` lane-wise, where a
source 0 is the ``input`` vector and source r is register r, and at the end of the cycle writes
register ``dest`` (if non-zero) with ``out``. Ops and their results are those of
:func:`tcu_hw.alu.simd_result` (NoOp passes the input through and writes nothing).

Lookup (op 16, only with ``lut_count = N ≥ 1``): k = the largest index with
``key[k] <= left`` (0 below the first key, a priority encoder); ``out = left - key[k]``
(saturating) goes to register ``dest`` (if non-zero) and ``value_t[k]`` to register
``dest + t`` for t = 1..N. The tables (one key table and N value tables of ``lut_depth``
scalars) are shared by all lanes and loaded a vector at a time: ``lut_valid`` writes scalars
``lut_index·n .. lut_index·n + n-1`` of table ``lut_table`` from ``lut_data``.

Ports (``name_`` prefix): inputs ``valid`` (1), ``op`` (OPB), ``left``, ``right``, ``dest``
(R bits each), ``input`` (n·W), ``lut_valid`` (1), ``lut_table`` (clog2(N+1)), ``lut_index``
(clog2(ceil(D/n))), ``lut_data`` (n·W). Output ``out`` (n·W), combinational from the inputs
of the same cycle. Register writes take effect for the next cycle. Undefined ops, registers
beyond the depth and Lookups that would overflow the registers are refused by the decoder
before they get here (they give 0 and write nothing here).
"""

from __future__ import annotations

import math

import pyrtl
from pyrtl import Const, Register, WireVector

from ..arch import Architecture
from ..isa import SimdOp, clog2
from . import fixed, lanes
from .stream import name_ports


class SimdArray:
    def __init__(self, arch: Architecture, name: str = "simd") -> None:
        dt, n = arch.dtype, arch.array_size
        w = dt.width
        lay = arch.layout
        depth, nlut, dlut = arch.simd_registers_depth, arch.lut_count, arch.lut_depth
        self.valid = WireVector(1, f"{name}_valid")
        self.op = WireVector(lay.simd_op_bits, f"{name}_op")
        rbits = max(lay.R, 1)
        self.left = WireVector(rbits, f"{name}_left")
        self.right = WireVector(rbits, f"{name}_right")
        self.dest = WireVector(rbits, f"{name}_dest")
        self.input = WireVector(n * w, f"{name}_input")

        regs = [Register(n * w, f"{name}_r{r}") for r in range(1, depth + 1)]
        self.registers = regs

        def source(sel: WireVector) -> list[WireVector]:
            return lanes.split(pyrtl.mux(sel, self.input, *regs, default=Const(0, n * w))
                               if regs else self.input, n)

        left, right = source(self.left), source(self.right)
        one = Const(dt.one, w)
        zero = Const(0, w)

        def flag(c: WireVector) -> WireVector:
            return pyrtl.select(c, one, zero)

        inputs = lanes.split(self.input, n)
        op = self.op
        # one saturating adder and one comparator per lane serve several ops
        is_sub = (op == SimdOp.SUBTRACT) | (op == SimdOp.DECREMENT) | \
            ((op == SimdOp.LOOKUP) if nlut else Const(0, 1))
        use_one = (op == SimdOp.INCREMENT) | (op == SimdOp.DECREMENT)
        tables = None
        if nlut:
            tables = [[Register(w, f"{name}_lut{t}_{k}") for k in range(dlut)]
                      for t in range(nlut + 1)]
            self.tables = tables
        results, lookup_values = [], []
        for i in range(n):
            a, b = left[i], right[i]
            a_true, b_true = a != 0, b != 0
            neg = (Const(0, w) - a)[:w]
            key, vals = None, None
            if nlut:
                # priority encoder: the highest k with key[k] <= a, else 0
                index = Const(0, max(clog2(dlut), 1))
                for k in range(1, dlut):
                    index = pyrtl.select(pyrtl.signed_le(tables[0][k], a),
                                         Const(k, index.bitwidth), index)
                key = pyrtl.mux(index, *tables[0], default=zero)
                vals = [pyrtl.mux(index, *tables[t], default=zero) for t in range(1, nlut + 1)]
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
                            "sum": sum_, "mul": fixed.mul(a, b, dt),
                            "abs": pyrtl.select(a[-1], neg, a), "flag_cmp": flag(compare),
                            "minmax": pyrtl.select(gt ^ (op == SimdOp.MIN), a, b)})

        # lookup tables are loaded a vector at a time
        if nlut:
            vectors = math.ceil(dlut / n)
            self.lut_valid = WireVector(1, f"{name}_lut_valid")
            self.lut_table = WireVector(max(clog2(nlut + 1), 1), f"{name}_lut_table")
            self.lut_index = WireVector(max(clog2(vectors), 1), f"{name}_lut_index")
            self.lut_data = WireVector(n * w, f"{name}_lut_data")
            data = lanes.split(self.lut_data, n)
            for t in range(nlut + 1):
                for k in range(dlut):
                    hit = self.lut_valid & (self.lut_table == t) & (self.lut_index == k // n)
                    tables[t][k].next <<= pyrtl.select(hit, data[k % n], tables[t][k])

        category = {SimdOp.NOOP: "input", SimdOp.ZERO: "zero", SimdOp.MOVE: "move",
                    SimdOp.NOT: "flag_logic", SimdOp.AND: "flag_logic", SimdOp.OR: "flag_logic",
                    SimdOp.INCREMENT: "sum", SimdOp.DECREMENT: "sum", SimdOp.ADD: "sum",
                    SimdOp.SUBTRACT: "sum", SimdOp.MULTIPLY: "mul", SimdOp.ABS: "abs",
                    SimdOp.GREATER_THAN: "flag_cmp", SimdOp.GREATER_THAN_EQUAL: "flag_cmp",
                    SimdOp.MIN: "minmax", SimdOp.MAX: "minmax", SimdOp.LOOKUP: "sum"}
        names = list(results[0])
        code = {nm: k for k, nm in enumerate(names)}
        cbits = max(clog2(len(names)), 1)
        sel = pyrtl.mux(op, *[Const(code[category[SimdOp(k)]] if k < 16 or (k == 16 and nlut)
                                    else code["zero"], cbits)
                              for k in range(1 << lay.simd_op_bits)])
        out = [pyrtl.mux(sel, *[r[nm] for nm in names], default=zero) for r in results]
        self.out = lanes.join(out)

        defined = (self.op != SimdOp.NOOP) & (self.op < (17 if nlut else 16))
        is_lookup = (self.op == SimdOp.LOOKUP) if nlut else Const(0, 1)
        for r, reg in enumerate(regs, start=1):
            write = self.valid & defined & (self.dest == r)
            value = self.out
            if nlut:
                # a Lookup also writes value table t to register dest + t
                for t in range(1, nlut + 1):
                    if r - t < 0:
                        continue
                    hit = self.valid & is_lookup & (self.dest == r - t)
                    vt = lanes.join([lookup_values[i][t - 1] for i in range(n)])
                    value = pyrtl.select(hit, vt, value)
                    write = write | hit
            reg.next <<= pyrtl.select(write, value, reg)
        name_ports(self, name)

    def connect_lut_idle(self) -> None:
        """Tie the LUT load port off (when the parent never loads tables)."""
        if hasattr(self, "lut_valid"):
            for wire in (self.lut_valid, self.lut_table, self.lut_index, self.lut_data):
                wire <<= 0
