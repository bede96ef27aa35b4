"""Numbers of the TCU (TCU.md §2): data types, the one MAC primitive, conversions, byte codecs.

This is the single definition of the TCU's arithmetic. The golden emulator calls it on numpy
arrays (it is the emulator's hot path, so everything is vectorized); the hardware's fixed-point
helper is tested exhaustively against it; the compiler uses its conversions.

Raw values are two's-complement integers ``value * 2**bp`` held in ``int64`` arrays. ``FLOAT32``
(compiler/emulator only) is held in ``float32`` arrays and computed in float32.

The primitive, on raw W-bit integers::

    MAC(x, y, z):  m = x*y + (z << bp)              exact (fits int64 for every type)
                   q = m >> bp, +1 if bit bp-1 of m is set and (bits 0..bp-2 are not all 0
                                    or bit bp of m is set)        round half to even
                   saturate q to [-2**(W-1), 2**(W-1) - 1]

``add(a, b) = MAC(a, one, b)``, ``sub(a, b) = MAC(a, one, -b)`` and ``mul(a, b) = MAC(a, b, 0)``.
Every processing element of the systolic array applies MAC, so a MatMul is a chain of n MACs
per output (:func:`matmul`), not a wide sum rounded once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DataType", "FP8BP4", "FP16BP8", "FP18BP10", "FP32BP16", "FLOAT32", "DATA_TYPES",
    "data_type", "Saturations", "saturate", "mac", "add", "sub", "mul", "matmul",
    "matmul_reference", "to_fixed", "nonfinite", "to_float", "encode_scalars", "decode_scalars",
    "encode_vectors", "decode_vectors",
]


@dataclass(frozen=True)
class DataType:
    """One TCU data type: ``width`` bits, ``binary_point`` fraction bits, file bytes per scalar.

    ``FLOAT32`` has ``is_float`` set; it exists for the compiler and the emulator only.
    """

    name: str
    width: int
    binary_point: int
    bytes_per_scalar: int
    is_float: bool = False

    @property
    def one(self):
        """Raw representation of 1.0 (``2**bp``; ``1.0`` for FLOAT32)."""
        return np.float32(1.0) if self.is_float else 1 << self.binary_point

    @property
    def min_raw(self) -> int:
        return -(1 << (self.width - 1))

    @property
    def max_raw(self) -> int:
        return (1 << (self.width - 1)) - 1

    @property
    def numpy_dtype(self):
        """The dtype of raw arrays: ``int64`` for fixed point, ``float32`` for FLOAT32."""
        return np.float32 if self.is_float else np.int64

    @property
    def error(self) -> float:
        """One least significant bit as a float (the tolerance of Tensil's compare)."""
        return 2.0 ** -23 if self.is_float else 2.0 ** -self.binary_point

    def __str__(self) -> str:
        return self.name


FP8BP4 = DataType("FP8BP4", 8, 4, 1)
FP16BP8 = DataType("FP16BP8", 16, 8, 2)
FP18BP10 = DataType("FP18BP10", 18, 10, 4)
FP32BP16 = DataType("FP32BP16", 32, 16, 4)
FLOAT32 = DataType("FLOAT32", 32, 0, 4, is_float=True)

#: All data types by name, hardware types first.
DATA_TYPES = {dt.name: dt for dt in (FP8BP4, FP16BP8, FP18BP10, FP32BP16, FLOAT32)}


def data_type(name) -> DataType:
    """The :class:`DataType` called ``name`` (a DataType is returned as is)."""
    if isinstance(name, DataType):
        return name
    try:
        return DATA_TYPES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown data type {name!r}; allowed: {', '.join(DATA_TYPES)}") from None


class Saturations:
    """A mutable saturation counter that arithmetic functions add to when given one."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def __repr__(self) -> str:
        return f"Saturations({self.count})"


def _raw(a, dt: DataType) -> np.ndarray:
    return np.asarray(a, dtype=dt.numpy_dtype)


def saturate(q, dt: DataType, sat: Saturations | None = None) -> np.ndarray:
    """Clip raw integers to the W-bit range of ``dt``, counting clipped elements in ``sat``."""
    q = np.asarray(q, dtype=np.int64)
    lo, hi = dt.min_raw, dt.max_raw
    if sat is not None:
        n = int(np.count_nonzero((q < lo) | (q > hi)))
        if n == 0:
            return q
        sat.count += n
    return np.clip(q, lo, hi)


def _round_shift(m: np.ndarray, bp: int) -> np.ndarray:
    """``m >> bp`` rounded to nearest, ties to even (m is an int64 array)."""
    half = 1 << (bp - 1)
    q = m >> bp
    rem = m & ((1 << bp) - 1)
    return q + ((rem > half) | ((rem == half) & (q & 1).astype(bool)))


def mac(x, y, z, dt: DataType, sat: Saturations | None = None) -> np.ndarray:
    """``MAC(x, y, z)`` element-wise on raw arrays (broadcasting): ``round(x*y) + z``, saturated."""
    if dt.is_float:
        return _raw(x, dt) * _raw(y, dt) + _raw(z, dt)
    m = _raw(x, dt) * _raw(y, dt) + (_raw(z, dt) << dt.binary_point)
    return saturate(_round_shift(m, dt.binary_point), dt, sat)


def add(a, b, dt: DataType, sat: Saturations | None = None) -> np.ndarray:
    """Saturating add; equal to ``MAC(a, one, b)`` (the product is exact, so no rounding)."""
    if dt.is_float:
        return _raw(a, dt) + _raw(b, dt)
    return saturate(_raw(a, dt) + _raw(b, dt), dt, sat)


def sub(a, b, dt: DataType, sat: Saturations | None = None) -> np.ndarray:
    """Saturating subtract; equal to ``MAC(a, one, -b)``."""
    if dt.is_float:
        return _raw(a, dt) - _raw(b, dt)
    return saturate(_raw(a, dt) - _raw(b, dt), dt, sat)


def mul(a, b, dt: DataType, sat: Saturations | None = None) -> np.ndarray:
    """Rounded, saturating multiply; ``MAC(a, b, 0)``."""
    return mac(a, b, 0, dt, sat)


def matmul_reference(x, rows, bias, dt: DataType, sat: Saturations | None = None) -> np.ndarray:
    """The systolic array's output, one MAC per processing element, written as the chain.

    ``x``: (m, n) raw inputs; ``rows``: (n, n) where ``rows[j]`` is the weight row of input j
    (lane i feeds output i); ``bias``: (n,). Output i of vector v is
    ``MAC(x[v, n-1], rows[n-1, i], ... MAC(x[v, 0], rows[0, i], bias[i]))``. This is the plain
    sequential definition; :func:`matmul` computes the same values faster.
    """
    x = _raw(x, dt)
    rows = _raw(rows, dt)
    acc = np.broadcast_to(_raw(bias, dt), (x.shape[0], rows.shape[1])).copy()
    for j in range(rows.shape[0]):
        acc = mac(x[:, j, None], rows[j][None, :], acc, dt, sat)
    return acc


def matmul(x, rows, bias, dt: DataType, sat: Saturations | None = None,
           rows_bound: int | None = None) -> np.ndarray:
    """Same result as :func:`matmul_reference`, vectorized over the chain when it cannot saturate.

    Because ``z << bp`` has no fraction bits, each step is ``acc += (p >> bp) + up`` where the
    rounding increment depends on ``acc`` only at an exact tie (round half to even), and a step
    that rounds a tie always leaves ``acc`` even. So the increment at a tie is the parity of the
    partial sum since the previous tie (or since the bias), which prefix sums give for all steps
    at once. When saturation is possible the chain is evaluated step by step.

    ``rows_bound``, if given, must be ``sum_j max_i |rows[j, i]|`` (callers that keep the
    weights across many calls pass it to skip recomputing it).
    """
    if dt.is_float:
        return matmul_reference(x, rows, bias, dt)
    x = _raw(x, dt)
    rows = _raw(rows, dt)
    bias = _raw(bias, dt)
    bp = dt.binary_point
    n_in = rows.shape[0]
    # |acc| never exceeds max|bias| + sum_j (|x_j| * |w_ji| >> bp) + n_in <= max|bias| +
    # (max|x| * rows_bound >> bp) + n_in; if that (or the exact per-element bound) is in
    # range, nothing can saturate.
    if rows_bound is None:
        rows_bound = int(np.abs(rows).max(axis=1).sum())
    bias_max = int(np.abs(bias).max(initial=0))
    xmax = int(np.abs(x).max(initial=0))
    p = x[:, :, None] * rows[None, :, :]                       # (m, n_in, n_out), exact
    hi = p >> bp
    if bias_max + ((xmax * rows_bound) >> bp) + n_in > dt.max_raw:
        bound = bias_max + int(np.abs(hi).sum(axis=1).max(initial=0)) + n_in
        if bound > dt.max_raw:
            return matmul_reference(x, rows, bias, dt, sat)
    rem = p & ((1 << bp) - 1)
    half = 1 << (bp - 1)
    a = hi + (rem > half)
    tie = rem == half
    if not tie.any():
        return bias + a.sum(axis=1)
    s = np.cumsum(a, axis=1)                                   # S_{j+1}
    parity = s & 1                                             # P_{j+1}
    # code = 2j + P_{j+1} at ties, -1 elsewhere; its running max forward-fills the last tie
    code = np.where(tie, (2 * np.arange(n_in))[None, :, None] + parity, -1)
    prev = np.empty_like(code)
    prev[:, 0, :] = -1
    np.maximum.accumulate(code[:, :-1, :], axis=1, out=prev[:, 1:, :])
    base = np.where(prev >= 0, prev & 1, bias & 1)             # parity after the last tie
    inc = tie & ((parity ^ base) == 1)
    return bias + s[:, -1, :] + inc.sum(axis=1)


def to_fixed(values, dt: DataType) -> tuple[np.ndarray, int]:
    """Float → raw, Tensil's rule: ``floor(float32(v) * 2**bp + 0.5)`` then saturate.

    Returns ``(raw, saturations)``; NaN is refused (ValueError), infinities saturate (as
    values beyond float32 do). For FLOAT32 the values are only rounded to float32. Tools
    refuse NaN and infinite model parameters and inputs before this (:func:`nonfinite`).
    """
    f = np.asarray(values, dtype=np.float64).astype(np.float32)
    if dt.is_float:
        return f, 0
    if np.isnan(f).any():
        raise ValueError("NaN cannot be converted to fixed point")
    r = np.floor(f.astype(np.float64) * float(1 << dt.binary_point) + 0.5)
    n = int(np.count_nonzero((r < dt.min_raw) | (r > dt.max_raw)))
    return np.clip(r, dt.min_raw, dt.max_raw).astype(np.int64), n


def nonfinite(values) -> str | None:
    """None when every value is finite, else a phrase for an error message ("2 NaN or
    infinite value(s) of 32")."""
    a = np.asarray(values)
    if a.dtype.kind not in "fc":
        return None
    bad = int(np.count_nonzero(~np.isfinite(a)))
    return f"{bad} NaN or infinite value(s) of {a.size}" if bad else None


def to_float(raw, dt: DataType) -> np.ndarray:
    """Raw → float (``raw / 2**bp``, exact in float64; FLOAT32 values are returned as float64)."""
    if dt.is_float:
        return np.asarray(raw, dtype=np.float32).astype(np.float64)
    return np.asarray(raw, dtype=np.int64) / float(1 << dt.binary_point)


_FILE_DTYPE = {"FP8BP4": "<i1", "FP16BP8": "<i2", "FP18BP10": "<u4", "FP32BP16": "<i4",
               "FLOAT32": ">f4"}


def encode_scalars(raw, dt: DataType) -> bytes:
    """Raw scalars → file/DRAM bytes: little-endian fixed point (FP18BP10 in the low 18 bits
    of 4 bytes, high bits 0), big-endian IEEE float32 for FLOAT32."""
    given = np.asarray(raw)
    if not dt.is_float and given.size and not np.issubdtype(given.dtype, np.integer):
        raise ValueError(f"raw {dt.name} values must be integers, got {given.dtype} (convert "
                         f"floats with to_fixed)")
    a = _raw(given, dt).ravel()
    if not dt.is_float and a.size and (a.min() < dt.min_raw or a.max() > dt.max_raw):
        raise ValueError(f"raw value out of range for {dt.name}")
    if dt.name == "FP18BP10":
        a = a & ((1 << 18) - 1)
    return a.astype(_FILE_DTYPE[dt.name]).tobytes()


def decode_scalars(data: bytes, dt: DataType) -> np.ndarray:
    """File/DRAM bytes → raw scalars (FP18BP10: low 18 bits, sign from bit 17)."""
    if len(data) % dt.bytes_per_scalar:
        raise ValueError(
            f"{len(data)} bytes is not a whole number of {dt.bytes_per_scalar}-byte scalars")
    a = np.frombuffer(data, dtype=_FILE_DTYPE[dt.name])
    if dt.is_float:
        return a.astype(np.float32)
    a = a.astype(np.int64)
    if dt.name == "FP18BP10":
        a &= (1 << 18) - 1
        a -= (a >> 17) << 18
    return a


def encode_vectors(raw, dt: DataType) -> bytes:
    """(m, n) raw vectors → bytes, vector after vector, lane 0 first."""
    return encode_scalars(raw, dt)


def decode_vectors(data: bytes, dt: DataType, n: int) -> np.ndarray:
    """Bytes → (m, n) raw vectors; the length must be a whole number of vectors."""
    if n < 1:
        raise ValueError(f"a vector needs at least one lane, got {n}")
    size = n * dt.bytes_per_scalar
    if len(data) % size:
        raise ValueError(f"{len(data)} bytes is not a whole number of {n}-lane {dt.name} "
                         f"vectors ({size} bytes each)")
    return decode_scalars(data, dt).reshape(-1, n)
