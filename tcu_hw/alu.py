"""Reference semantics of the SIMD ALU (TCU.md §4.5) and the lookup tables (§4.6).

Lane-wise functions on raw numpy arrays, built on :mod:`tcu_hw.numeric`. The golden emulator
executes SIMD instructions with them and the hardware's ALU is tested against them.
"""

from __future__ import annotations

import numpy as np

from . import numeric
from .isa import SimdOp
from .numeric import DataType, Saturations


def _bool(x, dt: DataType) -> np.ndarray:
    """``one`` where ``x`` is true (non-zero), else 0."""
    return np.where(x, dt.one, 0).astype(dt.numpy_dtype)


def simd_result(op: int, left, right, dt: DataType, sat: Saturations | None = None):
    """``op(left, right)`` lane-wise for ops 1..15 (NoOp and Lookup are handled by the caller).

    Comparisons are signed; "true" is non-zero; ``Abs`` of the most negative value is itself
    (modulo 2^W). Raises ValueError for an op number that has no defined result here.
    """
    left = np.asarray(left, dtype=dt.numpy_dtype)
    right = np.asarray(right, dtype=dt.numpy_dtype)
    if op == SimdOp.ZERO:
        return np.zeros_like(left)
    if op == SimdOp.MOVE:
        return left.copy()
    if op == SimdOp.NOT:
        return _bool(left == 0, dt)
    if op == SimdOp.AND:
        return _bool((left != 0) & (right != 0), dt)
    if op == SimdOp.OR:
        return _bool((left != 0) | (right != 0), dt)
    if op == SimdOp.INCREMENT:
        return numeric.add(left, dt.one, dt, sat)
    if op == SimdOp.DECREMENT:
        return numeric.sub(left, dt.one, dt, sat)
    if op == SimdOp.ADD:
        return numeric.add(left, right, dt, sat)
    if op == SimdOp.SUBTRACT:
        return numeric.sub(left, right, dt, sat)
    if op == SimdOp.MULTIPLY:
        if dt.multiplier_width:         # integer: the lane's one multiplier (Requantize's)
            return numeric.multiply_integer(left, right, dt, sat)
        return numeric.mul(left, right, dt, sat)
    if op == SimdOp.ABS:
        if dt.is_float:
            return np.abs(left)
        return np.where(left == dt.min_raw, left, np.abs(left))
    if op == SimdOp.GREATER_THAN:
        return _bool(left > right, dt)
    if op == SimdOp.GREATER_THAN_EQUAL:
        return _bool(left >= right, dt)
    if op == SimdOp.MIN:
        return np.minimum(left, right)
    if op == SimdOp.MAX:
        return np.maximum(left, right)
    raise ValueError(f"SIMD op {op} has no lane-wise result")


def lookup_index(left, keys) -> np.ndarray:
    """Per lane, the largest k with ``keys[k] <= left`` (0 when ``left < keys[0]``).

    Exact for any key order (a priority encoder over "key <= left"); ascending keys are what a
    compiler loads.
    """
    left = np.asarray(left)
    keys = np.asarray(keys)
    le = keys[None, :] <= left.reshape(-1, 1)                  # (lanes, D)
    last = keys.size - 1 - np.argmax(le[:, ::-1], axis=1)
    return np.where(le.any(axis=1), last, 0).reshape(left.shape)


def lookup(left, tables, dt: DataType, sat: Saturations | None = None):
    """Lookup (§4.6): returns ``(difference, values)`` for ``tables`` = (1 + N, D) raw.

    ``difference = left - key[k]`` (saturating) and ``values[t-1] = value_t[k]`` for t = 1..N,
    where k is :func:`lookup_index` of ``left`` in the key table ``tables[0]``.
    """
    tables = np.asarray(tables, dtype=dt.numpy_dtype)
    k = lookup_index(left, tables[0])
    diff = numeric.sub(left, tables[0][k], dt, sat)
    return diff, tables[1:, k]
