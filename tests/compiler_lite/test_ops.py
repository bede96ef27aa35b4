"""Operator variants on small graphs, against onnxruntime.

Every case runs twice: compiled for FLOAT32 (the emulator's float type) it must match
onnxruntime to float rounding, which checks the lowering exactly; compiled for FP16BP8 it must
match within a few LSB. Cases also run on a small architecture (n = 4, 1024 local vectors,
256 accumulators) where layers need several partitions and weights stream.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler_lite.compile import compile_model
from compiler_lite.frontend import load_graph
from compiler_lite.kernels import Linear
from compiler_lite.lower import Lowering
from tcu_hw.arch import preset
from tcu_hw.errors import CompileError
from tcu_hw.isa import MatMul

from .helpers import (compile_and_run, float_arch, lsb, make_model, ort_run, rand,
                      small_arch)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def conv_case(shape, w_shape, **attrs):
    w = rand(w_shape, 1, 0.4)
    b = rand(w_shape[:1], 2, 0.3)
    m = make_model([node("Conv", ["x", "w", "b"], ["y"], **attrs)], {"x": shape}, ["y"],
                   {"w": w, "b": b})
    return m, {"x": rand(shape, 3)}


def chain(nodes, inputs, outputs, inits=None, seed=5):
    m = make_model(nodes, inputs, outputs, inits or {})
    return m, {k: rand(v, seed + i) for i, (k, v) in enumerate(inputs.items())}


CASES = {
    "conv_asymmetric_pads": lambda: conv_case((2, 5, 9, 7), (7, 5, 3, 3),
                                              pads=[0, 1, 2, 1]),
    "conv_same_upper_stride2": lambda: conv_case((1, 6, 9, 10), (8, 6, 3, 3),
                                                 auto_pad="SAME_UPPER", strides=[2, 2]),
    "conv_same_lower": lambda: conv_case((1, 3, 6, 6), (4, 3, 2, 2), auto_pad="SAME_LOWER"),
    "conv_groups_dilation_stride": lambda: conv_case((1, 8, 11, 11), (6, 4, 3, 3), group=2,
                                                     dilations=[2, 2], strides=[2, 1],
                                                     pads=[2, 2, 2, 2]),
    "conv_depthwise_12": lambda: conv_case((1, 12, 7, 7), (12, 1, 3, 3), group=12,
                                           pads=[1, 1, 1, 1]),
    "conv_1x1_stride2": lambda: conv_case((1, 16, 8, 8), (24, 16, 1, 1), strides=[2, 2]),
    "conv1d_pad_stride": lambda: conv_case((2, 3, 17), (5, 3, 4), pads=[2, 1], strides=[2]),
    "conv_wide_channels": lambda: conv_case((1, 20, 6, 6), (33, 20, 3, 3), pads=[1, 1, 1, 1]),
    "gemm_alpha_beta_trans": lambda: chain(
        [node("Gemm", ["a", "w", "c"], ["y"], alpha=0.7, beta=1.3, transA=1, transB=1)],
        {"a": (12, 3)}, ["y"], {"w": rand((10, 12), 1, 0.3), "c": rand((3, 10), 2)}),
    "gemm_bias_vector": lambda: chain(
        [node("Gemm", ["a", "w", "c"], ["y"])], {"a": (4, 19)}, ["y"],
        {"w": rand((19, 9), 1, 0.3), "c": rand((9,), 2)}),
    "matmul_const_times_activation": lambda: chain(
        [node("MatMul", ["w", "x"], ["y"])], {"x": (6, 10)}, ["y"], {"w": rand((4, 6), 1, 0.5)}),
    "matmul_3d_activation": lambda: chain(
        [node("MatMul", ["x", "w"], ["y"])], {"x": (2, 3, 8)}, ["y"], {"w": rand((8, 5), 1, 0.5)}),
    "add_broadcast_const_and_residual": lambda: chain(
        [node("Add", ["x", "c"], ["t"]), node("Relu", ["t"], ["u"]),
         node("Add", ["u", "x"], ["y"])], {"x": (2, 3, 4, 5)}, ["y"], {"c": rand((3, 1, 1), 1)}),
    "sub_mul_div": lambda: chain(
        [node("Sub", ["x", "z"], ["a"]), node("Mul", ["a", "z"], ["b"]),
         node("Div", ["b", "c"], ["y"])], {"x": (1, 4, 3, 3), "z": (1, 4, 3, 3)}, ["y"],
        {"c": np.full((1, 4, 1, 1), 2.5, np.float32)}),
    "const_minus_activation": lambda: chain(
        [node("Sub", ["c", "x"], ["y"])], {"x": (2, 9)}, ["y"], {"c": rand((9,), 1)}),
    "max_min_pairs": lambda: chain(
        [node("Max", ["x", "z"], ["a"]), node("Min", ["a", "c"], ["y"])],
        {"x": (1, 10, 2, 2), "z": (1, 10, 2, 2)}, ["y"], {"c": np.array(0.4, np.float32)}),
    "relu6_and_clip": lambda: chain(
        [node("Clip", ["x", "lo", "hi"], ["a"]), node("Relu", ["a"], ["y"])],
        {"x": (1, 3, 4, 4)}, ["y"],
        {"lo": np.array(-0.5, np.float32), "hi": np.array(0.75, np.float32)}),
    "hard_sigmoid": lambda: chain([node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)],
                                  {"x": (2, 5, 3)}, ["y"]),
    "abs_neg": lambda: chain([node("Abs", ["x"], ["a"]), node("Neg", ["a"], ["y"])],
                             {"x": (3, 7)}, ["y"]),
    "leaky_after_gemm": lambda: chain(
        [node("Gemm", ["x", "w"], ["a"]), node("LeakyRelu", ["a"], ["y"], alpha=0.2)],
        {"x": (2, 11)}, ["y"], {"w": rand((11, 6), 1, 0.4)}),
    "concat_unaligned_channels_then_conv": lambda: chain(
        [node("Relu", ["x"], ["a"]), node("Concat", ["a", "z"], ["c"], axis=1),
         node("Conv", ["c", "w"], ["y"], pads=[1, 1, 1, 1])],
        {"x": (1, 3, 5, 5), "z": (1, 5, 5, 5)}, ["y"], {"w": rand((4, 8, 3, 3), 1, 0.3)}),
    "concat_height_split_relu": lambda: chain(
        [node("Concat", ["x", "z"], ["c"], axis=2),
         node("Split", ["c", "s"], ["p", "q"], axis=1), node("Relu", ["q"], ["y"]),
         node("Neg", ["p"], ["y2"])],
        {"x": (1, 6, 2, 3), "z": (1, 6, 3, 3)}, ["y", "y2"],
        {"s": np.array([2, 4], np.float32)}),
    "slice_steps_transpose_output": lambda: chain(
        [node("Slice", ["x", "st", "en", "ax", "sp"], ["a"]),
         node("Transpose", ["a"], ["y"], perm=[0, 3, 2, 1])],
        {"x": (1, 6, 7, 9)}, ["y"],
        {"st": np.array([1, 8], np.float32), "en": np.array([6, 0], np.float32),
         "ax": np.array([1, 3], np.float32), "sp": np.array([2, -3], np.float32)}),
    "squeeze_unsqueeze_flatten_gather": lambda: chain(
        [node("Unsqueeze", ["x", "ax"], ["a"]), node("Flatten", ["a"], ["f"], axis=2),
         node("Gather", ["f", "ix"], ["g"], axis=1), node("Unsqueeze", ["g", "ax"], ["u"]),
         node("Squeeze", ["u", "ax"], ["y"])],
        {"x": (2, 3, 4)}, ["y"],
        {"ax": np.array([1], np.float32), "ix": np.array([3, 0, 5], np.float32)}),
    "expand_tile": lambda: chain(
        [node("Expand", ["x", "sh"], ["a"]), node("Tile", ["a", "r"], ["y"])],
        {"x": (3, 1)}, ["y"],
        {"sh": np.array([2, 3, 4], np.float32), "r": np.array([1, 2, 1], np.float32)}),
    "avgpool_ceil_pads_exclusive": lambda: chain(
        [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
              pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=0)], {"x": (1, 5, 8, 7)}, ["y"]),
    "avgpool_inclusive": lambda: chain(
        [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], strides=[1, 2],
              pads=[1, 0, 0, 1], count_include_pad=1)], {"x": (2, 3, 5, 6)}, ["y"]),
    "maxpool_ceil_pads_dilation": lambda: chain(
        [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2],
              pads=[1, 1, 1, 0], dilations=[1, 2], ceil_mode=1)], {"x": (1, 9, 7, 8)}, ["y"]),
    "global_pools_reduce_mean": lambda: chain(
        [node("GlobalAveragePool", ["x"], ["a"]), node("GlobalMaxPool", ["x"], ["b"]),
         node("ReduceMean", ["x"], ["c"], axes=[2, 3], keepdims=0)],
        {"x": (2, 10, 5, 4)}, ["a", "b", "c"]),
    "resize_nearest_up": lambda: chain(
        [node("Resize", ["x", "", "sc"], ["y"], mode="nearest")], {"x": (1, 3, 4, 5)}, ["y"],
        {"sc": np.array([1, 1, 2, 3], np.float32)}),
    "resize_linear_align_corners": lambda: chain(
        [node("Resize", ["x", "", "", "sz"], ["y"], mode="linear",
              coordinate_transformation_mode="align_corners")], {"x": (1, 2, 5, 7)}, ["y"],
        {"sz": np.array([1, 2, 9, 4], np.float32)}),
    "resize_linear_pytorch_half_pixel_down": lambda: chain(
        [node("Resize", ["x", "", "sc"], ["y"], mode="linear",
              coordinate_transformation_mode="pytorch_half_pixel")], {"x": (1, 4, 12, 10)},
        ["y"], {"sc": np.array([1, 1, 0.5, 0.5], np.float32)}),
    "resize_nearest_asymmetric_floor": lambda: chain(
        [node("Resize", ["x", "", "sc"], ["y"], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
        {"x": (1, 1, 6, 6)}, ["y"], {"sc": np.array([1, 1, 1.5, 0.75], np.float32)}),
    "pad_constant_value_then_conv": lambda: chain(
        [node("Pad", ["x", "p", "v"], ["a"], mode="constant"),
         node("Conv", ["a", "w"], ["y"])], {"x": (1, 3, 4, 4)}, ["y"],
        {"p": np.array([0, 0, 1, 2, 0, 0, 2, 0], np.float32), "v": np.array(1.5, np.float32),
         "w": rand((2, 3, 3, 3), 1, 0.3)}),
    "batchnorm_standalone_and_folded": lambda: chain(
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["a"]),
         node("Conv", ["a", "w"], ["c"]),
         node("BatchNormalization", ["c", "s2", "b2", "m2", "v2"], ["y"])],
        {"x": (1, 3, 5, 5)}, ["y"],
        {"s": rand((3,), 1, 0.5) + 1, "b": rand((3,), 2, 0.2), "m": rand((3,), 3, 0.1),
         "v": np.abs(rand((3,), 4)) + 0.5, "w": rand((4, 3, 1, 1), 5, 0.5),
         "s2": rand((4,), 6, 0.5) + 1, "b2": rand((4,), 7, 0.2), "m2": rand((4,), 8, 0.1),
         "v2": np.abs(rand((4,), 9)) + 0.5}),
    "residual_block": lambda: chain(
        [node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]), node("Relu", ["a"], ["r"]),
         node("Conv", ["r", "w2"], ["c"], pads=[1, 1, 1, 1]), node("Add", ["c", "x"], ["s"]),
         node("Relu", ["s"], ["y"])],
        {"x": (1, 8, 6, 6)}, ["y"],
        {"w1": rand((8, 8, 3, 3), 1, 0.2), "b1": rand((8,), 2, 0.1),
         "w2": rand((8, 8, 3, 3), 3, 0.2)}),
    "residual_projection_stride2": lambda: chain(
        [node("Conv", ["x", "wp", "bp"], ["p"], strides=[2, 2]),
         node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1], strides=[2, 2]),
         node("Relu", ["a"], ["r"]), node("Conv", ["r", "w2", "b2"], ["c"], pads=[1, 1, 1, 1]),
         node("Add", ["p", "c"], ["s"]), node("Relu", ["s"], ["y"])],
        {"x": (2, 8, 10, 9)}, ["y"],
        {"wp": rand((20, 8, 1, 1), 4, 0.3), "bp": rand((20,), 5, 0.1),
         "w1": rand((12, 8, 3, 3), 1, 0.2), "b1": rand((12,), 2, 0.1),
         "w2": rand((20, 12, 3, 3), 3, 0.15), "b2": rand((20,), 6, 0.1)}),
    "residual_projection_3x3_second_operand": lambda: chain(
        [node("Relu", ["x"], ["x0"]),
         node("Conv", ["x0", "wp"], ["p"], pads=[1, 1, 1, 1]),
         node("Conv", ["x0", "w1"], ["a"], pads=[0, 0, 0, 0]), node("Relu", ["a"], ["r"]),
         node("Conv", ["r", "w2", "b2"], ["c"], pads=[1, 1, 1, 1]),
         node("Add", ["c", "p"], ["y"])],
        {"x": (1, 6, 7, 7)}, ["y", "x0"],
        {"wp": rand((8, 6, 3, 3), 4, 0.2), "w1": rand((6, 6, 1, 1), 1, 0.3),
         "w2": rand((8, 6, 3, 3), 3, 0.2), "b2": rand((8,), 6, 0.1)}),
    "conv_added_to_a_reshaped_gemm": lambda: chain(
        [node("Conv", ["x", "wp"], ["p"]), node("Flatten", ["x"], ["f"]),
         node("Gemm", ["f", "wg"], ["g"]), node("Reshape", ["g", "shape"], ["gs"]),
         node("Add", ["p", "gs"], ["y"])],
        {"x": (1, 5, 4, 6)}, ["y"],
        {"wp": rand((8, 5, 1, 1), 4, 0.3), "wg": rand((120, 192), 1, 0.1),
         "shape": np.array([1, 8, 4, 6], np.int64)}),
    "few_channels_packed": lambda: chain(
        [node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]), node("Relu", ["a"], ["r"]),
         node("Conv", ["r", "wp", "bp"], ["p"]),
         node("Conv", ["r", "w2", "b2"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
         node("Relu", ["c"], ["cr"]), node("Conv", ["cr", "w3", "b3"], ["d"]),
         node("Add", ["p", "d"], ["y"])],
        {"x": (2, 3, 5, 8)}, ["y"],
        {"w1": rand((4, 3, 3, 3), 1, 0.3), "b1": rand((4,), 2, 0.1),
         "wp": rand((12, 4, 1, 1), 3, 0.3), "bp": rand((12,), 4, 0.1),
         "w2": rand((4, 4, 3, 3), 5, 0.3), "b2": rand((4,), 6, 0.1),
         "w3": rand((12, 4, 1, 1), 7, 0.3), "b3": rand((12,), 8, 0.1)}),
    # a convolution reading packed pixels whose border outputs see only padding: the bias
    "packed_input_border_only_bias": lambda: chain(
        [node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]), node("Relu", ["a"], ["r"]),
         node("Conv", ["r", "w2", "b2"], ["y"], pads=[2, 2, 2, 2])],
        {"x": (1, 3, 6, 8)}, ["y"],
        {"w1": rand((4, 3, 3, 3), 1, 0.3), "b1": rand((4,), 2, 0.1),
         "w2": rand((4, 4, 1, 1), 3, 0.3), "b2": rand((4,), 4, 0.5) + 1}),
    # a projection with a bias added onto a sum whose own convolution leaves the border
    # vectors to a Zero step (1×1 with padding, no bias)
    "deferred_conv_onto_a_cleared_border": lambda: chain(
        [node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]), node("Relu", ["a"], ["r"]),
         node("Conv", ["r", "w2", "b2"], ["c"]), node("Relu", ["c"], ["cr"]),
         node("Conv", ["r", "w3", "b3"], ["p"], pads=[1, 1, 1, 1]),
         node("Conv", ["cr", "w4"], ["d"], pads=[1, 1, 1, 1]), node("Add", ["p", "d"], ["y"])],
        {"x": (1, 3, 8, 8)}, ["y"],
        {"w1": rand((4, 3, 3, 3), 1, 0.3), "b1": rand((4,), 2, 0.1),
         "w2": rand((4, 4, 3, 3), 3, 0.3), "b2": rand((4,), 4, 0.1),
         "w3": rand((4, 4, 3, 3), 5, 0.3), "b3": rand((4,), 6, 0.3) + 1,
         "w4": rand((4, 4, 1, 1), 7, 0.3)}),
    "identity_output_and_intermediate": lambda: chain(
        [node("Identity", ["x"], ["y"]), node("Relu", ["x"], ["r"]),
         node("Gemm", ["r", "w"], ["z"])], {"x": (2, 5)}, ["y", "r", "z"],
        {"w": rand((5, 3), 1)}),
    "prelu_per_channel_4d": lambda: chain(
        [node("PRelu", ["x", "s"], ["y"])], {"x": (2, 6, 3, 3)}, ["y"],
        {"s": rand((6, 1, 1), 1, 0.3)}),
}

# int-valued inputs of ONNX ops must be int64: rewrite those initializers
INT_INPUTS = {"Reshape": (1,), "Slice": (1, 2, 3, 4), "Unsqueeze": (1,), "Squeeze": (1,),
              "Gather": (1,), "Expand": (1,), "Tile": (1,), "Split": (1,), "Pad": (1,), "Resize": (3,)}


def build(name):
    from onnx import numpy_helper
    m, feeds = CASES[name]()
    ints = set()
    for n_ in m.graph.node:
        for k in INT_INPUTS.get(n_.op_type, ()):
            if k < len(n_.input) and n_.input[k]:
                ints.add(n_.input[k])
    for k, t in enumerate(m.graph.initializer):
        if t.name in ints:
            m.graph.initializer[k].CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(t).astype(np.int64), t.name))
    return m, feeds


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_exact(name):
    m, feeds = build(name)
    outs = [o.name for o in m.graph.output]
    ref = ort_run(m, feeds)
    _, run = compile_and_run(m, float_arch("pynqz1"), feeds, outputs=outs)
    for o in outs:
        np.testing.assert_allclose(run.outputs[o], ref[o], rtol=1e-5, atol=1e-5, err_msg=o)


#: LSB of tolerance beyond the default 12, for cases whose outputs sum many rounded products
#: (every processing element rounds: the error grows like the square root of the length)
TOL_LSB = {"conv_wide_channels": 24, "residual_block": 24, "residual_projection_stride2": 24,
           "residual_projection_3x3_second_operand": 24, "conv_added_to_a_reshaped_gemm": 24,
           "deferred_conv_onto_a_cleared_border": 24, "packed_input_border_only_bias": 24}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("arch", ["pynqz1", "small"])
def test_fixed_point(name, arch):
    m, feeds = build(name)
    a = small_arch() if arch == "small" else preset(arch)
    outs = [o.name for o in m.graph.output]
    ref = ort_run(m, feeds)
    _, run = compile_and_run(m, a, feeds, outputs=outs)
    for o in outs:
        err = float(np.abs(run.outputs[o] - ref[o]).max())
        tol = TOL_LSB.get(name, 12)
        assert err <= tol * lsb(a), f"{o}: {err:.5f} = {err / lsb(a):.1f} LSB"
    assert not run.events


# ------------------------------------------------------- pools wider than the accumulators

#: max pools whose one-pixel window span (two frame rows and more, times the vectors per
#: pixel) exceeds the small architecture's 256 accumulators: pooled in channel groups there
WIDE_POOLS = {
    "maxpool_3x3_wide": lambda: chain(
        [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[1, 1], pads=[1] * 4)],
        {"x": (1, 30, 10, 18)}, ["y"]),
    "maxpool_3x3_stride2_batch2_64ch": lambda: chain(
        [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)],
        {"x": (2, 64, 7, 32)}, ["y"]),
    "relu_concat_upsampled_then_maxpool": lambda: chain(
        [node("Resize", ["x", "", "sc"], ["u"], mode="nearest"), node("Relu", ["u"], ["r"]),
         node("Concat", ["u", "r", "u"], ["c"], axis=1),
         node("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[1, 1], pads=[1] * 4),
         node("Relu", ["y"], ["z"])],
        {"x": (2, 10, 5, 9)}, ["c", "z"], {"sc": np.array([1, 1, 2, 2], np.float32)}),
}


@pytest.mark.parametrize("name", sorted(WIDE_POOLS))
@pytest.mark.parametrize("dtype", ["float", "fixed"])
def test_maxpool_wider_than_the_accumulators_pools_channel_groups(name, dtype):
    m, feeds = WIDE_POOLS[name]()
    outs = [o.name for o in m.graph.output]
    ref = ort_run(m, feeds)
    for a in (small_arch(), preset("pynqz1")):
        c, run = compile_and_run(m, float_arch(a) if dtype == "float" else a, feeds,
                                 outputs=outs)
        split = [lay.name for lay in c.layers if lay.name.endswith(":in0")]
        assert bool(split) == (a.accumulator_depth == 256), split
        for o in outs:
            tol = 1e-5 if dtype == "float" else 2 * lsb(a)
            np.testing.assert_allclose(run.outputs[o], ref[o], rtol=0, atol=tol, err_msg=o)


def test_pool_whose_window_alone_exceeds_the_accumulators_is_refused_by_name():
    """A 20×20 GlobalMaxPool needs 400 pixels of one channel block in the accumulators (the
    small architecture has 256): no channel grouping helps, so a clear error names the
    layer, the node and both sizes."""
    m, _ = chain([node("GlobalMaxPool", ["x"], ["y"])], {"x": (1, 8, 20, 20)}, ["y"])
    with pytest.raises(CompileError, match=r"layer 'y' \(nodes GlobalMaxPool_0\): does not "
                                           r"fit: .* needs \d+ accumulator vectors \(the "
                                           r"architecture has 256\)"):
        compile_model(m, small_arch())


# ------------------------------------------------- pools fused into their producer or not

def stem(width: int, kernel: int, stride: int):
    """ResNet's stem at a small scale: a 7×7 stride-2 convolution of three channels to 16,
    ReLU, then a ``kernel`` × ``kernel`` max pool of ``stride``."""
    w = rand((16, 3, 7, 7), 1, 0.3)
    pad = [kernel // 2] * 4 if kernel == 3 else [0] * 4
    return chain([node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[3] * 4),
                  node("Relu", ["c"], ["r"]),
                  node("MaxPool", ["r"], ["y"], kernel_shape=[kernel] * 2,
                       strides=[stride] * 2, pads=pad)],
                 {"x": (1, 3, width, width)}, ["y"], {"w": w})


@pytest.mark.parametrize("width, kernel, stride, fused", [(48, 3, 2, False), (16, 3, 2, False),
                                                           (32, 2, 2, True)])
def test_pool_recomputing_its_producer_reads_a_stored_copy(width, kernel, stride, fused):
    """A pool's partitions compute their windows' span of the layer that feeds it. A 3×3
    stride-2 pool after ResNet's 7×7 stem shares a row between neighbouring partitions, and
    at 48 wide one output row's span (3 rows of 24 pixels × 4 vectors) exceeds the small
    architecture's 256 accumulators, so fused partitions would be a few pixels each
    recomputing two rows of the stem: the pool reads a stored copy, and every MatMul term of
    the stem runs once (at 16 wide the partitions are rows, and the row they share still
    costs more than a copy). A 2×2 stride-2 pool whose row fits shares nothing and stays in
    the stem's layer. onnxruntime's result either way."""
    m, feeds = stem(width, kernel, stride)
    arch = float_arch(small_arch())
    low = Lowering(load_graph(m, None, None, source="model.onnx"), arch)
    low.run()
    terms = sum(len(s.o) for lay in low.layers for s in lay.steps if isinstance(s, Linear))
    c, run = compile_and_run(m, arch, feeds)
    conv = [lay for lay in c.layers if lay.matmul_vectors]
    assert len(conv) == 1 and conv[0].matmul_vectors == terms, (conv, terms)
    assert (len(c.layers) == 1) == fused, [lay.name for lay in c.layers]
    np.testing.assert_allclose(run.outputs["y"], ort_run(m, feeds)["y"], rtol=1e-5, atol=1e-5)


def test_recompute_factor_of_windows_all_in_the_padding_is_one():
    """Windows that read nothing (all in the padding) recompute nothing."""
    from compiler_lite.ops.pool import recompute_factor
    none = np.full(8, -1, dtype=np.int64)
    assert recompute_factor(np.full(8, np.iinfo(np.int64).max), none, 8, 2, 256) == 1.0


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_ceil_mode_window_starting_in_the_end_padding_is_refused_by_name(op):
    """With ceil_mode = 1, 19 rows, pads 1 and 2, kernel 3 and stride 3, ONNX's shape
    inference gives 8 output rows and onnxruntime 7 (it leaves out the window that starts
    at row 20, past the input): the pool is refused by name instead of computing a shape
    onnxruntime does not; ceil_mode pools whose windows all start inside still compile
    (``CASES``)."""
    m = make_model([node(op, ["x"], ["y"], kernel_shape=[3, 4], strides=[3, 1],
                         pads=[1, 0, 2, 2], ceil_mode=1)], {"x": (1, 4, 19, 11)}, ["y"])
    with pytest.raises(CompileError, match=rf"node '{op}_0' \({op}\): ceil_mode = 1 makes a "
                                           r"last window along the rows that starts at 20, "
                                           r"past the input's 19"):
        compile_model(m, small_arch())


# ------------------------------------------------------ padding taps of a convolution

@pytest.mark.parametrize("height, width", [(6, 8), (5, 40), (1, 9)])
def test_conv_runs_only_the_taps_inside_its_input(height, width):
    """A padded 3×3 convolution runs a MatMul vector only for the taps that fall inside the
    input: no padding tap and no frame column costs a cycle (the runs break at the image's
    edges instead). With one tile per tap, the vectors are (3H − 2)(3W − 2) for an H × W
    image (3W − 2 when H = 1: only the middle row of the kernel is inside), and the result
    is onnxruntime's."""
    m, feeds = conv_case((1, 8, height, width), (8, 8, 3, 3), pads=[1, 1, 1, 1])
    arch = float_arch("pynqz1")
    low = Lowering(load_graph(m, None, None, source="model.onnx"), arch)
    low.run()
    steps = [s for lay in low.layers for s in lay.steps if isinstance(s, Linear)]
    rows = 3 * height - 2 if height > 1 else 1
    assert sum(len(s.o) for s in steps) == rows * (3 * width - 2)
    c, run = compile_and_run(m, arch, feeds)
    vectors = sum(i.size + 1 for i in c.program if isinstance(i, MatMul) and not i.zeroes)
    assert vectors == rows * (3 * width - 2)        # (MatMuls with zeroes clear margins)
    np.testing.assert_allclose(run.outputs["y"], ort_run(m, feeds)["y"], rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------- projection shortcuts

@pytest.mark.parametrize("name, fused", [("residual_projection_stride2", True),
                                         ("residual_projection_3x3_second_operand", True),
                                         ("conv_added_to_a_reshaped_gemm", False)])
def test_projection_conv_is_computed_into_the_residual_add(name, fused):
    """A convolution read only by an Add whose other operand comes later makes no layer of
    its own: its MatMuls accumulate onto the other operand in the Add's layer (no store, no
    load back). Added to a tensor stored otherwise than a vector per pixel and channel block
    (a Gemm's output reshaped to an image), it is computed as a layer of its own first."""
    m, feeds = build(name)
    for a in (preset("pynqz1"), small_arch()):
        c, run = compile_and_run(m, float_arch(a), feeds,
                                 outputs=[o.name for o in m.graph.output])
        names = [lay.name for lay in c.layers]
        assert ("p" not in names) == fused, names
        if fused:
            conv = c.graph.producer("p").name
            assert any(conv in lay.nodes and lay.name != "p" for lay in c.layers)
        ref = ort_run(m, feeds)
        for o in ref:
            np.testing.assert_allclose(run.outputs[o], ref[o], rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------- packed pixels

def test_few_channels_pack_pixels_into_a_vector():
    """Four channels on eight lanes: a convolution whose readers are convolutions (through
    ReLUs) stores two pixels per vector, so its MatMuls, ReLU passes and stores halve; the
    readers (a padded 3×3 and a projection added into the residual sum) read the packed
    pixels through gathered tiles. onnxruntime's result either way."""
    m, feeds = build("few_channels_packed")
    arch = float_arch("pynqz1")
    low = Lowering(load_graph(m, None, None, source="model.onnx"), arch)
    low.run()
    packed = {b.name: b.packed for b in low.space.buffers if b.packed > 1}
    assert packed == {"a": 2, "c": 2}, packed
    assert "p" not in [lay.name for lay in low.layers]         # still added in place
    c, run = compile_and_run(m, arch, feeds)
    np.testing.assert_allclose(run.outputs["y"], ort_run(m, feeds)["y"], rtol=1e-5, atol=1e-5)
    # the packed 3×3 convolution: one output vector per two pixels, at most 3 × 3 input
    # vectors each (fewer at the image's edges)
    conv = [lay for lay in c.layers if lay.name == "c"][0]
    assert conv.matmul_vectors <= 2 * 5 * 4 * 9
