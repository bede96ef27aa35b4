"""Max pooling: a SIMD ``Max`` chain through register 1 per output vector, reading the window's
vectors in the accumulators. Padding positions are skipped (they never win a max). A ReLU just
before the pool is folded into it: the chain starts from zero (``relu(max) = max(0, …)``), so
the ReLU costs one instruction per pooled vector instead of one per input vector.

The smallest partition of a pool is one output pixel, and it holds in the accumulators the
span of input vectors from its window's first pixel to its last (``KH - 1`` frame rows and
more, times the vectors per pixel). When that span does not fit, the channels are pooled in
groups small enough that it does (channels never mix in a max), each group from a compact
copy of its channels (a layer of its own, so that the pool's partitions stage the group's
vectors, not the whole input's), and the output is the groups' concatenation (a view).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..geometry import check_spatial, pixel_grid, spatial, window_attrs, window_taps
from ..ir import Tensor, groups
from ..kernels import Reduce, Simd
from ..registry import op

if TYPE_CHECKING:
    from ..lower import Lowering


def check_maxpool(node, g, arch) -> list[str]:
    out = check_spatial(node, g, arch)
    if len([o for o in node.outputs if o]) > 1:
        out.append("the Indices output is not supported")
    return out


def _standard_lanes(gr, C: int, n: int) -> bool:
    c = np.arange(C)
    return np.array_equal(gr.lane, c % n) and np.array_equal(gr.off[gr.slot], c // n)


def window_pixels(frame, out_hw, kernel, strides, dil, pads) -> int:
    """The most frame pixels from the first to the last of one output pixel's window: the
    input one output pixel holds in the accumulators is that many pixels' vectors."""
    px = replace(frame, Cb=1)
    nn, rr, cc = pixel_grid(frame.N, *out_hw)
    lo = hi = None
    for _, _, i0, i1, ok in window_taps(rr, cc, frame.S0, frame.S1, kernel, strides, dil,
                                        pads):
        at = np.where(ok, px.pixel(nn, i0, i1), -1)
        hi = at if hi is None else np.maximum(hi, at)
        at = np.where(ok, at, np.iinfo(np.int64).max)
        lo = at if lo is None else np.minimum(lo, at)
    real = hi >= 0
    return int((hi[real] - lo[real]).max()) + 1 if real.any() else 1


def max_pool(ctx: Lowering, node, x_name: str, kernel, strides, dil, pads) -> None:
    """Pool ``x_name`` into ``node``'s output: in one go when one output pixel's window fits
    the accumulators, else in channel groups (see the module docstring)."""
    x = ctx.tensor(x_name)
    N, C = x.shape[:2]
    out = node.outputs[0]
    out_shape = ctx.g.shape(out)
    frame = ctx.frame_for(x.shape)
    per_pixel = window_pixels(frame, spatial(out_shape), kernel, strides, dil, pads) + 1
    depth = ctx.arch.accumulator_depth
    cb = frame.Cb
    while cb > 1 and per_pixel * cb > depth:
        cb //= 2
    if cb == frame.Cb or per_pixel * cb > depth:    # fits whole, or not even one block
        _pool(ctx, x_name, out, out_shape, kernel, strides, dil, pads)
        return
    step = cb * ctx.n
    parts = []
    for c0 in range(0, C, step):
        part, group = f"{out}:c{c0}", f"{out}:in{c0}"
        got = ctx.copy_layer(Tensor(x.idx[:, c0:c0 + step]), group)
        ctx.set(group, got[1], internal=True)
        ctx.close()                 # a layer of its own: the pool then stages it densely
        _pool(ctx, group, part, (N, min(step, C - c0), *out_shape[2:]), kernel, strides, dil,
              pads)
        parts.append(ctx.tensor(part).idx)
    ctx.set(out, Tensor(np.concatenate(parts, axis=1)))


def _pool(ctx: Lowering, x_name: str, out: str, out_shape, kernel, strides, dil, pads) -> None:
    """One max pool of ``x_name`` into a new tensor ``out``."""
    x = ctx.tensor(x_name)
    n = ctx.n
    N, C = x.shape[:2]
    S0, S1 = spatial(x.shape)
    gr = groups(Tensor(x.idx.reshape(N, C, S0, S1)), (0, 2, 3), (1,), n)
    if gr is None or not _standard_lanes(gr, C, n):
        name = f"{x_name}:relayout"
        buf0, t0 = ctx.new_activation(name, x.shape)
        ctx.begin(buf0, ctx.copy_step(x, t0))
        ctx.set(name, t0, internal=True)
        x_name, x = name, t0
    got = ctx.extend(x_name, allow_reduce=False)
    if got is None:             # a copy of the input that only the windows read
        got = ctx.copy_layer(x, f"{out}:window")
        got[0].name = out
    layer, t = got
    src = layer.out
    gr = groups(Tensor(t.idx.reshape(N, C, S0, S1)), (0, 2, 3), (1,), n)
    buf, y = ctx.new_activation(out, out_shape)
    F = buf.frame
    nblk = -(-C // n)
    lists = []                                  # per tap: (out vectors, src vectors)
    nn, rr, cc = pixel_grid(N, *spatial(out_shape))
    for _, _, i0, i1, ok in window_taps(rr, cc, S0, S1, kernel, strides, dil, pads):
        base = gr.base[nn[ok], i0[ok], i1[ok]] - src.start
        opix = F.pixel(nn[ok], rr[ok], cc[ok])
        for cb in range(nblk):
            lists.append((opix + cb, base + cb))
    ov = np.concatenate([a for a, _ in lists])
    sv = np.concatenate([b for _, b in lists])
    order = np.argsort(ov, kind="stable")
    ov, sv = ov[order], sv[order]
    indptr = np.zeros(buf.vectors + 1, dtype=np.int64)
    np.add.at(indptr, ov + 1, 1)
    indptr = np.cumsum(indptr)
    relu = False
    last = layer.steps[-1]
    if isinstance(last, Simd) and last.is_relu and last.buf is src:
        layer.steps.pop()
        relu = True
    layer.steps.append(Reduce(buf, src, indptr, sv, relu))
    layer.out = buf
    ctx.set(out, y)


@op("MaxPool", check=check_maxpool)
def max_pool_op(node, ctx: Lowering):
    x = ctx.tensor(node.inputs[0])
    kernel, strides, dil, pads = window_attrs(node, x.shape)
    max_pool(ctx, node, node.inputs[0], kernel, strides, dil, pads)


@op("GlobalMaxPool", check=check_spatial)
def global_max_pool(node, ctx: Lowering):
    x = ctx.tensor(node.inputs[0])
    S0, S1 = spatial(x.shape)
    max_pool(ctx, node, node.inputs[0], (S0, S1), (1, 1), (1, 1), (0, 0, 0, 0))
