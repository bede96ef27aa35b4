"""QSoftmax of an INT16 tensor (docs/integer.md, "Softmax"): onnxruntime computes it in
float32 between DequantizeLinear and QuantizeLinear, ``y = z_y + round(p_i / s_y)``, so the
lanes carry ~24 significant bits throughout. One layer, rows along the lanes, as the INT8
form (:mod:`.qsoftmax`)::

    d' = x − max + 65535 in 0..65535;  h = ⌊d'/256⌋, l = d' − 256·h   (h by a Requantize)
    E  = round(T1[h] · T2[l] / 2^23)       T1[h] = round(2^36·exp(256·s_x·(h − 255))),
                                           T2[l] = round(2^23·exp(s_x·(l − 255))):
                                           16-bit digits in three and two value tables
    S  = Σ E over the row (exact: K·2^36 < 2^47)
    per row: S' = S / 2^e in [2^22, 2^23) (e by comparisons); r ≈ 2^46/S' from a seed table
             and three Newton steps; M = round(r·round(2^7/s_y) / 2^24)
    y  = Requantize(E; M, shift 29 + e, z_y)   (E·M/2^(29+e) = E/(S·s_y))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tcu_hw import numeric
from tcu_hw.isa import SimdOp as Op

from ..kernels import Reduce, Simd, register_step
from .integer import requantize_word
from .qtable import padded_tables, signed_digits, table_needs
from .softmax import broadcast_layer, rows_of_vectors

if TYPE_CHECKING:
    from ..lower import Lowering

#: T1's scale (E at the row maximum), T2's, S' in [2^S_LO, 2^(S_LO + 1)), r's numerator
E_BITS, T2_BITS, S_LO, R_BITS = 36, 23, 22, 46
#: 2^Y_BITS / s_y is the output factor's constant (below 2^M_BITS)
Y_BITS = 7
#: INT16's Requantize multiplier field (:func:`tcu_hw.numeric.requantize_fields`): r, T2 and
#: the output factor are M_BITS-bit multipliers
M_BITS = numeric.requantize_fields(numeric.INT16).multiplier_bits
#: the longest row: S = Σ E below 2^47
MAX_ROW = 1024


def registers_needed(arch) -> int:
    """The exp pass of T2 uses R(lut_count + 2)..(lut_count + 9)."""
    return arch.lut_count + 9


def check16(node, g, arch, K: int) -> list[str]:
    """Why an INT16 Softmax cannot be lowered on ``arch`` (rows of ``K``)."""
    out = table_needs("an INT16 Softmax (exp)", 3, 256, registers_needed(arch), arch)
    if K > MAX_ROW:
        out.append(f"rows of {K} elements: an INT16 Softmax sums exp in 48 bits, so at most "
                   f"{MAX_ROW}")
    return out


def exp_tables(scale: float, lut_count: int, depth: int) -> tuple[list, list]:
    """(T1's tables, T2's tables) for keys 0..255, padded to the architecture's tables."""
    k = np.arange(256)
    t1 = np.rint(2.0 ** E_BITS * np.exp(256.0 * float(scale) * (k - 255))).astype(np.int64)
    t2 = np.rint(2.0 ** T2_BITS * np.exp(float(scale) * (k - 255))).astype(np.int64)
    pad = [np.zeros(1)] * (lut_count - 3)
    return (padded_tables([k, *signed_digits(t1, 3, 16), *pad], depth),
            padded_tables([k, *signed_digits(t2, 2, 16), np.zeros(1), *pad], depth))




def _exp_passes(ctx: Lowering, buf, vecs, W, key: str, tables) -> list[Simd]:
    """``buf[v]`` (d') → E, through accumulator buffer ``W`` (T1, paired vector by vector)."""
    dt, n = ctx.arch.dtype, ctx.n
    b = ctx.arch.lut_count + 2
    full = (lambda v: np.full(n, v, dtype=np.int64))
    pair = np.arange(len(vecs))
    kh, kb, k16 = f"{key}:h", f"{key}:half", f"{key}:digit"
    split = [register_step(Op.ADD, 0, 0, b, read="self"), register_step(Op.REQUANTIZE, b, b + 1, b)]   # h
    consts = {kh: full(requantize_word(dt, 1, 9)), kb: full(-255), k16: full(1 << 16)}
    first = Simd(buf, vecs, [("lut", f"{key}:t1"), ("const", b + 1, kh), ("const", b + 2, kb),
                             ("const", b + 3, k16)],
                 split + [register_step(Op.LOOKUP, b, 0, 1), register_step(Op.MULTIPLY, 2, b + 3, 2),
                          register_step(Op.ADD, 2, 3, 2), register_step(Op.MULTIPLY, 2, b + 3, 2),
                          register_step(Op.ADD, 2, 4, 0, write="aux")], pair, W,
                 consts=consts, luts={f"{key}:t1": tables[0]})
    k256, ks = f"{key}:256", f"{key}:shift"
    second = Simd(buf, vecs, [("lut", f"{key}:t2"), ("const", b + 1, kh), ("const", b + 2, kb),
                              ("const", b + 3, k256), ("const", b + 4, k16),
                              ("const", b + 5, ks), ("zero", b + 7)],
                  split + [register_step(Op.MULTIPLY, b, b + 3, b),
                           register_step(Op.SUBTRACT, 0, b, b, read="self"),            # l
                           register_step(Op.LOOKUP, b, 0, 1), register_step(Op.MULTIPLY, 2, b + 4, 2),
                           register_step(Op.ADD, 2, 3, 2), register_step(Op.ADD, 2, b + 5, b + 6),  # M = T2
                           register_step(Op.MOVE, 0, 0, b, read="aux"),                  # T1
                           register_step(Op.REQUANTIZE, b, b + 6, 0, write="self")], pair, W,
                  consts={**consts, k256: full(256), ks: full(requantize_word(dt, 0, T2_BITS))},
                  luts={f"{key}:t2": tables[1]})
    return [first, second]


def _row_passes(ctx: Lowering, S, Ex, Rc, py, yc: int, key: str) -> list:
    """Per row: S → S' (in place) and its shift e; Rc = r ≈ 2^46/S'; Ex = the output's
    Requantize parameters (M, 29 + e, z_y)."""
    dt, n, arch = ctx.arch.dtype, ctx.n, ctx.arch
    rows = np.arange(S.vectors)
    full = (lambda v: np.full(n, v, dtype=np.int64))
    k = f"{key}:row"
    # e = 14 + #{k in 1..10: S ≥ 2^(36 + k)}; S' = round(S / 2^e)
    body = [register_step(Op.MOVE, 8, 8, 1), register_step(Op.GREATER_THAN_EQUAL, 0, 1, 2, read="self")]
    for _ in range(9):
        body += [register_step(Op.ADD, 1, 1, 1), register_step(Op.GREATER_THAN_EQUAL, 0, 1, 3, read="self"),
                 register_step(Op.ADD, 2, 3, 2)]
    body += [register_step(Op.MULTIPLY, 6, 2, 4), register_step(Op.ADD, 4, 7, 4),
             register_step(Op.REQUANTIZE, 0, 4, 0, read="self", write="self"),
             register_step(Op.ADD, 2, 9, 2), register_step(Op.MOVE, 2, 2, 0, write="aux")]
    shift = Simd(S, rows, [("const", 8, f"{k}:thr"), ("zero", 5), ("const", 6, f"{k}:s1"),
                           ("const", 7, f"{k}:p14"), ("const", 9, f"{k}:14")], body, rows, Ex,
                 consts={f"{k}:thr": full(1 << (E_BITS + 1)), f"{k}:s1": full(requantize_word(dt, 0, 1)),
                         f"{k}:p14": full(requantize_word(dt, 1, E_BITS - S_LO)), f"{k}:14": full(14)})
    b = arch.lut_count + 2
    keys = np.arange(129)
    vals = np.minimum(np.rint(2.0 ** (R_BITS - 16 - 10) / np.maximum(keys, 1)),
                      ((1 << M_BITS) - 1) // 1024)
    seed = Simd(Rc, rows, [("lut", f"{k}:seed"), ("const", b + 1, f"{k}:p16"), ("zero", b + 2),
                           ("const", b + 3, f"{k}:1024")],
                [register_step(Op.REQUANTIZE, 0, b + 1, b, read="aux"), register_step(Op.LOOKUP, b, 0, 1),
                 register_step(Op.MULTIPLY, 2, b + 3, 0, write="self")], rows, S,
                consts={f"{k}:p16": full(requantize_word(dt, 1, 16)), f"{k}:1024": full(1024)},
                luts={f"{k}:seed": padded_tables([keys, vals] + [np.zeros(1)] *
                                                 (arch.lut_count - 1), arch.lut_depth)})
    body = [register_step(Op.MOVE, 0, 0, 1, read="self")]
    for _ in range(3):                  # r ← r·(2^M − S'·r/2^(M−1))/2^(M−1), M = M_BITS
        body += [register_step(Op.ADD, 1, 5, 3), register_step(Op.REQUANTIZE, 0, 3, 2, read="aux"),
                 register_step(Op.SUBTRACT, 6, 2, 2), register_step(Op.ADD, 2, 5, 3), register_step(Op.REQUANTIZE, 1, 3, 1),
                 register_step(Op.MIN, 1, 7, 1)]
    body.append(register_step(Op.MOVE, 1, 1, 0, write="self"))
    newton = Simd(Rc, rows, [("zero", 4), ("const", 5, f"{k}:s23"), ("const", 6, f"{k}:two"),
                             ("const", 7, f"{k}:max")], body, rows, S,
                  consts={f"{k}:s23": full(requantize_word(dt, 0, 23)), f"{k}:two": full(1 << M_BITS),
                          f"{k}:max": full((1 << M_BITS) - 1)})
    params = Simd(Ex, rows, [("const", 2, f"{k}:y"), ("zero", 3), ("const", 6, f"{k}:s1"),
                             ("const", 7, f"{k}:base")],
                  [register_step(Op.MOVE, 0, 0, 1, read="aux"), register_step(Op.REQUANTIZE, 1, 2, 4),
                   register_step(Op.MULTIPLY, 6, 0, 5, read="self"), register_step(Op.ADD, 5, 4, 5),
                   register_step(Op.ADD, 5, 7, 0, write="self")], rows, Rc,
                  consts={f"{k}:y": full(requantize_word(dt, yc, M_BITS)), f"{k}:s1": full(requantize_word(dt, 0, 1)),
                          f"{k}:base": full(requantize_word(dt, 0, R_BITS - M_BITS + Y_BITS,
                                                  py.zero_point))})
    return [shift, seed, newton, params]


def lower16(ctx: Lowering, node, t, vec, lane, axis: int) -> None:
    """Softmax of INT16 tensor ``t`` (rows ``vec``/``lane`` along ``axis``), as the module
    says."""
    n = ctx.n
    px, py, out = node.attr("x"), node.attr("y"), node.outputs[0]
    R, K = vec.shape
    yc = int(np.rint(2.0 ** Y_BITS / np.float64(np.float32(py.scale))))
    if not 1 <= yc < 1 << M_BITS:
        ctx.fail(f"its output scale {py.scale:g}: an INT16 Softmax needs 2^-7 ≤ 1/scale "
                 f"< 2^17")
    tables = exp_tables(px.scale, ctx.arch.lut_count, ctx.arch.lut_depth)
    layer, B, buf_y, ty, load = broadcast_layer(ctx, out, t, vec, lane)
    M, S, Ex, Rc = (ctx.space.new(f"{out}:{w}", R) for w in ("max", "sum", "shift", "rcp"))
    WB = ctx.space.new(f"{out}:t1", R * K)
    member, row_of = rows_of_vectors(ctx, ty, buf_y, axis)
    WY = ctx.space.new(f"{out}:t1y", len(member))
    rows, every = np.arange(R), np.arange(R * K)
    indptr = np.arange(R + 1, dtype=np.int64) * K
    km, key = f"{out}:offset", f"{out}:exp"

    def shifted(buf, vecs, of):           # d' = x − (max − 65535)
        return Simd(buf, vecs, [], [register_step(Op.MOVE, 0, 0, 1, read="aux"),
                                    register_step(Op.SUBTRACT, 0, 1, 0, read="self", write="self")],
                    of, M)

    layer.steps += [
        Reduce(M, B, indptr, every, op=Op.MAX),
        Simd(M, rows, [("const", 1, km)], [register_step(Op.ADD, 0, 1, 0, read="self", write="self")],
             consts={km: np.full(n, -65535)}),
        shifted(B, every, every // K), *_exp_passes(ctx, B, every, WB, key, tables),
        Reduce(S, B, indptr, every, op=Op.ADD),
        *_row_passes(ctx, S, Ex, Rc, py, yc, out),
        load, shifted(buf_y, member, row_of),
        *_exp_passes(ctx, buf_y, member, WY, key, tables),
        Simd(buf_y, member, [("zero", 2)],
             [register_step(Op.MOVE, 0, 0, 1, read="aux"),
              register_step(Op.REQUANTIZE, 0, 1, 0, read="self", write="self")], row_of, Ex)]
    ctx.notes.append(f"{node.label}: exp of the {K}-element rows to 2^{E_BITS} (two "
                     f"tables), the row sum's reciprocal by a seed and three Newton steps")
    buf_y.dirty = True
    layer.sealed = True
    ctx.set(out, ty)
