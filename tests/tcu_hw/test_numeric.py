"""The TCU's numbers (TCU.md §2) in ``tcu_hw.numeric``.

Checked against the conformance data (``arithmetic.json``), the spec's own goldens, and an
exact rational reference written here with :class:`fractions.Fraction`: MAC with round half to
even and saturation, add/sub/mul, the systolic MatMul chain, float -> fixed conversion and the
byte codecs of every data type.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tcu_hw import numeric
from tcu_hw.numeric import FLOAT32, FP8BP4, FP16BP8, FP18BP10, FP32BP16, Saturations

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
ARITHMETIC = SHARED / "conformance" / "arithmetic.json"

FIXED = (FP8BP4, FP16BP8, FP18BP10, FP32BP16)
ALL_TYPES = FIXED + (FLOAT32,)
FIXED_IDS = [dt.name for dt in FIXED]
ALL_IDS = [dt.name for dt in ALL_TYPES]


def arithmetic() -> dict:
    if not ARITHMETIC.exists():
        pytest.skip(f"{ARITHMETIC} is missing: the shared conformance data must sit next to "
                    f"the repository (../shared)")
    return json.loads(ARITHMETIC.read_text())


# ------------------------------------------------------------------------ exact reference

def clamp(raw: int, dt) -> tuple[int, bool]:
    """``raw`` saturated to W bits, and whether it was clipped."""
    out = min(max(raw, dt.min_raw), dt.max_raw)
    return out, out != raw


def ref_mac(x: int, y: int, z: int, dt) -> tuple[int, bool]:
    """MAC(x, y, z) on raw integers, computed exactly with fractions (round half to even)."""
    bp = dt.binary_point
    value = Fraction(x * y, 2 ** (2 * bp)) + Fraction(z, 2 ** bp)
    return clamp(round(value * 2 ** bp), dt)


def ref_add(a, b, dt):
    return ref_mac(a, 2 ** dt.binary_point, b, dt)


def ref_sub(a, b, dt):
    return ref_mac(a, 2 ** dt.binary_point, -b, dt)


def ref_mul(a, b, dt):
    return ref_mac(a, b, 0, dt)


def ref_matmul(x, rows, bias, dt) -> tuple[list[list[int]], int]:
    """Output i of vector v = MAC(x[v][n-1], rows[n-1][i], ... MAC(x[v][0], rows[0][i], bias[i]))."""
    out, saturations = [], 0
    for vec in x:
        outs = []
        for i in range(len(bias)):
            acc = bias[i]
            for j in range(len(rows)):
                acc, clipped = ref_mac(vec[j], rows[j][i], acc, dt)
                saturations += clipped
            outs.append(acc)
        out.append(outs)
    return out, saturations


def ref_to_fixed(v: float, dt) -> tuple[int, bool]:
    """floor(float32(v) * 2**bp + 0.5), saturated (infinities saturate)."""
    with np.errstate(over="ignore"):
        f = float(np.float32(v))
    if math.isinf(f):
        return (dt.max_raw if f > 0 else dt.min_raw), True
    return clamp(math.floor(Fraction(f) * 2 ** dt.binary_point + Fraction(1, 2)), dt)


# ------------------------------------------------------------------------ strategies

def edge_values(dt) -> list[int]:
    """Raw values that make ties, exact products and saturation likely."""
    bp, one, half = dt.binary_point, 1 << dt.binary_point, 1 << (dt.binary_point - 1)
    root = 1 << ((dt.width - 1 + bp) // 2)          # root * root >> bp is about max_raw
    vals = {0, 1, 2, 3, 5, half, half + 1, 3 * half, one, one + 1, 2 * one, root, root + 1,
            dt.max_raw, dt.max_raw - 1, dt.max_raw // 2}
    vals |= {-v for v in vals}
    vals |= {dt.min_raw, dt.min_raw + 1}
    return sorted(v for v in vals if dt.min_raw <= v <= dt.max_raw)


def raws(dt):
    """Any raw value of ``dt``, with edge values drawn often."""
    return st.one_of(st.sampled_from(edge_values(dt)), st.integers(dt.min_raw, dt.max_raw))


def small_raws(dt):
    """Raw values within ±2.0, with exact half-LSB multiples often (ties likely)."""
    one, half = 1 << dt.binary_point, 1 << (dt.binary_point - 1)
    return st.one_of(st.sampled_from([0, 1, -1, 3, -3, half, -half, 3 * half, -3 * half, one,
                                      -one]),
                     st.integers(-2 * one, 2 * one))


def arr(values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# ------------------------------------------------------------------------ data types

def test_data_types_match_spec_table():
    table = {"FP8BP4": (8, 4, 1), "FP16BP8": (16, 8, 2), "FP18BP10": (18, 10, 4),
             "FP32BP16": (32, 16, 4)}
    for name, (width, bp, nbytes) in table.items():
        dt = numeric.data_type(name)
        assert (dt.width, dt.binary_point, dt.bytes_per_scalar, dt.is_float) == \
            (width, bp, nbytes, False)
        assert dt.one == 2 ** bp
        assert (dt.min_raw, dt.max_raw) == (-2 ** (width - 1), 2 ** (width - 1) - 1)
    assert FLOAT32.is_float and FLOAT32.bytes_per_scalar == 4
    assert numeric.data_type(FP16BP8) is FP16BP8


def test_data_type_unknown_name_raises():
    with pytest.raises(ValueError, match="FP16BP8"):
        numeric.data_type("FP16")


def test_conformance_type_parameters_match():
    for name, entry in arithmetic()["types"].items():
        dt = numeric.data_type(name)
        assert (entry["width"], entry["binary_point"], entry["bytes_per_scalar"]) == \
            (dt.width, dt.binary_point, dt.bytes_per_scalar), name


# ------------------------------------------------------------------------ conformance MAC

@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_conformance_mac_rows_scalar(dt):
    cases = arithmetic()["types"][dt.name]["cases"]
    assert len(cases) == 105
    for x, y, z, expected in cases:
        assert int(numeric.mac(x, y, z, dt)) == expected, (x, y, z)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_conformance_mac_rows_vectorized_with_saturations(dt):
    cases = np.array(arithmetic()["types"][dt.name]["cases"], dtype=np.int64)
    sat = Saturations()
    got = numeric.mac(cases[:, 0], cases[:, 1], cases[:, 2], dt, sat)
    assert got.tolist() == cases[:, 3].tolist()
    expected_sat = sum(ref_mac(int(x), int(y), int(z), dt)[1] for x, y, z, _ in cases)
    assert expected_sat > 0
    assert sat.count == expected_sat


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_conformance_rows_agree_with_fraction_reference(dt):
    for x, y, z, expected in arithmetic()["types"][dt.name]["cases"]:
        assert ref_mac(x, y, z, dt)[0] == expected, (x, y, z)


def test_conformance_tensil_golden():
    goldens = arithmetic()["tensil_goldens"]
    assert goldens
    for g in goldens:
        dt = numeric.data_type(g["data_type"])
        assert int(numeric.mac(g["x"], g["y"], g["z"], dt)) == g["result"]


def test_conformance_float_to_fixed_fp16bp8():
    pairs = arithmetic()["float_to_fixed"]["FP16BP8"]
    values = [float(text) for text, _ in pairs]
    expected = [raw for _, raw in pairs]
    for v, raw in zip(values, expected):
        got, _ = numeric.to_fixed(v, FP16BP8)
        assert int(got) == raw, v
    got, n = numeric.to_fixed(values, FP16BP8)
    assert got.tolist() == expected
    assert n == sum(ref_to_fixed(v, FP16BP8)[1] for v in values) == 4


# ------------------------------------------------------------------------ TCU.md §2 goldens

def test_spec_golden_fp16bp8():
    assert int(numeric.mac(-26, 68, 0, FP16BP8)) == -7
    assert int(numeric.mul(-26, 68, FP16BP8)) == -7


@pytest.mark.parametrize("x, expected", [(3, 2), (1, 0), (-1, 0), (-3, -2)])
def test_spec_tie_examples(x, expected):
    # raw products 384, 128, -128, -384 with bp = 8: ties to even
    assert x * 128 in (384, 128, -128, -384)
    assert int(numeric.mac(x, 128, 0, FP16BP8)) == expected
    assert int(numeric.mac(128, x, 0, FP16BP8)) == expected


def test_spec_tie_examples_vectorized():
    got = numeric.mac(arr([3, 1, -1, -3]), 128, 0, FP16BP8)
    assert got.tolist() == [2, 0, 0, -2]


def test_tie_parity_includes_accumulator():
    # 0.5 LSB + z: rounds to the even result, so z matters
    assert numeric.mac(arr([1, 1, 1, 1]), 128, arr([0, 1, 2, -1]), FP16BP8).tolist() == \
        [0, 2, 2, 0]


# ------------------------------------------------------------------------ MAC properties

def triples(dt):
    return st.lists(st.tuples(raws(dt), raws(dt), raws(dt)), min_size=1, max_size=40)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_mac_matches_exact_reference(dt, data):
    rows = data.draw(triples(dt))
    x, y, z = (arr(c) for c in zip(*rows))
    sat = Saturations()
    got = numeric.mac(x, y, z, dt, sat)
    expected = [ref_mac(*r, dt) for r in rows]
    assert got.dtype == np.int64 and got.shape == x.shape
    assert got.tolist() == [e for e, _ in expected]
    assert sat.count == sum(c for _, c in expected)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_add_sub_mul_match_exact_reference(dt, data):
    pairs = data.draw(st.lists(st.tuples(raws(dt), raws(dt)), min_size=1, max_size=40))
    a, b = (arr(c) for c in zip(*pairs))
    for fn, ref in ((numeric.add, ref_add), (numeric.sub, ref_sub), (numeric.mul, ref_mul)):
        sat = Saturations()
        got = fn(a, b, dt, sat)
        expected = [ref(int(p), int(q), dt) for p, q in pairs]
        assert got.tolist() == [e for e, _ in expected], fn.__name__
        assert sat.count == sum(c for _, c in expected), fn.__name__


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_add_sub_mul_equal_mac_forms(dt, data):
    pairs = data.draw(st.lists(st.tuples(raws(dt), raws(dt)), min_size=1, max_size=20))
    a, b = (arr(c) for c in zip(*pairs))
    one = dt.one
    assert numeric.add(a, b, dt).tolist() == numeric.mac(a, one, b, dt).tolist()
    assert numeric.sub(a, b, dt).tolist() == numeric.mac(a, one, -b, dt).tolist()
    assert numeric.mul(a, b, dt).tolist() == numeric.mac(a, b, 0, dt).tolist()


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_mac_broadcasts_scalar_operands(dt, data):
    xs = data.draw(st.lists(raws(dt), min_size=1, max_size=20))
    y, z = data.draw(raws(dt)), data.draw(raws(dt))
    sat = Saturations()
    got = numeric.mac(arr(xs), y, z, dt, sat)
    expected = [ref_mac(x, y, z, dt) for x in xs]
    assert got.tolist() == [e for e, _ in expected]
    assert sat.count == sum(c for _, c in expected)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_saturation_counter_accumulates_and_counts_elements(dt):
    sat = Saturations()
    assert sat.count == 0
    big = arr([dt.max_raw, dt.min_raw, 0])
    numeric.add(big, arr([1, -1, 1]), dt, sat)      # two clip
    assert sat.count == 2
    numeric.mul(big, big, dt, sat)                 # MAX*MAX and MIN*MIN clip
    assert sat.count == 4
    numeric.mac(big, 0, 0, dt, sat)                # nothing clips
    assert sat.count == 4


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_saturate_clips_and_counts(dt):
    sat = Saturations()
    got = numeric.saturate(arr([dt.max_raw + 5, dt.min_raw - 1, 7]), dt, sat)
    assert got.tolist() == [dt.max_raw, dt.min_raw, 7]
    assert sat.count == 2
    assert numeric.saturate(arr([dt.max_raw + 1]), dt).tolist() == [dt.max_raw]


# ------------------------------------------------------------------------ MatMul

@st.composite
def matmul_cases(draw, dt):
    """(x, rows, bias) with m in 1..6, n in 2..9; values made of ties, small (ties likely), full
    range (saturation likely) or mixed (tiny inputs, full-range weights and bias)."""
    m = draw(st.integers(1, 6))
    n = draw(st.integers(2, 9))
    mode = draw(st.sampled_from(["ties", "small", "full", "mixed"]))
    half = 1 << (dt.binary_point - 1)
    if mode == "ties":      # odd inputs times multiples of half an LSB: a tie in most steps
        xs = st.sampled_from([1, -1, 3, -3, 5, -5, 7, -7, 2, 0])
        ws = st.sampled_from([half, -half, 3 * half, -3 * half, 2 * half, 0])
        bs = st.integers(-4 * half, 4 * half)
    elif mode == "small":
        xs = ws = bs = small_raws(dt)
    elif mode == "full":
        xs = ws = bs = raws(dt)
    else:
        xs = st.sampled_from([0, 1, -1, 2, 3, -3])
        ws = bs = raws(dt)
    x = [[draw(xs) for _ in range(n)] for _ in range(m)]
    rows = [[draw(ws) for _ in range(n)] for _ in range(n)]
    bias = [draw(bs) for _ in range(n)]
    return x, rows, bias


def rows_bound(rows) -> int:
    """The ``rows_bound`` argument of :func:`numeric.matmul`: sum_j max_i |rows[j][i]|."""
    return sum(max(abs(w) for w in row) for row in rows)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_matmul_reference_equals_fraction_chain(dt, data):
    x, rows, bias = data.draw(matmul_cases(dt))
    expected, expected_sat = ref_matmul(x, rows, bias, dt)
    sat = Saturations()
    got = numeric.matmul_reference(arr(x), arr(rows), arr(bias), dt, sat)
    assert got.shape == (len(x), len(bias))
    assert got.tolist() == expected
    assert sat.count == expected_sat


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_matmul_equals_reference_and_fraction_chain(dt, data):
    x, rows, bias = data.draw(matmul_cases(dt))
    expected, expected_sat = ref_matmul(x, rows, bias, dt)
    ref_sat = Saturations()
    ref = numeric.matmul_reference(arr(x), arr(rows), arr(bias), dt, ref_sat)
    sat = Saturations()
    got = numeric.matmul(arr(x), arr(rows), arr(bias), dt, sat)
    assert got.tolist() == ref.tolist() == expected
    assert sat.count == ref_sat.count == expected_sat


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_matmul_with_rows_bound_equals_fraction_chain(dt, data):
    x, rows, bias = data.draw(matmul_cases(dt))
    expected, expected_sat = ref_matmul(x, rows, bias, dt)
    sat = Saturations()
    got = numeric.matmul(arr(x), arr(rows), arr(bias), dt, sat, rows_bound=rows_bound(rows))
    assert got.tolist() == expected
    assert sat.count == expected_sat


def test_matmul_tie_chain_small_example():
    # every product is an exact tie (x * 128 with odd x): the chain alternates round up/down
    x = [[1, 1, 1, 1]]
    rows = [[128] * 4] * 4
    bias = [0, 1, 2, 3]
    expected, _ = ref_matmul(x, rows, bias, FP16BP8)
    assert numeric.matmul(arr(x), arr(rows), arr(bias), FP16BP8).tolist() == expected
    assert numeric.matmul_reference(arr(x), arr(rows), arr(bias), FP16BP8).tolist() == expected


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_matmul_saturates_with_tiny_inputs_and_bias_at_max(dt):
    # x = 1 LSB times weight 1.0 rounds to +1 LSB: bias MAX + 1 must saturate to MAX (counted)
    x = [[1, 0]]
    rows = [[dt.one, 0], [0, 0]]
    bias = [dt.max_raw, 0]
    expected, expected_sat = ref_matmul(x, rows, bias, dt)
    assert expected == [[dt.max_raw, 0]] and expected_sat == 1
    for bound in (None, rows_bound(rows)):
        sat = Saturations()
        got = numeric.matmul(arr(x), arr(rows), arr(bias), dt, sat, rows_bound=bound)
        assert got.tolist() == expected, bound
        assert sat.count == expected_sat, bound


def test_matmul_float32_is_float32_chain():
    x = np.array([[0.1, 0.2, 0.3]], dtype=np.float32)
    rows = np.array([[1.5, -2.0, 0.25], [3.0, 0.5, 1.0], [-1.0, 2.0, 4.0]], dtype=np.float32)
    bias = np.array([1.0, -1.0, 0.5], dtype=np.float32)
    got = numeric.matmul(x, rows, bias, FLOAT32)
    assert got.dtype == np.float32
    for i in range(3):
        acc = bias[i]
        for j in range(3):
            acc = np.float32(x[0, j] * rows[j, i]) + acc
        assert got[0, i] == acc


# ------------------------------------------------------------------------ float <-> fixed

def float_inputs(dt):
    """Floats with exact ±0.5 / ±1.5 LSB ties, out-of-range and infinite values."""
    scale = 2 ** (dt.binary_point + 1)
    limit = 2.0 ** (dt.width - dt.binary_point)
    ties = st.integers(-2 ** 12, 2 ** 12).map(lambda k: k / scale)
    return st.one_of(ties,
                     st.floats(-2 * limit, 2 * limit, allow_nan=False),
                     st.floats(allow_nan=False, allow_infinity=True),
                     st.floats(allow_nan=False, width=32),
                     st.sampled_from([limit, -limit, limit - 1 / scale, -limit - 1 / scale]))


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_to_fixed_matches_reference(dt, data):
    values = data.draw(st.lists(float_inputs(dt), min_size=1, max_size=30))
    expected = [ref_to_fixed(v, dt) for v in values]
    with np.errstate(over="ignore"):
        raw, n = numeric.to_fixed(np.array(values), dt)
    assert raw.dtype == np.int64
    assert raw.tolist() == [e for e, _ in expected]
    assert n == sum(c for _, c in expected)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_to_fixed_rounds_half_up(dt):
    lsb = 2.0 ** -dt.binary_point
    raw, n = numeric.to_fixed([0.5 * lsb, 1.5 * lsb, -0.5 * lsb, -1.5 * lsb, -2.5 * lsb], dt)
    assert raw.tolist() == [1, 2, 0, -1, -2]
    assert n == 0


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_to_fixed_saturates_and_counts(dt):
    with np.errstate(over="ignore"):
        raw, n = numeric.to_fixed([1e300, -1e300, math.inf, -math.inf, 0.0], dt)
    assert raw.tolist() == [dt.max_raw, dt.min_raw, dt.max_raw, dt.min_raw, 0]
    assert n == 4


def test_to_fixed_rounds_to_float32_first():
    # just below +0.5 LSB in float64 (would give 0), exactly 0.5 LSB once rounded to float32
    v = (1 - 2 ** -30) * 2 ** -9
    assert float(np.float32(v)) == 2 ** -9
    assert int(numeric.to_fixed(v, FP16BP8)[0]) == 1
    # just below -0.5 LSB in float64 (would give -1), exactly -0.5 LSB in float32
    v = -(1 + 2 ** -30) * 2 ** -9
    assert float(np.float32(v)) == -2 ** -9
    assert int(numeric.to_fixed(v, FP16BP8)[0]) == 0


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_to_fixed_refuses_nan(dt):
    with pytest.raises(ValueError):
        numeric.to_fixed(math.nan, dt)
    with pytest.raises(ValueError):
        numeric.to_fixed([0.0, 1.0, math.nan], dt)


def test_to_fixed_float32_only_rounds():
    with np.errstate(over="ignore"):
        f, n = numeric.to_fixed([0.1, 1e40], FLOAT32)
    assert f.dtype == np.float32 and n == 0
    assert f[0] == np.float32(0.1)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_to_float_is_exact_and_inverted_by_to_fixed(dt, data):
    # |raw| <= 2**24 keeps raw / 2**bp exact in float32, so to_fixed must give raw back
    lo, hi = max(dt.min_raw, -2 ** 24), min(dt.max_raw, 2 ** 24)
    values = data.draw(st.lists(st.one_of(st.sampled_from([lo, hi, 0, 1, -1]),
                                          st.integers(lo, hi)), min_size=1, max_size=30))
    f = numeric.to_float(arr(values), dt)
    assert f.dtype == np.float64
    assert [Fraction(v) for v in f.tolist()] == [Fraction(r, 2 ** dt.binary_point)
                                                 for r in values]
    back, n = numeric.to_fixed(f, dt)
    assert back.tolist() == values and n == 0


def test_to_float_full_range_is_exact():
    for dt in FIXED:
        f = numeric.to_float(arr([dt.min_raw, dt.max_raw]), dt)
        assert f.tolist() == [dt.min_raw / 2 ** dt.binary_point, dt.max_raw / 2 ** dt.binary_point]


# ------------------------------------------------------------------------ byte codecs

def test_fp16bp8_bytes_little_endian_twos_complement():
    raw = [1, -1, 256, -32768, 32767]
    data = numeric.encode_scalars(arr(raw), FP16BP8)
    assert data == bytes.fromhex("0100" "ffff" "0001" "0080" "ff7f")
    assert numeric.decode_scalars(data, FP16BP8).tolist() == raw


def test_fp8bp4_and_fp32bp16_bytes():
    assert numeric.encode_scalars(arr([-1, 127, -128, 16]), FP8BP4) == bytes.fromhex("ff7f8010")
    assert numeric.encode_scalars(arr([-2, 65536]), FP32BP16) == \
        bytes.fromhex("feffffff" "00000100")
    assert numeric.decode_scalars(bytes.fromhex("00000080ffffff7f"), FP32BP16).tolist() == \
        [-2 ** 31, 2 ** 31 - 1]


def test_fp18bp10_written_in_low_18_bits():
    data = numeric.encode_scalars(arr([-1, -131072, 131071, 1024]), FP18BP10)
    assert data == bytes.fromhex("ffff0300" "00000200" "ffff0100" "00040000")


@pytest.mark.parametrize("hex_bytes, raw", [
    ("ffff0300", -1),
    ("ffffffff", -1),          # high 14 bits ignored
    ("00000200", -131072),
    ("0000feff", -131072),     # bit 17 set, high bits ignored
    ("ffff01fc", 131071),      # bit 17 clear: positive whatever the high bits
    ("01000000", 1),
    ("000004f0", 0),           # only high bits set
])
def test_fp18bp10_read_ignores_high_bits(hex_bytes, raw):
    assert numeric.decode_scalars(bytes.fromhex(hex_bytes), FP18BP10).tolist() == [raw]


def test_float32_bytes_big_endian():
    data = numeric.encode_scalars(np.array([1.0, -2.5], dtype=np.float32), FLOAT32)
    assert data == bytes.fromhex("3f800000" "c0200000")
    got = numeric.decode_scalars(data, FLOAT32)
    assert got.dtype == np.float32 and got.tolist() == [1.0, -2.5]


@pytest.mark.parametrize("dt, nbytes", [(FP16BP8, 3), (FP18BP10, 6), (FP32BP16, 5),
                                        (FLOAT32, 7)], ids=ALL_IDS[1:])
def test_decode_scalars_refuses_partial_scalar(dt, nbytes):
    # (FP8BP4 has 1-byte scalars: every length is whole)
    with pytest.raises(ValueError):
        numeric.decode_scalars(bytes(nbytes), dt)


@pytest.mark.parametrize("dt", ALL_TYPES, ids=ALL_IDS)
def test_decode_vectors_refuses_partial_vector(dt):
    whole_scalars = bytes(3 * dt.bytes_per_scalar)      # 3 scalars, not a whole 4-lane vector
    with pytest.raises(ValueError):
        numeric.decode_vectors(whole_scalars, dt, 4)
    with pytest.raises(ValueError):
        numeric.decode_vectors(bytes(4 * dt.bytes_per_scalar + 1), dt, 4)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
def test_encode_refuses_out_of_range(dt):
    for bad in (dt.max_raw + 1, dt.min_raw - 1):
        with pytest.raises(ValueError):
            numeric.encode_scalars(arr([0, bad]), dt)
        with pytest.raises(ValueError):
            numeric.encode_vectors(arr([[0, bad]]), dt)


def test_empty_round_trip():
    for dt in ALL_TYPES:
        assert numeric.encode_scalars(arr([]), dt) == b""
        assert numeric.decode_scalars(b"", dt).size == 0
        assert numeric.decode_vectors(b"", dt, 4).shape == (0, 4)


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_scalar_codec_round_trip_fixed(dt, data):
    raw = data.draw(st.lists(raws(dt), max_size=40))
    encoded = numeric.encode_scalars(arr(raw), dt)
    assert len(encoded) == len(raw) * dt.bytes_per_scalar
    bits = 8 * dt.bytes_per_scalar
    expected = b"".join((r & ((1 << dt.width) - 1)).to_bytes(bits // 8, "little") for r in raw)
    assert encoded == expected
    decoded = numeric.decode_scalars(encoded, dt)
    assert decoded.dtype == np.int64 and decoded.tolist() == raw


@pytest.mark.parametrize("dt", FIXED, ids=FIXED_IDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_vector_codec_round_trip_fixed(dt, data):
    n = data.draw(st.integers(1, 9))
    m = data.draw(st.integers(0, 5))
    raw = [[data.draw(raws(dt)) for _ in range(n)] for _ in range(m)]
    encoded = numeric.encode_vectors(arr(raw).reshape(m, n), dt)
    assert len(encoded) == m * n * dt.bytes_per_scalar
    assert encoded == numeric.encode_scalars(arr(raw).reshape(-1), dt)
    decoded = numeric.decode_vectors(encoded, dt, n)
    assert decoded.shape == (m, n) and decoded.tolist() == raw


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.floats(width=32, allow_nan=False), max_size=30),
       n=st.integers(1, 6))
def test_codec_round_trip_float32(values, n):
    values = values[: len(values) // n * n]
    a = np.array(values, dtype=np.float32)
    encoded = numeric.encode_scalars(a, FLOAT32)
    assert encoded == a.astype(">f4").tobytes()
    assert numeric.decode_scalars(encoded, FLOAT32).view(np.uint32).tolist() == \
        a.view(np.uint32).tolist()
    vectors = numeric.decode_vectors(numeric.encode_vectors(a.reshape(-1, n), FLOAT32),
                                     FLOAT32, n)
    assert vectors.shape == (len(values) // n, n)
    assert vectors.reshape(-1).view(np.uint32).tolist() == a.view(np.uint32).tolist()


# ------------------------------------------------------------------------ FLOAT32 arithmetic

def test_float32_mac_rounds_in_float32():
    x = np.float32(1 + 2 ** -12)
    # exact product 1 + 2**-11 + 2**-24: float32 rounds the tie to even, float64 keeps it
    got = numeric.mac(x, x, np.float32(0), FLOAT32)
    assert got.dtype == np.float32
    assert float(got) == 1 + 2 ** -11
    assert numeric.mul(x, x, FLOAT32) == np.float32(1 + 2 ** -11)


def test_float32_add_rounds_in_float32():
    got = numeric.add(np.float32(1.0), np.float32(2 ** -24), FLOAT32)
    assert got.dtype == np.float32 and float(got) == 1.0
    got = numeric.sub(np.float32(1.0), np.float32(2 ** -25), FLOAT32)
    assert got.dtype == np.float32 and float(got) == 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(*[st.floats(-1e6, 1e6, width=32)] * 3), min_size=1, max_size=20))
def test_float32_mac_add_mul_are_float32_operations(rows):
    x, y, z = (np.array(c, dtype=np.float32) for c in zip(*rows))
    got = numeric.mac(x, y, z, FLOAT32)
    assert got.dtype == np.float32
    expected = [np.float32(np.float32(a * b) + c) for a, b, c in zip(x, y, z)]
    assert got.tolist() == [float(e) for e in expected]
    assert numeric.add(x, z, FLOAT32).tolist() == [float(np.float32(a + c)) for a, c in zip(x, z)]
    assert numeric.mul(x, y, FLOAT32).tolist() == [float(np.float32(a * b)) for a, b in zip(x, y)]


def test_encode_refuses_float_raw_values():
    with pytest.raises(ValueError, match="must be integers"):
        numeric.encode_scalars(np.array([1.7, -0.9]), numeric.FP16BP8)


def test_decode_vectors_refuses_zero_lanes():
    with pytest.raises(ValueError, match="at least one lane"):
        numeric.decode_vectors(b"", numeric.FP16BP8, 0)
