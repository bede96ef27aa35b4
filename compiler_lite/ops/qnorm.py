"""QLayerNorm: LayerNormalization over the last axis of an integer tensor (docs/integer.md,
"LayerNorm"), against onnxruntime's float LayerNorm between DequantizeLinear and
QuantizeLinear. INT8 figures below (INT16: :class:`Fixed`).

With q a row's C integers and A = Σq, the normalized value is free of the input's scale:

    (x_i − mean) / √(var + ε) = d_i / √D,   d_i = C·q_i − A,
    D = C·Σq² − A² + round(C²·ε / s_x²)

so a row needs exact integer sums and one inverse square root, which the lanes compute
(one layer, each row along the lanes, lane k of a row's vectors holding its channel k)::

    x ──▶ every element broadcast to all lanes (a MatMul each) ──▶ B
    A = Σ_row B;  B = C·B²;  Q = Σ_row B                     (Reduce chains)
    per row:  D = Q − A² + ε steps (below 2^31: C ≤ 362);  f multiplications by 4 while
              D < 2^14, then e = #{k: D ≥ 2^(14 + 2k)}: D' = round(D·4^f / 4^e) in
              [2^14, 2^16); u₀ ≈ 2^23/√D' from a table of D'/2^10; three Newton steps
              u ← u·(3·2^14 − D'·u²/2^32) / 2^15, each product a Requantize
    per element:  d = C·q − A;  z = ±round(d·u / 2^(e − f + 23 − Z)) = ±d/√D · 2^Z
              y = z_y + round((z + β·2^Z/|γ|) · |γ| / (2^Z·s_y))   (Requantize per channel)

Z = 16 (INT16: 24), fewer when |β|/|γ| leaves the accumulator less room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tcu_hw import numeric
from tcu_hw.isa import SimdOp as Op

from ..kernels import Reduce, Simd, SimdStep, register_step
from ..quant import DOMAIN
from ..registry import op
from .integer import requantize, requantize_word
from .qtable import padded_tables, table_needs
from .softmax import broadcast_layer, lane_rows, rows_of_vectors

if TYPE_CHECKING:
    from ..lower import Lowering

#: the widest row: C·Σq² stays inside the accumulator (|q| ≤ 2^(W−1))
MAX_CHANNELS = 362
#: Newton steps
NEWTON_STEPS = 3
#: registers: the Newton pass uses R1..R9; the seed pass R(lut_count + 2)..(lut_count + 5)
REGISTERS = 9


@dataclass(frozen=True)
class Fixed:
    """The fixed point of the inverse square root for a data type of W bits (INT8 / INT16
    figures)."""

    m_bits: int     # Requantize multipliers: W + 8 (16 / 24)
    lo: int         # D' in [2^lo, 2^(lo + 2)) (14 / 22)
    u_bits: int     # u = 2^u_bits / √D' just below 2^m_bits (23 / 35)
    steps: int      # down: thresholds 2^(lo + 2k), k = 1..steps (8 / 12)
    up: int         # up: at most lo/2 multiplications by 4 bring D ≥ 1 to 2^lo (7 / 11)
    acc: int        # accumulator bits (32 / 48)

    @property
    def z_most(self) -> int:
        """Z at most: z's shift e − f + u_bits − Z stays ≥ 0 (16 / 24)."""
        return self.u_bits - self.up


def fixed(dt) -> Fixed:
    """The plan for integer type ``dt``, from its Requantize layout
    (:func:`tcu_hw.numeric.requantize_fields`): D' < 2^m_bits fits the multiplier field, and
    2^(lo + 2) = 2^m_bits is the shift field's unit, which the run-time shifts are built from
    (``_normalize_body`` reuses its threshold register for it)."""
    m = numeric.requantize_fields(dt).multiplier_bits
    if requantize_word(dt, 0, 1) != 1 << m:
        raise AssertionError(f"{dt.name}: the Requantize shift field no longer starts at bit {m}")
    acc = dt.accumulator_width
    return Fixed(m, m - 2, m + (m - 2) // 2, (acc - m) // 2, (m - 2) // 2, acc)


def registers_needed(arch) -> int:
    return max(REGISTERS, arch.lut_count + 5)


def check_qlayernorm(node, g, arch) -> list[str]:
    """Checker of QLayerNorm: a lookup table of at least 65 entries, the registers, rows of
    at most :data:`MAX_CHANNELS`."""
    shape = g.shapes.get(node.inputs[0])
    out = table_needs("an integer LayerNorm (its inverse square root's seed)", 1, 65,
                      registers_needed(arch), arch)
    if shape and shape[-1] > MAX_CHANNELS:
        out.append(f"rows of {shape[-1]} elements: an integer LayerNorm sums C·Σq² in the "
                   f"accumulators, so C ≤ {MAX_CHANNELS}")
    return out


def seed_table(fx: Fixed) -> tuple[np.ndarray, np.ndarray]:
    """(keys 0..64, values): u₀ = 1024·value ≈ 2^u_bits / √(key·2^(lo − 4)), below
    2^m_bits."""
    keys = np.arange(65)
    v = np.rint(2.0 ** (fx.u_bits - 10) / np.sqrt(np.maximum(keys, 1) * 2.0 ** (fx.lo - 4)))
    return keys, np.minimum(v, ((1 << fx.m_bits) - 1) // 1024).astype(np.int64)



def _row_passes(ctx: Lowering, Q, A, E, U, Z: int, eps_steps: int, lut_key: str,
                fx: Fixed) -> list:
    """The per-row steps (vectors ``rows`` of Q, A, E, U; see the module): Q ends holding
    D', E the Requantize parameters of z (u, e − f + c), U the inverse square root."""
    dt, n = ctx.arch.dtype, ctx.n
    rows = np.arange(Q.vectors)
    full = (lambda v: np.full(n, v, dtype=np.int64))
    base = ctx.arch.lut_count + 1
    keys, values = seed_table(fx)
    tables = padded_tables([keys, values] + [np.zeros(1)] * (ctx.arch.lut_count - 1),
                           ctx.arch.lut_depth)
    k = f"{lut_key}:row"
    # D = C·Σq² − A² + ε steps (Q holds C·Σq²)
    d = Simd(Q, rows, [("const", 2, f"{k}:eps")],
             [register_step(Op.MOVE, 0, 0, 1, read="aux"), register_step(Op.MULTIPLY, 1, 1, 1),
              register_step(Op.SUBTRACT, 0, 1, 1, read="self"), register_step(Op.ADD, 1, 2, 0, write="self")],
             rows, A, consts={f"{k}:eps": full(eps_steps)})
    normal = Simd(Q, rows, [("const", 4, f"{k}:thr"), ("zero", 7), ("const", 8, f"{k}:lo")],
                  _normalize_body(fx), rows, E,
                  consts={f"{k}:thr": full(1 << (fx.lo + 2)), f"{k}:lo": full(1 << fx.lo)})
    # u₀ = 1024·table[round(D' / 2^(lo − 4))]
    # (U's passes read D' as their aux vector, so a partition's rows of Q are resident)
    seed = Simd(U, rows, [("lut", lut_key), ("const", base + 2, f"{k}:by1024"),
                          ("zero", base + 3), ("const", base + 4, f"{k}:1024")],
                [register_step(Op.REQUANTIZE, 0, base + 2, base + 1, read="aux"),
                 register_step(Op.LOOKUP, base + 1, 0, 1), register_step(Op.MULTIPLY, 2, base + 4, 0, write="self")],
                rows, Q, consts={f"{k}:by1024": full(requantize_word(dt, 1, fx.lo - 4)),
                                 f"{k}:1024": full(1024)}, luts={lut_key: tables})
    newton = Simd(U, rows, [("zero", 5), ("const", 6, f"{k}:s16"), ("const", 7, f"{k}:s15"),
                            ("const", 8, f"{k}:three"), ("const", 9, f"{k}:max")],
                  _newton_body(), rows, Q,
                  consts={f"{k}:s16": full(requantize_word(dt, 0, fx.m_bits)),
                          f"{k}:s15": full(requantize_word(dt, 0, fx.lo + 1)),
                          f"{k}:three": full(3 << fx.lo),
                          f"{k}:max": full((1 << fx.m_bits) - 1)})
    # E = u + (e − f + c)·2^m_bits: the Requantize parameters of z
    c0 = fx.u_bits - Z
    params = Simd(E, rows, [("const", 2, f"{k}:s1"), ("const", 4, f"{k}:c0")],
                  [register_step(Op.MOVE, 0, 0, 1, read="aux"), register_step(Op.MULTIPLY, 2, 0, 3, read="self"),
                   register_step(Op.ADD, 3, 1, 3), register_step(Op.ADD, 3, 4, 0, write="self")], rows, U,
                  consts={f"{k}:s1": full(requantize_word(dt, 0, 1)), f"{k}:c0": full(requantize_word(dt, 0, c0))})
    return [d, normal, seed, newton, params]


def _normalize_body(fx: Fixed) -> list[SimdStep]:
    """D (the pass's vector) → D' = min(round(D·4^f / 4^e), 2^m_bits − 1) in place and
    e − f to the aux vector: f multiplications by 4 while D < 2^lo (R8), then e = #{k:
    D ≥ 2^(lo + 2k)} (R4 = 2^(lo + 2) = 2^m_bits, the Requantize shift field's unit)."""
    body = [register_step(Op.MOVE, 0, 0, 1, read="self")]
    for step in range(fx.up):                       # R9 = f, R3 = this step's bit
        bit = 9 if step == 0 else 3
        body += [register_step(Op.GREATER_THAN, 8, 1, bit)] + ([register_step(Op.ADD, 9, 3, 9)] if step else [])
        body += [register_step(Op.MULTIPLY, 1, bit, 6), register_step(Op.ADD, 1, 6, 1), register_step(Op.ADD, 1, 6, 1),
                 register_step(Op.ADD, 1, 6, 1)]
    body += [register_step(Op.MOVE, 4, 4, 2), register_step(Op.GREATER_THAN_EQUAL, 1, 2, 5)]   # R5 = e
    for _ in range(fx.steps - 1):
        body += [register_step(Op.ADD, 2, 2, 2), register_step(Op.ADD, 2, 2, 2),
                 register_step(Op.GREATER_THAN_EQUAL, 1, 2, 3), register_step(Op.ADD, 5, 3, 5)]
    body += [register_step(Op.MULTIPLY, 4, 5, 6), register_step(Op.ADD, 6, 6, 6), register_step(Op.INCREMENT, 6, 6, 6),
             register_step(Op.REQUANTIZE, 1, 6, 3),                      # (M 1, shift 2e), bias R7 = 0
             register_step(Op.MOVE, 4, 4, 2), register_step(Op.DECREMENT, 2, 2, 2),
             register_step(Op.MIN, 3, 2, 0, write="self"),
             register_step(Op.SUBTRACT, 5, 9, 5), register_step(Op.MOVE, 5, 5, 0, write="aux")]
    return body


def _newton_body() -> list[SimdStep]:
    """u (R1, the pass's own vector) ← u·(3·2^lo − D'·u²/2^(2·m_bits))/2^(lo + 1), three
    times (INT8: 3·2^14 − D'·u²/2^32, /2^15); D' is the aux vector. R4/R5: Requantize
    parameters and a zero bias; R6, R7: the shifts m_bits and lo + 1; R8 3·2^lo."""
    body = [register_step(Op.MOVE, 0, 0, 1, read="self")]
    for _ in range(NEWTON_STEPS):
        body += [register_step(Op.ADD, 1, 6, 4), register_step(Op.REQUANTIZE, 1, 4, 2),           # t = u·u/2^m
                 register_step(Op.ADD, 0, 6, 4, read="aux"), register_step(Op.REQUANTIZE, 2, 4, 3),   # w = t·D'/2^m
                 register_step(Op.SUBTRACT, 8, 3, 3), register_step(Op.ADD, 3, 7, 4),             # 3·2^lo − w
                 register_step(Op.REQUANTIZE, 1, 4, 1), register_step(Op.MIN, 1, 9, 1)]           # u·that/2^(lo+1)
    body.append(register_step(Op.MOVE, 1, 1, 0, write="self"))
    return body


@op("QLayerNorm", check=check_qlayernorm, needs_lut=True, domain=DOMAIN)
def qlayernorm(node, ctx: Lowering):
    """LayerNormalization of an integer tensor over its last axis (see the module)."""
    n = ctx.n
    px, out = node.attr("x"), node.outputs[0]
    axis = len(ctx.tensor(node.inputs[0]).shape) - 1
    name, vec, lane = lane_rows(ctx, node, node.inputs[0], axis, flat=True)
    t = ctx.tensor(name)
    R, C = vec.shape
    width = ctx.arch.dtype.width
    fx = fixed(ctx.arch.dtype)
    # D ≤ C·Σq² + ε steps ≤ C²·2^(2W−2) + ε steps stays below 2^(acc−1)
    eps_steps = int(min(np.rint(C * C * float(node.attr("epsilon")) / float(px.scale) ** 2),
                        (1 << (fx.acc - 1)) - 1 - C * C * (1 << (2 * width - 2))))
    Z = _z_bits(ctx, node, C, fx)
    layer, B, buf_y, ty, load = broadcast_layer(ctx, out, t, vec, lane)
    A, Q = ctx.space.new(f"{out}:sum", R), ctx.space.new(f"{out}:squares", R)
    E, U = ctx.space.new(f"{out}:shift", R), ctx.space.new(f"{out}:rsqrt", R)
    every, indptr = np.arange(R * C), np.arange(R + 1, dtype=np.int64) * C
    kc = f"{out}:C"
    member, row_of = rows_of_vectors(ctx, ty, buf_y, axis)
    layer.steps += [
        Reduce(A, B, indptr, every, op=Op.ADD),
        Simd(B, every, [("const", 1, kc)], [register_step(Op.MULTIPLY, 0, 0, 2, read="self"),
                                             register_step(Op.MULTIPLY, 2, 1, 0, write="self")],
             consts={kc: np.full(n, C)}),
        Reduce(Q, B, indptr, every, op=Op.ADD),
        *_row_passes(ctx, Q, A, E, U, Z, eps_steps, f"{out}:seed", fx),
        load,
        Simd(buf_y, member, [("const", 2, kc)],
             [register_step(Op.MOVE, 0, 0, 1, read="aux"), register_step(Op.MULTIPLY, 0, 2, 3, read="self"),
              register_step(Op.SUBTRACT, 3, 1, 0, write="self")], row_of, A)]
    _normalize(ctx, node, layer, ty, E, member, row_of, Z)
    ctx.notes.append(f"{node.label}: inverse square root of each {C}-element row by a "
                     f"65-entry seed and {NEWTON_STEPS} Newton steps ({fx.m_bits} bits)")
    ctx.set(out, ty)


def _z_bits(ctx: Lowering, node, C: int, fx: Fixed) -> int:
    """Z: fraction bits of z, ``fx.z_most`` or fewer when the largest |z| (√C·2^Z) plus the
    largest bias (|β|/|γ|·2^Z) would leave the accumulator."""
    gamma = np.abs(np.asarray(node.attr("gamma"), dtype=np.float64))
    beta = np.abs(np.asarray(node.attr("beta"), dtype=np.float64))
    ratio = float(np.max(beta / np.where(gamma != 0, gamma, 1.0), initial=0.0))
    room = (fx.acc - 2) - int(np.ceil(np.log2(np.sqrt(C) + ratio + 1.0)))
    Z = min(fx.z_most, room)
    if Z < 8:
        ctx.fail(f"its bias is up to {ratio:.3g} times its scale (|β|/|γ|): the normalized "
                 f"value would keep only {Z} fraction bits in {ctx.arch.dtype.accumulator.name}"
                 f" (at least 8 needed)")
    return Z


def _normalize(ctx: Lowering, node, layer, ty, E, member, row_of, Z: int) -> None:
    """z = ±d·u / 2^(e + c) per element (the sign of γ per channel), then Requantize per
    channel by |γ| / (2^Z·s_y) with bias β·2^Z / |γ| (γ = 0: by 1 / (2^Z·s_y), bias β·2^Z)."""
    n = ctx.n
    out = node.outputs[0]
    gamma = np.asarray(node.attr("gamma"), dtype=np.float64)
    beta = np.asarray(node.attr("beta"), dtype=np.float64)
    C = len(gamma)
    sign = np.sign(gamma).astype(np.int64)
    mag = np.where(gamma != 0, np.abs(gamma), 1.0)
    rows = (ty.idx.reshape(-1, C) // n)[:, ::n] - layer.out.start     # (rows, blocks)
    for cob in range(rows.shape[1]):
        lanes = np.arange(cob * n, cob * n + n)
        ks = f"{out}:sign{cob}"
        sel = np.isin(member, rows[:, cob])
        layer.steps.append(Simd(
            layer.out, member[sel], [("zero", 3), ("const", 5, ks)],
            [register_step(Op.MOVE, 0, 0, 2, read="aux"), register_step(Op.REQUANTIZE, 0, 2, 4, read="self"),
             register_step(Op.MULTIPLY, 4, 5, 0, write="self")], row_of[sel], E,
            consts={ks: np.where(lanes < C, sign[np.minimum(lanes, C - 1)], 0)}))
    bias = np.rint(beta * 2.0 ** Z / mag).astype(np.int64)
    requantize(ctx, layer, rows, mag / 2.0 ** Z, bias, node.attr("y"), node.attr("clip"), out)
