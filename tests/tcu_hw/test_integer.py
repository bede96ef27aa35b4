"""The integer types' arithmetic (docs/integer.md) in ``tcu_hw.numeric``: exact column sums,
Requantize against an exact rational reference, its parameters, and QuantizeLinear /
DequantizeLinear and integer requantization against onnxruntime itself."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tcu_hw import numeric
from tcu_hw.numeric import INT8, INT16, INT32, INT48, Saturations

TYPES = (INT8, INT16)
IDS = [dt.name for dt in TYPES]


def rhe(value: Fraction) -> int:
    """Round half to even, exactly."""
    q = value.numerator // value.denominator
    rem = value - q
    return q + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and q % 2) else 0)


def clamp(v: int, dt) -> int:
    return max(dt.min_raw, min(dt.max_raw, v))


def test_types_and_their_accumulators():
    assert (INT8.width, INT8.binary_point, INT8.bytes_per_scalar) == (8, 0, 1)
    assert (INT16.width, INT16.binary_point, INT16.bytes_per_scalar) == (16, 0, 2)
    assert INT8.accumulator is INT32 and INT16.accumulator is INT48
    assert INT32.accumulator is INT32 and numeric.FP16BP8.accumulator is numeric.FP16BP8
    assert numeric.data_type("INT8") is INT8 and "INT32" not in numeric.DATA_TYPES
    assert INT8.one == 1 and INT8.error == 1.0


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_codecs_are_little_endian_twos_complement(dt):
    raw = np.array([dt.min_raw, -1, 0, 1, dt.max_raw])
    data = numeric.encode_scalars(raw, dt)
    assert len(data) == 5 * dt.bytes_per_scalar
    assert data[:dt.bytes_per_scalar] == (1 << (dt.width - 1)).to_bytes(dt.bytes_per_scalar,
                                                                         "little")
    assert np.array_equal(numeric.decode_scalars(data, dt), raw)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_column_sums_are_exact(data):
    dt = data.draw(st.sampled_from(TYPES))
    n = data.draw(st.integers(1, 8))
    ints = st.integers(dt.min_raw, dt.max_raw)
    x = np.array(data.draw(st.lists(st.lists(ints, min_size=n, max_size=n), min_size=1,
                                    max_size=4)))
    rows = np.array(data.draw(st.lists(st.lists(ints, min_size=n, max_size=n), min_size=n,
                                       max_size=n)))
    bias = np.array(data.draw(st.lists(ints, min_size=n, max_size=n)))
    want = [[int(bias[i]) + sum(int(x[v, j]) * int(rows[j, i]) for j in range(n))
             for i in range(n)] for v in range(len(x))]
    assert numeric.matmul(x, rows, bias, dt).tolist() == want
    assert numeric.matmul_reference(x, rows, bias, dt).tolist() == want


def test_extreme_column_sum_fits_the_accumulator():
    for dt in TYPES:
        n = 256
        x = np.full((1, n), dt.min_raw)
        rows = np.full((n, n), dt.min_raw)
        sat = Saturations()
        y = numeric.matmul(x, rows, np.full(n, dt.max_raw), dt, sat)
        assert y[0, 0] == n * dt.min_raw ** 2 + dt.max_raw and sat.count == 0


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_requantize_fields_pack_and_unpack(dt):
    f = numeric.requantize_fields(dt)
    assert f.multiplier_bits == dt.width + 8 and f.zero_point_lo + dt.width <= \
        dt.accumulator.width
    m = np.array([0, 1, (1 << f.multiplier_bits) - 1])
    s, z = np.array([0, 63, 17]), np.array([dt.min_raw, 0, dt.max_raw])
    packed = numeric.pack_requantize(m, s, z, dt)
    assert packed.min() >= dt.accumulator.min_raw and packed.max() <= dt.accumulator.max_raw
    for got, want in zip(numeric.unpack_requantize(packed, dt), (m, s, z)):
        assert np.array_equal(got, want)
    for bad in ({"multiplier": 1 << f.multiplier_bits}, {"shift": 64},
                {"zero_point": dt.max_raw + 1}, {"multiplier": -1}):
        args = {"multiplier": 1, "shift": 0, "zero_point": 0, **bad}
        with pytest.raises(ValueError, match=next(iter(bad)).replace("_", " ")):
            numeric.pack_requantize(args["multiplier"], args["shift"], args["zero_point"], dt)
    with pytest.raises(ValueError, match="not an integer data type"):
        numeric.requantize_fields(numeric.FP16BP8)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_requantize_is_exact(data):
    dt = data.draw(st.sampled_from(TYPES))
    at, f = dt.accumulator, numeric.requantize_fields(dt)
    left = data.draw(st.integers(at.min_raw, at.max_raw))
    bias = data.draw(st.integers(at.min_raw, at.max_raw))
    m = data.draw(st.integers(0, (1 << f.multiplier_bits) - 1))
    s = data.draw(st.integers(0, 63))
    z = data.draw(st.integers(dt.min_raw, dt.max_raw))
    want = clamp(z + rhe(Fraction((left + bias) * m, 1 << s)), at)
    sat = Saturations()
    got = numeric.requantize([left], numeric.pack_requantize(m, s, z, dt), [bias], dt, sat)
    assert int(got[0]) == want
    assert sat.count == int(want in (at.min_raw, at.max_raw) and
                            z + rhe(Fraction((left + bias) * m, 1 << s)) != want)


def test_requantize_ties_go_to_even():
    p = numeric.pack_requantize(1, 1, 0, INT8)
    got = numeric.requantize([1, 3, -1, -3, 5], p, [0] * 5, INT8)
    assert got.tolist() == [0, 2, 0, -2, 2]


@settings(max_examples=200, deadline=None)
@given(st.floats(2.0 ** -40, 65535.0, allow_nan=False, width=32))
def test_requantize_parameters_keep_w_plus_8_bits(scale):
    for dt in TYPES:
        bits = numeric.requantize_fields(dt).multiplier_bits
        m, s = (int(v) for v in numeric.requantize_parameters(scale, dt))
        assert 0 <= s <= 63 and 0 <= m < 1 << bits
        if s < 63:                      # full precision: M has exactly W + 8 bits
            assert m >= 1 << (bits - 1)
        assert abs(Fraction(m, 1 << s) - Fraction(float(np.float32(scale)))) <= \
            Fraction(1, 1 << (s + 1))


def test_requantize_parameters_refuse_what_they_cannot_hold():
    for bad in (0.0, -1.0, float("inf"), float("nan"), 2.0 ** 16, 65535.5):
        with pytest.raises(ValueError, match="scales must be"):
            numeric.requantize_parameters([bad], INT8)


# ------------------------------------------------------------------- against onnxruntime

def _ort(nodes, inputs, outputs, opset=21):
    ort = pytest.importorskip("onnxruntime", reason="install onnxruntime (pip install .[test])")
    from onnx import helper
    graph = helper.make_graph(nodes, "q", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=10)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_quantize_and_dequantize_are_onnxruntimes(dt):
    from onnx import TensorProto, helper
    elem = TensorProto.INT8 if dt is INT8 else TensorProto.INT16
    rng = np.random.default_rng(3)
    scale, zp = np.float32(0.0123), -7
    x = np.concatenate([rng.standard_normal(4000) * 200 * (dt.max_raw / 127) * scale,
                        (np.arange(-40, 40) + 0.5) * scale]).astype(np.float32)  # ties
    sess = _ort([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                 helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"])],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(x)]),
                 helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                 helper.make_tensor_value_info("z", elem, [])],
                [helper.make_tensor_value_info("q", elem, [len(x)]),
                 helper.make_tensor_value_info("d", TensorProto.FLOAT, [len(x)])])
    q, d = sess.run(None, {"x": x, "s": np.array(scale, np.float32),
                           "z": np.array(zp, dtype=np.int8 if dt is INT8 else np.int16)})
    raw, saturated = numeric.quantize(x, scale, zp, dt)
    assert np.array_equal(raw, q.astype(np.int64)) and saturated > 0
    assert np.array_equal(numeric.dequantize(raw, scale, zp), d)


def test_requantize_agrees_with_onnxruntimes_integer_convolution():
    """onnxruntime's QLinearConv (int8, per-channel weight scales) computes exact int32 sums
    and requantizes them in float32; Requantize with requantize_parameters' (M, s) lands on
    the same integer almost always and never more than 1 away."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(5)
    c_in, c_out, hw = 16, 32, 12
    x = rng.integers(-128, 128, (1, c_in, hw, hw)).astype(np.int8)
    w = rng.integers(-127, 128, (c_out, c_in, 3, 3)).astype(np.int8)
    b = rng.integers(-20000, 20000, c_out).astype(np.int32)
    sx, sy, zx, zy = np.float32(0.02), np.float32(0.9), np.int8(3), np.int8(-5)
    sw = (rng.uniform(0.5, 2.0, c_out) * 0.004).astype(np.float32)
    init = [helper.make_tensor("w", TensorProto.INT8, w.shape, w.tobytes(), raw=True),
            helper.make_tensor("b", TensorProto.INT32, b.shape, b.tobytes(), raw=True)]
    names = ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"]
    node = helper.make_node("QLinearConv", names, ["y"], pads=[1, 1, 1, 1])
    ins = [helper.make_tensor_value_info("x", TensorProto.INT8, x.shape)]
    consts = {"sx": sx, "zx": zx, "sw": sw, "zw": np.zeros(c_out, np.int8), "sy": sy,
              "zy": zy}
    nodes = [helper.make_node("Constant", [], [k], value=helper.make_tensor(
        k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v),
        np.atleast_1d(v).tolist())) for k, v in consts.items()] + \
        [helper.make_node("Constant", [], [k], value=t) for k, t in zip(("w", "b"), init)]
    sess = _ort(nodes + [node], ins,
                [helper.make_tensor_value_info("y", TensorProto.INT8, None)], opset=13)
    want = sess.run(None, {"x": x})[0].astype(np.int64)
    # the exact int32 sums, as the array computes them
    xp = np.pad(x.astype(np.int64) - zx, ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((c_out, hw, hw), np.int64)
    for i in range(3):
        for j in range(3):
            acc += np.einsum("oc,chw->ohw", w[:, :, i, j].astype(np.int64),
                             xp[0, :, i:i + hw, j:j + hw])
    m, s = numeric.requantize_parameters(sx * sw / sy, INT8)
    params = numeric.pack_requantize(m, s, zy, INT8)[:, None, None]
    got = numeric.requantize(acc, np.broadcast_to(params, acc.shape), b[:, None, None],
                             INT8)
    got = np.clip(got, -128, 127)                 # the move to local memory
    diff = np.abs(got - want[0])
    assert diff.max() <= 1 and (diff == 0).mean() >= 0.99, (diff.max(), (diff == 0).mean())


def test_integer_instructions_encode_and_assemble():
    from tcu_hw.arch import preset
    from tcu_hw.asm import assemble, format_program
    from tcu_hw.isa import SIMD, DataMove, DataMoveKind, SimdOp
    arch = preset("pynqz1").with_changes("int8", data_type="INT8", simd_registers_depth=3)
    lay = arch.layout
    assert lay.integer and lay.simd_op_bits == 5 and int(SimdOp.REQUANTIZE) in lay.simd_ops
    assert int(SimdOp.LOOKUP) not in lay.simd_ops                      # no lookup tables
    assert DataMoveKind.LOCAL_TO_ACC_SHIFT in lay.data_move_kinds
    assert DataMoveKind.LOCAL_TO_ACC_SHIFT not in preset("pynqz1").layout.data_move_kinds
    program = [DataMove(DataMoveKind.LOCAL_TO_ACC_SHIFT, 3, 1, 7, 0, 2),
               SIMD(SimdOp.REQUANTIZE, 0, 1, 3, read=True, write=True, read_address=5,
                    write_address=6)]
    text = format_program(program)
    assert "DataMove[local_to_acc_shift]" in text and "R3=Requantize(I,R1)" in text
    assert assemble(text, layout=lay) == program
    for ins in program:
        assert lay.decode_word(lay.encode_word(ins)) == ins


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_integer_multiply_is_exact_with_its_right_operand_clipped(data):
    at = data.draw(st.sampled_from((INT32, INT48)))
    a = data.draw(st.integers(at.min_raw, at.max_raw))
    b = data.draw(st.integers(at.min_raw, at.max_raw))
    bits = at.multiplier_width
    b_clipped = max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, b))
    assert int(numeric.multiply_integer([a], [b], at)[0]) == clamp(a * b_clipped, at)


@pytest.mark.parametrize("name", ["INT8", "INT16"])
def test_accumulator_digits_rebuild_the_value_by_0xD_then_0xE(name):
    """The compiler's words for a wide constant: 0xD sign-extends the top one, each 0xE
    shifts W bits in (acc·2^W + word mod 2^W); the edges of the accumulator type too."""
    from tcu_hw.numeric import accumulator_digits
    dt = {"INT8": numeric.INT8, "INT16": numeric.INT16}[name]
    at, w = dt.accumulator, dt.width
    rng = np.random.default_rng(5)
    v = np.concatenate([[at.min_raw, at.max_raw, 0, -1, 1],
                        rng.integers(at.min_raw, at.max_raw, 200, endpoint=True)])
    words = accumulator_digits(v, dt)
    assert words.min() >= dt.min_raw and words.max() <= dt.max_raw
    acc = words[0].astype(object)
    for word in words[1:]:
        acc = acc * (1 << w) + (word.astype(object) % (1 << w))
    assert list(acc) == [int(x) for x in v]
    with pytest.raises(ValueError, match="outside"):
        accumulator_digits([at.max_raw + 1], dt)
