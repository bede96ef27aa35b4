"""QTable: an element-wise function of a quantized tensor through the SIMD lookup tables
(docs/integer.md, "Table functions"). :mod:`compiler_lite.quant` gives the node ``table``
(the quantized output for every input value, from the type's lowest up) and ``exact`` (the
same before rounding, in output LSB).

Two forms:

- **Steps** (exact, any integer type): a key at the first input of each run of equal
  outputs, the output as the value; ``Lookup`` then a move. Any INT8 function fits
  ``lut_depth`` 256; an INT16 function only when its output changes at most
  ``lut_depth − 1`` times.
- **Piecewise linear** (functions with more steps than ``lut_depth`` holds: INT16 ones, or
  INT8 ones with fewer than 256 entries; ``lut_count = N ≥ 3``, ``simd_registers_depth ≥
  N + 3``): per segment k starting at key ``x_k``, three values ``hi_k``, ``frac_k`` and
  ``slope_k`` give ``y = hi_k + RHE((slope_k·(x − x_k) + frac_k) / 2^s)``::

      Lookup     r1 = x − x_k, r2 = hi_k, r3 = frac_k, r4 = slope_k (r5..r(N+1): tables past
                 the third, unused)
      Multiply   r1 = r1 · r4                  (exact)
      Add        r1 = r1 + r3
      Requantize r1 = RHE(r1 / 2^s)            (r(N+2) = (M 1, s, zp 0), r(N+3) = 0)
      Add        out = r1 + r2

  Segments are fitted greedily to the exact values with the smallest error bound that fits
  ``lut_depth`` (each line through the segment's ends, shifted to halve its largest
  deviation); the compile notes give the largest error and the share of inputs that land
  on the exactly rounded output.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tcu_hw import numeric
from tcu_hw.isa import SimdOp as Op

from ..ir import Tensor
from ..kernels import Simd, SimdStep
from ..quant import DOMAIN
from ..registry import op
from .lut import lookup_registers

if TYPE_CHECKING:
    from ..lower import Lowering

#: piecewise-linear tables: value tables they need (and registers: ``lut_count + 3``)
LINEAR_TABLES = 3
#: registers of the piecewise-linear body that Lookup writes (see the module); the
#: Requantize parameters and its zero bias follow the last table's register
R_DIFF, R_HI, R_FRAC, R_SLOPE = 1, 2, 3, 4
#: steps narrowing the piecewise-linear error bound once one fits
BISECTIONS = 4


def table_entries(table: np.ndarray, dt) -> tuple[np.ndarray, np.ndarray]:
    """A QTable's step table: (keys, values), the first input value of each run of equal
    outputs and that output (``table`` holds the output of every input from ``dt.min_raw``
    up). With these keys Lookup (TCU.md §4.6: the largest k with key[k] ≤ x) returns every
    output exactly."""
    table = np.asarray(table, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], table[1:] != table[:-1]]))
    return starts + dt.min_raw, table[starts]


def steps_fit(arch, table) -> bool:
    """Whether the architecture's lookup tables hold ``table``'s steps (the exact form)."""
    dt = arch.dtype
    return table is not None and arch.lut_count >= 1 and not lookup_registers(arch) and \
        len(table_entries(table, dt)[0]) <= arch.lut_depth


def linear_registers(arch) -> int:
    """SIMD registers the piecewise-linear body needs: Lookup writes r1..r(lut_count + 1),
    then the Requantize parameters and its bias."""
    return arch.lut_count + 3


def _linear_ok(arch) -> bool:
    return arch.lut_count >= LINEAR_TABLES and \
        arch.simd_registers_depth >= linear_registers(arch)


def check_qtable(node, g, arch) -> list[str]:
    """Checker of QTable: the steps fit the lookup tables, or the piecewise-linear form has
    the tables and registers it needs."""
    dt = arch.dtype
    keys, _ = table_entries(node.attr("table"), dt)
    short = lookup_registers(arch)
    if short:
        return short
    if len(keys) <= arch.lut_depth or _linear_ok(arch):
        return []
    return [f"its table ({node.attr('functions')}) changes value {len(keys) - 1} times over "
            f"the {1 << dt.width} {dt.name} inputs; lut_depth {arch.lut_depth} holds "
            f"{arch.lut_depth} steps (lut_depth ≥ 256 makes every INT8 function exact); for "
            f"more steps a piecewise-linear table needs lut_count ≥ {LINEAR_TABLES} and "
            f"simd_registers_depth ≥ lut_count + 3 (the architecture has "
            f"{arch.lut_count} and {arch.simd_registers_depth})"]


def table_needs(what: str, count: int, depth: int, registers: int, arch) -> list[str]:
    """Why ``arch`` cannot run ``what``, which reads ``count`` value tables of ``depth``
    entries and uses ``registers`` SIMD registers (empty when it can)."""
    out = []
    if arch.lut_count < count or arch.lut_depth < depth:
        out.append(f"{what} reads {count} value table(s) of {depth} entries (lut_count ≥ "
                   f"{count}, lut_depth ≥ {depth}); the architecture has {arch.lut_count} "
                   f"and {arch.lut_depth}")
    if arch.simd_registers_depth < registers:
        out.append(f"{what} needs simd_registers_depth ≥ {registers} (the architecture has "
                   f"{arch.simd_registers_depth})")
    return out


def signed_digits(v, count: int, bits: int) -> list[np.ndarray]:
    """Integers ``v`` as ``count`` signed digits of ``bits`` bits, highest first
    (``Σ_j digit_j · 2^(bits·(count − 1 − j))``), every one but the highest in
    −2^(bits−1) .. 2^(bits−1) − 1: what value tables of that width hold."""
    v = np.asarray(v, dtype=np.int64)
    half, base = 1 << (bits - 1), 1 << bits
    out = []
    for _ in range(count - 1):
        low = (v + half) % base - half
        out.insert(0, low)
        v = (v - low) // base
    return [v] + out


def padded_tables(tables, depth: int) -> list:
    """Tables of ``depth`` entries (the last entry repeated: its key is the largest)."""
    return [np.concatenate([t, np.full(depth - len(t), t[-1])]).astype(np.float64)
            for t in tables]


@op("QTable", check=check_qtable, needs_lut=True, domain=DOMAIN)
def qtable(node, ctx: Lowering):
    """``y = f(x)`` through the lookup tables (module docstring); lanes past the tensor
    hold f of a zero input."""
    arch = ctx.arch
    dt = arch.dtype
    keys, values = table_entries(node.attr("table"), dt)
    out = node.outputs[0]
    layer, t = ctx.copy_layer(ctx.tensor(node.inputs[0]), out)
    vecs = ctx.vectors_in(t, layer.out)
    key = f"{out}:table"
    if len(keys) <= arch.lut_depth:
        layer.steps.append(Simd(layer.out, vecs, [("lut", key)],
                                [SimdStep(Op.LOOKUP, 0, 0, 1, read="self", write=None),
                                 SimdStep(Op.MOVE, 2, 2, 0, read=None, write="self")],
                                luts={key: padded_tables([keys, values], arch.lut_depth)}))
        at_zero = values[np.searchsorted(keys, 0, side="right") - 1]
    else:
        at_zero = _linear_steps(ctx, layer, vecs, node, key)
    if at_zero != 0:
        layer.out.dirty = True
    layer.sealed = True
    ctx.set(out, Tensor(t.idx))


def _linear_steps(ctx: Lowering, layer, vecs, node, key: str) -> int:
    """The piecewise-linear pass (module docstring); returns the output for input 0."""
    arch = ctx.arch
    dt = arch.dtype
    exact = np.asarray(node.attr("exact"), dtype=np.float64)
    table = node.attr("table")
    # a tie (x.5, e.g. a saturated function's ±1 in a scale of 1/32767.5) is fitted at its
    # rounded value: any approximation error would otherwise round it the other way
    target = np.where(np.abs(exact - table) == 0.5, table, exact)
    keys = table_entries(table, dt)[0]
    if slope_shift(target, dt.width) is None:
        steep = float(np.abs(np.diff(target)).max())
        ctx.fail(f"its table ({node.attr('functions')}) changes by up to {steep:.0f} LSB from "
                 f"one input to the next, beyond the {dt.width}-bit slopes of a "
                 f"piecewise-linear table (at most 2^{dt.width - 3}); a steps table needs "
                 f"lut_depth ≥ {len(keys)}")
    fit = fit_linear(target, arch.lut_depth, dt.width)
    if fit is None:
        ctx.fail(f"its table ({node.attr('functions')}) has no piecewise-linear form of "
                 f"{arch.lut_depth} segments within 1 LSB")
    starts, hi, frac, slope, s = fit
    got = linear_outputs(fit, len(exact), dt)
    err = np.abs(got - exact)
    equal = float(np.mean(got == table))
    ctx.notes.append(f"{node.label}: piecewise-linear table of {len(starts)} segments "
                     f"({node.attr('functions')}): largest error {err.max():.3f} LSB, "
                     f"{100 * equal:.2f}% of the {len(exact)} inputs exactly rounded")
    n = ctx.n
    kp = f"{key}:params"
    params = linear_registers(arch) - 1             # past every register Lookup writes
    tables = [starts + dt.min_raw, hi, frac, slope]
    tables += [np.zeros(1, dtype=np.int64)] * (arch.lut_count - LINEAR_TABLES)
    layer.steps.append(Simd(
        layer.out, vecs, [("lut", key), ("const", params, kp), ("zero", params + 1)],
        [SimdStep(Op.LOOKUP, 0, 0, R_DIFF, read="self", write=None),
         SimdStep(Op.MULTIPLY, R_DIFF, R_SLOPE, R_DIFF, read=None, write=None),
         SimdStep(Op.ADD, R_DIFF, R_FRAC, R_DIFF, read=None, write=None),
         SimdStep(Op.REQUANTIZE, R_DIFF, params, R_DIFF, read=None, write=None),
         SimdStep(Op.ADD, R_DIFF, R_HI, 0, read=None, write="self")],
        consts={kp: np.full(n, numeric.pack_requantize(1, s, 0, dt), dtype=np.int64)},
        luts={key: padded_tables(tables, arch.lut_depth)}))
    return int(got[-dt.min_raw])


def _segment(y: np.ndarray, a: int, b: int, s: int, limit: int):
    """(hi, frac, slope, largest error) of the line for ``y[a..b]``: through the ends,
    shifted to halve its largest deviation, in the integers of the hardware (``hi`` in
    −``limit`` .. ``limit`` − 1, the table entries' range)."""
    span = y[a:b + 1]
    d = np.arange(b - a + 1)
    slope = int(np.rint((span[-1] - span[0]) / (b - a) * 2.0 ** s)) if b > a else 0
    line = span[0] + slope * d / 2.0 ** s
    dev = span - line
    start = span[0] + (dev.max() + dev.min()) / 2
    hi = int(np.clip(np.rint(start), -limit, limit - 1))
    frac = int(np.rint((start - hi) * 2.0 ** s))
    approx = hi + (slope * d + frac) / 2.0 ** s
    return hi, frac, slope, float(np.abs(approx - span).max())


def _segments(y: np.ndarray, tol: float, s: int, limit: int, width: int) -> list | None:
    """Greedy segments of ``y`` within ``tol`` (None past ``limit`` segments), entries of
    ``width`` bits."""
    out, a, L = [], 0, len(y)
    top = 1 << (width - 1)

    def ok(end: int) -> bool:
        return _segment(y, a, end, s, top)[3] <= tol

    while a < L:
        if len(out) == limit:
            return None
        good, step = a, 1
        while good < L - 1 and ok(min(good + step, L - 1)):
            good = min(good + step, L - 1)
            step *= 2
        bad = min(good + step, L - 1)
        while bad - good > 1:                       # the first failing end lies in between
            mid = (good + bad) // 2
            good, bad = (mid, bad) if ok(mid) else (good, mid)
        out.append((a, *_segment(y, a, good, s, top)[:3]))
        a = good + 1
    return out


def fit_linear(exact: np.ndarray, depth: int, width: int):
    """(starts, hi, frac, slope, s) of at most ``depth`` segments for the exact outputs
    ``exact`` (one per input, in LSB), the smallest error bound from 1/256 LSB up that fits
    (doubled until one does, then narrowed);
    None when even 1/2 LSB does not. ``s`` keeps every slope and frac in ``width`` bits."""
    s = slope_shift(exact, width)
    if s is None:
        return None
    tol, best = 1 / 256, None
    while best is None and tol <= 0.5:
        best = _segments(exact, tol, s, depth, width)
        tol *= 2
    if best is None:
        return None
    lo, hi = tol / 4, tol / 2                   # the bound fits at hi, not at lo: narrow it
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        segs = _segments(exact, mid, s, depth, width)
        lo, hi, best = (lo, mid, segs) if segs is not None else (mid, hi, best)
    a, hi_, frac, slope = (np.array(c, dtype=np.int64) for c in zip(*best))
    return a, hi_, frac, slope, s


def slope_shift(exact: np.ndarray, width: int) -> int | None:
    """The shift ``s`` that keeps the steepest step of ``exact`` (LSB per input) times 2^s
    within ``width`` − 2 bits; None when no s ≥ 1 does."""
    steepest = float(np.abs(np.diff(exact)).max(initial=0.0))
    s = width - 2 - max(0, math.ceil(math.log2(steepest + 1e-9)))
    return s if s >= 1 else None


def linear_outputs(fit, count: int, dt) -> np.ndarray:
    """What the piecewise-linear pass computes for each of ``count`` inputs (from the
    type's lowest), with the hardware's arithmetic (:func:`tcu_hw.numeric.requantize`)."""
    starts, hi, frac, slope, s = fit
    x = np.arange(count)
    k = np.searchsorted(starts, x, side="right") - 1
    acc = slope[k] * (x - starts[k]) + frac[k]
    params = numeric.pack_requantize(1, s, 0, dt)
    return np.clip(numeric.requantize(acc, params, 0, dt) + hi[k], dt.min_raw, dt.max_raw)
