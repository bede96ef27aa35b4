"""The integer operators (docs/integer.md) that :mod:`compiler_lite.quant` makes of a
quantized model: exact integer sums through the array, then one SIMD Requantize per output
vector with per-channel parameters.

A layer's requantization::

    MatMuls (integer weights, exact INT32/INT48 sums; a padding tap reads a vector of the
    input's zero point, so the sum is Σ w·(x − zp) + zp·Σw whatever the pixel)
        → SIMD Requantize, per block of n output channels: registers R3 = (M, s, zp) and
          R4 = B (the bias minus the input's zero point times the weight sum), per lane
        → optional Max/Min with R1 (a Relu or Clip the quantization does not cover)
        → move to local memory, saturating to the data type

Requantized values exceed the data type until that move, so no later node works on them in
the accumulators (the layer is ``sealed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tcu_hw import numeric
from tcu_hw.isa import SimdOp as Op

from ..geometry import check_spatial, spatial, window_attrs
from ..ir import Tensor
from ..kernels import Simd, SimdStep
from ..quant import DOMAIN
from ..registry import op
from .elementwise import operand_beside
from .linear import (block_vectors, check_avgpool, dense_weights, depthwise, matmul_rows,
                     spatial_linear)
from .qtable import qtable, steps_fit

if TYPE_CHECKING:
    from ..lower import Lowering

#: SIMD registers: a clamp bound, the Requantize parameters and its bias
R_CLAMP, R_PARAMS, R_BIAS = 1, 3, 4


def requantize(ctx: Lowering, layer, blocks: np.ndarray, acc_scale, bias, y, clip,
               key: str) -> None:
    """Requantize steps for ``blocks`` (per row, the vectors of one item, a column per block
    of n output channels) of ``layer``'s output: ``out[c] = y.zp + round((acc[c] + bias[c])
    · acc_scale[c] / y.scale)``, clamped to ``clip`` (integers) when given. Lanes past the
    last channel come out 0."""
    n = ctx.n
    m, s = _parameters(ctx, acc_scale, y)
    channels = len(m)
    for cob in range(blocks.shape[1]):
        lanes = np.arange(cob * n, cob * n + n)
        real = lanes < channels
        at = np.minimum(lanes, channels - 1)
        _steps(ctx, layer, np.sort(blocks[:, cob]), m[at], s[at], np.asarray(bias)[at], real,
               y, clip, f"{key}:{cob}")
    layer.sealed = True


def requantize_paired(ctx: Lowering, layer, vecs, aux, aux_buf, acc_scale: float, lanes: int,
                      y, clip, key: str) -> None:
    """:func:`requantize` of ``vecs`` with one scale, each vector's bias read from its
    paired vector ``aux`` of accumulator buffer ``aux_buf`` (a bias computed at run time;
    none when ``aux`` is None); lanes from ``lanes`` on come out 0."""
    n = ctx.n
    m, s = _parameters(ctx, np.array([acc_scale]), y)
    order = np.argsort(vecs, kind="stable")
    _steps(ctx, layer, np.asarray(vecs)[order], np.full(n, m[0]), np.full(n, s[0]),
           np.zeros(n), np.arange(n) < lanes, y, clip, key,
           None if aux is None else np.asarray(aux)[order], aux_buf)
    layer.sealed = True


def requantize_lanes(ctx: Lowering, layer, t: Tensor, scale: float, bias: int, y, clip,
                     key: str) -> np.ndarray:
    """:func:`requantize` of every element of ``t`` (in ``layer``'s output) with one scale
    and bias, lanes that hold no element of ``t`` left 0; returns ``t``'s vectors."""
    n = ctx.n
    v, lane = np.divmod(t.idx.reshape(-1), n)
    v = v - layer.out.start
    vecs, row = np.unique(v, return_inverse=True)
    mask = np.zeros((len(vecs), n), dtype=bool)
    mask[row.reshape(-1), lane] = True
    m, s = _parameters(ctx, np.array([scale]), y)
    pats, of = np.unique(mask, axis=0, return_inverse=True)
    for k, real in enumerate(pats):
        _steps(ctx, layer, vecs[of.reshape(-1) == k], np.full(n, m[0]), np.full(n, s[0]),
               np.full(n, bias), real, y, clip, f"{key}:{k}")
    layer.sealed = True
    return vecs


def requantize_word(dt, multiplier: int = 0, shift: int = 0, zero_point: int = 0) -> int:
    """One lane's Requantize parameters as a register value
    (:func:`tcu_hw.numeric.pack_requantize`); ``requantize_word(dt, 0, 1)`` is the shift
    field's unit, which run-time shifts are multiples of."""
    return int(numeric.pack_requantize(multiplier, shift, zero_point, dt))


def _parameters(ctx: Lowering, acc_scale, y):
    """(M, s) per channel for scales ``acc_scale / y.scale`` (CompileError when out of
    range)."""
    dt = ctx.arch.dtype
    S = np.asarray(acc_scale, dtype=np.float32) / np.float32(y.scale)
    try:
        return numeric.requantize_parameters(S, dt)
    except ValueError:
        ctx.fail(f"a requantization scale ({float(S.min()):.3g}..{float(S.max()):.3g}) is "
                 f"outside what {dt.name} represents (> 0, < 2^{dt.width + 8})")


def _steps(ctx: Lowering, layer, vecs, m, s, bias, real, y, clip, key: str,
           aux=None, aux_buf=None) -> None:
    """The Requantize (and clamp) steps over ``vecs``, parameters per lane; lanes not
    ``real`` get all-zero parameters (their output is 0). With ``aux``, each vector's bias
    is its paired vector of accumulator buffer ``aux_buf`` (``bias`` is not used)."""
    dt = ctx.arch.dtype
    params = np.where(real, numeric.pack_requantize(m, s, y.zero_point, dt), 0)
    kp, kb = f"{key}:params", f"{key}:bias"
    if aux is None:
        b = np.where(real, bias, 0).astype(np.int64)
        layer.steps.append(Simd(layer.out, vecs,
                                [("const", R_PARAMS, kp), ("const", R_BIAS, kb)],
                                [SimdStep(Op.REQUANTIZE, 0, R_PARAMS, 0)],
                                consts={kp: params, kb: b}))
    else:
        layer.steps.append(Simd(layer.out, vecs, [("const", R_PARAMS, kp)],
                                [SimdStep(Op.MOVE, 0, 0, R_BIAS, read="aux", write=None),
                                 SimdStep(Op.REQUANTIZE, 0, R_PARAMS, 0)], aux, aux_buf,
                                consts={kp: params}))
    for bound, simd_op, edge in ((0, Op.MAX, dt.min_raw), (1, Op.MIN, dt.max_raw)):
        if clip is None or clip[bound] == edge:
            continue
        kv = f"{key}:clip{bound}"
        v = np.where(real, clip[bound], 0).astype(np.int64)
        layer.steps.append(Simd(layer.out, vecs, [("const", R_CLAMP, kv)],
                                [SimdStep(simd_op, 0, R_CLAMP, 0)], consts={kv: v}))


def _zero_point_vectors(ctx: Lowering, x: Tensor, zp: int, out_shape) -> int | None:
    """The first of max(rows, columns) of ``out_shape`` constant vectors holding ``zp`` in
    every lane (what padding taps read: :func:`.linear.spatial_linear`), or None for a
    zero point of 0 (padding taps then cost nothing)."""
    if zp == 0:
        return None
    count = max(spatial(out_shape))
    key = f"{x.name}:zero_point:{count}"
    ctx.g.consts.setdefault(key, np.full((count, ctx.n), float(zp)))
    return int(ctx.const_tensor(key).idx.reshape(-1)[0] // ctx.n)


def check_qconv(node, g, arch) -> list[str]:
    """Checker of QConv: a 1-D or 2-D input whose channels match the weights."""
    out = check_spatial(node, g, arch)
    w = node.attr("w")
    shape = g.shapes.get(node.inputs[0])
    if shape is not None and w.shape[1] * int(node.attr("group", 1)) != shape[1]:
        out.append(f"weights have {w.shape[1]} input channels × group "
                   f"{node.attr('group', 1)}, the input has {shape[1]}")
    return out


@op("QConv", check=check_qconv, domain=DOMAIN)
def qconv(node, ctx: Lowering):
    """Conv: exact integer sums (padding taps read the input's zero point), then
    Requantize per output channel with bias ``B − zp_x·Σw``."""
    x = ctx.tensor(node.inputs[0])
    w = node.attr("w").astype(np.float64)
    Co, Cig = w.shape[:2]
    _, strides, dil, pads = window_attrs(node, x.shape, w.shape[2:])
    wfull = dense_weights(w, int(node.attr("group", 1)), x.shape[1])
    px = node.attr("x")
    out = node.outputs[0]
    pad = _zero_point_vectors(ctx, x, px.zero_point, ctx.g.shape(out)) if any(pads) else None
    spatial_linear(ctx, x, out, ctx.g.shape(out), wfull, None, strides, dil, pads, Co * Cig,
                   pad_vector=pad)
    layer, y = ctx.open, ctx.tensor(out)
    wsum = w.reshape(Co, -1).sum(axis=1).astype(np.int64)
    bias = node.attr("bias") - px.zero_point * wsum
    requantize(ctx, layer, block_vectors(y, layer.out.start, ctx.n), node.attr("w_scale")
               * np.float32(px.scale), bias, node.attr("y"), node.attr("clip"), out)


@op("QGemm", domain=DOMAIN)
def qgemm(node, ctx: Lowering):
    """Gemm / MatMul with constant weights: exact integer rows, then Requantize per output
    feature with bias ``B − zp_x·Σw``."""
    a = ctx.tensor(node.inputs[0])
    w = node.attr("w").astype(np.float64)
    out = node.outputs[0]
    shape = ctx.g.shape(out)
    matmul_rows(ctx, a, out, shape, w, None, int(np.prod(shape)) * w.shape[0])
    layer, y = ctx.open, ctx.tensor(out)
    n, Nout = ctx.n, w.shape[1]
    rows = (y.idx.reshape(-1, Nout) // n)[:, ::n] - layer.out.start
    px = node.attr("x")
    bias = node.attr("bias") - px.zero_point * w.sum(axis=0).astype(np.int64)
    requantize(ctx, layer, rows, node.attr("w_scale") * np.float32(px.scale), bias,
               node.attr("y"), node.attr("clip"), out)


@op("QAdd", domain=DOMAIN)
def qadd(node, ctx: Lowering):
    """``y = zp_y + round((s_a(a − zp_a) + s_b(b − zp_b)) / s_y)``: a and b multiplied in
    the accumulators by A, B ≈ s/max(s_a, s_b) · 2^(W+7) (W + 8-bit integers, exact
    products), summed, then requantized by max(s_a, s_b) / (s_y · 2^(W+7)) with bias
    −(zp_a·A + zp_b·B)."""
    dt, n = ctx.arch.dtype, ctx.n
    pa, pb, py = node.attr("a"), node.attr("b"), node.attr("y")
    k = dt.width + 7
    top = max(np.float32(pa.scale), np.float32(pb.scale))
    ma = int(np.rint(np.float64(np.float32(pa.scale)) / top * 2.0 ** k))
    mb = int(np.rint(np.float64(np.float32(pb.scale)) / top * 2.0 ** k))
    out = node.outputs[0]
    tb = ctx.tensor(node.inputs[1])
    layer, t = ctx.copy_layer(ctx.tensor(node.inputs[0]), out)
    o, aux = operand_beside(ctx, layer, t, tb, out)
    paired = np.argsort(o, kind="stable")
    o = o[paired]
    ka, kb = f"{out}:scale_a", f"{out}:scale_b"
    layer.steps.append(Simd(layer.out, o, [("const", R_CLAMP, ka)],
                            [SimdStep(Op.MULTIPLY, 0, R_CLAMP, 0)],
                            consts={ka: np.full(n, ma, dtype=np.int64)}))
    layer.steps.append(Simd(layer.out, o, [("const", R_CLAMP, kb)],
                            [SimdStep(Op.MULTIPLY, 0, R_CLAMP, 0, read="aux", write="self",
                                      accumulate=True)], paired, aux,
                            consts={kb: np.full(n, mb, dtype=np.int64)}))
    ctx.set(out, Tensor(t.idx))
    requantize_lanes(ctx, layer, t, float(top) / 2.0 ** k,
                     -(pa.zero_point * ma + pb.zero_point * mb), py, node.attr("clip"), out)


@op("QAveragePool", check=check_avgpool, domain=DOMAIN)
def qaverage_pool(node, ctx: Lowering):
    """GlobalAveragePool, or AveragePool counting its padding (which reads the zero point):
    the window's sum through the array (weight 1 per tap), requantized by
    s_x / (s_y · taps) with bias −zp_x · taps."""
    x = ctx.tensor(node.inputs[0])
    C = x.shape[1]
    if "kernel_shape" in node.attrs:
        kernel, strides, _, pads = window_attrs(node, x.shape)
    else:
        kernel, strides, pads = list(spatial(x.shape)), [1, 1], [0, 0, 0, 0]
    wfull = depthwise(kernel[0], kernel[1], C, range(kernel[0] * kernel[1]), 1.0)
    px, taps = node.attr("x"), kernel[0] * kernel[1]
    out = node.outputs[0]
    pad = _zero_point_vectors(ctx, x, px.zero_point, ctx.g.shape(out)) if any(pads) else None
    spatial_linear(ctx, x, out, ctx.g.shape(out), wfull, None, strides, (1, 1), pads, 1,
                   pad_vector=pad)
    layer, y = ctx.open, ctx.tensor(out)
    scale = np.full(C, np.float64(np.float32(px.scale)) / taps)
    bias = np.full(C, -px.zero_point * taps, dtype=np.int64)
    requantize(ctx, layer, block_vectors(y, layer.out.start, ctx.n), scale, bias,
               node.attr("y"), node.attr("clip"), out)

def _copy(ctx: Lowering, node):
    """The node's input copied into the accumulators of a new layer: (layer, tensor)."""
    return ctx.copy_layer(ctx.tensor(node.inputs[0]), node.outputs[0])


@op("QRescale", domain=DOMAIN)
def qrescale(node, ctx: Lowering):
    """``y = zp_y + round((x − zp_x) · s_x / s_y)``, clamped (a Relu or Clip, or an input of
    a Concat quantized otherwise than its output)."""
    px = node.attr("x")
    layer, t = _copy(ctx, node)
    ctx.set(node.outputs[0], Tensor(t.idx))
    requantize_lanes(ctx, layer, t, float(np.float32(px.scale)), -px.zero_point,
                     node.attr("y"), node.attr("clip"), node.outputs[0])


def _multiply_steps(ctx: Lowering, layer, vecs, value, key: str, write="self", read="self",
                    aux=None, aux_buf=None) -> None:
    """One SIMD pass: ``vecs`` times ``value`` (per lane), through register R1."""
    layer.steps.append(Simd(layer.out, vecs, [("const", R_CLAMP, key)],
                            [SimdStep(Op.MULTIPLY, 0, R_CLAMP, 0, read=read, write=write)],
                            aux, aux_buf, consts={key: np.asarray(value, dtype=np.int64)}))


def check_qaffine(node, g, arch) -> list[str]:
    """Checker of QAffine: per-channel maps need a 1-D or 2-D signal; one a and b any
    shape."""
    return check_spatial(node, g, arch) if node.attr("a").size > 1 else []


@op("QAffine", check=check_qaffine, domain=DOMAIN)
def qaffine(node, ctx: Lowering):
    """``y = a·x + b`` per channel (a batch norm of its own), or with one a and b for every
    element: ``x`` times ±2^(W+7) per lane, then requantized by |a|·s_x / (s_y · 2^(W+7))
    with bias b·2^(W+7) / (|a|·s_x) − (±zp_x · 2^(W+7)); exact up to the bias's rounding,
    2^−(W+8) of an input LSB. A scalar INT8 map goes through its table instead when the
    lookup tables hold it (onnxruntime's float32 results, ties included)."""
    if steps_fit(ctx.arch, node.attrs.get("table")):
        return qtable(node, ctx)            # exact, onnxruntime's float32 ties included
    dt, n = ctx.arch.dtype, ctx.n
    px, a, b = node.attr("x"), node.attr("a"), node.attr("b")
    k = dt.width + 7
    sign = np.sign(a).astype(np.int64)
    mag = np.where(a != 0, np.abs(a), 1.0)
    sx = float(np.float32(px.scale))
    bias = np.rint(b * 2.0 ** k / (mag * sx)).astype(np.int64) - sign * px.zero_point * 2 ** k
    if np.abs(bias).max(initial=0) + 2 ** (dt.width - 1 + k) > dt.accumulator.max_raw:
        ctx.fail(f"the batch norm's offset is {int(np.abs(bias).max())} input steps · 2^{k}, "
                 f"beyond {dt.accumulator.name}")
    layer, t = _copy(ctx, node)
    if len(a) == 1:
        vecs = ctx.vectors_in(t, layer.out)
        _multiply_steps(ctx, layer, vecs, np.full(n, sign[0] << k), f"{node.outputs[0]}:times")
        ctx.set(node.outputs[0], Tensor(t.idx))
        requantize_lanes(ctx, layer, t, float(mag[0] * sx / 2.0 ** k), int(bias[0]),
                         node.attr("y"), node.attr("clip"), node.outputs[0])
        return
    blocks = block_vectors(t, layer.out.start, n)
    C = len(a)
    for cob in range(blocks.shape[1]):
        lanes = np.arange(cob * n, cob * n + n)
        mult = np.where(lanes < C, sign[np.minimum(lanes, C - 1)] << k, 0)
        _multiply_steps(ctx, layer, np.sort(blocks[:, cob]), mult,
                        f"{node.outputs[0]}:times{cob}")
    ctx.set(node.outputs[0], Tensor(t.idx))
    requantize(ctx, layer, blocks, mag * sx / 2.0 ** k, bias, node.attr("y"),
               node.attr("clip"), node.outputs[0])


@op("QLeakyRelu", domain=DOMAIN)
def qleaky_relu(node, ctx: Lowering):
    """``y = zp_y + round(s_x / s_y · leaky(x − zp_x))``: with d = x − zp_x, the sum
    αA·d + (A − αA)·max(d, 0), A = 2^(W+7), requantized by s_x / (s_y · A)."""
    dt = ctx.arch.dtype
    px, alpha = node.attr("x"), node.attr("alpha")
    k = dt.width + 7
    lo = int(np.rint(alpha * 2.0 ** k))
    out = node.outputs[0]
    layer, t = _copy(ctx, node)
    vecs = ctx.vectors_in(t, layer.out)
    n = ctx.n
    neg = ctx.space.new(f"{out}:slope", len(vecs))
    pair = np.arange(len(vecs))
    kz = f"{out}:minus_zero_point"
    layer.steps.append(Simd(layer.out, vecs, [("const", R_CLAMP, kz)],
                            [SimdStep(Op.ADD, 0, R_CLAMP, 0)],
                            consts={kz: np.full(n, -px.zero_point, dtype=np.int64)}))
    _multiply_steps(ctx, layer, vecs, np.full(n, lo), f"{out}:alpha", write="aux", aux=pair,
                    aux_buf=neg)
    ku = f"{out}:unit"
    layer.steps.append(Simd(layer.out, vecs, [("const", R_CLAMP, ku), ("zero", 2)],
                            [SimdStep(Op.MAX, 0, 2, 0),
                             SimdStep(Op.MULTIPLY, 0, R_CLAMP, 0),
                             SimdStep(Op.MOVE, 0, 0, 0, read="aux", write="self",
                                      accumulate=True)], pair, neg,
                            consts={ku: np.full(n, 2 ** k - lo, dtype=np.int64)}))
    ctx.set(out, Tensor(t.idx))
    requantize_lanes(ctx, layer, t, float(np.float32(px.scale)) / 2.0 ** k, 0,
                     node.attr("y"), node.attr("clip"), out)


@op("QMul", domain=DOMAIN)
def qmul(node, ctx: Lowering):
    """``y = zp_y + round(s_a·s_b·(a − zp_a)(b − zp_b) / s_y)``: both operands' zero points
    taken off in the accumulators (b put next to a, broadcast through the array when it is
    a per-channel gate), one exact product, then Requantize by s_a·s_b / s_y."""
    pa, pb = node.attr("a"), node.attr("b")
    out, n = node.outputs[0], ctx.n
    tb = ctx.tensor(node.inputs[1])
    layer, t = _copy(ctx, node)
    o, aux = operand_beside(ctx, layer, t, tb, out)
    paired = np.argsort(o, kind="stable")
    o = o[paired]
    for key, zp, read in ((f"{out}:minus_zp_a", pa.zero_point, "self"),
                          (f"{out}:minus_zp_b", pb.zero_point, "aux")):
        layer.steps.append(Simd(layer.out, o, [("const", R_CLAMP, key)],
                                [SimdStep(Op.ADD, 0, R_CLAMP, 0, read=read, write=read)],
                                paired, aux, consts={key: np.full(n, -zp, dtype=np.int64)}))
    layer.steps.append(Simd(layer.out, o, [],
                            [SimdStep(Op.MOVE, 0, 0, 2, read="aux", write=None),
                             SimdStep(Op.MULTIPLY, 0, 2, 0)], paired, aux))
    ctx.set(out, Tensor(t.idx))
    requantize_lanes(ctx, layer, t, float(np.float32(pa.scale)) * float(np.float32(pb.scale)),
                     0, node.attr("y"), node.attr("clip"), out)
