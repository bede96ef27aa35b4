"""The networks users bring, built with ``onnx.helper``: ResNet-50 v2, MobileNetV2, YOLOv4-tiny
(to its two heads, as Tensil's tutorial compiles it), EfficientNet-B0 (SiLU and squeeze-excite
as PyTorch exports them), ResNet-20 v2's shape at any width and DeiT-tiny's encoder (``size``
= tokens).

Weights are random and He-scaled (std sqrt(2 / fan-in)); every BatchNormalization gets the
statistics a trained network would have seen: its running mean and variance are measured on
the float model itself over seeded random inputs, in order (each one after the ones before
it are set), and its scale and shift are drawn near 1 and 0. So activations keep their scale
through the depth of the network, as in a trained one, and precision figures measured on
these models mean what they would on real weights.

    from networks import build
    model = build("resnet50v2", size=224)         # onnx.ModelProto, input "x" NCHW

``python bench/networks.py NAME [--size S] -o FILE.onnx`` writes one.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8
OPSET = 17


@dataclass
class Net:
    """A graph under construction: nodes, initializers, and a seeded generator."""

    seed: int = 0
    nodes: list = field(default_factory=list)
    inits: dict = field(default_factory=dict)
    bns: list = field(default_factory=list)          # (input name, BN node name, channels)
    count: int = 0

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def const(self, name: str, value, dtype=np.float32) -> str:
        self.inits[name] = np.asarray(value, dtype=dtype)
        return name

    def shape(self, kind: str, values) -> str:
        """An int64 constant (a Reshape's shape, a Slice's bounds)."""
        return self.const(self.name(kind), values, np.int64)

    def node(self, op: str, inputs: list, outputs: int = 1, **attrs) -> list[str]:
        name = self.name(op.lower())
        outs = [name] if outputs == 1 else [f"{name}:{k}" for k in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs

    def conv(self, x: str, cin: int, cout: int, k: int = 1, stride: int = 1,
             groups: int = 1, bias: bool = False) -> str:
        """A k×k convolution, SAME padding, He-scaled random weights."""
        name = self.name("conv")
        fan_in = cin // groups * k * k
        w = self.rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / fan_in)
        inputs = [x, self.const(f"{name}.w", w)]
        if bias:
            inputs.append(self.const(f"{name}.b", self.rng.standard_normal(cout) * 0.1))
        pad = (k - 1) // 2
        self.nodes.append(helper.make_node(
            "Conv", inputs, [name], name=name, kernel_shape=[k, k], strides=[stride, stride],
            pads=[pad, pad, k - 1 - pad, k - 1 - pad], group=groups))
        return name

    def bn(self, x: str, c: int) -> str:
        """A BatchNormalization whose statistics :func:`calibrate_bn` sets later."""
        name = self.name("bn")
        gamma = self.rng.uniform(0.7, 1.3, c)
        beta = self.rng.standard_normal(c) * 0.1
        params = [self.const(f"{name}.{p}", v) for p, v in
                  (("scale", gamma), ("bias", beta), ("mean", np.zeros(c)), ("var", np.ones(c)))]
        self.nodes.append(helper.make_node("BatchNormalization", [x, *params], [name],
                                           name=name, epsilon=1e-5))
        self.bns.append((x, name, c))
        return name

    def gemm(self, x: str, cin: int, cout: int) -> str:
        name = self.name("fc")
        w = self.rng.standard_normal((cout, cin)) * np.sqrt(1.0 / cin)
        self.nodes.append(helper.make_node(
            "Gemm", [x, self.const(f"{name}.w", w), self.const(f"{name}.b", np.zeros(cout))],
            [name], name=name, transB=1))
        return name

    def model(self, shape: tuple, outputs: list[str], title: str):
        """The model, its outputs' shapes inferred (so ``onnx.checker`` accepts it)."""
        from onnx import shape_inference
        graph = helper.make_graph(
            self.nodes, title, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
            [numpy_helper.from_array(v, k) for k, v in self.inits.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  ir_version=IR_VERSION)
        inferred = shape_inference.infer_shapes(model).graph
        known = {v.name: v for v in list(inferred.value_info) + list(inferred.output)}
        for out in model.graph.output:
            out.CopyFrom(known[out.name])
        return model


def relu(net: Net, x: str) -> str:
    return net.node("Relu", [x])[0]


def relu6(net: Net, x: str) -> str:
    lo, hi = net.const(net.name("zero"), 0.0), net.const(net.name("six"), 6.0)
    return net.node("Clip", [x, lo, hi])[0]


def leaky(net: Net, x: str) -> str:
    return net.node("LeakyRelu", [x], alpha=0.1)[0]


# --------------------------------------------------------------------------- ResNet v2


def preact_bottleneck(net: Net, x: str, cin: int, width: int, stride: int) -> str:
    """ResNet v2 bottleneck: BN-ReLU first, 1×1 → 3×3 (stride) → 1×1 to 4·width, the
    shortcut a 1×1 projection of the pre-activation where the shape changes."""
    cout = 4 * width
    pre = relu(net, net.bn(x, cin))
    short = x if (cin == cout and stride == 1) else net.conv(pre, cin, cout, 1, stride)
    y = net.conv(pre, cin, width, 1)
    y = net.conv(relu(net, net.bn(y, width)), width, width, 3, stride)
    y = net.conv(relu(net, net.bn(y, width)), width, cout, 1)
    return net.node("Add", [y, short])[0]


def resnet50v2(size: int = 224, classes: int = 1000, seed: int = 0):
    net = Net(seed)
    x = net.conv("x", 3, 64, 7, 2, bias=True)
    x = net.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])[0]
    cin = 64
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for b in range(blocks):
            x = preact_bottleneck(net, x, cin, width, 2 if (b == 0 and stage > 0) else 1)
            cin = 4 * width
    x = relu(net, net.bn(x, cin))
    x = net.node("GlobalAveragePool", [x])[0]
    x = net.node("Flatten", [x])[0]
    out = net.gemm(x, cin, classes)
    return net, net.model([1, 3, size, size], [out], "resnet50v2")


def resnet20v2(size: int = 32, classes: int = 10, seed: int = 0):
    """ResNet-20 v2's shape (CIFAR: three stages of three pre-activation basic blocks)."""
    net = Net(seed)
    x = net.conv("x", 3, 16, 3, bias=True)
    cin = 16
    for stage, width in enumerate((16, 32, 64)):
        for b in range(3):
            stride = 2 if (b == 0 and stage > 0) else 1
            pre = relu(net, net.bn(x, cin))
            short = x if (cin == width and stride == 1) else net.conv(pre, cin, width, 1, stride)
            y = net.conv(pre, cin, width, 3, stride)
            y = net.conv(relu(net, net.bn(y, width)), width, width, 3)
            x, cin = net.node("Add", [y, short])[0], width
    x = relu(net, net.bn(x, cin))
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x])[0]])[0]
    return net, net.model([1, 3, size, size], [net.gemm(x, cin, classes)], "resnet20v2")


# --------------------------------------------------------------------------- MobileNetV2

MOBILENETV2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1))


def inverted_residual(net: Net, x: str, cin: int, cout: int, expand: int, stride: int,
                      k: int = 3, act=relu6, squeeze: int = 0) -> str:
    """MobileNetV2's block (EfficientNet's MBConv with ``act`` SiLU and ``squeeze``): 1×1
    expansion, k×k depthwise, squeeze-excite to ``squeeze`` channels when given, 1×1
    projection; a residual when the shape stays."""
    hidden = cin * expand
    y = x
    if expand != 1:
        y = act(net, net.bn(net.conv(y, cin, hidden, 1), hidden))
    y = act(net, net.bn(net.conv(y, hidden, hidden, k, stride, groups=hidden), hidden))
    if squeeze:
        y = squeeze_excite(net, y, hidden, squeeze)
    y = net.bn(net.conv(y, hidden, cout, 1), cout)
    return net.node("Add", [x, y])[0] if (stride == 1 and cin == cout) else y


def mobilenetv2(size: int = 224, classes: int = 1000, seed: int = 0):
    net = Net(seed)
    x = relu6(net, net.bn(net.conv("x", 3, 32, 3, 2), 32))
    cin = 32
    for t, c, n, s in MOBILENETV2:
        for i in range(n):
            x = inverted_residual(net, x, cin, c, t, s if i == 0 else 1)
            cin = c
    x = relu6(net, net.bn(net.conv(x, cin, 1280, 1), 1280))
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x])[0]])[0]
    return net, net.model([1, 3, size, size], [net.gemm(x, 1280, classes)], "mobilenetv2")


# ------------------------------------------------------------------------- EfficientNet-B0

#: EfficientNet-B0's stages: (expansion, kernel, output channels, blocks, first stride)
EFFICIENTNET_B0 = [(1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 5, 40, 2, 2), (6, 3, 80, 3, 2),
                   (6, 5, 112, 3, 1), (6, 5, 192, 4, 2), (6, 3, 320, 1, 1)]


def swish(net: Net, x: str) -> str:
    """SiLU as PyTorch exports it: ``x · Sigmoid(x)``."""
    return net.node("Mul", [x, net.node("Sigmoid", [x])[0]])[0]


def squeeze_excite(net: Net, x: str, c: int, squeezed: int) -> str:
    """Global average → 1×1 to ``squeezed`` → SiLU → 1×1 back → Sigmoid gate on ``x``."""
    s = net.node("GlobalAveragePool", [x])[0]
    s = swish(net, net.conv(s, c, squeezed, 1, bias=True))
    gate = net.node("Sigmoid", [net.conv(s, squeezed, c, 1, bias=True)])[0]
    return net.node("Mul", [x, gate])[0]


def efficientnet_b0(size: int = 224, classes: int = 1000, seed: int = 0):
    net = Net(seed)
    x = swish(net, net.bn(net.conv("x", 3, 32, 3, 2), 32))
    cin = 32
    for expand, k, c, n, stride in EFFICIENTNET_B0:
        for i in range(n):
            x = inverted_residual(net, x, cin, c, expand, stride if i == 0 else 1, k,
                                  swish, max(1, cin // 4))
            cin = c
    x = swish(net, net.bn(net.conv(x, cin, 1280, 1), 1280))
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x])[0]])[0]
    return net, net.model([1, 3, size, size], [net.gemm(x, 1280, classes)], "efficientnet_b0")


# --------------------------------------------------------------------------- YOLOv4-tiny


def cbl(net: Net, x: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
    """Darknet's convolution: conv (no bias), BatchNormalization, LeakyReLU 0.1."""
    return leaky(net, net.bn(net.conv(x, cin, cout, k, stride), cout))


def csp_block(net: Net, x: str, c: int) -> tuple[str, str]:
    """CSPDarknet53-tiny's block on a c-channel input: (the 2c-channel output before its
    max pool, the c-channel route YOLO's second head reads)."""
    sizes = net.name("split")
    net.inits[sizes] = np.array([c // 2, c // 2], dtype=np.int64)
    half = net.node("Split", [x, sizes], outputs=2, axis=1)[1]
    a = cbl(net, half, c // 2, c // 2, 3)
    b = cbl(net, a, c // 2, c // 2, 3)
    route = cbl(net, net.node("Concat", [b, a], axis=1)[0], c, c, 1)
    return net.node("Concat", [x, route], axis=1)[0], route


def yolov4_tiny(size: int = 416, classes: int = 80, seed: int = 0):
    """YOLOv4-tiny to its two heads (3·(5 + classes) channels at size/32 and size/16)."""
    net = Net(seed)
    head = 3 * (5 + classes)
    x = cbl(net, cbl(net, "x", 3, 32, 3, 2), 32, 64, 3, 2)
    for c in (64, 128, 256):
        x, route = csp_block(net, cbl(net, x, c, c, 3), c)
        x = net.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])[0]
    x = cbl(net, x, 512, 512, 3)
    neck = cbl(net, x, 512, 256, 1)
    out1 = net.conv(cbl(net, neck, 256, 512, 3), 512, head, 1, bias=True)
    up = cbl(net, neck, 256, 128, 1)
    up = net.node("Resize", [up, "", net.const(net.name("scales"), [1, 1, 2, 2])],
                  mode="nearest")[0]
    y = net.node("Concat", [up, route], axis=1)[0]
    out2 = net.conv(cbl(net, y, 384, 256, 3), 256, head, 1, bias=True)
    return net, net.model([1, 3, size, size], [out1, out2], "yolov4_tiny")


def linear(net: Net, x: str, cin: int, cout: int) -> str:
    """``x @ W + b`` on [1, T, cin] tokens, W of std sqrt(1 / cin)."""
    name = net.name("linear")
    w = net.const(f"{name}.w", net.rng.standard_normal((cin, cout)) * np.sqrt(1.0 / cin))
    b = net.const(f"{name}.b", net.rng.standard_normal(cout) * 0.02)
    return net.node("Add", [net.node("MatMul", [x, w])[0], b])[0]


def layer_norm(net: Net, x: str, c: int) -> str:
    name = net.name("ln")
    g = net.const(f"{name}.scale", net.rng.uniform(0.7, 1.3, c))
    return net.node("LayerNormalization", [x, g, net.const(f"{name}.bias",
                                                           net.rng.standard_normal(c) * 0.1)],
                    axis=-1, epsilon=1e-6)[0]


def attention(net: Net, x: str, tokens: int, dim: int, heads: int) -> str:
    """Multi-head self-attention as PyTorch exports it (Reshape/Transpose into heads)."""
    d = dim // heads
    split = net.shape("heads", [1, tokens, heads, d])
    q, k, v = (net.node("Reshape", [linear(net, x, dim, dim), split])[0] for _ in range(3))
    q = net.node("Transpose", [q], perm=[0, 2, 1, 3])[0]
    k = net.node("Transpose", [k], perm=[0, 2, 3, 1])[0]
    v = net.node("Transpose", [v], perm=[0, 2, 1, 3])[0]
    s = net.node("Div", [net.node("MatMul", [q, k])[0],
                         net.const(net.name("sqrt_d"), np.sqrt(d))])[0]
    o = net.node("MatMul", [net.node("Softmax", [s], axis=-1)[0], v])[0]
    o = net.node("Reshape", [net.node("Transpose", [o], perm=[0, 2, 1, 3])[0],
                             net.shape("merge", [1, tokens, dim])])[0]
    return linear(net, o, dim, dim)


def gelu(net: Net, x: str) -> str:
    """GELU in PyTorch's Erf form."""
    e = net.node("Erf", [net.node("Div", [x, net.const(net.name("sqrt2"), np.sqrt(2.0))])[0]])
    half = net.node("Mul", [x, net.const(net.name("half"), 0.5)])[0]
    return net.node("Mul", [half, net.node("Add", [e[0], net.const(net.name("one"), 1.0)])[0]])[0]


def deit_tiny(size: int = 197, classes: int = 1000, seed: int = 0, depth: int = 12,
              dim: int = 192, heads: int = 3):
    """DeiT-tiny's encoder on ``size`` tokens of ``dim`` (the patch embedding, class token and
    position embedding are the input), pre-LN blocks of attention and a 4× GELU MLP, the
    final LayerNorm, the class token's logits."""
    net = Net(seed)
    x = "x"
    for _ in range(depth):
        x = net.node("Add", [x, attention(net, layer_norm(net, x, dim), size, dim, heads)])[0]
        h = gelu(net, linear(net, layer_norm(net, x, dim), dim, 4 * dim))
        x = net.node("Add", [x, linear(net, h, 4 * dim, dim)])[0]
    cls = net.node("Slice", [layer_norm(net, x, dim), net.shape("start", [0]),
                             net.shape("end", [1]), net.shape("axis", [1])])
    flat = net.node("Reshape", [cls[0], net.shape("flat", [1, dim])])[0]
    logits = net.node("Add", [net.node("MatMul", [flat, net.const(
        net.name("head"), net.rng.standard_normal((dim, classes)) * np.sqrt(1.0 / dim))])[0],
        net.const(net.name("head_b"), np.zeros(classes))])[0]
    return net, net.model([1, size, dim], [logits], "deit_tiny")


BUILDERS = {"resnet50v2": resnet50v2, "mobilenetv2": mobilenetv2, "yolov4_tiny": yolov4_tiny,
            "resnet20v2": resnet20v2, "deit_tiny": deit_tiny, "efficientnet_b0": efficientnet_b0}
SIZES = {"resnet50v2": 224, "mobilenetv2": 224, "yolov4_tiny": 192, "resnet20v2": 32,
         "deit_tiny": 197, "efficientnet_b0": 224}


def calibrate_bn(net: Net, model, samples: int = 4, seed: int = 1):
    """Set every BatchNormalization's mean and variance to those of its input over
    ``samples`` seeded N(0, 1) images, in graph order (each measured with the ones before
    it already set), as training would have left them."""
    import onnxruntime as ort
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(seed).standard_normal((samples, *shape[1:])).astype(np.float32)
    inits = {i.name: i for i in model.graph.initializer}
    for source, name, c in net.bns:
        m = helper.make_model(model.graph, opset_imports=model.opset_import,
                              ir_version=IR_VERSION)
        del m.graph.output[:]
        m.graph.output.append(helper.make_tensor_value_info(source, TensorProto.FLOAT, None))
        m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        a = sess.run(None, {"x": x})[0]
        for p, v in (("mean", a.mean(axis=(0, 2, 3))), ("var", a.var(axis=(0, 2, 3)) + 1e-3)):
            inits[f"{name}.{p}"].CopyFrom(numpy_helper.from_array(v.astype(np.float32),
                                                                  f"{name}.{p}"))
    return model


def build(name: str, size: int | None = None, seed: int = 0, **kw):
    """The named network (``BUILDERS``) at ``size`` (default ``SIZES``), BN calibrated."""
    if name not in BUILDERS:
        raise SystemExit(f"unknown network {name!r}; choose one of {', '.join(BUILDERS)}")
    net, model = BUILDERS[name](size or SIZES[name], seed=seed, **kw)
    return calibrate_bn(net, model)


def cached_model(name: str, size: int | None = None) -> Path:
    """The network as an ONNX file, built once and kept under ``~/.cache/tcu_hw/networks``
    (``$XDG_CACHE_HOME`` when set)."""
    import onnx
    size = size or SIZES[name]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tcu_hw" / \
        "networks"
    path = cache / f"{name}_{size}_seed0.onnx"
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        onnx.save(build(name, size), str(path))
    return path


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="Write one of the benchmark networks as ONNX.")
    p.add_argument("network", choices=sorted(BUILDERS))
    p.add_argument("--size", type=int, help="input height and width (default per network)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.onnx")
    args = p.parse_args(argv)
    import onnx
    onnx.save(build(args.network, args.size), args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
