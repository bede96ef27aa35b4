"""Fixed-point arithmetic in PyRTL: the hardware mirror of :mod:`tcu_hw.numeric`.

All functions take and return W-bit two's-complement WireVectors for a fixed-point or
integer :class:`~tcu_hw.numeric.DataType` (for an integer type's accumulators, pass
``dt.accumulator``); they are combinational. :func:`mac` is the one primitive
(TCU.md §2); it is tested exhaustively for FP8BP4 and on edge and random values for the wider
types against :func:`tcu_hw.numeric.mac`.

``MAC(x, y, z)`` is built so that synthesis puts everything but the last step in one DSP
multiply-add: ``p = x*y + (z << bp) + half`` (``half`` is just wiring, because ``z << bp``
has zero low bits) gives the round-half-up result ``p >> bp``; round half to even then only
clears bit 0 when the low ``bp`` bits of ``p`` are all zero (an exact tie)::

    x ─┐
       ├─ DSP: x*y + {z, half} ──▶ p ── p >> bp ─┬─ bit 0 &= ~tie ─ saturate ─▶ W bits
    y ─┘                              └ p[bp-1:0] == 0 (tie) ┘
    z ─┘
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, WireVector

from ..numeric import DataType


def saturate(v: WireVector, width: int) -> WireVector:
    """A signed wire of any width clipped to ``width`` bits two's complement."""
    if v.bitwidth <= width:
        return v.sign_extended(width)
    upper = v[width - 1:]
    fits = (upper == 0) | (upper == Const((1 << upper.bitwidth) - 1, upper.bitwidth))
    limit = pyrtl.select(v[-1], Const(1 << (width - 1), width),
                         Const((1 << (width - 1)) - 1, width))
    return pyrtl.select(fits, v[:width], limit)


def mac(x: WireVector, y: WireVector, z: WireVector, dt: DataType) -> WireVector:
    """``MAC(x, y, z)``: ``x*y + (z << bp)`` rounded half to even at bit bp, saturated."""
    return accumulate(product(x, y), z, dt)


def product(x: WireVector, y: WireVector) -> WireVector:
    """The exact 2W-bit signed product ``x*y``, the first half of :func:`mac` (a pipeline
    may register it: Yosys packs that register into the DSP's multiplier register)."""
    x, y = (pyrtl.as_wires(v) for v in (x, y))
    return pyrtl.signed_mult(x, y)


def accumulate(prod: WireVector, z: WireVector, dt: DataType) -> WireVector:
    """The second half of :func:`mac`: ``prod + (z << bp)`` (``prod`` the exact product)
    rounded half to even at bit bp, saturated to W bits (binary point 0, the integer types
    and their accumulators: exact, then saturated)."""
    w, bp = dt.width, dt.binary_point
    z = pyrtl.as_wires(z)
    if bp == 0:
        k = max(prod.bitwidth, z.bitwidth) + 1
        return saturate((prod.sign_extended(k) + z.sign_extended(k))[:k], w)
    k = 2 * w + 2
    addend = pyrtl.concat(z, Const(1 << (bp - 1), bp))         # (z << bp) + half
    p = (prod.sign_extended(k) + addend.sign_extended(k))[:k]  # round half up at bit bp
    tie = p[:bp] == 0
    q = pyrtl.concat(p[bp + 1:], p[bp] & ~tie)                 # ties go to the even side
    return saturate(q, w)


def add(a: WireVector, b: WireVector, dt: DataType) -> WireVector:
    """Saturating ``a + b`` (= MAC(a, one, b))."""
    w = dt.width
    return saturate((a.sign_extended(w + 1) + b.sign_extended(w + 1))[:w + 1], w)


def sub(a: WireVector, b: WireVector, dt: DataType) -> WireVector:
    """Saturating ``a - b`` (= MAC(a, one, -b))."""
    w = dt.width
    return saturate((a.sign_extended(w + 1) - b.sign_extended(w + 1))[:w + 1], w)


def mul(a: WireVector, b: WireVector, dt: DataType) -> WireVector:
    """Rounded, saturating ``a * b`` (= MAC(a, b, 0))."""
    return mac(a, b, Const(0, dt.width), dt)


def column_add(prod: WireVector, z: WireVector, width: int) -> WireVector:
    """``prod + z`` in ``width`` bits, no rounding and no saturation: an integer type's column
    sum in the systolic array, which cannot leave its accumulator width (n ≤ 256 products of
    W-bit operands, docs/integer.md)."""
    return (prod.sign_extended(width) + pyrtl.as_wires(z).sign_extended(width))[:width]
