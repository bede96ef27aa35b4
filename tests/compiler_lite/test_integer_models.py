"""Quantized models on the integer types: onnxruntime's QDQ models (made by
:func:`compiler_lite.quantize.quantize_model`, i.e. its own ``quantize_static``) compiled for
INT8 and INT16 and run on the golden emulator must give onnxruntime's outputs for the same
QDQ model: at least 99% of values equal and none more than 1 LSB off (docs/integer.md says
why 1 LSB can differ).

For INT8 onnxruntime runs its integer kernels (QLinearConv, QLinearMatMul, QLinearAdd); for
INT16 it has none and computes each layer in float32 between DequantizeLinear and
QuantizeLinear, whose sums are a few hundredths of an LSB off the exact value, so that a
value near a rounding boundary may land on the other side (seen: exact 9885.4995 in LSB,
ours 9885, onnxruntime's 9886). A 1-LSB difference in one layer's output then moves a later
layer's too, and two such branches meet in a residual Add: INT16 is held to 1 LSB on one
layer, 2 LSB on blocks of several, and 97% equal on the three-layer digits CNN.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from compiler_lite.quantize import quantize_model
from tcu_hw.errors import CompileError

from ..conftest import shared_path
from .helpers import make_model, ort_run, rand

ARCHS = {"int8": "pynqz1_int8", "int16": "ultra96v2_int16"}


def he(shape, seed):
    fan_in = int(np.prod(shape[1:]))
    return rand(shape, seed, np.sqrt(2.0 / fan_in))


def conv_bn(name, x, cin, cout, k, seed, stride=1, group=1, act=None):
    """Conv + BatchNormalization (realistic statistics) [+ Relu or Clip 0..6]."""
    w = he((cout, cin // group, k, k), seed)
    rng = np.random.default_rng(seed + 1)
    inits = {f"{name}_w": w,
             f"{name}_g": rng.uniform(0.5, 1.5, cout), f"{name}_b": rng.normal(0, 0.1, cout),
             f"{name}_m": rng.normal(0, 0.2, cout), f"{name}_v": rng.uniform(0.5, 2.0, cout)}
    nodes = [helper.make_node("Conv", [x, f"{name}_w"], [f"{name}_c"], pads=[k // 2] * 4,
                              strides=[stride, stride], group=group),
             helper.make_node("BatchNormalization", [f"{name}_c", f"{name}_g", f"{name}_b",
                                                     f"{name}_m", f"{name}_v"], [name])]
    if act == "relu":
        nodes.append(helper.make_node("Relu", [name], [f"{name}_r"]))
        return nodes, inits, f"{name}_r"
    if act == "leaky":
        nodes.append(helper.make_node("LeakyRelu", [name], [f"{name}_r"], alpha=0.1))
        return nodes, inits, f"{name}_r"
    if act == "relu6":
        inits[f"{name}_lo"], inits[f"{name}_hi"] = np.float32(0), np.float32(6)
        nodes.append(helper.make_node("Clip", [name, f"{name}_lo", f"{name}_hi"], [f"{name}_r"]))
        return nodes, inits, f"{name}_r"
    return nodes, inits, name


def chain(*parts):
    nodes, inits = [], {}
    for n, i, _ in parts:
        nodes += n
        inits.update(i)
    return nodes, inits


def resnet_block():
    """A ResNet basic block with a strided projection shortcut."""
    a = conv_bn("a", "x", 8, 16, 3, 1, stride=2, act="relu")
    b = conv_bn("b", a[2], 16, 16, 3, 3)
    s = conv_bn("s", "x", 8, 16, 1, 5, stride=2)
    nodes, inits = chain(a, b, s)
    nodes += [helper.make_node("Add", [b[2], s[2]], ["sum"]),
              helper.make_node("Relu", ["sum"], ["y"])]
    return make_model(nodes, {"x": (1, 8, 10, 10)}, ["y"], inits, opset=13)


def mobilenet_block():
    """An inverted residual: 1×1 expand, ReLU6, 3×3 depthwise, ReLU6, 1×1 project, add."""
    e = conv_bn("e", "x", 8, 24, 1, 11, act="relu6")
    d = conv_bn("d", e[2], 24, 24, 3, 13, group=24, act="relu6")
    p = conv_bn("p", d[2], 24, 8, 1, 15)
    nodes, inits = chain(e, d, p)
    nodes.append(helper.make_node("Add", [p[2], "x"], ["y"]))
    return make_model(nodes, {"x": (1, 8, 9, 9)}, ["y"], inits, opset=13)


def classifier_head():
    """Global average pooling, Flatten, Gemm; and a MatMul with constant weights."""
    inits = {"wf": he((10, 16), 21), "bf": rand((10,), 22, 0.1), "wm": he((10, 12), 23)}
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["z"], transB=1),
             helper.make_node("MatMul", ["z", "wm"], ["y"])]
    return make_model(nodes, {"x": (1, 16, 5, 7)}, ["y"], inits, opset=13)


def yolo_block():
    """A YOLOv4-tiny-style block: LeakyReLU convolutions, a channel Split, Concat, MaxPool,
    a nearest Resize ×2 and two heads."""
    a = conv_bn("a", "x", 8, 16, 3, 41, act="leaky")
    nodes, inits = chain(a)
    nodes += [helper.make_node("Constant", [], ["halves"], value=onnx.numpy_helper.from_array(
                  np.array([8, 8], dtype=np.int64))),
              helper.make_node("Split", [a[2], "halves"], ["h0", "h1"], axis=1)]
    b = conv_bn("b", "h1", 8, 8, 3, 43, act="leaky")
    c = conv_bn("c", b[2], 8, 8, 3, 45, act="leaky")
    n2, i2 = chain(b, c)
    nodes += n2
    inits.update(i2)
    nodes += [helper.make_node("Concat", [c[2], b[2]], ["cat"], axis=1),
              helper.make_node("MaxPool", ["cat"], ["pool"], kernel_shape=[2, 2],
                               strides=[2, 2])]
    h1 = conv_bn("h1c", "pool", 16, 12, 1, 47)
    u = conv_bn("u", "pool", 16, 8, 1, 49, act="leaky")
    n3, i3 = chain(h1, u)
    nodes += n3
    inits.update(i3)
    inits["sc"] = np.array([1, 1, 2, 2], dtype=np.float32)
    nodes += [helper.make_node("Resize", [u[2], "", "sc"], ["up"], mode="nearest"),
              helper.make_node("Concat", ["up", a[2]], ["cat2"], axis=1)]
    h2 = conv_bn("h2c", "cat2", 24, 12, 3, 51)
    n4, i4 = chain(h2)
    nodes += n4 + [helper.make_node("Identity", [h1[2]], ["y1"]),
                   helper.make_node("Identity", [h2[2]], ["y2"])]
    inits.update(i4)
    return make_model(nodes, {"x": (1, 8, 8, 8)}, ["y1", "y2"], inits, opset=13)


def preactivation_block():
    """A ResNet v2 block: batch norm and ReLU before each convolution (the first one after
    the previous block's Add, so it stays a layer of its own), identity shortcut."""
    rng = np.random.default_rng(61)
    inits = {"g": rng.uniform(0.5, 1.5, 8), "be": rng.normal(0, 0.1, 8),
             "mu": rng.normal(0, 0.2, 8), "va": rng.uniform(0.5, 2.0, 8)}
    inits["g"][2] = -0.7                        # a negative scale too
    nodes = [helper.make_node("Add", ["x", "x"], ["x2"]),
             helper.make_node("BatchNormalization", ["x2", "g", "be", "mu", "va"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"])]
    a = conv_bn("a", "r", 8, 8, 3, 63, act="relu")
    b = conv_bn("b", a[2], 8, 8, 3, 65)
    n2, i2 = chain(a, b)
    inits.update(i2)
    nodes += n2 + [helper.make_node("Add", [b[2], "x2"], ["y"])]
    return make_model(nodes, {"x": (1, 8, 6, 6)}, ["y"], inits, opset=13)


def squeeze_excite_block():
    """Squeeze-excite with MobileNetV3's gate: GlobalAveragePool, 1×1 convolutions, a
    HardSigmoid gate multiplied per channel; then two average poolings (one counting its
    padding)."""
    f = conv_bn("f", "x", 8, 16, 3, 71, act="relu")
    nodes, inits = chain(f)
    inits.update(w1=he((4, 16, 1, 1), 73), b1=rand((4,), 74, 0.1), w2=he((16, 4, 1, 1), 75),
                 b2=rand((16,), 76, 0.1))
    nodes += [helper.make_node("GlobalAveragePool", [f[2]], ["sq"]),
              helper.make_node("Conv", ["sq", "w1", "b1"], ["e1"]),
              helper.make_node("Relu", ["e1"], ["e1r"]),
              helper.make_node("Conv", ["e1r", "w2", "b2"], ["e2"]),
              helper.make_node("HardSigmoid", ["e2"], ["gate"], alpha=1 / 6, beta=0.5),
              helper.make_node("Mul", [f[2], "gate"], ["se"]),
              helper.make_node("AveragePool", ["se"], ["p1"], kernel_shape=[3, 3],
                               pads=[1, 1, 1, 1], count_include_pad=1),
              helper.make_node("AveragePool", ["p1"], ["y"], kernel_shape=[2, 2],
                               strides=[2, 2])]
    return make_model(nodes, {"x": (1, 8, 6, 6)}, ["y"], inits, opset=13)


BLOCKS = {"resnet": resnet_block, "squeeze_excite": squeeze_excite_block,
          "mobilenet": mobilenet_block, "head": classifier_head, "yolo": yolo_block,
          "preactivation": preactivation_block}


def quantized(model, kind, tmp_path, samples=8, seed=100):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "float.onnx"
    onnx.save(model, str(path))
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    cal = {"x": rand((samples, *shape[1:]), seed)}
    return quantize_model(path, kind, cal, tmp_path), shape


def agreement(q_path, arch, shape, count=4, seed=7):
    """(fraction of equal output values, largest difference in LSB) over ``count`` inputs."""
    c = compile_model(str(q_path), arch)
    diffs = []
    for k in range(count):
        x = {"x": rand(shape, seed + k)}
        got = run_emulator(c, x).outputs
        ref = ort_run(str(q_path), x)
        diffs += [np.abs(got[t.name] - ref[t.name]).reshape(-1) / t.scale for t in c.outputs]
    d = np.concatenate(diffs)
    return float(np.mean(d < 0.5)), float(d.max())


def one_conv():
    """One padded convolution (the input's zero point is read at the borders)."""
    return make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
                      {"x": (1, 6, 7, 7)}, ["y"], {"w": he((12, 6, 3, 3), 31),
                                                  "b": rand((12,), 32, 0.1)}, opset=13)


#: (largest difference in LSB, least fraction equal) end to end: a 1-LSB difference in one
#: layer moves later ones (more where a layer's output scale is finer than its input's, as
#: after a LeakyReLU), so a block of eight layers (yolo) is held to 2 LSB;
#: :func:`test_every_layer_within_one_lsb` holds each layer to 1 LSB. A HardSigmoid gate
#: (squeeze_excite) maps an input at its zero point to 0.5, which with the [0, 1] output's
#: scale 1/255 is a tie (127.5 steps) that float32 rounding breaks either way: its 16 gate
#: values differ in one or two places
END_TO_END = {("int8", False): (1, 0.99), ("int16", False): (2, 0.98),
              ("int8", True): (2, 0.97), ("int16", True): (2, 0.95)}


@pytest.mark.parametrize("kind", ["int8", "int16"])
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_block_equals_onnxruntime(block, kind, tmp_path):
    q, shape = quantized(BLOCKS[block](), kind, tmp_path)
    equal, worst = agreement(q, ARCHS[kind], shape)
    most, least = END_TO_END[kind, block in ("yolo", "squeeze_excite")]
    assert worst < most + 0.01, worst          # (LSB as floats: a hair over 1 is 1)
    assert equal >= least, equal


def layers(q_model):
    """Per quantized layer of a QDQ model (a node between DequantizeLinear and
    QuantizeLinear): (its float inputs before their QuantizeLinear, its output after its
    DequantizeLinear)."""
    g = q_model.graph
    made = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    for n in g.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            continue
        ins = []
        for i in n.input:
            dq = made.get(i)
            if dq is not None and dq.op_type == "DequantizeLinear" and dq.input[0] in made:
                ins.append(made[dq.input[0]].input[0])      # the float before its Q
        out = n.output[0]
        while out in readers and readers[out][0].op_type in ("Relu", "Clip"):
            out = readers[out][0].output[0]
        q = readers.get(out, [None])[0]
        if not ins or q is None or q.op_type != "QuantizeLinear":
            continue
        yield ins, readers[q.output[0]][0].output[0]


@pytest.mark.parametrize("kind", ["int8", "int16"])
@pytest.mark.parametrize("block", ["yolo", "preactivation", "resnet"])
def test_every_layer_within_one_lsb(block, kind, tmp_path):
    """Each quantized layer alone, given onnxruntime's own inputs (its float inputs, which
    the host quantizes as its QuantizeLinear does): within 1 LSB, 99% equal."""
    from onnx.utils import Extractor
    q, shape = quantized(BLOCKS[block](), kind, tmp_path)
    model = onnx.shape_inference.infer_shapes(onnx.load(str(q)))
    found = 0
    for ins, out in layers(model):
        sub = Extractor(model).extract_model(sorted(set(ins)), [out])
        feeds = ort_run(str(q), {"x": rand(shape, 9)}, sorted(set(ins)))
        c = compile_model(sub, ARCHS[kind])
        got = run_emulator(c, feeds).outputs[out]
        d = np.abs(got - ort_run(sub, feeds)[out]) / c.outputs[0].scale
        assert d.max() < 1.01 and np.mean(d < 0.5) >= 0.99, (out, d.max(), np.mean(d < 0.5))
        found += 1
    assert found >= 4


@pytest.mark.parametrize("kind", ["int8", "int16"])
def test_one_layer_within_one_lsb(kind, tmp_path):
    q, shape = quantized(one_conv(), kind, tmp_path)
    equal, worst = agreement(q, ARCHS[kind], shape)
    assert worst < 1.01 and equal >= 0.99, (worst, equal)


@pytest.mark.parametrize("kind, least", [("int8", 0.99), ("int16", 0.97)])
def test_trained_digits_cnn(kind, least, tmp_path):
    """The trained digits CNN (conv, relu, max pool ×2, flatten, gemm; its opset-10 file is
    converted first), calibrated on 64 test images: outputs as onnxruntime's within 1 LSB,
    and the accuracy on 120 test images within a point of float's."""
    x = np.load(shared_path("models", "digits_test_x.npy"))[:120]
    y = np.load(shared_path("models", "digits_test_y.npy"))[:120]
    path = shared_path("models", "digits_cnn_opset10.onnx")
    q = quantize_model(path, kind, {"x": x[:64]}, tmp_path)
    c = compile_model(str(q), ARCHS[kind])
    got = np.concatenate([run_emulator(c, {"x": x[k:k + 1]}).outputs["logits"]
                          for k in range(len(x))])
    ref = np.concatenate([ort_run(str(q), {"x": x[k:k + 1]})["logits"] for k in range(len(x))])
    fl = np.concatenate([ort_run(path, {"x": x[k:k + 1]})["logits"] for k in range(len(x))])
    d = np.abs(got - ref) / c.outputs[0].scale
    assert d.max() < 1.01 and np.mean(d < 0.5) >= least
    assert abs(np.mean(got.argmax(1) == y) - np.mean(fl.argmax(1) == y)) <= 0.01


def test_io_layout_carries_the_quantization(tmp_path):
    q, _ = quantized(classifier_head(), "int8", tmp_path)
    c = compile_model(str(q), "pynqz1_int8")
    m = onnx.load(str(q))
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    qx = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "x")
    assert c.inputs[0].scale == pytest.approx(float(inits[qx.input[1]]))
    assert c.inputs[0].zero_point == int(inits[qx.input[2]])
    assert '"scale"' in c.files()[f"{c.name}.tio.json"].decode()


def test_float_model_on_an_integer_type_is_refused():
    with pytest.raises(CompileError, match="needs a quantized model.*--quantize int8"):
        compile_model(classifier_head(), "pynqz1_int8")


def test_unsupported_quantized_node_is_named(tmp_path):
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"]),
                        helper.make_node("InstanceNormalization", ["c", "g", "b"], ["y"])],
                       {"x": (1, 4, 5, 5)}, ["y"], {"w": he((4, 4, 1, 1), 3),
                                                    "g": rand((4,), 4), "b": rand((4,), 5)},
                       opset=13)
    q, _ = quantized(model, "int8", tmp_path)
    with pytest.raises(CompileError, match=r"InstanceNormalization.*no integer lowering"):
        compile_model(str(q), "pynqz1_int8")


def test_layer_norm_over_other_axes_is_refused(tmp_path):
    """An integer LayerNorm normalizes over the last axis only (the quantized model's
    LayerNormalization set to axis 1 after quantizing)."""
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["c"]),
                        helper.make_node("LayerNormalization", ["c", "g", "b"], ["y"])],
                       {"x": (1, 6, 8)}, ["y"],
                       {"w": rand((8, 8), 3), "g": rand((8,), 4), "b": rand((8,), 5)},
                       opset=17)
    q, _ = quantized(model, "int8", tmp_path)
    m = onnx.load(str(q))
    ln = next(n for n in m.graph.node if n.op_type == "LayerNormalization")
    del ln.attribute[:]
    ln.attribute.append(helper.make_attribute("axis", 1))
    with pytest.raises(CompileError, match=r"LayerNormalization.*over the last axis"):
        compile_model(m, "pynqz1_int8")


@pytest.mark.parametrize("kind, arch, typ", [("int16", "pynqz1_int8", "int16"),
                                             ("int8", "ultra96v2_int16", "int8")])
def test_a_model_of_the_other_integer_type_is_refused(kind, arch, typ, tmp_path):
    q, _ = quantized(classifier_head(), kind, tmp_path)
    with pytest.raises(CompileError, match=f"activation type {typ} does not match"):
        compile_model(str(q), arch)


def operator_form(model, tmp_path):
    """onnxruntime's operator-form model (QLinearConv, QLinearMatMul) of ``model``."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    samples = iter([{"x": rand(shape, 40 + k)} for k in range(6)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(samples, None)

    path, out = tmp_path / "float.onnx", tmp_path / "qop.onnx"
    onnx.save(model, str(path))
    quantize_static(str(path), str(out), Reader(), quant_format=QuantFormat.QOperator,
                    per_channel=True, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    return out, shape


def test_operator_form_conv_and_matmul(tmp_path):
    """QLinearConv with an int32 bias (already at s_x·s_w) and QLinearMatMul."""
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                        helper.make_node("Flatten", ["c"], ["f"]),
                        helper.make_node("MatMul", ["f", "wm"], ["y"])],
                       {"x": (1, 4, 5, 5)}, ["y"], {"w": he((6, 4, 3, 3), 81),
                                                   "b": rand((6,), 82, 0.3),
                                                   "wm": he((150, 10), 83)}, opset=13)
    q, shape = operator_form(model, tmp_path)
    ops = {n.op_type for n in onnx.load(str(q)).graph.node}
    assert {"QLinearConv", "QLinearMatMul"} <= ops
    equal, worst = agreement(q, "pynqz1_int8", shape)
    assert worst < 1.01 and equal >= 0.99, (worst, equal)


def test_refusals_name_the_node(tmp_path):
    """Quantized patterns the integer path cannot take: one error naming each node."""
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"]),
                    helper.make_node("Resize", ["c", "", "sc"], ["r"], mode="linear"),
                    helper.make_node("AveragePool", ["r"], ["a"], kernel_shape=[3, 3],
                                     strides=[2, 2], ceil_mode=1),
                    helper.make_node("LeakyRelu", ["a"], ["y"], alpha=3.0)],
                   {"x": (1, 4, 5, 5)}, ["y"], {"w": he((4, 4, 1, 1), 3),
                                               "sc": np.array([1, 1, 2, 2])}, opset=13)
    q, _ = quantized(m, "int8", tmp_path)
    with pytest.raises(CompileError) as e:
        compile_model(str(q), "pynqz1_int8")
    text = str(e.value)
    assert "3 node(s)" in text and "mode 'nearest'" in text and "ceil_mode = 1" in text \
        and "alpha 3.0" in text


@pytest.mark.parametrize("kind, size", [("int8", 64), ("int16", 160)])
def test_global_average_over_a_map_larger_than_local_memory(kind, size, tmp_path):
    """An integer global average keeps its exact sums in the accumulators, so one partition
    reads the whole map: 16 channels at 64 × 64 are 8,192 vectors on pynqz1_int8 (its local
    memory has 8,192), at 160 × 160 25,600 on ultra96v2_int16 (20,480). The map is loaded
    chunk by chunk into two areas in turn, each vector once, and the result is
    onnxruntime's."""
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    m = make_model(nodes, {"x": (1, 16, size, size)}, ["y"],
                   {"wf": he((10, 16), 21), "bf": rand((10,), 22, 0.1)}, opset=13)
    q, shape = quantized(m, kind, tmp_path, samples=2)
    c = compile_model(str(q), ARCHS[kind])
    gap = next(st for st in c.layers if "GlobalAveragePool" in " ".join(st.nodes))
    vectors = size * size * -(-16 // c.arch.array_size)
    assert vectors <= gap.dram_vectors < vectors + 64, gap.dram_vectors   # (+ its constants)
    x = {"x": rand(shape, 7)}
    got, ref = run_emulator(c, x).outputs, ort_run(str(q), x)
    np.testing.assert_array_equal(got["y"], ref["y"])


def test_chunked_partitions_leave_room_for_their_chunks(tmp_path):
    """An INT8 16×16 average pool (stride 1) over 40 × 40 on 1,024 local vectors: with
    1,024 accumulators the largest partition's output staging would leave no room for the
    source's chunks, so the partitions shrink until it does; the program gives the bits of
    the one that stages whole sources in a 16K local memory."""
    from tcu_hw.arch import preset
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]),
             helper.make_node("AveragePool", ["c"], ["a"], kernel_shape=[16, 16],
                              strides=[1, 1]),
             helper.make_node("Conv", ["a", "w2", "b2"], ["y"])]
    m = make_model(nodes, {"x": (1, 16, 40, 40)}, ["y"],
                   {"w": he((16, 16, 1, 1), 51), "b": rand((16,), 52, 0.1),
                    "w2": he((4, 16, 1, 1), 53), "b2": rand((4,), 54, 0.1)}, opset=13)
    q, shape = quantized(m, "int8", tmp_path, samples=2)

    def arch(local):
        return preset("cmoda7").with_changes(
            "smallint", data_type="INT8", local_depth=local, accumulator_depth=1024,
            simd_registers_depth=4, dram0_depth=1 << 16, dram1_depth=1 << 16)

    x = {"x": rand(shape, 7)}
    got = run_emulator(compile_model(str(q), arch(1024)), x).raw["y"]
    want = run_emulator(compile_model(str(q), arch(1 << 14)), x).raw["y"]
    np.testing.assert_array_equal(got, want)


def test_two_outputs_dequantize_one_tensor(tmp_path):
    """Two graph outputs, each a DequantizeLinear of the same quantized tensor."""
    q, shape = quantized(make_model([helper.make_node("Conv", ["x", "w"], ["y1"])],
                                    {"x": (1, 4, 5, 5)}, ["y1"], {"w": he((4, 4, 1, 1), 3)},
                                    opset=13), "int8", tmp_path)
    m = onnx.load(str(q))
    dq = next(n for n in m.graph.node if n.output[0] == "y1")
    m.graph.node.append(helper.make_node("DequantizeLinear", list(dq.input), ["y2"]))
    m.graph.output.append(helper.make_tensor_value_info("y2", onnx.TensorProto.FLOAT, None))
    onnx.save(m, str(tmp_path / "two.onnx"))
    equal, worst = agreement(tmp_path / "two.onnx", "pynqz1_int8", shape)
    assert worst < 1.01 and equal >= 0.99


def test_cli_quantize_and_calibrate(tmp_path, capsys):
    """--quantize int8 --calibrate: onnxruntime's quantizer, then the INT8 program, its
    artifacts (the I/O layout with scales) and its precision against float."""
    from compiler_lite.__main__ import main
    path = tmp_path / "head.onnx"
    onnx.save(classifier_head(), str(path))
    np.savez(tmp_path / "cal.npz", x=rand((6, 16, 5, 7), 3))
    assert main(["-a", "pynqz1_int8", "-m", str(path), "--quantize", "int8", "--calibrate",
                 str(tmp_path / "cal.npz"), "-t", str(tmp_path / "out"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "PRECISION on 6 calibration sample(s): INT8 against float" in out
    rms = float(next(line for line in out.splitlines() if line.startswith("y ")).split()[4]
                .rstrip("%"))
    assert 0 < rms < 3
    layout = (tmp_path / "out" / "head_onnx_pynqz1_int8.tio.json").read_text()
    assert '"zero_point"' in layout


@pytest.mark.parametrize("extra, message", [
    ([], "needs --calibrate"),
    (["--calibrate", "CAL"], "needs an architecture of data type INT16; pynqz1_int8 is INT8"),
])
def test_cli_quantize_errors(extra, message, tmp_path, capsys):
    from compiler_lite.__main__ import main
    path = tmp_path / "head.onnx"
    onnx.save(classifier_head(), str(path))
    np.savez(tmp_path / "cal.npz", x=rand((2, 16, 5, 7), 3))
    extra = [str(tmp_path / "cal.npz") if a == "CAL" else a for a in extra]
    assert main(["-a", "pynqz1_int8", "-m", str(path), "--quantize", "int16",
                 "-t", str(tmp_path / "out"), "-q", *extra]) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_constant_operand_of_add_is_named(tmp_path):
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"]),
                        helper.make_node("Add", ["c", "k"], ["y"])],
                       {"x": (1, 4, 5, 5)}, ["y"], {"w": he((4, 4, 1, 1), 3),
                                                   "k": rand((1, 4, 5, 5), 4)}, opset=13)
    q, _ = quantized(model, "int8", tmp_path)
    with pytest.raises(CompileError, match=r"Add.*is a constant; the integer Add takes two "
                                           r"activations"):
        compile_model(str(q), "pynqz1_int8")
