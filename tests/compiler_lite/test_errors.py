"""Models that cannot be compiled as asked: each error names the file, the node or layer,
what is needed and what the architecture has."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from tcu_hw.arch import preset
from tcu_hw.errors import CompileError, TcuError

from .helpers import make_model, rand, small_arch


def gemm(k, n, rows=1):
    return make_model([helper.make_node("Gemm", ["x", "w"], ["y"], name="dense")],
                      {"x": (rows, k)}, ["y"], {"w": rand((k, n), 1, 0.01)})


def test_inputs_too_large_for_dram0():
    m = gemm(20_000, 4)                        # 5000 vectors on cmoda7 (4-lane, 4096 DRAM0)
    with pytest.raises(CompileError, match=r"inputs and outputs need 5001 vectors of DRAM0, "
                                           r"the architecture has 4094 usable"):
        compile_model(m, "cmoda7")


def test_constants_too_large_for_dram1():
    m = gemm(1000, 200)                        # 250 tiles × … > 32768 DRAM1 vectors
    with pytest.raises(CompileError, match=r"constants need \d+ vectors of DRAM1, the "
                                           r"architecture has dram1_depth 32768"):
        compile_model(m, "cmoda7")


def test_layer_too_large_for_local_memory_names_the_layer():
    arch = small_arch(local_depth=64, accumulator_depth=64)
    m = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="big", pads=[1, 1, 1, 1])],
                   {"x": (1, 64, 4, 40)}, ["y"], {"w": rand((64, 64, 3, 3), 1, 0.05)})
    with pytest.raises(CompileError, match=r"layer 'y' \(nodes big\): does not fit: the "
                                           r"smallest partition .* needs \d+ accumulator "
                                           r"vectors .* local vectors"):
        compile_model(m, arch)


def test_local_consts_that_do_not_fit():
    m = gemm(512, 256)
    with pytest.raises(CompileError, match="strategy local-consts: the constants need .* "
                                           "use local-isolated or local-vars"):
        compile_model(m, "pynqz1", strategy="local-consts")


def test_unknown_strategy_and_resize_mode():
    m = gemm(8, 8)
    with pytest.raises(CompileError, match="strategy 'fast' is unknown; allowed: "
                                           "local-isolated, local-vars"):
        compile_model(m, "pynqz1", strategy="fast")
    with pytest.raises(CompileError, match="resize mode 'cubic' is unknown"):
        compile_model(m, "pynqz1", resize_mode="cubic")


def test_dynamic_dimension_needs_a_shape():
    m = gemm(8, 8)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "F"
    with pytest.raises(CompileError, match=r"input 'x' dimension 1 is dynamic \(F\); give the "
                                           r"shape with --input-shapes 'x \[d0,d1,...\]'"):
        compile_model(m, "pynqz1")
    c = compile_model(m, "pynqz1", input_shapes={"x": (3, 8)})
    assert c.inputs[0].shape == (3, 8)


def test_model_needs_tables_the_architecture_lacks():
    m = make_model([helper.make_node("Sigmoid", ["x"], ["y"], name="sig")], {"x": (2, 4)}, ["y"])
    with pytest.raises(CompileError, match=r"node 'sig' \(Sigmoid\): needs lookup tables: the "
                                           r"architecture must have lut_count ≥ 1"):
        compile_model(m, "pynqz1")


def test_computed_weights_are_refused():
    m = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="c")],
                   {"x": (1, 2, 4, 4), "w": (3, 2, 1, 1)}, ["y"])
    with pytest.raises(CompileError, match=r"node 'c' \(Conv\): input 1 \('w'\) must be a "
                                           r"constant"):
        compile_model(m, "pynqz1")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_infinite_parameters_and_inputs_name_the_tensor(bad):
    """A weight that is NaN or infinite is refused at compile time naming the tensor (no
    traceback from the fixed-point conversion); so are such inputs to the golden run."""
    w = rand((8, 4), 1, 0.01)
    w[3, 2] = bad
    m = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], name="dense")],
                   {"x": (1, 8)}, ["y"], {"w": w})
    with pytest.raises(CompileError, match=r"parameter tensor 'w' holds 1 NaN or infinite "
                                           r"value\(s\) of 32"):
        compile_model(m, "pynqz1")
    c = compile_model(gemm(8, 4), "pynqz1")
    x = np.zeros((1, 8))
    x[0, 5] = bad
    with pytest.raises(CompileError, match=r"tensor 'x': 1 NaN or infinite value\(s\)"):
        run_emulator(c, {"x": x})


def test_golden_inputs_must_match_the_model():
    c = compile_model(gemm(8, 4), "pynqz1")
    with pytest.raises(CompileError, match="missing \\['x'\\]"):
        run_emulator(c, {"z": np.zeros((1, 8))})
    with pytest.raises(TcuError, match=r"tensor 'x': shape \[2, 8\], expected \[1, 8\]"):
        run_emulator(c, {"x": np.zeros((2, 8))})


def test_flush_probe_vectors_stay_free():
    """No program touches DRAM0[depth-1], DRAM0[depth-2] or local[local_depth-1]."""
    from tcu_hw.isa import DataMove, DataMoveKind, LoadLUT, LoadWeights, MatMul, address_run
    arch = preset("cmoda7")
    m = make_model([helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["a"], ["y"])],
                   {"x": (1, 8, 12, 12)}, ["y"], {"w": rand((8, 8, 3, 3), 1, 0.1)})
    c = compile_model(m, arch, strategy="local-isolated")
    lay = arch.layout
    for ins in c.program:
        if isinstance(ins, (DataMove, MatMul, LoadWeights, LoadLUT)):
            count = ins.size if isinstance(ins, LoadWeights) else getattr(ins, "size", 0)
            run = address_run(ins.local_address, ins.local_stride, count, lay.L)
            assert run.highest < arch.local_depth - 1, ins
        if isinstance(ins, DataMove) and ins.kind in (DataMoveKind.DRAM0_TO_LOCAL,
                                                      DataMoveKind.LOCAL_TO_DRAM0):
            run = address_run(ins.other_address, ins.other_stride, ins.size, lay.D0)
            assert run.highest < arch.dram0_depth - 2, ins


def test_float_reference_without_onnxruntime_says_what_to_install(monkeypatch):
    import sys

    from compiler_lite.golden import onnxruntime_outputs
    monkeypatch.setitem(sys.modules, "onnxruntime", None)          # import fails
    with pytest.raises(CompileError, match=r"needs onnxruntime: pip install onnxruntime"):
        onnxruntime_outputs(gemm(4, 4), {"x": np.zeros((1, 4), np.float32)})


def test_unknown_resize_nearest_mode_is_named():
    sc = np.array([1, 1, 2, 2], np.float32)
    m = make_model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="up", mode="nearest",
                                     nearest_mode="round_half_even")],
                   {"x": (1, 4, 4, 4)}, ["y"], {"sc": sc})
    with pytest.raises(CompileError, match=r"up.*nearest_mode 'round_half_even' is not "
                                           r"supported; supported: round_prefer_floor"):
        compile_model(m, "pynqz1")
