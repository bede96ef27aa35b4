"""QSoftmax: Softmax of an INT8 tensor as onnxruntime's QLinearSoftmax computes it (what its
CPU provider runs for a QDQ int8 Softmax; docs/integer.md, "Softmax"):

    y_i = clamp(z_y + round(Y · e_i / Σ_j e_j)),   e_i = exp(s_x·(x_i − max_j x_j)),
    Y = floor(1 / s_y)

Here e is an integer, ``E(d) = round(2^P · exp(s_x·d))`` of the difference d in
−255..0, from two or three lookup tables (one byte each: ``E = 256·hi + lo`` or
``65536·hi + 256·mid + lo``), and the division is exact long division in the SIMD lanes
(round half up). One layer, rows along the lanes
(:func:`.softmax.lane_rows` relays them out when needed)::

    x ──▶ broadcast every element to all lanes (a MatMul each) ──▶ B
    M  = max over the row's B vectors (Reduce), minus 127
    B  = E(B − M)              (d + 127 in −128..127 indexes the tables)
    T  = 128 · Σ B over the row (Reduce, then one Multiply)
    y  = E(x − M), then 8 steps of long division of Y·y by T/128, + z_y

``P`` keeps 2·T below 2^31 and the top byte in range: P = min(14 or 22 (two or three
tables), 23 − ⌈log₂ K⌉) for rows of K elements.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tcu_hw.isa import SimdOp as Op

from ..kernels import Reduce, Simd, SimdStep
from ..quant import DOMAIN
from ..registry import op
from .qsoftmax16 import check16, lower16
from .qtable import padded_tables, signed_digits, table_needs
from .softmax import broadcast_layer, lane_rows, rows_of_vectors

if TYPE_CHECKING:
    from ..lower import Lowering

#: registers of the division pass (the exp pass uses those after Lookup's)
R_Y, R_ZP, R_T, R_REM, R_Q, R_BIT = 1, 2, 3, 4, 5, 6
#: quotient bits: Y · e_i / Σ e ≤ Y ≤ 255
BITS = 8


def exp_digits(arch) -> int:
    """Bytes of e: one value table each (three at most)."""
    return min(3, arch.lut_count)


def exp_bits(K: int, digits: int) -> int:
    """P of the module docstring for rows of ``K`` elements and e of ``digits`` bytes."""
    return min(8 * digits - 2, 23 - math.ceil(math.log2(max(K, 2))))


def check_qsoftmax(node, g, arch) -> list[str]:
    """Checker of QSoftmax: two 256-entry tables and the registers of both passes (INT16:
    :func:`.qsoftmax16.check16`)."""
    dt = arch.dtype
    shape = g.shapes.get(node.inputs[0])
    K = shape[int(node.attr("axis")) % len(shape)] if shape else 1
    if dt.width == 16:
        return check16(node, g, arch, K)
    out = table_needs("an INT8 Softmax (exp)", 2, 256, max(R_BIT, arch.lut_count + 3), arch)
    if exp_bits(K, exp_digits(arch)) < 8:
        out.append(f"rows of {K} elements leave exp fewer than 8 bits (at most 32768)")
    return out


def exp_table(scale: float, P: int, digits: int) -> list[np.ndarray]:
    """The bytes of e, highest first, for the inputs u = d + 127 in −128..127:
    ``Σ_j byte_j · 256^(digits−1−j) = round(2^P · exp(scale · d))``, each in −128..127."""
    d = np.arange(-128, 128) - 127
    return signed_digits(np.rint(2.0 ** P * np.exp(np.float64(scale) * d)), digits, 8)


def _exp_pass(ctx: Lowering, buf, vecs, aux, M, key: str, tables) -> Simd:
    """``buf[v] = E(buf[v] − M[aux])`` (M holds the row maximum minus 127): Lookup writes
    the bytes of e to r2, r3, …, which are put together by multiplying by 256 and adding."""
    arch = ctx.arch
    r_d, r_256 = arch.lut_count + 2, arch.lut_count + 3
    k256 = f"{key}:256"
    body = [SimdStep(Op.MOVE, 0, 0, r_d, read="aux", write=None),
            SimdStep(Op.SUBTRACT, 0, r_d, r_d, read="self", write=None),
            SimdStep(Op.LOOKUP, r_d, 0, 1, read=None, write=None)]
    digits = exp_digits(arch)
    for j in range(3, 2 + digits):
        body += [SimdStep(Op.MULTIPLY, 2, r_256, 2, read=None, write=None),
                 SimdStep(Op.ADD, 2, j, 2, read=None, write=None)]
    body.append(SimdStep(Op.MOVE, 2, 2, 0, read=None, write="self"))
    return Simd(buf, vecs, [("lut", key), ("const", r_256, k256)], body, aux, M,
                consts={k256: np.full(ctx.n, 256)}, luts={key: tables})


def _division_body() -> list[SimdStep]:
    """``self = z_y + round(Y · self / S)`` with T = 128·S from the aux vector: long division
    by T of a remainder doubled after every step."""
    body = [SimdStep(Op.MOVE, 0, 0, R_T, read="aux", write=None),
            SimdStep(Op.MULTIPLY, 0, R_Y, R_REM, read="self", write=None)]
    for step in range(BITS):
        bit = R_Q if step == 0 else R_BIT               # the first bit starts the quotient
        body.append(SimdStep(Op.GREATER_THAN_EQUAL, R_REM, R_T, bit, read=None, write=None))
        if step:
            body += [SimdStep(Op.ADD, R_Q, R_Q, R_Q, read=None, write=None),
                     SimdStep(Op.ADD, R_Q, R_BIT, R_Q, read=None, write=None)]
        body += [SimdStep(Op.MULTIPLY, R_T, bit, R_BIT, read=None, write=None),
                 SimdStep(Op.SUBTRACT, R_REM, R_BIT, R_REM, read=None, write=None),
                 SimdStep(Op.ADD, R_REM, R_REM, R_REM, read=None, write=None)]
    # the remainder is now 2^BITS·r: round up when 2r ≥ S
    body += [SimdStep(Op.GREATER_THAN_EQUAL, R_REM, R_T, R_BIT, read=None, write=None),
             SimdStep(Op.ADD, R_Q, R_BIT, R_Q, read=None, write=None)]
    body.append(SimdStep(Op.ADD, R_Q, R_ZP, 0, read=None, write="self"))
    return body


@op("QSoftmax", check=check_qsoftmax, needs_lut=True, domain=DOMAIN)
def qsoftmax(node, ctx: Lowering):
    """Softmax of an INT8 tensor (see the module; INT16: :mod:`.qsoftmax16`)."""
    arch, n = ctx.arch, ctx.n
    px, py, out = node.attr("x"), node.attr("y"), node.outputs[0]
    axis = int(node.attr("axis")) % len(ctx.tensor(node.inputs[0]).shape)
    name, vec, lane = lane_rows(ctx, node, node.inputs[0], axis, flat=True)
    t = ctx.tensor(name)
    if arch.dtype.width == 16:
        return lower16(ctx, node, t, vec, lane, axis)
    R, K = vec.shape
    digits = exp_digits(arch)
    P, Y = exp_bits(K, digits), int(np.floor(np.float32(1.0) / np.float32(py.scale)))
    if not 1 <= Y < 1 << BITS:
        ctx.fail(f"its output scale {py.scale:g} gives floor(1/scale) = {Y}; an INT8 "
                 f"Softmax needs 1..255")
    key = f"{out}:exp"
    tables = padded_tables([np.arange(-128, 128), *exp_table(px.scale, P, digits)] +
                           [np.zeros(1)] * (arch.lut_count - digits), arch.lut_depth)
    layer, B, buf_y, ty, load = broadcast_layer(ctx, out, t, vec, lane)
    M, S = ctx.space.new(f"{out}:max", R), ctx.space.new(f"{out}:sum", R)
    rows, every = np.arange(R), np.arange(R * K)
    indptr = np.arange(R + 1, dtype=np.int64) * K
    ks, kt = f"{out}:minus_127", f"{out}:times_128"
    member, row_of = rows_of_vectors(ctx, ty, buf_y, axis)
    ky, kz = f"{out}:Y", f"{out}:zero_point"
    layer.steps += [
        Reduce(M, B, indptr, every, op=Op.MAX),
        Simd(M, rows, [("const", 1, ks)], [SimdStep(Op.ADD, 0, 1, 0)],
             consts={ks: np.full(n, -127)}),
        _exp_pass(ctx, B, every, every // K, M, key, tables),
        Reduce(S, B, indptr, every, op=Op.ADD),
        Simd(S, rows, [("const", 1, kt)], [SimdStep(Op.MULTIPLY, 0, 1, 0)],
             consts={kt: np.full(n, 128)}),
        load,
        _exp_pass(ctx, buf_y, member, row_of, M, key, tables),
        Simd(buf_y, member, [("const", R_Y, ky), ("const", R_ZP, kz)], _division_body(),
             row_of, S, consts={ky: np.full(n, Y), kz: np.full(n, py.zero_point)})]
    ctx.notes.append(f"{node.label}: exp of the {K}-element rows as {P}-bit integers "
                     f"(2^{P} at the row maximum), divided exactly")
    buf_y.dirty = True
    layer.sealed = True
    ctx.set(out, ty)
