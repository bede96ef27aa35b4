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

Integer types (``INT8``, ``INT16``; docs/integer.md) have binary point 0, so MAC is exact, and
a wider :attr:`DataType.accumulator` type (``INT32``, ``INT48``) for the accumulators, the SIMD
registers and the array's column sums: a MatMul's sum is exact, and :func:`requantize` brings
it back to the narrow type with a per-lane multiplier, shift and zero point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DataType", "FP8BP4", "FP16BP8", "FP18BP10", "FP32BP16", "FLOAT32", "INT8", "INT16",
    "INT32", "INT48", "DATA_TYPES", "data_type", "RequantizeFields", "requantize_fields",
    "pack_requantize", "unpack_requantize", "requantize", "requantize_parameters", "quantize",
    "multiply_integer",
    "dequantize", "Saturations", "saturate", "clip_bits", "mac", "add", "sub", "mul", "matmul",
    "matmul_reference", "to_fixed", "nonfinite", "to_float", "encode_scalars", "decode_scalars",
    "encode_vectors", "decode_vectors",
]


@dataclass(frozen=True)
class DataType:
    """One TCU data type: ``width`` bits, ``binary_point`` fraction bits, file bytes per scalar.

    ``FLOAT32`` has ``is_float`` set; it exists for the compiler and the emulator only.
    Integer types (``is_integer``) name the wider type of their accumulators
    (``accumulator_width`` bits, :attr:`accumulator`); every other type accumulates in itself.
    """

    name: str
    width: int
    binary_point: int
    bytes_per_scalar: int
    is_float: bool = False
    is_integer: bool = False
    accumulator_width: int = 0
    multiplier_width: int = 0        # accumulator types: the SIMD multiplier's right operand

    @property
    def accumulator(self) -> "DataType":
        """The type of the accumulators, the SIMD registers and the array's column sums:
        ``INT32`` for INT8, ``INT48`` for INT16, the type itself for the others."""
        if not self.accumulator_width:
            return self
        return ACCUMULATOR_TYPES[self.accumulator_width]

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
INT8 = DataType("INT8", 8, 0, 1, is_integer=True, accumulator_width=32)
INT16 = DataType("INT16", 16, 0, 2, is_integer=True, accumulator_width=48)
#: accumulator types of the integer types (never an architecture's data type)
#: (their SIMD lanes have one (W_acc + 1) × (W + 9)-bit multiplier: Multiply's right operand
#: saturates to W + 9 bits, which holds Requantize's W + 8-bit multiplier)
INT32 = DataType("INT32", 32, 0, 4, is_integer=True, multiplier_width=17)
INT48 = DataType("INT48", 48, 0, 6, is_integer=True, multiplier_width=25)
ACCUMULATOR_TYPES = {32: INT32, 48: INT48}

#: All data types of architectures by name, hardware types first.
DATA_TYPES = {dt.name: dt for dt in (FP8BP4, FP16BP8, FP18BP10, FP32BP16, FLOAT32, INT8, INT16)}


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


def clip_bits(q, bits: int) -> np.ndarray:
    """Raw integers clipped to ``bits``-bit two's complement."""
    return np.clip(np.asarray(q, dtype=np.int64), -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _round_shift(m: np.ndarray, s) -> np.ndarray:
    """``m / 2**s`` rounded to nearest, ties to even: the one rounding rule of MAC and
    Requantize. ``s`` >= 0 is one shift or one per element (s = 0: m itself); ``m`` is int64,
    or Python integers in an object array."""
    if np.ndim(s) == 0:
        if s == 0:
            return m
        half = 1 << (s - 1)
        up = s > 0
    else:
        half = np.where(s > 0, 1 << np.maximum(s - 1, 0), 0)
        up = s > 0
    q = m >> s
    rem = m - (q << s)
    return q + (up & ((rem > half) | ((rem == half) & ((q & 1) == 1)))).astype(np.int64)


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
    ``MAC(x[v, n-1], rows[n-1, i], ... MAC(x[v, 0], rows[0, i], bias[i]))``, each MAC in the
    accumulator type (for an integer type: exact, in INT32 or INT48; the others: ``dt``). This
    is the plain sequential definition; :func:`matmul` computes the same values faster.
    """
    x = _raw(x, dt)
    rows = _raw(rows, dt)
    at = dt.accumulator
    acc = np.broadcast_to(_raw(bias, dt), (x.shape[0], rows.shape[1])).copy()
    for j in range(rows.shape[0]):
        acc = mac(x[:, j, None], rows[j][None, :], acc, at, sat)
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
    if dt.is_integer:
        # exact products and sums; n <= 256 products of W-bit operands never reach the
        # accumulator type's range, so saturating once equals saturating at every step
        return saturate(bias + np.einsum("vj,ji->vi", x, rows), dt.accumulator, sat)
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


# ------------------------------------------------------------------------------------------
# Integer types: requantization (docs/integer.md)

#: bits of the requantization shift field
SHIFT_BITS = 6


@dataclass(frozen=True)
class RequantizeFields:
    """Where the fields of a Requantize parameter sit in an accumulator-type register lane
    (LSB first): the unsigned multiplier ``M`` (W + 8 bits), the shift ``s`` (6 bits: 0..63),
    the signed zero point ``zp`` (W bits): 30 bits of INT32 for INT8, 46 of INT48 for INT16."""

    multiplier_bits: int
    shift_lo: int
    zero_point_lo: int
    zero_point_bits: int


def accumulator_digit_count(dt: DataType) -> int:
    """Local-memory words per accumulator-type value of integer type ``dt``: ceil(accumulator
    width / W) (one 0xD move, then one 0xE per lower digit; :func:`accumulator_digits`)."""
    return -(-dt.accumulator.width // dt.width)


def accumulator_digits(values, dt: DataType) -> np.ndarray:
    """Accumulator-type values of integer type ``dt`` as the local-memory words that put them
    in the accumulators (docs/integer.md, DataMove 0xD then 0xE): shape (digits, ...) with
    ``digits = ceil(accumulator width / W)``, the top digit signed, each lower one its W
    bits read as a signed W-bit value (0xE takes it modulo 2^W). ValueError for a value
    outside the accumulator type."""
    if not dt.is_integer or not dt.accumulator_width:
        raise ValueError(f"{dt.name} has no wide accumulator values")
    at, w = dt.accumulator, dt.width
    v = np.asarray(values, dtype=np.int64)
    if v.size and (v.min() < at.min_raw or v.max() > at.max_raw):
        raise ValueError(f"value outside {at.name}")
    count = accumulator_digit_count(dt)
    out = [v >> (w * (count - 1))]
    for d in range(1, count):
        low = (v >> (w * (count - 1 - d))) & ((1 << w) - 1)
        out.append(np.where(low >= 1 << (w - 1), low - (1 << w), low))
    return np.stack(out)


def requantize_fields(dt: DataType) -> RequantizeFields:
    """The parameter layout of integer type ``dt`` (ValueError for other types)."""
    if not dt.is_integer or not dt.accumulator_width:
        raise ValueError(f"{dt.name} has no requantization: it is not an integer data type "
                         f"with a wider accumulator (INT8, INT16)")
    m = dt.width + 8
    return RequantizeFields(m, m, m + SHIFT_BITS, dt.width)


def pack_requantize(multiplier, shift, zero_point, dt: DataType) -> np.ndarray:
    """Requantize parameters (per lane, broadcasting) → raw accumulator-type register
    values. Each field must fit (ValueError naming the field and its range)."""
    f = requantize_fields(dt)
    m, s, z = (np.asarray(v, dtype=np.int64) for v in (multiplier, shift, zero_point))
    for name, v, lo, hi in (("multiplier", m, 0, (1 << f.multiplier_bits) - 1),
                            ("shift", s, 0, (1 << SHIFT_BITS) - 1),
                            ("zero point", z, dt.min_raw, dt.max_raw)):
        if v.size and (v.min() < lo or v.max() > hi):
            raise ValueError(f"requantize {name} out of range for {dt.name}: {lo}..{hi}")
    return (z << f.zero_point_lo) + (s << f.shift_lo) + m


def unpack_requantize(params, dt: DataType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw register values → (multiplier, shift, zero point), the hardware's bit slices."""
    f = requantize_fields(dt)
    p = np.asarray(params, dtype=np.int64)
    m = p & ((1 << f.multiplier_bits) - 1)
    s = (p >> f.shift_lo) & ((1 << SHIFT_BITS) - 1)
    z = (p >> f.zero_point_lo) & ((1 << f.zero_point_bits) - 1)
    z = z - ((z >> (f.zero_point_bits - 1)) << f.zero_point_bits)
    return m, s, z


def requantize(left, params, bias, dt: DataType, sat: Saturations | None = None
               ) -> np.ndarray:
    """The SIMD Requantize op of integer type ``dt``, lane-wise on accumulator-type raw values:

        out = saturate_acc(zp + round_half_even((left + bias) * M / 2**s))

    with (M, s, zp) unpacked from ``params`` (:func:`unpack_requantize`). The sum and the
    product are exact (up to 73 bits for INT16, computed with Python integers where they
    may not fit int64); the result saturates to the accumulator type, and a move to local
    memory saturates it to ``dt``."""
    at = dt.accumulator
    m, s, z = unpack_requantize(params, dt)
    y = _raw(left, at) + _raw(bias, at)
    if at.width + 1 + requantize_fields(dt).multiplier_bits > 62:
        y, m, s = (np.asarray(v).astype(object) for v in (y, m, s))
    r = _round_shift(y * m, s) + z
    if r.dtype == object:       # out of range stays out of range: saturate() counts it
        r = np.array(np.clip(r, at.min_raw - 1, at.max_raw + 1), dtype=np.int64)
    return saturate(r, at, sat)


def multiply_integer(left, right, at: DataType, sat: Saturations | None = None
                     ) -> np.ndarray:
    """SIMD Multiply of an integer type's accumulator type ``at`` (INT32, INT48):
    ``saturate(left * clip(right))`` with ``right`` clipped to the lane multiplier's
    ``at.multiplier_width`` bits; exact (Python integers where int64 could overflow)."""
    a = _raw(left, at)
    b = clip_bits(right, at.multiplier_width)
    if at.width + at.multiplier_width > 62:
        p = np.asarray(a).astype(object) * np.asarray(b).astype(object)
        p = np.array(np.clip(p, at.min_raw - 1, at.max_raw + 1), dtype=np.int64)
    else:
        p = a * b
    return saturate(p, at, sat)


def requantize_parameters(scale, dt: DataType) -> tuple[np.ndarray, np.ndarray]:
    """``(M, s)`` per element for float scales ``S > 0`` (as float32, as onnxruntime keeps
    them): ``s`` the largest shift in 0..63 with ``round(S * 2**s) < 2**(W + 8)`` and
    ``M = round_half_even(S * 2**s)`` (exact: a float32 times a power of two is exact in
    float64). ValueError for a scale that is not positive and finite, or that rounds to
    ``2**(W + 8)`` or more (``S >= 2**(W + 8) - 1/2``)."""
    bits = requantize_fields(dt).multiplier_bits
    S = np.asarray(scale, dtype=np.float32).astype(np.float64)
    if not np.isfinite(S).all() or (S <= 0).any() or (S >= 2.0 ** bits - 0.5).any():
        raise ValueError(f"requantize scales must be finite, > 0 and < 2**{bits} - 1/2 for "
                         f"{dt.name}")
    _, e = np.frexp(S)                                   # S = f * 2**e, f in [0.5, 1)
    s = np.minimum(bits - e, 63)
    m = np.rint(np.ldexp(S, s))
    over = m >= 2.0 ** bits                              # f rounded up to 1
    s = np.where(over, s - 1, s)
    m = np.where(over, np.rint(np.ldexp(S, s)), m)
    return m.astype(np.int64), s.astype(np.int64)


def quantize(values, scale, zero_point, dt: DataType) -> tuple[np.ndarray, int]:
    """Float → raw integer, onnxruntime's QuantizeLinear: ``round_half_even(float32(v) /
    float32(scale)) + zero_point``, saturated to ``dt``. Returns ``(raw, saturations)``."""
    if not dt.is_integer:
        raise ValueError(f"quantize needs an integer data type, not {dt.name}")
    f = np.asarray(values, dtype=np.float32) / np.asarray(scale, dtype=np.float32)
    if np.isnan(f).any():
        raise ValueError("NaN cannot be quantized")
    r = np.rint(f).astype(np.float64) + np.asarray(zero_point, dtype=np.float64)
    n = int(np.count_nonzero((r < dt.min_raw) | (r > dt.max_raw)))
    return np.clip(r, dt.min_raw, dt.max_raw).astype(np.int64), n


def dequantize(raw, scale, zero_point) -> np.ndarray:
    """Raw integer → float, onnxruntime's DequantizeLinear: ``(raw - zero_point) * scale``
    in float32."""
    d = (np.asarray(raw, dtype=np.int64) - np.asarray(zero_point, dtype=np.int64))
    return d.astype(np.float32) * np.asarray(scale, dtype=np.float32)


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
               "FLOAT32": ">f4", "INT8": "<i1", "INT16": "<i2"}


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
