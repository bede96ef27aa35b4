"""Standalone normalizations moved into neighbouring weights (compiler_lite.prescale) and
layers that save a tensor before going on in place (Lowering.fork)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler_lite.frontend import load_graph
from compiler_lite.kernels import Save
from compiler_lite.lower import Lowering
from compiler_lite.prescale import prescale
from tcu_hw.arch import preset
from tcu_hw.numeric import FLOAT32

from .helpers import compile_and_run, float_arch, lsb, make_model, ort_run, rand, small_arch


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def bn_params(prefix: str, c: int, seed: int, scale=(0.5, 1.8)) -> dict:
    g = np.random.default_rng(seed)
    return {f"{prefix}_g": g.uniform(*scale, c), f"{prefix}_b": g.normal(0, 0.3, c),
            f"{prefix}_m": g.normal(0, 0.3, c), f"{prefix}_v": g.uniform(0.5, 1.5, c)}


def preact_block(c: int = 8, scale=(0.5, 1.8), relu_out: bool = False, pad_projection=False,
                 same_projection: int = 0):
    """Two ResNet v2 blocks: a sum of two convolutions, BN + ReLU on the sum (the sum also
    feeds the next residual Add and a projection), the block's convolutions, the next sum.
    ``same_projection`` = k: the projection is k × k with ``auto_pad`` SAME_UPPER (stride 1)."""
    bn = bn_params("bn", c, 7, scale)
    nodes = [
        node("Conv", ["x", "w0", "b0"], ["p"], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "w1", "b1"], ["q"]),
        node("Add", ["p", "q"], ["s"]),
        node("BatchNormalization", ["s", "bn_g", "bn_b", "bn_m", "bn_v"], ["n"]),
        node("Relu", ["n"], ["r"]),
        node("Conv", ["r", "w2", "b2"], ["u"], pads=[1, 1, 1, 1]),
        node("Relu", ["u"], ["ur"]),
        node("Conv", ["ur", "w3", "b3"], ["v"]),
        node("Add", ["s", "v"], ["s2"]),
        node("Conv", ["s", "w4", "b4"], ["proj"], strides=[2, 2],
             **({"pads": [1, 1, 1, 1]} if pad_projection else {})),
    ]
    if same_projection:
        nodes[-1] = node("Conv", ["s", "w4", "b4"], ["proj"], auto_pad="SAME_UPPER")
    inits = {"w0": rand((c, 4, 3, 3), 1, 0.3), "b0": rand((c,), 2, 0.1),
             "w1": rand((c, 4, 1, 1), 3, 0.3), "b1": rand((c,), 4, 0.1),
             "w2": rand((c, c, 3, 3), 5, 0.15), "b2": rand((c,), 6, 0.1),
             "w3": rand((c, c, 1, 1), 8, 0.3), "b3": rand((c,), 9, 0.1),
             "w4": rand((2 * c, c) + (same_projection or (3 if pad_projection else 1),) * 2,
                        10, 0.2),
             "b4": rand((2 * c,), 11, 0.1), **bn}
    outs = ["s2", "proj"] + (["r"] if relu_out else [])
    m = make_model(nodes, {"x": (1, 4, 6, 7)}, outs, inits)
    return m, {"x": rand((1, 4, 6, 7), 12)}


def saves(m, arch) -> int:
    """Save steps in ``m``'s layers as compile_model lowers it for ``arch``."""
    g = load_graph(m, None, [o.name for o in m.graph.output], source="model.onnx")
    low = Lowering(prescale(g, arch.dtype), arch)
    low.run()
    return sum(isinstance(s, Save) for lay in low.layers for s in lay.steps)


def moved(m) -> bool:
    g = load_graph(m, None, None, source="model.onnx")
    return not any(n.op == "BatchNormalization" for n in prescale(g, FLOAT32).nodes)


def test_normalization_of_a_residual_sum_is_moved_into_the_weights():
    """The BN disappears (its scale into the ReLU's reader, its offset into the sum's
    convolution and back out of the other readers of the sum): onnxruntime's results, in
    float to rounding and in fixed point within a few LSB, on two architectures; and the
    sum's layer saves the sum before its ReLU (no copy layer)."""
    m, feeds = preact_block()
    assert moved(m)
    ref = ort_run(m, feeds)
    for a in (preset("pynqz1"), small_arch()):
        for arch, tol in ((float_arch(a), 1e-5), (a, 24 * lsb(a))):
            c, run = compile_and_run(m, arch, feeds, outputs=["s2", "proj"])
            for o in ("s2", "proj"):
                np.testing.assert_allclose(run.outputs[o], ref[o], rtol=0, atol=tol,
                                           err_msg=f"{arch.data_type} n={arch.array_size} {o}")
            assert "n" not in [lay.name for lay in c.layers]
            assert saves(m, arch) == 1


@pytest.mark.parametrize("case, reason", [
    (dict(scale=(-0.5, 1.5)), "a negative scale"),
    (dict(scale=(0.05, 0.2)), "scales too small for fixed-point weights"),
    (dict(relu_out=True), "the ReLU is a model output"),
    (dict(pad_projection=True), "a padded convolution reads the sum"),
    (dict(same_projection=3), "a 3×3 SAME_UPPER convolution reads the sum (padded)"),
])
def test_normalization_stays_when_moving_it_is_not_exact(case, reason):
    """Left in place, and still right, when the move would not be exact or safe."""
    m, feeds = preact_block(**case)
    g = load_graph(m, None, None, source="model.onnx")
    for dtype in (preset("pynqz1").dtype, FLOAT32):
        assert any(n.op == "BatchNormalization" for n in prescale(g, dtype).nodes), reason
    outs = [o.name for o in m.graph.output]
    ref = ort_run(m, feeds)
    _, run = compile_and_run(m, float_arch("pynqz1"), feeds, outputs=outs)
    for o in outs:
        np.testing.assert_allclose(run.outputs[o], ref[o], rtol=0, atol=1e-5, err_msg=o)


def test_an_auto_padded_reader_without_padding_takes_the_offset_back():
    """A 1×1 SAME_UPPER projection reads no padding (``auto_pad`` resolved as the op does):
    the BN still moves, and the result is onnxruntime's."""
    m, feeds = preact_block(same_projection=1)
    assert moved(m)
    ref = ort_run(m, feeds)
    _, run = compile_and_run(m, float_arch("pynqz1"), feeds, outputs=["s2", "proj"])
    for o in ("s2", "proj"):
        np.testing.assert_allclose(run.outputs[o], ref[o], rtol=0, atol=1e-5, err_msg=o)


def test_prescale_leaves_the_given_graph_alone():
    m, _ = preact_block()
    g = load_graph(m, None, None, source="model.onnx")
    before = {k: np.array(v) for k, v in g.consts.items()}
    nodes = list(g.nodes)
    assert prescale(g, FLOAT32) is not g
    assert g.nodes == nodes and all(np.array_equal(g.consts[k], v) for k, v in before.items())


# ------------------------------------------------------------------------------- forks

FORKS = {
    # r = relu(a) in place after saving a, which a later convolution reads
    "saved_then_read_later": ([node("Conv", ["x", "w"], ["a"]), node("Relu", ["a"], ["r"]),
                               node("Conv", ["a", "w2"], ["y"])], ["r", "y"], 1),
    # the saved tensor read by the node that works in place: a copy layer, as before
    "saved_read_by_the_same_layer": ([node("Conv", ["x", "w"], ["a"]),
                                      node("Relu", ["a"], ["r"]),
                                      node("Add", ["r", "a"], ["y"])], ["y"], 1),
    # a saved tensor (an output) whose layer then pools: the pool gets a layer of its own
    "saved_then_pooled": ([node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
                           node("Relu", ["a"], ["r"]),
                           node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                          ["a", "y"], 1),
    # a model output that is also worked on in place
    "output_worked_on_in_place": ([node("Conv", ["x", "w"], ["a"]),
                                   node("Clip", ["a", "lo", "hi"], ["y"])],
                                  ["a", "y"], 1),
}


@pytest.mark.parametrize("name", sorted(FORKS))
def test_a_layer_saves_a_tensor_others_read_then_goes_on_in_place(name):
    nodes, outs, count = FORKS[name]
    inits = {"w": rand((8, 5, 1, 1), 1, 0.4), "w2": rand((8, 8, 1, 1), 2, 0.4),
             "lo": np.float32(-0.5), "hi": np.float32(0.5)}
    m = make_model(nodes, {"x": (1, 5, 4, 6)}, outs, inits)
    feeds = {"x": rand((1, 5, 4, 6), 3)}
    ref = ort_run(m, feeds)
    for a in (preset("pynqz1"), small_arch()):
        for arch, tol in ((float_arch(a), 1e-5), (a, 12 * lsb(a))):
            c, run = compile_and_run(m, arch, feeds, outputs=outs)
            assert saves(m, arch) == count
            for o in outs:
                np.testing.assert_allclose(run.outputs[o], ref[o], rtol=0, atol=tol,
                                           err_msg=f"{arch.data_type} n={arch.array_size} {o}")


def test_fixed_point_bias_change_is_bounded():
    """An unpadded reader of the sum takes W·t/s back into its bias: when that is beyond the
    fixed-point limit (here 16 channels × 1.2 × 7 = 134 > 8) the BN stays; in float it
    moves. Either way the result is onnxruntime's."""
    c = 16
    nodes = [node("Conv", ["x", "w0", "b0"], ["p"]), node("Conv", ["x", "w1", "b1"], ["q"]),
             node("Add", ["p", "q"], ["s"]),
             node("BatchNormalization", ["s", "g", "b", "m", "v"], ["n"]),
             node("Relu", ["n"], ["r"]), node("Conv", ["r", "w2", "b2"], ["u"]),
             node("Conv", ["s", "w4", "b4"], ["proj"])]
    inits = {"w0": rand((c, 4, 1, 1), 1, .2), "b0": rand((c,), 2, .1),
             "w1": rand((c, 4, 1, 1), 3, .2), "b1": rand((c,), 4, .1),
             "w2": rand((c, c, 1, 1), 5, .2), "b2": rand((c,), 6, .1),
             "w4": np.full((4, c, 1, 1), 1.2), "b4": np.zeros(4),
             "g": np.ones(c), "b": np.zeros(c), "m": np.full(c, -7.0), "v": np.ones(c)}
    m = make_model(nodes, {"x": (1, 4, 4, 4)}, ["u", "proj"], inits)
    g = load_graph(m, None, None, source="model.onnx")
    assert any(n.op == "BatchNormalization" for n in prescale(g, preset("pynqz1").dtype).nodes)
    assert moved(m)
    feeds = {"x": rand((1, 4, 4, 4), 12, .5)}
    ref = ort_run(m, feeds)
    for arch, tol in ((float_arch("pynqz1"), 1e-5), (preset("pynqz1"), 24 * lsb(preset("pynqz1")))):
        _, run = compile_and_run(m, arch, feeds, outputs=["u", "proj"])
        for o in ("u", "proj"):
            np.testing.assert_allclose(run.outputs[o], ref[o], rtol=0, atol=tol, err_msg=o)


def test_a_broadcast_operand_of_the_sum_does_not_take_the_offset():
    """The sum's convolution with one output channel broadcasts over the channels: the offset
    goes into the other operand's convolution (channels alike), and the result is right."""
    c = 8
    nodes = [node("Conv", ["x", "wp", "bp"], ["p"]), node("Relu", ["x"], ["xr"]),
             node("Conv", ["xr", "wq", "bq"], ["q"]), node("Add", ["p", "q"], ["s"]),
             node("BatchNormalization", ["s", "bn_g", "bn_b", "bn_m", "bn_v"], ["n"]),
             node("Relu", ["n"], ["r"]), node("Conv", ["r", "w2", "b2"], ["u"]),
             node("Add", ["s", "u"], ["y"])]
    inits = {"wp": rand((1, 4, 1, 1), 1, .3), "bp": rand((1,), 2, .3),
             "wq": rand((c, 4, 1, 1), 3, .3), "bq": rand((c,), 4, .3),
             "w2": rand((c, c, 1, 1), 5, .3), "b2": rand((c,), 6, .3), **bn_params("bn", c, 3)}
    m = make_model(nodes, {"x": (1, 4, 5, 5)}, ["y"], inits)
    assert moved(m)
    feeds = {"x": rand((1, 4, 5, 5), 1)}
    _, run = compile_and_run(m, float_arch("pynqz1"), feeds)
    np.testing.assert_allclose(run.outputs["y"], ort_run(m, feeds)["y"], rtol=0, atol=1e-5)
