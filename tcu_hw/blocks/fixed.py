"""Fixed-point arithmetic in PyRTL: the hardware mirror of :mod:`tcu_hw.numeric`.

All functions take and return W-bit two's-complement WireVectors for a fixed-point
:class:`~tcu_hw.numeric.DataType`; they are combinational. :func:`mac` is the one primitive
(TCU.md §2); it is tested exhaustively for FP8BP4 and on edge and random values for the wider
types against :func:`tcu_hw.numeric.mac`.

``MAC(x, y, z)`` is built without a wide adder for ``z << bp``: the shifted ``z`` has no
fraction bits, so ``q = (x*y >> bp) + z + r`` where the round-half-even increment ``r`` only
needs the product's low bits and the parity ``prod[bp] ^ z[0]`` of the sum (a carry-in for
synthesis)::

    x ─┐                 ┌─ prod >> bp ──┐
       ├─ signed mult ───┤               ├─ + ─ saturate ─▶ W bits
    y ─┘                 └─ low bits ─ r ┤
    z ────────────────────────────────── ┘
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
    w, bp = dt.width, dt.binary_point
    prod = pyrtl.signed_mult(x, y)                              # 2W bits, exact
    high = prod[bp:]                                            # prod >> bp (signed)
    low = prod[:bp - 1] if bp > 1 else None
    sticky = (low != 0) if low is not None else Const(0, 1)
    r = prod[bp - 1] & (sticky | (prod[bp] ^ z[0]))
    k = 2 * w - bp + 1
    q = (high.sign_extended(k) + z.sign_extended(k) + r)[:k]
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
