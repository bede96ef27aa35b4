"""Element-wise functions of quantized models (docs/integer.md, "Table functions"): a chain
of float functions between DequantizeLinear and QuantizeLinear becomes one lookup table
of the quantized output for every input value (exact for INT8 with 256 entries; piecewise
linear, within 1 LSB, for INT16), and a chain of arithmetic with scalar constants becomes one
affine map (any integer type, no tables).
Outputs are compared with onnxruntime's for the same QDQ model, as in
:mod:`.test_integer_models`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from compiler_lite.ops.qtable import fit_linear, linear_outputs, table_entries
from tcu_hw import alu, numeric
from tcu_hw.errors import CompileError

from .helpers import lut_arch, make_model, ort_run, rand
from .test_hardware import check, requires_gcc
from .test_integer_models import agreement, he, quantized

N = helper.make_node

#: INT8 with exact tables: one value table of 256 entries
INT8_TABLES = lut_arch("pynqz1_int8", count=1, depth=256, registers=4)


def between_convs(fn_nodes, inits=None, opset=13):
    """Conv → the nodes (input 'c', output 'f') → Conv: the function's input and output are
    both quantized, as onnxruntime's quantizer leaves them."""
    inits = {"w": he((4, 4, 1, 1), 3), "w2": he((4, 4, 1, 1), 5), **(inits or {})}
    return make_model([N("Conv", ["x", "w"], ["c"]), *fn_nodes, N("Conv", ["f", "w2"], ["y"])],
                      {"x": (1, 4, 5, 5)}, ["y"], inits, opset=opset)


@pytest.mark.parametrize("fn", ["Sigmoid", "Tanh", "Erf", "Exp", "Softplus", "HardSwish",
                                "Gelu", "Abs"])
def test_functions_equal_onnxruntime_on_int8(fn, tmp_path):
    model = between_convs([N(fn, ["c"], ["f"])], opset={"Gelu": 20, "HardSwish": 14}.get(fn, 13))
    q, shape = quantized(model, "int8", tmp_path)
    equal, worst = agreement(q, INT8_TABLES, shape)
    assert worst < 1.01 and equal >= 0.99, (worst, equal)


def test_a_chain_of_functions_is_one_table(tmp_path):
    """Div by √2 then Erf (GELU's inner part): onnxruntime quantizes only Erf's output, so
    the two are one table."""
    model = between_convs([N("Div", ["c", "r2"], ["d"]), N("Erf", ["d"], ["f"])],
                          {"r2": np.array(np.sqrt(2.0), dtype=np.float32)})
    q, shape = quantized(model, "int8", tmp_path)
    c = compile_model(str(q), INT8_TABLES)
    assert any("Div → Erf" in str(n.attrs.get("functions", "")) for n in c.graph.nodes)
    equal, worst = agreement(q, INT8_TABLES, shape)
    assert worst < 1.01 and equal >= 0.99, (worst, equal)


@pytest.mark.parametrize("kind, arch", [("int8", "pynqz1_int8"),
                                        ("int16", "ultra96v2_int16")])
@pytest.mark.parametrize("op, const, first", [("Add", 1.0, False), ("Sub", 0.3, False),
                                              ("Sub", 1.0, True), ("Mul", -0.5, False),
                                              ("Div", 2.8, False)])
def test_scalar_arithmetic_is_affine_without_tables(kind, arch, op, const, first, tmp_path):
    """Arithmetic with a scalar constant (GELU's ``+ 1`` and ``· ½``, attention's ``/ √d``,
    ``1 − x``) needs no lookup tables: the integer presets take it."""
    ins = ["k", "c"] if first else ["c", "k"]
    model = between_convs([N(op, ins, ["f"])], {"k": np.array(const, dtype=np.float32)})
    q, shape = quantized(model, kind, tmp_path)
    equal, worst = agreement(q, arch, shape)
    assert worst < 1.01 and equal >= 0.99, (worst, equal)


def sigmoid_squeeze_excite():
    """Squeeze-excite with the Sigmoid gate (SENet, EfficientNet) and a SiLU after it."""
    inits = {"w0": he((16, 8, 3, 3), 81), "w1": he((4, 16, 1, 1), 83),
             "b1": rand((4,), 84, 0.1), "w2": he((16, 4, 1, 1), 85), "b2": rand((16,), 86, 0.1)}
    nodes = [N("Conv", ["x", "w0"], ["f"], pads=[1, 1, 1, 1]),
             N("GlobalAveragePool", ["f"], ["sq"]), N("Conv", ["sq", "w1", "b1"], ["e1"]),
             N("Relu", ["e1"], ["e1r"]), N("Conv", ["e1r", "w2", "b2"], ["e2"]),
             N("Sigmoid", ["e2"], ["gate"]), N("Mul", ["f", "gate"], ["se"]),
             N("Sigmoid", ["se"], ["sg"]), N("Mul", ["se", "sg"], ["y"])]
    return make_model(nodes, {"x": (1, 8, 6, 6)}, ["y"], inits, opset=13)


def gelu_mlp(T=6, C=8, hidden=16):
    """A transformer's MLP on [1, T, C] tokens: MatMul → GELU in Erf form → MatMul, plus the
    residual."""
    inits = {"w1": rand((C, hidden), 3, 0.3), "b1": rand((hidden,), 4, 0.1),
             "w2": rand((hidden, C), 5, 0.3), "sqrt2": np.array(np.sqrt(2.0)),
             "one": np.array(1.0), "half": np.array(0.5)}
    nodes = [N("MatMul", ["x", "w1"], ["h0"]), N("Add", ["h0", "b1"], ["h"]),
             N("Div", ["h", "sqrt2"], ["hd"]), N("Erf", ["hd"], ["e"]),
             N("Add", ["e", "one"], ["e1"]), N("Mul", ["h", "e1"], ["hm"]),
             N("Mul", ["hm", "half"], ["gelu"]), N("MatMul", ["gelu", "w2"], ["o"]),
             N("Add", ["x", "o"], ["y"])]
    return make_model(nodes, {"x": (1, T, C)}, ["y"], inits, opset=13)


@pytest.mark.parametrize("build", [sigmoid_squeeze_excite, gelu_mlp])
def test_blocks_with_functions_equal_onnxruntime_on_int8(build, tmp_path):
    q, shape = quantized(build(), "int8", tmp_path)
    equal, worst = agreement(q, INT8_TABLES, shape)
    assert worst < 1.01 and equal >= 0.99, (worst, equal)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-128, 127), min_size=256, max_size=256),
       st.integers(0, 255))
def test_table_entries_give_every_value_back(values, runs):
    """Keys at the first input of each run of equal outputs: Lookup (§4.6) returns the
    output of every input exactly, whatever the function."""
    dt = numeric.DATA_TYPES["INT8"]
    table = np.sort(np.array(values))[::-1] if runs % 2 else np.array(values)
    keys, vals = table_entries(table, dt)
    x = np.arange(-128, 128)
    _, got = alu.lookup(x, np.stack([keys, vals]), dt)
    np.testing.assert_array_equal(got[0], table)


#: INT16 with piecewise-linear tables (three value tables, six registers)
INT16_TABLES = lut_arch("ultra96v2_int16", count=3, depth=1024, registers=6)


def sigmoid_layer():
    return make_model([N("Conv", ["x", "w"], ["c"]), N("Sigmoid", ["c"], ["y"])],
                      {"x": (1, 4, 5, 5)}, ["y"], {"w": he((4, 4, 1, 1), 3)}, opset=13)


@pytest.mark.parametrize("depth, least", [(1024, 0.97), (256, 0.75)])
def test_int16_sigmoid_piecewise_linear(depth, least, tmp_path):
    """INT16 Sigmoid through 1,024 or 256 segments: never more than 1 LSB from
    onnxruntime's (which computes it in float32), most values equal."""
    q, shape = quantized(sigmoid_layer(), "int16", tmp_path)
    arch = lut_arch("ultra96v2_int16", count=3, depth=depth, registers=6)
    equal, worst = agreement(q, arch, shape, count=8)
    assert worst < 1.01 and equal >= least, (worst, equal)


def erf_exact(scale_x=2e-4, zp_x=-2197, scale_y=1 / 32767.5):
    """The exact outputs (LSB) and their rounding of an INT16 Erf at realistic scales."""
    x = np.arange(-32768, 32768)
    real = np.vectorize(math.erf)((x - zp_x).astype(np.float32) * np.float32(scale_x))
    exact = (real.astype(np.float32) / np.float32(scale_y)).astype(np.float64)
    return np.clip(exact, -32768, 32767), np.clip(np.rint(exact), -32768, 32767)


def test_piecewise_linear_fit_on_int16():
    """The fit at 1,024 segments: every output within 1 LSB of the exact value, and at
    least 99% the exactly rounded one (ties fitted at their rounding); at 16 segments
    there is no fit within 1 LSB."""
    dt = numeric.DATA_TYPES["INT16"]
    exact, rounded = erf_exact()
    target = np.where(np.abs(exact - rounded) == 0.5, rounded, exact)
    fit = fit_linear(target, 1024, 16)
    got = linear_outputs(fit, len(exact), dt)
    assert len(fit[0]) <= 1024 and np.abs(got - exact).max() < 1.0
    assert np.mean(got == rounded) >= 0.99
    assert fit_linear(target, 16, 16) is None


def test_int16_functions_need_steps_or_linear_tables(tmp_path):
    q, _ = quantized(between_convs([N("Sigmoid", ["c"], ["f"])]), "int16", tmp_path)
    arch = lut_arch("ultra96v2_int16", count=1, depth=1024, registers=4)
    with pytest.raises(CompileError, match=r"Sigmoid.*\(QTable\): its table \(Sigmoid\) "
                                           r"changes value \d+ times over the 65536 INT16 "
                                           r"inputs; lut_depth 1024.*lut_count ≥ 3 and "
                                           r"simd_registers_depth ≥ lut_count \+ 3"):
        compile_model(str(q), arch)
    with pytest.raises(CompileError, match=r"no piecewise-linear form of 32 segments within "
                                           r"1 LSB"):
        compile_model(str(q), lut_arch("ultra96v2_int16", count=3, depth=32, registers=6))


def test_int8_function_without_tables_or_with_too_few(tmp_path):
    q, _ = quantized(between_convs([N("Tanh", ["c"], ["f"])]), "int8", tmp_path)
    with pytest.raises(CompileError, match=r"Tanh.*needs lookup tables: the architecture "
                                           r"must have lut_count ≥ 1"):
        compile_model(str(q), "pynqz1_int8")
    with pytest.raises(CompileError, match=r"changes value \d+ times over the 256 INT8 "
                                           r"inputs; lut_depth 16 holds 16 steps \(lut_depth "
                                           r"≥ 256 makes every INT8 function exact"):
        compile_model(str(q), lut_arch("pynqz1_int8", count=1, depth=16, registers=4))


def test_a_float_function_at_the_output_is_named(tmp_path):
    """onnxruntime's quantizer leaves Tanh at a model's output in float."""
    model = make_model([N("Conv", ["x", "w"], ["c"]), N("Tanh", ["c"], ["y"])],
                       {"x": (1, 4, 5, 5)}, ["y"], {"w": he((4, 4, 1, 1), 3)}, opset=13)
    q, _ = quantized(model, "int8", tmp_path)
    with pytest.raises(CompileError, match=r"Tanh.*computes the model's output 'y' in float"):
        compile_model(str(q), INT8_TABLES)


@requires_gcc
def test_tables_bit_exact_on_the_core(tmp_path):
    """The PyRTL core runs the INT8 Sigmoid squeeze-excite (tables loaded with LoadLUT,
    Lookup on integer lanes, scalar affine maps) and an INT16 piecewise-linear Softplus
    (Lookup into three value tables, Multiply, Requantize) as the emulator does."""
    q, shape = quantized(sigmoid_squeeze_excite(), "int8", tmp_path / "se")
    check(compile_model(str(q), INT8_TABLES), {"x": rand(shape, 3)})
    q, shape = quantized(between_convs([N("Softplus", ["c"], ["f"])]), "int16",
                         tmp_path / "softplus")
    arch = lut_arch("ultra96v2_int16", count=3, depth=128, registers=6, array_size=4)
    c = compile_model(str(q), arch)
    assert any("piecewise-linear table of" in note for note in c.notes)
    check(c, {"x": rand(shape, 3)})


def test_more_value_tables_than_the_linear_form_uses(tmp_path):
    """Lookup writes one register per value table: with four tables the Requantize
    parameters move past them (lut_count + 3 registers), and the result is the same."""
    q, shape = quantized(sigmoid_layer(), "int16", tmp_path)
    arch = lut_arch("ultra96v2_int16", count=4, depth=256, registers=7)
    equal, worst = agreement(q, arch, shape, count=4)
    assert worst < 1.01 and equal >= 0.75, (worst, equal)
    with pytest.raises(CompileError, match=r"simd_registers_depth ≥ lut_count \+ 3"):
        compile_model(str(q), lut_arch("ultra96v2_int16", count=4, depth=256, registers=6))


def qdq(x, y, scale, zp, dtype=np.int8):
    """QuantizeLinear → DequantizeLinear of float tensor ``x`` into float tensor ``y``."""
    z = f"{y}_zp"
    return ([N("QuantizeLinear", [x, f"{y}_s", z], [f"{y}_q"]),
             N("DequantizeLinear", [f"{y}_q", f"{y}_s", z], [y])],
            {f"{y}_s": np.array(scale, dtype=np.float32), z: np.array(zp, dtype=dtype)})


def qdq_model(nodes, outputs, inits):
    """A hand-made QDQ model of input x [1, 256] (zero points kept int8)."""
    model = make_model(nodes, {"x": (1, 256)}, outputs, inits, opset=13)
    for k, init in enumerate(model.graph.initializer):
        if init.name.endswith("_zp"):
            model.graph.initializer[k].CopyFrom(numpy_helper.from_array(
                np.asarray(inits[init.name], dtype=np.int8), init.name))
    return model


def test_chains_that_share_a_prefix_and_clamp_inside(tmp_path):
    """A hand-made QDQ model: Sigmoid → Relu-free Clip → Tanh and Sigmoid → Exp, the float
    Sigmoid read by two chains; each chain is one table from the quantized input, equal to
    onnxruntime's on every input value."""
    nodes, inits = [], {}
    for part in (qdq("x", "xd", 0.05, 3), qdq("t", "y1", 1 / 200, -20),
                 qdq("e", "y2", 0.02, -128)):
        nodes += part[0]
        inits.update(part[1])
    inits.update(lo=np.array(0.2, dtype=np.float32), hi=np.array(0.9, dtype=np.float32))
    nodes[2:2] = [N("Sigmoid", ["xd"], ["s"]), N("Clip", ["s", "lo", "hi"], ["c"]),
                  N("Tanh", ["c"], ["t"]), N("Exp", ["s"], ["e"])]
    model = qdq_model(nodes, ["y1", "y2"], inits)
    x = ((np.arange(-128, 128) - 3) * 0.05).astype(np.float32).reshape(1, 256)
    c = compile_model(model, INT8_TABLES)
    got = run_emulator(c, {"x": x}).outputs
    ref = ort_run(model, {"x": x})
    for name in ("y1", "y2"):
        np.testing.assert_array_equal(got[name], ref[name], err_msg=name)


def test_a_table_of_not_a_number_is_noted():
    """x^0.5 of the negative inputs: the table gives them the zero point and says so."""
    (n1, i1), (n2, i2) = qdq("x", "xd", 0.05, 0), qdq("r", "y", 0.05, -128)
    model = qdq_model(n1 + [N("Pow", ["xd", "half"], ["r"])] + n2, ["y"],
                      {**i1, **i2, "half": np.array(0.5, dtype=np.float32)})
    c = compile_model(model, INT8_TABLES)
    assert any("128 of the 256 input values (from -6.4) make Pow not a number" in note
               for note in c.notes), c.notes
    x = np.linspace(-6, 6, 256, dtype=np.float32).reshape(1, 256)
    got = run_emulator(c, {"x": x}).outputs["y"]
    np.testing.assert_array_equal(got[x >= 0], ort_run(model, {"x": x})["y"][x >= 0])
    assert np.all(got[x < -0.025] == 0.0)


def test_a_lookup_needs_a_register_per_value_table(tmp_path):
    """Lookup writes r1..r(lut_count + 1): two tables and two registers is a valid .tarch
    but no table function fits it; the compiler says so (the emulator used to stop with
    'SIMD destination R3 does not exist')."""
    q, _ = quantized(between_convs([N("Sigmoid", ["c"], ["f"])]), "int8", tmp_path)
    with pytest.raises(CompileError, match=r"Sigmoid.*simd_registers_depth ≥ lut_count \+ 1 "
                                           r"= 3 \(it is 2\)"):
        compile_model(str(q), lut_arch("pynqz1_int8", count=2, depth=256, registers=2))
