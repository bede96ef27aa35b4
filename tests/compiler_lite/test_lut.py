"""Functions through lookup tables, against onnxruntime, in fixed point; the SiLU pattern
``x · sigmoid(x)`` becomes one table."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .helpers import compile_and_run, lsb, lut_arch, make_model, ort_run, rand

#: op → (attributes, opset, input scale, tolerance in LSB)
FUNCS = {
    "Sigmoid": ({}, 17, 3.0, 4), "Tanh": ({}, 17, 2.0, 4), "Exp": ({}, 17, 1.0, 8),
    "Softplus": ({}, 17, 3.0, 6), "Softsign": ({}, 17, 4.0, 6), "Elu": ({"alpha": 0.7}, 17, 2.0, 8),
    "Selu": ({}, 17, 2.0, 8), "Celu": ({"alpha": 1.5}, 17, 2.0, 8),
    "HardSwish": ({}, 17, 3.0, 8), "Erf": ({}, 17, 1.5, 4), "Mish": ({}, 18, 3.0, 8),
    "Gelu": ({}, 20, 2.0, 8), "Swish": ({"alpha": 1.5}, 24, 3.0, 8),
}


@pytest.mark.parametrize("op_", sorted(FUNCS))
def test_function(op_):
    attrs, opset, scale, tol = FUNCS[op_]
    m = make_model([helper.make_node(op_, ["x"], ["y"], **attrs)], {"x": (3, 20)}, ["y"],
                   opset=opset)
    x = rand((3, 20), 1, scale)
    try:
        ref = ort_run(m, {"x": x})["y"]
    except Exception as e:  # noqa: BLE001 - an older onnxruntime may lack the op
        pytest.skip(f"onnxruntime cannot run {op_} at opset {opset}: {e}")
    arch = lut_arch()
    _, run = compile_and_run(m, arch, {"x": x})
    err = float(np.abs(run.outputs["y"] - ref).max())
    assert err <= tol * lsb(arch), f"{err / lsb(arch):.1f} LSB"


@pytest.mark.parametrize("op_,lo", [("Log", 0.05), ("Sqrt", 0.0), ("Reciprocal", 0.25)])
def test_positive_functions(op_, lo):
    m = make_model([helper.make_node(op_, ["x"], ["y"])], {"x": (2, 16)}, ["y"])
    x = np.random.default_rng(2).uniform(lo + 0.01, 8.0, (2, 16)).astype(np.float32)
    ref = ort_run(m, {"x": x})["y"]
    arch = lut_arch(depth=128)
    _, run = compile_and_run(m, arch, {"x": x})
    rel = np.abs(run.outputs["y"] - ref) / np.maximum(np.abs(ref), 0.25)
    assert rel.max() < 0.05


def test_silu_pattern_is_one_table():
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Sigmoid", ["c"], ["s"]),
                    helper.make_node("Mul", ["c", "s"], ["y"])],
                   {"x": (1, 4, 6, 6)}, ["y"], {"w": rand((6, 4, 3, 3), 1, 0.3)})
    x = rand((1, 4, 6, 6), 2)
    ref = ort_run(m, {"x": x})["y"]
    arch = lut_arch()
    c, run = compile_and_run(m, arch, {"x": x})
    assert np.abs(run.outputs["y"] - ref).max() <= 8 * lsb(arch)
    kinds = [i.name for i in c.program]
    assert kinds.count("LoadLUT") == 3 * c.layers[-1].partitions or kinds.count("LoadLUT") <= 6
    assert not any(s.nodes == ["Sigmoid"] for s in c.layers)


def test_one_table_holds_the_edge_value_beyond_its_range():
    """A piecewise-constant SiLU (one table) on inputs past its range (±8) gives the value
    at the edge, not the value at the middle of the open segment (32,756 in FLOAT32 before),
    and the compile notes say so; two tables follow the function."""
    m = make_model([helper.make_node("Swish", ["x"], ["y"])], {"x": (1, 8)}, ["y"],
                   opset=24)
    x = np.array([[-30, -12, -4, 0, 4, 9, 12, 30]], dtype=np.float32)
    try:
        ref = ort_run(m, {"x": x})["y"]
    except Exception as e:  # noqa: BLE001 - an older onnxruntime may lack the op
        pytest.skip(f"onnxruntime cannot run Swish at opset 24: {e}")
    one = lut_arch(count=1, depth=64, registers=2)
    c, run = compile_and_run(m, one, {"x": x})
    got = run.outputs["y"]
    assert np.all(np.abs(got[0, 5:]) < 9) and np.abs(got[0, :2]).max() < 0.01
    assert any("holds Swish's value at 8" in n for n in c.notes), c.notes
    c, run = compile_and_run(m, lut_arch(count=2, depth=64, registers=3), {"x": x})
    assert np.abs(run.outputs["y"] - ref).max() <= 8 * lsb(one)
    assert not any("holds" in n for n in c.notes)
