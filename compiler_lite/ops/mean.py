"""Exact averages: window sums that stay exact and in range, and division by a count without
a biased reciprocal.

A sum over ``d`` taps with unit weights is exact while it fits the data type, but its range is
only ``max / d`` for the mean. The taps are therefore cut into groups of ``g = 2^j`` taps
(:func:`group_bits`, ``g ≈ √d`` with at least four groups): each group sum ``G_i`` is exact,
the array adds ``round(G_i · 2^-j)`` (one rounding per group, not per tap) into
``T ≈ S / 2^j``, and ``T`` is divided by ``D = d / 2^j``. Both ``G_i`` and ``T`` hold means up
to ``max / √d`` (FP16BP8 over 7×7: 16, where a plain sum saturates above 2.6).

Dividing by ``D`` with one fixed-point multiply by ``round(2^bp / D)`` would bias every mean by
the reciprocal's representation error (1/49 in FP16BP8 is 5/256: 4.3% low). Instead, with
``m = ⌊log2 D⌋`` (0 ≤ m ≤ bp) and ``q = 2^m / D`` in (½, 1]:

::

    a = round(q·2^bp)                    high part of q        (raw, ≤ 2^bp)
    b = round((q − a/2^bp)·2^2bp)        low part, in units of 2^-2bp   (|b| ≤ 2^(bp-1))

    L  = T · b/2^bp          → temporary          (SIMD Multiply, register 1 = b)
    Z  = T · a/2^bp          → in place            (register 1 = a; skipped when a = 2^bp)
    Z += L · 2^-bp           accumulating write    (register 1 = raw 1; skipped when b = 0)
    y  = Z · 2^-m            → in place            (register 1 = 2^-m; skipped when m = 0)

``Z`` is ``T·2^m/D`` within 1.25 raw (three roundings of at most ½ raw, one of them scaled by
2^-bp, and the low part's own error ≤ ¼ raw over the whole range), and the last multiply
divides that by 2^m before one final rounding. The groups add at most ½ raw each to ``T``,
``⌈d/g⌉·g/(2d) ≤ 0.63`` raw in the mean. With ``m ≥ 2`` the mean is within 1.44 raw of the
exact quotient, so within one LSB of the exactly rounded mean (exactly rounded when ``d`` is
a power of two up to 4). Every step is one SIMD instruction per vector and needs one register.

Means beyond the groups' range make their sums saturate (large values of both signs can
saturate a group even when the mean is small). Every average therefore also computes a
full-range estimate: each tap scaled by ``2^-j`` (rounded) so that no group sum saturates,
the group sums scaled by ``2^-k`` (at most ``2^k`` groups), divided as above; within
``2^(j-1) + groups·2^(j+k-1)/d + 1.25`` raw (about 10 for 7×7; for windows of fewer than 8
taps, all taps scaled by ``2^-k`` with ``2^k ≥ d``: ``2^(k-1) + 1.25``). The exact result is
kept only where the two agree within their worst errors (:func:`within`), so the mean is
within one LSB of the exactly rounded one while no group sum saturates, and within twice
the estimate's bound plus 1.5 raw otherwise. Without a SIMD register (``simd_registers_depth``
0) the division is folded into the weights instead, as Tensil does (biased).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tcu_hw.isa import SimdOp as Op

from ..ir import Tensor, congruent_pairs, lane_table
from ..kernels import Load, Simd, SimdStep

if TYPE_CHECKING:
    from ..lower import Lowering


def group_bits(d: int, dt) -> int:
    """``j``: taps per exact group sum are ``2^j`` for a window of ``d`` taps (0: one exact
    sum). ``2^j ≈ √d`` balances the range of group sums and their total; ``d / 2^j ≥ 4``
    keeps the division's last shift ``m ≥ 2``; ``j ≤ bp`` keeps ``2^-j`` representable."""
    if dt.is_float or d < 8:
        return 0
    return int(max(0, min(round(np.log2(d) / 2), np.floor(np.log2(d / 4)), dt.binary_point)))


def reciprocal_parts(d, bp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, m) per divisor in ``d`` (> 0) for the binary point ``bp``: see the module
    docstring. ``a`` and ``b`` are raw integers, ``m`` the final shift."""
    d = np.asarray(d, dtype=np.float64)
    if not np.all(d > 0):
        raise ValueError(f"divisors must be positive, got {np.unique(d)[:4]}")
    m = np.clip(np.floor(np.log2(d)), 0, bp).astype(np.int64)
    q = np.ldexp(1.0, m) / d
    a = np.round(q * 2.0 ** bp).astype(np.int64)
    b = np.round((q - a / 2.0 ** bp) * 2.0 ** (2 * bp)).astype(np.int64)
    return a, b, m


class LanePasses:
    """SIMD passes over the vectors of ``t`` (the open ``layer``'s result) whose register 1
    holds a per-element constant: vectors are grouped by their constant vector, one pass per
    group (every architecture has one register)."""

    def __init__(self, ctx: Lowering, layer, t: Tensor, name: str) -> None:
        self.layer, self.name, self.t, self.n = layer, name, t, ctx.n
        self.vecs = np.unique(t.idx // ctx.n)
        self.rows = self.vecs - layer.out.start

    def table(self, values, fill: float = 1.0) -> np.ndarray:
        """(vectors, n) per-lane values (``values`` broadcast to the shape; ``fill`` in lanes
        outside the tensor)."""
        return lane_table(self.t, self.n, values, fill)[1]

    def run(self, table: np.ndarray, body, aux=None, aux_buf=None, tag: str = "") -> None:
        pats, of = np.unique(table, axis=0, return_inverse=True)
        of = of.ravel()
        for k, vec in enumerate(pats):
            sel = of == k
            key = f"{self.name}:{tag}:{k}"
            self.layer.steps.append(Simd(self.layer.out, self.rows[sel], [("const", 1, key)],
                                         body, None if aux is None else aux[sel], aux_buf,
                                         {key: vec}))

    def temporary(self, ctx: Lowering, tag: str):
        """(aux indices, buffer): one accumulator vector per vector of ``t``."""
        return np.arange(len(self.rows)), ctx.space.new(f"{self.name}:{tag}", len(self.rows))


def divide_in_place(ctx: Lowering, layer, t: Tensor, counts, name: str) -> None:
    """Divide ``t`` (the open ``layer``'s result, a sum) by ``counts`` (broadcast to its
    shape; positive) in place with the steps above. For FLOAT32 programs: one multiply by
    1/d."""
    dt = ctx.arch.dtype
    passes = LanePasses(ctx, layer, t, f"mean:{name}")
    table = passes.table(counts)
    if dt.is_float:
        passes.run(1.0 / table, [SimdStep(Op.MULTIPLY, 0, 1, 0)], tag="recip")
        return
    bp = dt.binary_point
    a, b, m = reciprocal_parts(table, bp)
    one = 2.0 ** bp
    if np.any(b != 0):
        aux, tmp = passes.temporary(ctx, "low")
        passes.run(b / one, [SimdStep(Op.MULTIPLY, 0, 1, 0, read="self", write="aux")],
                   aux, tmp, "low")
    if np.any(a != 2 ** bp):
        passes.run(a / one, [SimdStep(Op.MULTIPLY, 0, 1, 0)], tag="high")
    if np.any(b != 0):
        passes.run(np.full(table.shape, 1.0 / one),
                   [SimdStep(Op.MULTIPLY, 0, 1, 0, read="aux", write="self",
                             accumulate=True)], aux, tmp, "add")
    if np.any(m != 0):
        passes.run(np.ldexp(1.0, -m), [SimdStep(Op.MULTIPLY, 0, 1, 0)], tag="shift")


def within(ctx: Lowering, layer, t: Tensor, wide: Tensor, tol, name: str) -> None:
    """``t ← t if |t − wide| ≤ tol else wide`` in place: ``t`` (precise, but its sums may
    saturate) is kept wherever it agrees with ``wide`` (a full-range estimate) within
    ``tol``, the largest disagreement of two correct results; elsewhere ``t`` saturated and
    ``wide`` is the result. As SIMD passes: ``D = t − wide``, ``f = (tol ≥ |D|)`` (one or
    zero), ``t = wide + D·f``. ``wide`` must be stored like ``t`` (same lanes, one vector
    per vector)."""
    buf = layer.out
    pairs = congruent_pairs(t, wide, ctx.n)
    if pairs is None:
        ctx.fail(f"internal: '{name}': the full-range mean is stored differently")
    passes = LanePasses(ctx, layer, t, f"mean:{name}")
    order = np.searchsorted(pairs[0], passes.vecs)
    aux, tmp = passes.temporary(ctx, "wide")
    _, flags = passes.temporary(ctx, "agree")
    layer.steps.append(Load(tmp, aux, pairs[1][order]))
    layer.steps.append(Simd(buf, passes.rows, [], [          # D = t − wide
        SimdStep(Op.MOVE, 0, 0, 1, read="aux", write=None),
        SimdStep(Op.SUBTRACT, 0, 1, 0, read="self", write="self")], aux, tmp))
    layer.steps.append(Simd(buf, passes.rows, [], [          # |D|
        SimdStep(Op.ABS, 0, 0, 0, read="self", write="aux")], aux, flags))
    passes.run(passes.table(tol, fill=0.0),                  # f = tol ≥ |D|
               [SimdStep(Op.GREATER_THAN_EQUAL, 1, 0, 0, read="aux", write="aux")],
               aux, flags, "agree")
    layer.steps.append(Simd(buf, passes.rows, [], [          # D·f
        SimdStep(Op.MOVE, 0, 0, 1, read="aux", write=None),
        SimdStep(Op.MULTIPLY, 0, 1, 0, read="self", write="self")], aux, flags))
    layer.steps.append(Simd(buf, passes.rows, [], [          # + wide
        SimdStep(Op.MOVE, 0, 0, 0, read="aux", write="self", accumulate=True)], aux, tmp))


def finish_mean(ctx: Lowering, out_name: str, K: int, groups: int, j: int, div,
                grouped_sum, exact_err: float = 1.5, wide_bits: int | None = None) -> None:
    """``out_name`` = the mean of ``K`` taps divided by ``div`` (broadcast to the output),
    from ``grouped_sum(name, tap_weight, group_weight, req)``, which computes ``name`` =
    Σ over ``groups`` groups of ``group_weight · round(Σ tap_weight · x)`` (one group: the
    taps' plain sum): the exact path (groups of ``2^j`` taps at most, weights 1 and
    ``2^-j``) and, in fixed point, the full-range estimate that replaces it where its sums
    saturated (:func:`within`; ``exact_err``: the exact path's worst error, raw;
    ``wide_bits``: the estimate scales taps by ``2^-wide_bits`` instead of ``2^-j``, for
    groups larger than ``2^j`` taps)."""
    dt = ctx.arch.dtype
    wide = None
    if not dt.is_float and K > 1:
        # a full-range estimate: every tap scaled by 2^-j (rounded), so that no group sum
        # saturates, and the group sums by 2^-k (at most 2^k groups, so neither does their
        # total); worst error in the mean, raw: 2^(j-1) + groups·2^(j+k-1)/count + 1.25
        jw = (j if wide_bits is None else wide_bits) if groups > 1 else \
            min(int(np.ceil(np.log2(K))), dt.binary_point)
        k = min(int(np.ceil(np.log2(groups))), dt.binary_point) if groups > 1 else 0
        name = f"{out_name}:wide"
        grouped_sum(name, 2.0 ** -jw, 2.0 ** -k, name)
        layer, t = ctx.in_acc(name)
        divide_in_place(ctx, layer, t, div / 2.0 ** (jw + k), name)
        wide = ctx.tensor(name)
        err = 2.0 ** (jw - 1) + groups * 2.0 ** (jw + k - 1) / div + 1.25 \
            if groups > 1 else 2.0 ** (jw - 1) + 1.25
        # the exact result is kept where it agrees with the estimate within both errors
        tol = np.ceil(err + exact_err) / 2.0 ** dt.binary_point
    tmp = out_name + ":sum"
    grouped_sum(tmp, 1.0, 2.0 ** -j, out_name)
    layer, t = ctx.in_acc(tmp)
    divide_in_place(ctx, layer, t, div / 2.0 ** j, out_name)
    if wide is not None:
        within(ctx, layer, t, wide, tol, out_name)
    ctx.set(out_name, Tensor(t.idx))


class LaneGroups:
    """The groups of a mean whose rows sit along the lanes (rows ``(R, K)`` of virtual scalar
    indices; every vector holds elements of one row only): a group is a row's elements in
    one vector, at most ``cap`` of them (in lane order), summed exactly by one MatMul.
    ``slots[s]`` (R, V): the ``s``-th element of each group, -1 where a group has fewer."""

    def __init__(self, rows: np.ndarray, n: int, cap: int) -> None:
        R, K = rows.shape
        srt = np.sort(rows, axis=1)
        vec = srt // n
        new = np.ones((R, K), dtype=bool)
        new[:, 1:] = vec[:, 1:] != vec[:, :-1]
        start = np.maximum.accumulate(np.where(new, np.arange(K), 0), axis=1)
        new |= (np.arange(K) - start) % cap == 0        # a vector's elements, cap at a time
        group = np.cumsum(new, axis=1) - 1              # group number of each element
        start = np.maximum.accumulate(np.where(new, np.arange(K), 0), axis=1)
        slot = np.arange(K) - start                     # place within its group
        self.V, S = int(group.max()) + 1, int(slot.max()) + 1
        self.slots = np.full((S, R, self.V), -1, dtype=np.int64)
        self.slots[slot, np.arange(R)[:, None], group] = srt
        self.largest = S                                # elements of the largest group

    @staticmethod
    def of(x: Tensor, perm, n: int, cap: int | None = None) -> LaneGroups | None:
        """The lane groups of a mean over the axes after the first two of ``perm`` (the
        view :func:`.linear._mean_view` gives; groups of at most ``cap``, default n), or
        None when a vector holds elements of two rows or no vector holds two of a row (the
        spatial path is as good there)."""
        view = np.transpose(x.idx, perm)
        R = int(np.prod(view.shape[:2]))
        rows = view.reshape(R, -1)
        vecs = rows // n
        pairs = np.unique(np.stack([vecs.ravel(), np.repeat(np.arange(R), rows.shape[1])]),
                          axis=1)
        if len(np.unique(pairs[0])) != pairs.shape[1] or pairs.shape[1] >= rows.size:
            return None
        return LaneGroups(rows, n, cap or n)


def lane_average(ctx: Lowering, node, x: Tensor, out_name: str, perm) -> bool:
    """The mean over lanes (e.g. a LayerNorm's over the channels of [N, T, C]) without
    moving data: each vector's elements of a row (at most ``2^bp`` of them) sum exactly in
    one MatMul (a tile of ones in those lanes, the result in one lane of a vector of group
    sums), the group sums add with weight ``2^-j`` in a second, then the division and the
    full-range estimate of :func:`finish_mean`, whose taps are scaled so that the largest
    group cannot saturate. ``2^j`` is at most the largest group, so the roundings of the
    group sums cost at most ``groups·2^(j-1)/K`` raw (the exact path's error bound below).
    Without a SIMD register one MatMul per vector sums the whole row with weights 1/K, as
    :func:`.linear.average` does. False (nothing done) when the rows are not along the
    lanes (:meth:`LaneGroups.of`)."""
    n, dt = ctx.n, ctx.arch.dtype
    lg = LaneGroups.of(x, perm, n, None if dt.is_float else 2 ** dt.binary_point)
    if lg is None:
        return False
    out_shape = ctx.g.shape(out_name)
    R, V = lg.slots.shape[1:]
    K = int(np.count_nonzero(lg.slots[:, 0] >= 0))  # (every row has K elements)
    j = min(group_bits(K, dt), int(np.floor(np.log2(lg.largest)))) if V > 1 else 0
    groups = V if j > 0 else 1

    def sum_into(name, sources):
        buf, y = ctx.new_activation(name, out_shape)
        ctx.begin(buf, ctx.gather(buf, y, [(s.reshape(out_shape), w) for s, w in sources]))
        ctx.set(name, y, internal=True)

    def row_sum(name, tap_weight):
        sum_into(name, [(lg.slots[s, :, i], tap_weight)
                        for s in range(lg.slots.shape[0]) for i in range(V)])

    def grouped_sum(name, tap_weight, group_weight, req):
        if groups == 1:                         # one exact sum of every element
            row_sum(name, tap_weight)
            return
        W = -(-V // n)
        buf = ctx.space.new(f"{name}:groups", R * W)
        gi = np.arange(V)
        gidx = (buf.start + np.arange(R)[:, None] * W + gi // n) * n + gi % n
        real = lg.slots[0] >= 0
        gidx = np.where(real, gidx, -1)
        buf.set_extent(gidx[real], n)
        ctx.begin(buf, ctx.gather(buf, Tensor(gidx[real]), [(s[real], tap_weight)
                                                              for s in lg.slots]))
        ctx.set(f"{name}:groups", Tensor(gidx[real]), internal=True)
        sum_into(name, [(gidx[:, i], group_weight) for i in range(V)])

    if ctx.arch.simd_registers_depth < 1:           # as average(): 1/K in the weights
        row_sum(out_name + ":sum", 1.0)
        ctx.fold_affine(out_name + ":sum", 1.0 / K, 0.0, out_name)
        return True
    wide_bits = min(int(np.ceil(np.log2(lg.largest))), dt.binary_point) \
        if groups > 1 and not dt.is_float else None
    exact_err = max(1.5, groups * 2.0 ** (j - 1) / K + 1.25)
    finish_mean(ctx, out_name, K, groups, j, float(K), grouped_sum, exact_err, wide_bits)
    return True
