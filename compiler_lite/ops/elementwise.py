"""Element-wise operators.

* With a constant operand (Add, Sub, Mul, Div, Neg, BatchNormalization elsewhere): a
  per-element affine map folded into the weights of the layer that produced the input, or
  run through the array as a diagonal MatMul.
* ReLU, Clip/Relu6, LeakyRelu, PRelu, Abs: SIMD passes in place in the accumulators (one
  instruction per vector; LeakyRelu/PRelu as ``x + (α-1)·min(x, 0)``, two per vector);
  HardSigmoid as its affine map (folded) then a clip.
* Division by an activation: its reciprocal from a lookup table (:mod:`.lut`), then Mul.
* Add/Sub of two activations: the second operand is added by accumulating moves (or MatMuls
  when its lanes differ); Mul/Max/Min of two activations: SIMD with the operand loaded into
  the accumulators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tcu_hw.isa import SimdOp as Op

from ..ir import Tensor, congruent_pairs, lane_table
from ..kernels import Load, Simd, SimdStep, Zero
from ..registry import consts_of, op
from .linear import block_vectors
from .lut import function_node, lut_pass

if TYPE_CHECKING:
    from ..lower import Lowering


def _const_or_none(ctx: Lowering, name: str):
    return ctx.const(name) if ctx.is_const(name) else None


def _check_binary(node, g, arch) -> list[str]:
    a, b = node.inputs[:2]
    out = g.shapes.get(node.outputs[0])
    if g.is_const(a) and g.is_const(b):
        return []
    if node.op == "Div" and not g.is_const(b):
        if arch.lut_count < 1 or arch.lut_depth < 2 or arch.simd_registers_depth < 2:
            return ["division by a computed tensor needs lookup tables (a reciprocal table): "
                    "the architecture must have lut_count ≥ 1, lut_depth ≥ 2 and "
                    "simd_registers_depth ≥ 2"]
        if g.is_const(a):
            return []
    if node.op in ("Mul", "Div", "Max", "Min") and not g.is_const(a) and not g.is_const(b):
        if arch.simd_registers_depth < 1:
            return [f"{node.op} of two computed tensors needs a SIMD register "
                    f"(simd_registers_depth ≥ 1; it is 0)"]
        if out not in (g.shapes.get(a), g.shapes.get(b)):
            return [f"{node.op} of two computed tensors needs one operand of the output's "
                    f"shape {list(out)} (the other may broadcast to it; got "
                    f"{list(g.shapes.get(a))} and {list(g.shapes.get(b))})"]
    return []


def affine(ctx: Lowering, node, x: str, scale, offset) -> None:
    ctx.fold_affine(x, scale, offset, node.outputs[0])


@op("Add", "Sub", "Mul", "Div", check=_check_binary)
def binary(node, ctx: Lowering):
    a, b = node.inputs[:2]
    out = node.outputs[0]
    shape = ctx.g.shape(out)
    ca, cb = _const_or_none(ctx, a), _const_or_none(ctx, b)
    if ca is not None or cb is not None:
        x, c = (b, ca) if ca is not None else (a, cb)
        if ctx.tensor(x).shape != shape:
            x = expand(ctx, node, x, shape)
        if node.op == "Add":
            return affine(ctx, node, x, 1.0, c)
        if node.op == "Sub":
            return affine(ctx, node, x, -1.0, c) if ca is not None else \
                affine(ctx, node, x, 1.0, -c)
        if node.op == "Mul":
            return affine(ctx, node, x, c, 0.0)
        if ca is not None:                      # constant / activation
            return divide(ctx, node, a, b)
        return affine(ctx, node, x, 1.0 / c, 0.0)
    if node.op in ("Add", "Sub"):
        return add_sub(ctx, node, a, b, -1.0 if node.op == "Sub" else 1.0)
    if node.op == "Mul":
        return pairwise(ctx, node, a, b, Op.MULTIPLY)
    return divide(ctx, node, a, b)


def divide(ctx: Lowering, node, a: str, b: str) -> None:
    """a / b = a · reciprocal(b), the reciprocal from a lookup table."""
    recip = f"{b}:reciprocal:{node.name}"
    layer, t = ctx.in_acc(b) if ctx.extend(b) is not None else \
        ctx.copy_layer(ctx.tensor(b), recip)
    lut_pass(ctx, layer, t, function_node(node, "Reciprocal"))
    ctx.set(recip, Tensor(t.idx), internal=True)
    if ctx.is_const(a):
        ca = ctx.const(a)
        shape = ctx.g.shape(node.outputs[0])
        _scale_in_place(ctx, node, recip, np.broadcast_to(ca, shape))
        return
    pairwise(ctx, node, a, recip, Op.MULTIPLY)


def _scale_in_place(ctx: Lowering, node, name: str, c) -> None:
    """Multiply ``name`` by a constant in place with SIMD (after a nonlinearity)."""
    layer, t = ctx.in_acc(name)
    vecs, group, pats = _lane_consts(ctx, t, layer.out, c)
    for k, vec in pats.items():
        key = f"scale:{node.name}:{k}"
        layer.steps.append(Simd(layer.out, vecs[group == k], [("const", 1, key)],
                                [SimdStep(Op.MULTIPLY, 0, 1, 0)], consts={key: vec}))
    ctx.set(node.outputs[0], Tensor(t.idx))


def expand(ctx: Lowering, node, x: str, shape) -> str:
    """A full-shape copy of a broadcast operand (through the array); returns its name."""
    t = ctx.tensor(x)
    name = f"{x}:expanded:{node.name}"
    buf, nt = ctx.new_activation(name, shape)
    ctx.begin(buf, ctx.copy_step(Tensor(np.broadcast_to(t.idx, shape).copy()), nt))
    ctx.set(name, nt, internal=True)
    return name


def _congruent(ctx: Lowering, a: Tensor, b: Tensor):
    return congruent_pairs(a, b, ctx.n)


def add_sub(ctx: Lowering, node, a: str, b: str, sign: float) -> None:
    """a + sign·b for two activations: ``a`` in the accumulators (in place when it is the
    open layer's result), ``b`` added by accumulating local → accumulator moves, or MatMuls
    when its lanes differ or it is subtracted."""
    out = node.outputs[0]
    shape = ctx.g.shape(out)
    if sign > 0 and _add_deferred(ctx, node, a, b):
        return
    if ctx.tensor(a).shape != shape and ctx.tensor(b).shape == shape and sign > 0:
        a, b = b, a
    if ctx.tensor(a).shape != shape:
        a = expand(ctx, node, a, shape)
    if sign > 0 and ctx.tensor(b).shape == shape and ctx.extend(a) is None and \
            ctx.extend(b) is not None:
        a, b = b, a
    tb = ctx.tensor(b)
    layer, t = ctx.in_acc(a)
    pairs = _congruent(ctx, t, tb)
    if pairs is not None and sign > 0:
        layer.steps.append(Load(layer.out, pairs[0] - layer.out.start, pairs[1], add=True))
    else:
        step = ctx.gather(layer.out, t, [(np.broadcast_to(tb.idx, shape), sign)])
        layer.steps.append(step)
    if any(x.dirty for x in ctx.buffers_of(tb)):
        layer.out.dirty = True
    ctx.set(out, Tensor(t.idx))


def _add_deferred(ctx: Lowering, node, a: str, b: str) -> bool:
    """a + b where one operand's convolution was deferred to this Add
    (:func:`.linear.residual_add`): the other in the accumulators, the convolution's MatMuls
    accumulate onto it. False (nothing done) when neither or both were deferred, when the
    other is not stored a vector per pixel and channel block, or when the convolution
    cannot read its input in place in that layer (:meth:`Lowering.fusable`)."""
    pending = [v for v in (a, b) if v in ctx.deferred]
    if len(pending) != 1:
        return False
    d = pending[0]
    other = b if d == a else a
    if block_vectors(ctx.tensor(other), 0, ctx.n) is None or not ctx.fusable(d):
        return False
    layer, t = ctx.in_acc(other)
    if block_vectors(t, layer.out.start, ctx.n) is None:
        ctx.fail("internal: the accumulators' copy of an operand is not a vector per pixel")
    conv_node, lower = ctx.take_deferred(d)
    layer.nodes.append(conv_node.name)
    lower(into=(layer, t))
    ctx.set(node.outputs[0], Tensor(t.idx))
    return True


def pairwise(ctx: Lowering, node, a: str, b: str, simd_op: int) -> None:
    """out = op(a, b) per element with SIMD (a commutative op): b is put next to a in the
    accumulators, by vector moves when it is stored like a, else through the array (an
    operand that broadcasts, such as a per-channel [N, C, 1, 1] gate or per-token [N, T, 1]
    statistics, or one stored in other lanes)."""
    out = node.outputs[0]
    shape = ctx.g.shape(out)
    if ctx.tensor(a).shape != shape or (ctx.extend(b) is not None and ctx.extend(a) is None
                                        and ctx.tensor(b).shape == shape):
        a, b = b, a
    tb = ctx.tensor(b)
    layer, t = ctx.in_acc(a)
    o, aux = operand_beside(ctx, layer, t, tb, out)
    body = [SimdStep(Op.MOVE, 0, 0, 1, read="aux", write=None),
            SimdStep(simd_op, 0, 1, 0, read="self", write="self")]
    layer.steps.append(Simd(layer.out, o, [], body, np.arange(len(o)), aux))
    if any(x.dirty for x in ctx.buffers_of(tb)):
        layer.out.dirty = True
    ctx.set(out, Tensor(t.idx))


def operand_beside(ctx: Lowering, layer, t: Tensor, tb: Tensor, name: str):
    """``tb``'s elements next to ``t``'s (in ``layer``'s accumulators) in a new accumulator
    buffer: by vector moves when ``tb`` is stored like ``t``, else through the array (an
    operand that broadcasts, or one in other lanes). Returns (``t``'s vectors in
    ``layer.out``, the buffer; its vector k pairs with the k-th)."""
    pairs = _congruent(ctx, t, tb)
    if pairs is not None:
        aux = ctx.space.new(f"{name}:operand", pairs.shape[1])
        layer.steps.append(Load(aux, np.arange(pairs.shape[1]), pairs[1]))
        return pairs[0] - layer.out.start, aux
    return operand_like(ctx, layer, t, np.broadcast_to(tb.idx, t.shape), name)


def operand_like(ctx: Lowering, layer, t: Tensor, src_idx: np.ndarray, name: str):
    """Gather the elements ``src_idx`` (one per element of ``t``) into a new accumulator
    buffer laid out like ``t``'s vectors in ``layer``, through the array (one MatMul per
    pair of vectors, the tiles mapping lanes): returns (``t``'s vectors in ``layer.out``,
    the buffer; its vector k pairs with the k-th)."""
    aux, dst = ctx.like(f"{name}:operand", t)
    vecs = np.unique(t.idx // ctx.n)
    builder = ctx.gather(aux, dst, [(src_idx, 1.0)])
    layer.steps.append(builder.build())
    if builder.clear is not None and len(builder.clear):
        layer.steps.append(Zero(aux, np.asarray(builder.clear, dtype=np.int64)))
    return vecs - layer.out.start, aux


def _check_max_min(node, g, arch) -> list[str]:
    ins = [i for i in node.inputs if i]
    if len(ins) != 2:
        return [f"{len(ins)} operands: only two are supported"]
    for x in ins:
        if g.is_const(x) and np.asarray(g.consts[x]).size != 1:
            return ["a constant operand must be a scalar"]
    return _check_binary(node, g, arch)


@op("Max", "Min", check=_check_max_min)
def max_min(node, ctx: Lowering):
    a, b = [i for i in node.inputs if i]
    simd_op = Op.MAX if node.op == "Max" else Op.MIN
    if ctx.is_const(a) or ctx.is_const(b):
        x, c = (b, ctx.const(a)) if ctx.is_const(a) else (a, ctx.const(b))
        c = np.asarray(c)
        return clip(ctx, node, x, float(c) if node.op == "Max" else None,
                    float(c) if node.op == "Min" else None)
    pairwise(ctx, node, a, b, simd_op)


@op("Neg")
def neg(node, ctx: Lowering):
    affine(ctx, node, node.inputs[0], -1.0, 0.0)


@op("Identity", "Dropout")
def identity(node, ctx: Lowering):
    ctx.set(node.outputs[0], Tensor(ctx.tensor(node.inputs[0]).idx))


# ------------------------------------------------------------------------------ activations

def _lane_consts(ctx: Lowering, t: Tensor, buf, values) -> tuple[np.ndarray, dict]:
    """Group the vectors of ``t`` by the per-lane constant vector ``values`` (broadcast to
    the shape) gives them: (vectors in ``buf``, group id per vector, {group id: vector})."""
    vecs, table = lane_table(t, ctx.n, values)
    pats, of = np.unique(table, axis=0, return_inverse=True)
    return vecs - buf.start, of.ravel(), {k: pats[k] for k in range(len(pats))}


def clip(ctx: Lowering, node, x: str, lo, hi) -> None:
    """max(x, lo) then min(·, hi), each one SIMD instruction per vector."""
    layer, t = ctx.in_acc(x)
    buf = layer.out
    vecs = ctx.vectors_in(t, buf)
    n = ctx.n
    for bound, simd_op in ((lo, Op.MAX), (hi, Op.MIN)):
        if bound is None:
            continue
        if bound == 0:
            layer.steps.append(Simd(buf, vecs, [("zero", 1)], [SimdStep(simd_op, 0, 1, 0)]))
        else:
            key = f"{simd_op}:{bound}"
            layer.steps.append(Simd(buf, vecs, [("const", 1, key)], [SimdStep(simd_op, 0, 1, 0)],
                                    consts={key: np.full(n, float(bound))}))
            if (simd_op == Op.MAX and bound > 0) or (simd_op == Op.MIN and bound < 0):
                buf.dirty = True
    ctx.set(node.outputs[0], Tensor(t.idx))


@op("Relu")
def relu(node, ctx: Lowering):
    layer, t = ctx.in_acc(node.inputs[0])
    ctx.relu_pass(layer, t)
    ctx.set(node.outputs[0], Tensor(t.idx))


def _check_clip(node, g, arch) -> list[str]:
    return consts_of(node, g)


@op("Clip", check=_check_clip)
def clip_op(node, ctx: Lowering):
    lo = node.attr("min")
    hi = node.attr("max")
    if len(node.inputs) > 1 and node.inputs[1]:
        lo = float(ctx.const(node.inputs[1]))
    if len(node.inputs) > 2 and node.inputs[2]:
        hi = float(ctx.const(node.inputs[2]))
    clip(ctx, node, node.inputs[0], lo, hi)


@op("HardSigmoid")
def hard_sigmoid(node, ctx: Lowering):
    """max(0, min(1, αx + β)): an affine map folded into weights, then a clip."""
    alpha, beta = float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))
    tmp = f"{node.outputs[0]}:affine"
    ctx.fold_affine(node.inputs[0], alpha, beta, tmp)
    ctx.internal.add(tmp)
    clip(ctx, node, tmp, 0.0, 1.0)


def leaky(ctx: Lowering, node, x: str, slope) -> None:
    """``x + (α−1)·min(x, 0)`` (exact for any α): min into a temporary, then multiply and
    accumulate back; α may differ per lane (PRelu)."""
    layer, t = ctx.in_acc(x)
    buf = layer.out
    vecs, group, pats = _lane_consts(ctx, t, buf, np.asarray(slope, dtype=np.float64) - 1.0)
    tmp = ctx.space.new(f"{node.outputs[0]}:min", len(vecs))
    aux = np.arange(len(vecs))
    layer.steps.append(Simd(buf, vecs, [("zero", 1)],
                            [SimdStep(Op.MIN, 0, 1, 0, read="self", write="aux")], aux, tmp))
    for k, vec in pats.items():
        sel = group == k
        key = f"slope:{node.name}:{k}"
        layer.steps.append(Simd(buf, vecs[sel], [("const", 1, key)],
                                [SimdStep(Op.MULTIPLY, 0, 1, 0, read="aux", write="self",
                                          accumulate=True)], aux[sel], tmp, {key: vec}))
    ctx.set(node.outputs[0], Tensor(t.idx))


@op("LeakyRelu")
def leaky_relu(node, ctx: Lowering):
    leaky(ctx, node, node.inputs[0], float(node.attr("alpha", 0.01)))


def _check_prelu(node, g, arch) -> list[str]:
    if not g.is_const(node.inputs[1]):
        return ["the slope must be a constant"]
    slope, shape = np.asarray(g.consts[node.inputs[1]]), g.shapes[node.inputs[0]]
    try:
        np.broadcast_shapes(slope.shape, shape)
    except ValueError:
        if not (slope.ndim == 1 and len(shape) > 1 and slope.size == shape[1]):
            return [f"slope shape {list(slope.shape)} does not broadcast to {list(shape)}"]
    return []


@op("PRelu", check=_check_prelu)
def prelu(node, ctx: Lowering):
    x = ctx.tensor(node.inputs[0])
    slope = ctx.const(node.inputs[1])
    try:
        slope = np.broadcast_to(slope, x.shape)
    except ValueError:                          # opset < 7: one slope per channel
        slope = np.broadcast_to(slope.reshape((1, -1) + (1,) * (len(x.shape) - 2)), x.shape)
    leaky(ctx, node, node.inputs[0], slope)


@op("Abs")
def absolute(node, ctx: Lowering):
    layer, t = ctx.in_acc(node.inputs[0])
    layer.steps.append(Simd(layer.out, ctx.vectors_in(t, layer.out), [],
                            [SimdStep(Op.ABS, 0, 0, 0)]))
    ctx.set(node.outputs[0], Tensor(t.idx))


# ------------------------------------------------------------------------------------- Pow

#: exponents computed by SIMD multiplies (no lookup table needed)
POW_BY_MULTIPLY = (1, 2, 3, 4)


def _exponent(node, g):
    e = node.inputs[1]
    if not g.is_const(e) or np.asarray(g.consts[e]).size != 1:
        return None
    return float(np.asarray(g.consts[e]).reshape(()))


def _check_pow(node, g, arch) -> list[str]:
    if g.is_const(node.inputs[0]):
        return ["the base must be computed (a constant base with a computed exponent is not "
                "supported)"]
    p = _exponent(node, g)
    if p is None:
        return ["the exponent must be a scalar constant"]
    if p in POW_BY_MULTIPLY:
        if p > 2 and arch.simd_registers_depth < 1:
            return [f"exponent {p:g} needs a SIMD register (simd_registers_depth ≥ 1; it is "
                    f"0); exponents 1 and 2 do not"]
        return []
    if arch.lut_count < 1 or arch.lut_depth < 2 or arch.simd_registers_depth < 2:
        return [f"exponent {p:g} needs a lookup table (exponents {list(POW_BY_MULTIPLY)} do "
                f"not): the architecture must have lut_count ≥ 1, lut_depth ≥ 2 and "
                f"simd_registers_depth ≥ 2"]
    if p <= 0 and p == int(p) and p != -1:
        return [f"exponent {p:g} is not supported (allowed: {list(POW_BY_MULTIPLY)}, -1, "
                f"and non-integers such as 0.5 or -0.5 for positive bases)"]
    return []


@op("Pow", check=_check_pow)
def power(node, ctx: Lowering):
    """``x^p``: p = 1..4 by SIMD multiplies of the vector by itself (x² in one instruction,
    x³ and x⁴ in two); p = -1 as Reciprocal, p = 0.5 as Sqrt, other p (e.g. -0.5) through a
    lookup table of x^p on positive x (negative bases give 0)."""
    p = _exponent(node, ctx.g)
    layer, t = ctx.in_acc(node.inputs[0])
    if p == 1:
        pass
    elif p in POW_BY_MULTIPLY:
        square = SimdStep(Op.MULTIPLY, 0, 0, 1 if p > 2 else 0, read="self",
                          write=None if p > 2 else "self")
        body = [square]
        if p == 3:
            body.append(SimdStep(Op.MULTIPLY, 0, 1, 0, read="self", write="self"))
        elif p == 4:
            body.append(SimdStep(Op.MULTIPLY, 1, 1, 0, read=None, write="self"))
        layer.steps.append(Simd(layer.out, ctx.vectors_in(t, layer.out), [], body))
    elif p == -1:
        lut_pass(ctx, layer, t, function_node(node, "Reciprocal"))
    elif p == 0.5:
        lut_pass(ctx, layer, t, function_node(node, "Sqrt"))
    else:
        def fn(x, p=p):
            with np.errstate(all="ignore"):
                return np.where(x > 0, np.power(np.maximum(x, 1e-30), p), 0.0)
        lut_pass(ctx, layer, t, function_node(node, "Pow"), fn, "positive", None, None)
    ctx.set(node.outputs[0], Tensor(t.idx))


# -------------------------------------------------------------------- LayerNormalization

def _check_layer_norm(node, g, arch) -> list[str]:
    """Only reached for the forms the front end does not decompose."""
    shape = g.shapes.get(node.inputs[0])
    rank = len(shape) if shape is not None else 0
    axis = node.attr("axis", -1)
    return [f"normalization over axis {axis} on of a rank-{rank} tensor "
            f"{list(shape or [])} is not supported: only the last axis of [N, C] or "
            f"[N, T, C], or the spatial axes of [N, C, H, W] (axis 2)"]


@op("LayerNormalization", check=_check_layer_norm)
def layer_norm(node, ctx: Lowering):
    ctx.fail(_check_layer_norm(node, ctx.g, ctx.arch)[0])
