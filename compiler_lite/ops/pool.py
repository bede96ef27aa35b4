"""Max pooling: a SIMD ``Max`` chain through register 1 per output vector, reading the window's
vectors in the accumulators. Padding positions are skipped (they never win a max). A ReLU just
before the pool is folded into it: the chain starts from zero (``relu(max) = max(0, …)``), so
the ReLU costs one instruction per pooled vector instead of one per input vector.

A partition of a pool holds in the accumulators the span of input vectors from its windows'
first pixel to their last: for one output row, ``(KH - 1)·dilation + 1`` frame rows times the
vectors per pixel; for one output pixel (the smallest partition), a row less and more. When a
row's span does not fit (partitions of a few pixels would load most of the span again each),
the channels are pooled in groups small enough that it does (else that a pixel's does;
channels never mix in a max), each group from a compact
copy of its channels (a layer of its own, so that the pool's partitions stage the group's
vectors, not the whole input's), and the output is the groups' concatenation (a view).

A pool whose input the open layer computes joins that layer (its windows read the layer's
accumulators) unless that recomputes too much: a partition computes its windows' whole span of
input rows, so neighbouring partitions whose windows overlap (kernel larger than stride)
compute the shared rows twice, and when one output row's span does not fit the accumulators
the partitions are a few pixels, each computing rows of input for them. When the recomputed
work costs more than storing the input and loading it back (:func:`fusing_pays`), the pool
reads a stored copy instead (ResNet's 7×7 stem and 3×3 pool at 224: 28× the stem's MatMuls).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..geometry import (ceil_mode_problems, check_spatial, pixel_grid, spatial,
                        window_attrs, window_taps)
from ..ir import Tensor, groups
from ..kernels import Linear, LinearBuilder, Load, Reduce, Simd
from ..registry import op

if TYPE_CHECKING:
    from ..lower import Lowering


def check_maxpool(node, g, arch) -> list[str]:
    out = check_spatial(node, g, arch) + ceil_mode_problems(node, g)
    if len([o for o in node.outputs if o]) > 1:
        out.append("the Indices output is not supported")
    return out


def _standard_lanes(gr, C: int, n: int) -> bool:
    c = np.arange(C)
    return np.array_equal(gr.lane, c % n) and np.array_equal(gr.off[gr.slot], c // n)


def window_bounds(frame, out_hw, kernel, strides, dil, pads) -> tuple[np.ndarray, np.ndarray]:
    """Per output pixel (images, rows, columns, row-major): the first and the last frame
    pixel of its window (hi −1 and lo the largest int64 when the window is all padding)."""
    px = replace(frame, Cb=1)
    nn, rr, cc = pixel_grid(frame.N, *out_hw)
    lo = hi = None
    for _, _, i0, i1, ok in window_taps(rr, cc, frame.S0, frame.S1, kernel, strides, dil,
                                        pads):
        at = np.where(ok, px.pixel(nn, i0, i1), -1)
        hi = at if hi is None else np.maximum(hi, at)
        at = np.where(ok, at, np.iinfo(np.int64).max)
        lo = at if lo is None else np.minimum(lo, at)
    return lo, hi


def unit_bounds(lo: np.ndarray, hi: np.ndarray, unit: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`window_bounds` over groups of ``unit`` consecutive output pixels (one output
    row, or one pixel): the first and the last frame pixel any of their windows reads."""
    lo, hi = lo.reshape(-1, unit), hi.reshape(-1, unit)
    return np.where(hi >= 0, lo, np.iinfo(np.int64).max).min(axis=1), hi.max(axis=1)


def span_pixels(lo: np.ndarray, hi: np.ndarray, unit: int) -> int:
    """The most frame pixels from the first to the last that ``unit`` consecutive output
    pixels' windows read: what one such unit holds of the input in the accumulators."""
    u_lo, u_hi = unit_bounds(lo, hi, unit)
    real = u_hi >= 0
    return int((u_hi[real] - u_lo[real]).max()) + 1 if real.any() else 1


def group_vectors(lo: np.ndarray, hi: np.ndarray, wo: int, cb: int, depth: int) -> int:
    """Vectors of each pixel (``cb``, or a power of two below it) to pool at once: the most
    whose output row fits ``depth`` accumulators with its windows' span, else the most whose
    output pixel fits (partitions of pixels), else ``cb`` (nothing fits: refused later)."""
    for unit in (wo, 1):
        per = span_pixels(lo, hi, unit) + unit
        g = cb
        while g > 1 and per * g > depth:
            g //= 2
        if per * g <= depth:
            return g
    return cb


def recompute_factor(lo: np.ndarray, hi: np.ndarray, unit: int, cb: int,
                     depth: int) -> float | None:
    """Input pixels computed, over the span of input pixels the pool reads (first to last),
    when a layer computes its input and pools it in partitions of whole units (output rows
    or pixels) of ``unit`` output pixels each: every partition computes its windows' span
    (``lo``, ``hi``: :func:`window_bounds`), and has as many units as fit ``depth`` vectors
    with ``cb`` vectors a pixel. None when one unit does not fit."""
    u_lo, u_hi = unit_bounds(lo, hi, unit)
    best = None
    for per in range(1, len(u_lo) + 1):
        starts = np.arange(0, len(u_lo), per)
        a, b = np.minimum.reduceat(u_lo, starts), np.maximum.reduceat(u_hi, starts)
        spans = np.where(b >= 0, b - a + 1, 0)
        if (spans.max() + per * unit) * cb > depth:
            break
        best = spans
    if best is None:
        return None
    read = u_hi >= 0
    if not read.any():                  # every window in the padding: nothing is read
        return 1.0
    return int(best.sum()) / int(u_hi.max() - u_lo[read].min() + 1)


def staging_room(arch, layer, work: list) -> int:
    """Vectors of ``layer``'s output whose sources fit half the local memory twice (double
    buffered beside the tiles): the partitions of a fused layer stage its sources too."""
    xs = [x for x in (s.sources() for s in work) if len(x)]
    sources = len(np.unique(np.concatenate(xs))) if xs else 0
    per = sources / max(1, layer.out.vectors)           # source vectors per output vector
    return int(arch.local_depth / 4 / per) if per else arch.local_depth


def fusing_pays(ctx: Lowering, x_name: str, out_hw, kernel, strides, dil, pads) -> bool:
    """Whether pooling ``x_name`` inside the open layer that computes it costs less than
    pooling a stored copy: the open layer's MatMul and load terms per vector (``w``) times
    the input computed again over partitions (``f`` − 1, :func:`recompute_factor` by rows,
    else by pixels; partitions as large as the accumulators and :func:`staging_room`
    allow) against a store and ``f`` loads per vector. A pool whose input is not the open
    layer's is not fused anyway (True)."""
    layer = ctx.open
    bufs = ctx.buffers_of(ctx.tensor(x_name))
    if layer is None or len(bufs) != 1 or bufs[0] is not layer.out or bufs[0].frame is None:
        return True
    frame = bufs[0].frame
    work = [s for s in layer.steps if isinstance(s, (LinearBuilder, Linear, Load))]
    w = sum(s.term_count for s in work) / max(1, layer.out.vectors)
    lo, hi = window_bounds(frame, out_hw, kernel, strides, dil, pads)
    depth = min(ctx.arch.accumulator_depth, staging_room(ctx.arch, layer, work))
    f = recompute_factor(lo, hi, out_hw[1], frame.Cb, depth)
    if f is None:
        f = recompute_factor(lo, hi, 1, frame.Cb, depth)
    return f is not None and (f - 1) * w <= 1 + f


def max_pool(ctx: Lowering, node, x_name: str, kernel, strides, dil, pads) -> None:
    """Pool ``x_name`` into ``node``'s output: in one go when one output row's windows fit
    the accumulators (or, when no group of channels makes a row fit, one output pixel's
    window), else in channel groups (see the module docstring)."""
    x = ctx.tensor(x_name)
    N, C = x.shape[:2]
    out = node.outputs[0]
    out_shape = ctx.g.shape(out)
    frame = ctx.frame_for(x.shape)
    out_hw = spatial(out_shape)
    lo, hi = window_bounds(frame, out_hw, kernel, strides, dil, pads)
    cb = group_vectors(lo, hi, out_hw[1], frame.Cb, ctx.arch.accumulator_depth)
    if cb == frame.Cb:                  # fits whole, or not even one block
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
    fuse = fusing_pays(ctx, x_name, spatial(out_shape), kernel, strides, dil, pads)
    got = ctx.extend(x_name, allow_reduce=False) if fuse else None
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
