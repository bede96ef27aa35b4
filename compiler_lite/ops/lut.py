"""Unary functions through the SIMD lookup tables (TCU.md §4.6; the architecture needs
``lut_count ≥ 1``).

A function is approximated piecewise-linearly on keys spread over its interesting range (and
one key at the lowest representable value, so everything below the range falls in a first,
wide segment): with two value tables (``lut_count ≥ 2``) and three registers, ``Lookup``
gives the distance to the key below, that key's value and the segment's slope, and two more
instructions compute ``value + slope·distance``. With one table (or two registers) the table
holds each segment's mid value (piecewise constant); the open-ended first and last segments
hold the value at the range's edge, and the compile notes say when the function keeps
changing beyond it (SiLU, GELU, Softplus: two tables follow it). The largest error of the
approximation against the exact function, measured on a fine grid in the data type, goes
into the compile notes.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from tcu_hw import alu, numeric
from tcu_hw.isa import SimdOp as Op

from ..ir import Tensor
from ..kernels import Simd, SimdStep
from ..registry import op

if TYPE_CHECKING:
    from ..lower import Lowering


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _erf(x):
    return np.vectorize(math.erf, otypes=[float])(x)


def _elu(alpha):
    return lambda x: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def function_spec(node):
    """(the float function of element-wise ``node``, grid: "linear", "log" or "positive",
    lo, hi); KeyError for an op that has none. lo/hi are clipped to the data type's range.
    "log" spaces keys geometrically away from zero (steep near 0), "positive" likewise on
    x > 0 only (functions of positive numbers: all keys where they matter). The integer
    tables (:mod:`compiler_lite.quant`) use the function alone."""
    a = node.attr
    op_ = node.op
    if op_ == "Sigmoid":
        return _sigmoid, "linear", -8.0, 8.0
    if op_ == "Tanh":
        return np.tanh, "linear", -4.0, 4.0
    if op_ == "Exp":
        return np.exp, "linear", -8.0, None
    if op_ == "Log":
        return lambda x: np.log(np.maximum(x, 1e-30)), "positive", None, None
    if op_ == "Softplus":
        return lambda x: np.logaddexp(0.0, x), "linear", -8.0, 8.0
    if op_ == "Softsign":
        return lambda x: x / (1.0 + np.abs(x)), "linear", -16.0, 16.0
    if op_ == "Elu":
        return _elu(float(a("alpha", 1.0))), "linear", -8.0, 8.0
    if op_ == "Celu":
        alpha = float(a("alpha", 1.0))
        return (lambda x: np.maximum(0, x) + np.minimum(0, alpha * np.expm1(x / alpha))), \
            "linear", -8.0 * alpha, 8.0
    if op_ == "Selu":
        alpha = float(a("alpha", 1.67326319217681884765625))
        gamma = float(a("gamma", 1.05070102214813232421875))
        return (lambda x: gamma * _elu(alpha)(x)), "linear", -8.0, 8.0
    if op_ == "HardSwish":
        return (lambda x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)), "linear", -4.0, 4.0
    if op_ == "Erf":
        return _erf, "linear", -4.0, 4.0
    if op_ == "Gelu":
        if a("approximate", "none") == "tanh":
            return (lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 *
                                                     (x + 0.044715 * x ** 3)))), "linear", \
                -6.0, 6.0
        return (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))), "linear", -6.0, 6.0
    if op_ == "Swish":
        alpha = float(a("alpha", 1.0))
        return (lambda x: x * _sigmoid(alpha * x)), "linear", -8.0, 8.0
    if op_ == "Mish":
        return (lambda x: x * np.tanh(np.logaddexp(0.0, x))), "linear", -8.0, 8.0
    if op_ == "Sqrt":
        return lambda x: np.sqrt(np.maximum(x, 0.0)), "positive", None, None
    if op_ == "Reciprocal":
        return lambda x: 1.0 / np.where(x == 0, 1e-30, x), "log", None, None
    raise KeyError(op_)


def tables(fn, grid: str, lo, hi, arch, pwl: bool):
    """Raw lookup tables for ``fn``: [keys, values, slopes] (PWL) or [keys, mid values]."""
    dt = arch.dtype
    D = arch.lut_depth
    one = 1.0 if dt.is_float else float(2 ** dt.binary_point)
    vmax = (dt.max_raw / one) if not dt.is_float else 65504.0
    vmin = (dt.min_raw / one) if not dt.is_float else -65504.0
    res = 2.0 ** -16 if dt.is_float else 1.0 / one
    if grid == "linear":
        lo = max(vmin, lo) if lo is not None else vmin
        hi = min(vmax, hi) if hi is not None else math.log(vmax) if fn is np.exp else vmax
        # keys denser where the function bends: density ∝ sqrt|f''| equalizes the
        # interpolation error of the segments
        xs = np.linspace(lo, hi, 4097)
        with np.errstate(all="ignore"):
            fx = np.nan_to_num(fn(xs))
        bend = np.sqrt(np.abs(np.gradient(np.gradient(fx, xs), xs)))
        dens = bend + 0.05 * bend.mean() + 1e-12
        cdf = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2)])
        inner = np.interp(np.linspace(0.0, cdf[-1], max(D - 1, 1)), cdf, xs)
    elif grid == "positive":                # geometric, x > 0 only (x ≤ 0 in the first)
        inner = np.geomspace(res, vmax, max(D - 1, 1))
    else:                                   # geometric away from zero, both signs
        lo = res
        m = max(D - 1, 2)
        half = m // 2
        pos = np.geomspace(lo, vmax, m - half)
        neg = -np.geomspace(lo, vmax, half)[::-1]
        inner = np.concatenate([neg, pos])
    keys = np.concatenate([[vmin], inner])
    keys_raw, _ = numeric.to_fixed(keys, dt)
    keys_raw = np.unique(keys_raw)
    while len(keys_raw) < D:                # small types: repeat the last key
        keys_raw = np.concatenate([keys_raw, keys_raw[-1:]])
    keys_raw = keys_raw[:D]
    kf = numeric.to_float(keys_raw, dt)
    nxt = np.concatenate([kf[1:], [vmax]])
    with np.errstate(all="ignore"):
        fk = np.clip(np.nan_to_num(fn(kf), nan=0.0, posinf=vmax, neginf=vmin), vmin, vmax)
        fn_ = np.clip(np.nan_to_num(fn(nxt), nan=0.0, posinf=vmax, neginf=vmin), vmin, vmax)
    if pwl:
        width = np.where(nxt > kf, nxt - kf, 1.0)
        slope = np.clip((fn_ - fk) / width, vmin, vmax)
        out = [kf, fk, slope]
    else:
        # the open-ended outer segments hold the value at their inner end (the midpoint of
        # [hi, vmax] would give a growing function's value far beyond its range)
        at = np.where(np.arange(len(kf)) == 0, nxt, (kf + nxt) / 2)
        at = np.where(nxt >= vmax, kf, at)
        mid = np.clip(np.nan_to_num(fn(at), nan=0.0), vmin, vmax)
        out = [kf, mid]
    return [numeric.to_float(numeric.to_fixed(t, dt)[0], dt) for t in out]


def evaluate(tabs, x, arch, pwl: bool) -> np.ndarray:
    """What the hardware computes for raw inputs ``x`` with these tables (for error notes)."""
    dt = arch.dtype
    raw = [numeric.to_fixed(t, dt)[0] for t in tabs]
    diff, vals = alu.lookup(x, np.stack(raw), dt)
    if pwl:
        return numeric.add(numeric.mul(diff, vals[1], dt), vals[0], dt)
    return vals[0]


def function_node(node, op_name: str) -> SimpleNamespace:
    """A stand-in for ``node`` (same name and label, no attributes) that makes
    :func:`lut_pass` tabulate the function of the ONNX op ``op_name``."""
    return SimpleNamespace(op=op_name, name=node.name, attr=lambda k, d=None: d,
                           label=node.label)


def lut_pass(ctx: Lowering, layer, t: Tensor | None, node, fn=None, grid=None, lo=None,
             hi=None, buf=None, vecs=None) -> Simd:
    """Append a pass computing f(x) in place on the vectors of ``t`` in ``layer`` (or on
    ``vecs`` of accumulator buffer ``buf``)."""
    arch = ctx.arch
    if fn is None:
        fn, grid, lo, hi = function_spec(node)
    pwl = arch.lut_count >= 2 and arch.simd_registers_depth >= 3
    tabs = tables(fn, grid, lo, hi, arch, pwl)
    key = f"lut:{node.name}:{node.op}"
    buf = buf if buf is not None else layer.out
    vecs = vecs if vecs is not None else ctx.vectors_in(t, buf)
    if pwl:
        body = [SimdStep(Op.LOOKUP, 0, 0, 1, read="self", write=None),
                SimdStep(Op.MULTIPLY, 1, 3, 1, read=None, write=None),
                SimdStep(Op.ADD, 1, 2, 0, read=None, write="self")]
    else:
        body = [SimdStep(Op.LOOKUP, 0, 0, 1, read="self", write=None),
                SimdStep(Op.MOVE, 2, 2, 0, read=None, write="self")]
    step = Simd(buf, vecs, [("lut", key)], body, luts={key: tabs})
    layer.steps.append(step)
    zero = np.zeros(1, dtype=np.int64 if not arch.dtype.is_float else np.float32)
    if evaluate(tabs, zero, arch, pwl)[0] != 0:
        buf.dirty = True                        # padding lanes become f(0)
    if not pwl and grid == "linear":
        _note_edges(ctx, node, fn, lo, hi)
    # how good is the approximation, in the data type?
    dt = arch.dtype
    if not dt.is_float:
        grid_x = np.arange(dt.min_raw, dt.max_raw + 1, max(1, (dt.max_raw - dt.min_raw) // 20000))
        xf = numeric.to_float(grid_x, dt)
        got = numeric.to_float(evaluate(tabs, grid_x, arch, pwl), dt)
        with np.errstate(all="ignore"):
            want = np.clip(np.nan_to_num(fn(xf), nan=0.0), dt.min_raw / 2 ** dt.binary_point,
                           dt.max_raw / 2 ** dt.binary_point)
        span = (xf > (lo if lo is not None else -np.inf)) & \
            (xf < (hi if hi is not None else np.inf)) if grid == "linear" else xf > 0
        err = float(np.max(np.abs(got - want)[span])) if span.any() else 0.0
        ctx.notes.append(f"{node.label}: {'piecewise-linear' if pwl else 'piecewise-constant'} "
                         f"table of {arch.lut_depth} entries, max error {err:.4f} on its range")
    return step


def _note_edges(ctx: Lowering, node, fn, lo, hi) -> None:
    """A piecewise-constant table holds the value at its range's edges beyond them: say so
    when the function keeps changing there (SiLU, GELU, Softplus grow with x)."""
    for edge, far in ((lo, None if lo is None else 2 * lo - (hi or 0)),
                      (hi, None if hi is None else 2 * hi - (lo or 0))):
        if edge is None:
            continue
        with np.errstate(all="ignore"):
            f_edge, f_far = float(fn(np.float64(edge))), float(fn(np.float64(far)))
        if abs(f_far - f_edge) > 0.01 * max(1.0, abs(f_far)):
            ctx.notes.append(
                f"{node.label}: one lookup table holds {node.op}'s value at {edge:g} for every "
                f"input beyond it ({f_edge:.4g} at {far:g}, where it is {f_far:.4g}); "
                f"lut_count ≥ 2 and simd_registers_depth ≥ 3 give linear segments that "
                f"follow it")
            return


def lookup_registers(arch) -> list[str]:
    """Why a Lookup into register 1 cannot run (empty when it can): it writes the difference
    to r1 and one value per table to r2..r(lut_count + 1) (TCU.md §4.6)."""
    need = arch.lut_count + 1
    if arch.simd_registers_depth < need:
        return [f"a table lookup writes the difference and one register per value table: "
                f"it needs simd_registers_depth ≥ lut_count + 1 = {need} (it is "
                f"{arch.simd_registers_depth})"]
    return []


def check_lut(node, g, arch) -> list[str]:
    if arch.lut_depth < 2:
        return [f"needs lookup tables: lut_depth must be ≥ 2 (it is {arch.lut_depth})"]
    return lookup_registers(arch)


@op("Sigmoid", "Tanh", "Exp", "Log", "Softplus", "Softsign", "Elu", "Celu", "Selu", "HardSwish",
    "Erf", "Gelu", "Mish", "Sqrt", "Reciprocal", "Swish", check=check_lut, needs_lut=True)
def unary(node, ctx: Lowering):
    layer, t = ctx.in_acc(node.inputs[0])
    lut_pass(ctx, layer, t, node)
    ctx.set(node.outputs[0], Tensor(t.idx))
