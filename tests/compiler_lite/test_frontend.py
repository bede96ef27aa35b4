"""The ONNX front end: opset conversion, shapes, constant folding, output selection."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler_lite.frontend import load_graph, parse_input_shapes
from tcu_hw.errors import CompileError

from ..conftest import shared_path
from .helpers import compile_and_run, float_arch, make_model, ort_run, rand


def test_parse_input_shapes():
    assert parse_input_shapes('x [1,3,32,32]') == {"x": (1, 3, 32, 32)}
    assert parse_input_shapes(['a:0 [2, 4]', 'b [1]; c [3,3]']) == {
        "a:0": (2, 4), "b": (1,), "c": (3, 3)}
    with pytest.raises(CompileError, match="positive integers"):
        parse_input_shapes("x [1,-3]")


def test_old_opsets_are_converted_and_resize_keeps_its_coordinates():
    g = load_graph(shared_path("conformance", "speech_robot", "speech_commands.onnx"))
    assert g.opset >= 13
    assert any("asymmetric" in n for n in g.notes)
    resize = next(n for n in g.nodes if n.op == "Resize")
    assert resize.attr("coordinate_transformation_mode") == "asymmetric"
    # 124 × 0.2580645 rounds to 32 as in onnxruntime (ONNX's floor would give 31)
    assert g.shapes[resize.outputs[0]] == (1, 1, 32, 32)


def test_batch_from_the_model_or_from_i():
    path = shared_path("conformance", "speech_robot", "speech_commands.onnx")
    assert load_graph(path).shapes["input_1"] == (1, 1, 124, 129)
    g = load_graph(path, input_shapes={"input_1": (3, 1, 124, 129)})
    assert g.shapes["dense_1"] == (3, 12)


def test_shape_subgraphs_fold_to_constants():
    """Shape → Gather → Unsqueeze → Concat → Reshape (a typical exporter's flatten)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "w"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(0, np.int64), "zero"),
         numpy_helper.from_array(np.array([0], np.int64), "ax"),
         numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
         numpy_helper.from_array(rand((12, 5), 1), "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    g = load_graph(m)
    assert [n.op for n in g.nodes] == ["Relu", "Reshape", "Gemm"]
    assert list(g.consts["shape"]) == [2, -1]
    x = rand((2, 3, 2, 2), 2)
    ref = ort_run(m, {"x": x})["y"]
    _, run = compile_and_run(m, float_arch("pynqz1"), {"x": x})
    np.testing.assert_allclose(run.outputs["y"], ref, rtol=1e-5, atol=1e-5)


def test_outputs_select_and_prune():
    m = make_model([helper.make_node("Relu", ["x"], ["a"]),
                    helper.make_node("Neg", ["a"], ["b"]),
                    helper.make_node("Abs", ["x"], ["c"])], {"x": (2, 3)}, ["b", "c"])
    g = load_graph(m, outputs=["a"])
    assert [n.op for n in g.nodes] == ["Relu"] and g.outputs == ["a"]
    with pytest.raises(CompileError, match="'zz' is not a tensor computed by the model; "
                                           "valid names: x, a, b, c"):
        load_graph(m, outputs=["zz"])


def test_integer_inputs_are_refused():
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(CompileError, match="input 'x' has element type INT64"):
        load_graph(m)


def test_unreadable_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all \xff\xff")
    with pytest.raises(CompileError, match="bad.onnx: cannot read ONNX model"):
        load_graph(bad)


def test_zero_pad_before_conv_becomes_its_padding():
    m = make_model([helper.make_node("Pad", ["x", "p"], ["a"]),
                    helper.make_node("Conv", ["a", "w"], ["y"], pads=[0, 1, 0, 0])],
                   {"x": (1, 3, 5, 6)}, ["y"], {"w": rand((4, 3, 3, 3), 1, 0.3)})
    m.graph.initializer.append(numpy_helper.from_array(
        np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64), "p"))
    g = load_graph(m)
    assert [(n.op, n.attr("pads")) for n in g.nodes] == [("Conv", [1, 3, 2, 1])]
    x = rand((1, 3, 5, 6), 2)
    ref = ort_run(m, {"x": x})["y"]
    _, run = compile_and_run(m, float_arch("pynqz1"), {"x": x})
    np.testing.assert_allclose(run.outputs["y"], ref, rtol=1e-5, atol=1e-5)
