"""Operators with weights: Conv (1-D/2-D, pads, strides, dilations, groups), average pooling
(as a depthwise convolution with the divisor folded into the weights), Gemm and MatMul, and
the per-channel affine maps (BatchNormalization) that fold into them.

A convolution is lowered without im2col: for each kernel tap, input slot (a vector of input
channels) and output block of n channels there is one weight tile, and the tile's MatMuls run
over the output pixels whose input pixel through that tap lies inside the input (a padding
tap costs no cycle: the runs break at the image's edges instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..geometry import (ceil_mode_problems, check_spatial, pixel_grid, spatial,
                        window_attrs, window_taps)
from ..ir import Tensor, groups, next_pow2, packed_layout
from ..kernels import LinearBuilder
from ..registry import consts_of, op
from .attention import check_product, product
from .mean import LaneGroups, finish_mean, group_bits, lane_average

if TYPE_CHECKING:
    from ..lower import Lowering


def check_conv(node, g, arch) -> list[str]:
    out = check_spatial(node, g, arch) + consts_of(node, g)
    if len(node.inputs) > 1 and node.inputs[1] in g.consts:
        w = g.consts[node.inputs[1]]
        shape = g.shapes[node.inputs[0]]
        group = node.attr("group", 1)
        if w.shape[1] * group != shape[1]:
            out.append(f"weights have {w.shape[1]} input channels × group {group}, the input "
                       f"has {shape[1]}")
    return out


def input_slots(ctx: Lowering, x: Tensor):
    """How a convolution reads ``x`` in place: its channel slots (:func:`groups`), or None
    when ``x`` must first be copied (channels not stored alike in every pixel). Padding is
    never read, so any layout of pixels will do."""
    N, C = x.shape[:2]
    S0, S1 = spatial(x.shape)
    return groups(Tensor(x.idx.reshape(N, C, S0, S1)), (0, 2, 3), (1,), ctx.n)


def pack_factor(ctx: Lowering, name: str, shape) -> int:
    """Pixels per vector for convolution output ``name``: k = n / (C rounded up to a power of
    two) when that is at least 2, the image rows are a multiple of k wide, and every reader
    is a convolution (through ReLUs done in place); else 1."""
    n = ctx.n
    if len(shape) != 4 or shape[1] > n // 2:
        return 1
    k = n // next_pow2(shape[1])
    if shape[3] % k:
        return 1
    g = ctx.g
    todo = [name]
    while todo:
        t = todo.pop()
        if t in g.outputs:
            return 1
        users = g.consumers(t)
        if not users:
            return 1
        for u in users:
            if u.op == "Relu" and len(users) == 1:
                todo.append(u.outputs[0])
            elif u.op != "Conv" or u.inputs[0] != t or t in u.inputs[1:]:
                return 1
    return k


def gathered_conv(ctx: Lowering, x: Tensor, out_name: str, out_shape, wfull, bias, strides,
                  dil, pads, macs: int, into, pack: int, pad_vector=None) -> LinearBuilder:
    """:func:`spatial_linear` for a packed input or output (:func:`.ir.packed_layout`): every
    (input channel, kernel tap) is a weighted gather of the input (:meth:`Lowering.gather`),
    so one tile maps each pair of input and output vectors, whatever pixels they hold. The
    bias joins the producer's folded offset (no extra MatMul)."""
    n = ctx.n
    N, C = x.shape[:2]
    S0, S1 = spatial(x.shape)
    KH, KW, Co, _ = wfull.shape
    Ho, Wo = spatial(out_shape)
    if pad_vector is not None:
        ctx.fail("internal: a packed convolution cannot read a padding vector")
    if into is None:
        if pack > 1:
            buf, y = packed_layout(ctx.space, out_name, (N, Co, Ho, Wo), pack, n)
            y = Tensor(y.idx.reshape(out_shape), out_name)
        else:
            buf, y = ctx.new_activation(out_name, out_shape)
    else:
        layer, y = into
        buf = layer.out
    x4 = x.idx.reshape(N, C, S0, S1)
    nn, rr, cc = pixel_grid(N, Ho, Wo)
    dst = Tensor(y.idx.reshape(N, Co, Ho, Wo)[nn, :, rr, cc])           # (pixels, Co)
    sources, inside_taps = [], 0
    for kh, kw, i0, i1, inside in window_taps(rr, cc, S0, S1, (KH, KW), strides, dil, pads):
        inside_taps += int(np.count_nonzero(inside))
        src = x4[nn, :, np.clip(i0, 0, S0 - 1), np.clip(i1, 0, S1 - 1)]  # (pixels, C)
        src = np.where(inside[:, None], src, -1)
        for c in np.flatnonzero(np.any(wfull[kh, kw] != 0, axis=0)):
            sources.append((src[:, c:c + 1], wfull[kh, kw, :, c][None, :]))
    b = ctx.gather(buf, dst, sources, into=LinearBuilder(buf, n) if into is not None else None)
    b.macs = inside_taps * macs
    if into is None:
        layer = ctx.begin(buf, b)
        ctx.set(out_name, y)
    else:
        layer.steps.append(b)
    if bias is not None and np.any(bias != 0):
        # the bias joins the offset of the producer's first term of each vector (no MatMul);
        # a vector the producer has no term for (every tap in padding) gets it by a bias-only
        # MatMul of this step instead
        per = np.broadcast_to(np.asarray(bias, dtype=np.float64)[None, :], dst.shape)
        first = layer.steps[0]
        hit = first.covered()[dst.idx // n - buf.start] if isinstance(first, LinearBuilder) \
            else np.zeros(dst.shape, dtype=bool)
        if not hit.all():
            ctx.gather(buf, dst, [], const=np.where(hit, 0.0, per), into=b)
        if hit.any():
            ctx.fold_into(layer, dst, 1.0, np.where(hit, per, 0.0))
    return b


def block_vectors(y: Tensor, base: int, n: int) -> np.ndarray | None:
    """Per output pixel (N, rows, columns flat, row-major) and block of n channels: the
    vector (from ``base``) holding the block's channels in lanes 0..n-1; None unless ``y``
    [N, C, ...] is stored that way."""
    N, Co = y.shape[:2]
    y3 = y.idx.reshape(N, Co, -1)
    vec, lane = np.divmod(y3, n)
    nblk = -(-Co // n)
    first = vec[:, ::n]                                     # (N, nblk, pixels)
    if not (np.array_equal(lane, np.broadcast_to((np.arange(Co) % n)[None, :, None],
                                                 lane.shape))
            and np.array_equal(vec, np.repeat(first, n, axis=1)[:, :Co])):
        return None
    return first.transpose(0, 2, 1).reshape(-1, nblk) - base


def spatial_linear(ctx: Lowering, x: Tensor, out_name: str, out_shape, wfull: np.ndarray,
                   bias, strides, dil, pads, macs: int, req_name: str | None = None,
                   into: tuple | None = None, pad_vector: int | None = None
                   ) -> LinearBuilder:
    """A layer computing ``out[n, co, i, j] = bias[co] + Σ_{kh,kw,c} wfull[kh,kw,co,c] ·
    x[n, c, i·s + kh·d − pt, j·s + kw·d − pl]`` (zero outside ``x``); returns its builder.

    ``wfull``: (KH, KW, Co, C) dense weights (block-diagonal for groups). ``macs``: the
    model's MACs per (output pixel, kernel tap) that falls inside the input (Co × C/groups),
    counted Tensil's way: padding taps are not MACs. ``into``: (layer, tensor) to add the
    result to in the accumulators instead (an accumulating step of that open layer, the
    tensor stored per :func:`block_vectors`, ``x`` read in place per :func:`input_slots`).
    ``pad_vector``: the first of max(output rows, columns) vectors (virtual index) that
    padding taps read instead of being left out, for an input whose padding value is not
    zero (an integer input's zero point: every lane of every one holds it)."""
    n = ctx.n
    N, C = x.shape[:2]
    S0, S1 = spatial(x.shape)
    KH, KW, Co, _ = wfull.shape
    Ho, Wo = spatial(out_shape)
    pack = pack_factor(ctx, out_name, out_shape) if into is None and req_name is None else 1
    if pack > 1 or any(b.packed > 1 for b in ctx.buffers_of(x)):
        return gathered_conv(ctx, x, out_name, out_shape, wfull, bias, strides, dil, pads,
                             macs, into, pack, pad_vector)
    gr = input_slots(ctx, x)
    if gr is None:                                  # channels not stored alike: relayout
        if into is not None:
            ctx.fail("internal: a convolution added in place must read its input in place")
        buf0, t0 = ctx.new_activation(f"{x.name}:relayout", x.shape)
        ctx.begin(buf0, ctx.copy_step(x, t0), nodes=[ctx.node.name])
        return spatial_linear(ctx, t0, out_name, out_shape, wfull, bias, strides, dil, pads,
                              macs, req_name, pad_vector=pad_vector)
    if into is None:
        buf, y = ctx.new_activation(out_name, out_shape)
        b = LinearBuilder(buf, n)
        ctx.begin(buf, b)
        ctx.set(out_name, y, internal=req_name is not None)
    else:
        layer, y = into
        buf = layer.out
        b = LinearBuilder(buf, n)
        layer.steps.append(b)
    o_blk = block_vectors(y, buf.start, n)

    affine = gr.affine
    if affine is not None:
        origin, (sN, s0s, s1s) = affine
    nn, rr, cc = pixel_grid(N, Ho, Wo)

    nblk = -(-Co // n)
    cb_bias = (KH // 2, KW // 2)
    slot_lanes = [gr.lanes_of(s) for s in range(gr.slots)]

    # every tile [kh, kw, slot, output block]: row 1 + j holds the weights of input lane j;
    # and which of them have any weight
    co_pad = nblk * n
    nz = np.zeros((KH, KW, gr.slots, nblk), dtype=bool)
    # all tiles at once, unless that array would be large (wide depthwise windows)
    eager = KH * KW * gr.slots * nblk * (n + 1) * n <= 1 << 20
    tiles = np.zeros((KH, KW, gr.slots, nblk, n + 1, n)) if eager else None
    for s in range(gr.slots):
        ks, js = slot_lanes[s]
        block = np.zeros((KH, KW, co_pad, len(ks)))
        block[:, :, :Co] = wfull[:, :, :, ks]
        nz[:, :, s] = block.reshape(KH, KW, nblk, -1).any(axis=3)
        if eager:
            tiles[:, :, s][:, :, :, 1 + js, :] = block.reshape(
                KH, KW, nblk, n, len(ks)).transpose(0, 1, 2, 4, 3)

    def tile_of(kh, kw, s, cob):
        if eager:
            return tiles[kh, kw, s, cob].copy()
        ks, js = slot_lanes[s]
        kc = min(n, Co - cob * n)
        t = np.zeros((n + 1, n))
        t[1 + js, :kc] = wfull[kh, kw, cob * n:cob * n + kc][:, ks].T
        return t

    # the tile carrying each block's bias: centre tap, the slot with the most weight
    bias_slot = {}
    has_bias = bias is not None and np.any(bias != 0)
    if has_bias:
        for cob in range(nblk):
            mags = [np.abs(tile_of(*cb_bias, s, cob)).sum() for s in range(gr.slots)]
            bias_slot[cob] = int(np.argmax(mags))
    # per tap and slot: the output blocks with a tile (weights, or the bias)
    has = nz.copy()
    for cob, s in bias_slot.items():
        has[cb_bias[0], cb_bias[1], s, cob] = True
    blocks = [[[np.flatnonzero(has[kh, kw, s]).tolist() for s in range(gr.slots)]
               for kw in range(KW)] for kh in range(KH)]
    for kh, kw, i0, i1, inside in window_taps(rr, cc, S0, S1, (KH, KW), strides, dil, pads):
        b.macs += int(np.count_nonzero(inside)) * macs
        if affine is not None:
            base = origin + nn * sN + i0 * s0s + i1 * s1s
        else:
            base = np.where(inside, gr.base[nn, np.clip(i0, 0, S0 - 1),
                                            np.clip(i1, 0, S1 - 1)], -1)
        by_tile: dict[bytes, list] = {}
        for s in range(gr.slots):
            if not blocks[kh][kw][s]:
                continue
            xv = base + gr.off[s]
            # only taps inside the input: a padding tap would cost a MatMul vector (runs
            # break at the image's edges, which costs instructions, not cycles)
            o_valid, x_valid = o_blk[inside], xv[inside]
            if pad_vector is not None and not inside.all():
                # along a padded row the column picks the vector, down a padded column the
                # row does: both runs roll up into one MatMul each
                row_out = ((i0 < 0) | (i0 >= S0))[~inside]
                pad_x = pad_vector + np.where(row_out, cc[~inside], rr[~inside])
                o_valid = np.concatenate([o_valid, o_blk[~inside]])
                x_valid = np.concatenate([x_valid, pad_x])
            o_lack = None
            for cob in blocks[kh][kw][s]:
                is_bias = has_bias and (kh, kw) == cb_bias and bias_slot[cob] == s
                tile = tile_of(kh, kw, s, cob)
                if is_bias:
                    kc = min(n, Co - cob * n)
                    tile[0, :kc] = bias[cob * n:cob * n + kc]
                    if o_lack is None:
                        o_lack = o_blk[~inside]
                    if len(o_lack):
                        b.add(o_lack[:, cob], np.full(len(o_lack), -1), tile)
                entry = by_tile.setdefault(tile.tobytes(), [tile, [], []])
                entry[1].append(o_valid[:, cob])
                entry[2].append(x_valid)
        for tile, os, xs in by_tile.values():
            b.add(np.concatenate(os), np.concatenate(xs), tile)
    if into is not None:
        return b
    # logical outputs with no term at all (e.g. every tap in padding, no bias) are zero
    covered = b.covered()
    vecs = ctx.vectors_in(y, buf)
    b.clear = vecs[~covered[vecs]]
    return b


def dense_weights(w: np.ndarray, group: int, C: int) -> np.ndarray:
    """A Conv's weights (Co, C/group, [KH,] KW) as the dense (KH, KW, Co, C) array
    :func:`spatial_linear` takes (block-diagonal for groups; 1-D kernels as one row)."""
    Co, Cig = w.shape[:2]
    if w.ndim == 3:
        w = w.reshape(Co, Cig, 1, w.shape[2])
    KH, KW = w.shape[2:]
    wfull = np.zeros((KH, KW, Co, C))
    cog = Co // group
    for gi in range(group):
        wfull[:, :, gi * cog:(gi + 1) * cog, gi * Cig:(gi + 1) * Cig] = \
            w[gi * cog:(gi + 1) * cog].transpose(2, 3, 0, 1)
    return wfull


@op("Conv", check=check_conv)
def conv(node, ctx: Lowering):
    x = ctx.tensor(node.inputs[0])
    w = ctx.const(node.inputs[1])
    bias = ctx.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    kernel, strides, dil, pads = window_attrs(node, x.shape, w.shape[2:])
    Co, Cig = w.shape[:2]
    wfull = dense_weights(w, int(node.attr("group", 1)), x.shape[1])
    out_shape = ctx.g.shape(node.outputs[0])

    def lower(into=None):               # the input as it is named then (it may have moved)
        b = spatial_linear(ctx, ctx.tensor(node.inputs[0]), node.outputs[0], out_shape,
                           wfull, bias, strides, dil, pads, Co * Cig, into=into)
        if node.attr("tcu_true_macs") is not None:      # an unfolded input (unfold.py)
            b.macs = int(node.attr("tcu_true_macs"))
        return b

    def fusable():
        x = ctx.tensor(node.inputs[0])
        return input_slots(ctx, x) is not None or any(b.packed > 1 for b in ctx.buffers_of(x))

    if residual_add(ctx, node) is not None and fusable():
        ctx.defer(node.outputs[0], [node.inputs[0]], lower, fusable)
        return
    lower()


def residual_add(ctx: Lowering, node):
    """The Add that is the only reader of ``node``'s output, when that Add's other operand is
    a computed tensor of the same shape produced after ``node`` (so that it is still in the
    accumulators when the Add comes): the Add may then compute ``node`` into them (a
    projection shortcut of a residual block: no store, no load back; see
    :func:`.elementwise.add_sub`, which falls back to a layer of its own when it cannot).
    None otherwise."""
    g = ctx.g
    out = node.outputs[0]
    users = g.consumers(out)
    if out in g.outputs or len(users) != 1 or users[0].op != "Add":
        return None
    add = users[0]
    ins = [i for i in add.inputs if i]
    if len(ins) != 2 or ins.count(out) != 1:
        return None
    other = ins[1] if ins[0] == out else ins[0]
    maker = g.producer(other)
    if maker is None or g.is_const(other) or \
            not g.shape(other) == g.shape(out) == g.shape(add.outputs[0]):
        return None
    order = {id(m): k for k, m in enumerate(g.nodes)}
    return add if order[id(maker)] > order[id(node)] else None


def check_avgpool(node, g, arch) -> list[str]:
    out = check_spatial(node, g, arch) + ceil_mode_problems(node, g)
    if node.op == "AveragePool" and any(d != 1 for d in node.attr("dilations", []) or []):
        out.append("dilated average pooling is not supported")
    return out


def _pool_counts(size, out, k, s, p0, p1, include_pad):
    """Divisor of each output position along one axis."""
    start = np.arange(out) * s - p0
    end = np.minimum(start + k, size + p1)
    if include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)


def average(ctx: Lowering, node, x: Tensor, out_name: str, kernel, strides, pads,
            include_pad: bool) -> None:
    """Average pooling with an exact sum and an exact division (see :mod:`.mean`).

    The window's taps are cut into groups of ``2^j`` taps (:func:`.mean.group_bits`): each
    group sums exactly (a depthwise convolution of ones over the group's taps), the array
    adds the group sums scaled by ``2^-j`` (one rounding per group, not per tap), and the
    result is divided by ``count / 2^j`` (per output position: borders divide by the window
    part inside the image unless ``include_pad``). With ``j = 0`` (small windows) the sum
    over all taps is exact. A full-range estimate computed the same way from scaled taps
    replaces the result where the exact sums saturated (:func:`.mean.within`)."""
    N, C = x.shape[:2]
    S0, S1 = spatial(x.shape)
    out_shape = ctx.g.shape(out_name)
    Ho, Wo = spatial(out_shape)
    KH, KW = kernel
    pt, pb, pl, pr = pads
    c0 = _pool_counts(S0, Ho, KH, strides[0], pt, pb, include_pad)
    c1 = _pool_counts(S1, Wo, KW, strides[1], pl, pr, include_pad)
    div = (c0[:, None] * c1[None, :]).reshape((1, 1, Ho, Wo) if len(out_shape) == 4
                                              else (1, 1, Wo))
    dt = ctx.arch.dtype
    K = KH * KW
    x4 = x.idx.reshape(N, C, S0, S1)
    whole = Ho * Wo == 1 and (KH, KW) == (S0, S1) and not any(pads)

    def window_sum(name, taps, weight, req):
        """``name`` = Σ over ``taps`` of ``weight``·x: a depthwise convolution, or for one
        window over the whole input, a weighted gather of the taps' vectors."""
        if not whole:
            spatial_linear(ctx, x, name, out_shape, depthwise(KH, KW, C, taps, weight),
                           None, strides, (1, 1), pads, 0, req_name=req)
            return
        buf, y = ctx.new_activation(name, out_shape)
        builder = None
        for tap in taps:                        # one gather per tap: one run each
            a, b = divmod(int(tap), KW)
            builder = ctx.gather(buf, y, [(x4[:, :, a, b].reshape(y.shape), weight)],
                                 into=builder)
        ctx.begin(buf, builder)
        ctx.set(name, y, internal=True)

    if ctx.arch.simd_registers_depth < 1:
        # no register for the division: 1/count folded into the weights (biased by the
        # reciprocal's rounding in fixed point, exact in FLOAT32)
        window_sum(out_name + ":sum", np.arange(K), 1.0, out_name)
        ctx.fold_affine(out_name + ":sum", 1.0 / div, 0.0, out_name)
        if not dt.is_float:
            ctx.notes.append(f"{node.label}: no SIMD register (simd_registers_depth 0): the "
                             f"average divides by weights of 1/count, not exactly")
        return
    j = group_bits(K, dt)
    taps = np.arange(K)
    groups_of_taps = [taps] if j == 0 else \
        [taps[k:k + (1 << j)] for k in range(0, K, 1 << j)]

    def grouped_sum(name, tap_weight, group_weight, req):
        """``name`` = Σ_groups group_weight · round(Σ_taps tap_weight · x)."""
        if len(groups_of_taps) == 1:
            window_sum(name, groups_of_taps[0], tap_weight, req)
            return
        sums = []
        for k, group in enumerate(groups_of_taps):
            window_sum(f"{name}:group{k}", group, tap_weight, f"{name}:group{k}")
            sums.append(ctx.tensor(f"{name}:group{k}"))
        buf, y = ctx.new_activation(name, out_shape)
        ctx.begin(buf, ctx.gather(buf, y, [(t.idx, group_weight) for t in sums]))
        ctx.set(name, y, internal=True)

    finish_mean(ctx, out_name, K, len(groups_of_taps), j, div, grouped_sum)


def depthwise(KH: int, KW: int, C: int, taps, weight: float) -> np.ndarray:
    """(KH, KW, C, C) weights of a depthwise sum over ``taps`` (row-major tap numbers)."""
    wfull = np.zeros((KH, KW, C, C))
    kh, kw = np.divmod(np.asarray(taps), KW)
    for c in range(C):
        wfull[kh, kw, c, c] = weight
    return wfull


@op("AveragePool", check=check_avgpool)
def average_pool(node, ctx: Lowering):
    x = ctx.tensor(node.inputs[0])
    kernel, strides, _, pads = window_attrs(node, x.shape)
    average(ctx, node, x, node.outputs[0], kernel, strides, pads,
            bool(node.attr("count_include_pad", 0)))


@op("GlobalAveragePool", check=check_spatial)
def global_average_pool(node, ctx: Lowering):
    x = ctx.tensor(node.inputs[0])
    S0, S1 = spatial(x.shape)
    average(ctx, node, x, node.outputs[0], (S0, S1), (1, 1), (0, 0, 0, 0), True)


def check_reduce_mean(node, g, arch) -> list[str]:
    shape = g.shapes.get(node.inputs[0])
    axes = _reduce_axes(node, g)
    if shape is None or axes is None:
        return ["axes must be constant"]
    if _mean_view(shape, axes) is None:
        return [f"only a mean that keeps the first axis and one other of a rank-3 or rank-4 "
                f"tensor is supported: the spatial axes of [N,C,H,W] or [N,C,L], the tokens "
                f"(axis 1) or channels (axis 2) of [N,T,C], or axis 1 of [N,C] (got axes "
                f"{list(axes)} of {list(shape)})"]
    return []


def _reduce_axes(node, g):
    if len(node.inputs) > 1 and node.inputs[1]:
        a = g.consts.get(node.inputs[1])
        return None if a is None else [int(v) for v in np.ravel(a)]
    axes = node.attr("axes")
    return list(axes) if axes is not None else list(range(len(g.shapes[node.inputs[0]])))


def _mean_view(shape, axes):
    """The axis order (batch, kept axis, reduced axes) that makes a mean over ``axes`` a
    global average pool of a [N, C, S0(, S1)] view, or None."""
    rank = len(shape)
    red = sorted(set(a % rank for a in axes)) if rank else []
    kept = [a for a in range(rank) if a not in red]
    if rank == 2 and red == [1]:
        return (0, 1)                           # viewed as [N, 1, C]
    if rank not in (3, 4) or len(kept) != 2 or kept[0] != 0 or not red:
        return None
    return (0, kept[1], *red)


@op("ReduceMean", check=check_reduce_mean)
def reduce_mean(node, ctx: Lowering):
    """A mean over the spatial axes (or the tokens, or the channels of [N, T, C]): over the
    lanes when the rows lie along them (:func:`.mean.lane_average`, not for integer types),
    else a global average pool of the view that puts the kept axis second (no data moves).
    A LayerNorm's mean over the features (``features``) of a [N, T, C] tensor stored with
    the tokens in the lanes (a model input's layout) first moves the tensor, for every later
    reader too: the normalization and the projections after it then work in rows."""
    x = ctx.tensor(node.inputs[0])
    perm = _mean_view(x.shape, _reduce_axes(node, ctx.g))
    integer = ctx.arch.dtype.is_integer
    if not integer and node.attr("features") and tuple(perm) == tuple(range(len(x.shape))):
        x = _features_in_lanes(ctx, node.inputs[0], x)
    if len(x.shape) == 2:                       # [N, C] → [N, 1, C]: a mean over lanes
        x, perm = Tensor(x.idx[:, None, :], x.name), (0, 1, 2)
    if not integer and lane_average(ctx, node, x, node.outputs[0], perm):
        return
    view = Tensor(np.transpose(x.idx, perm), x.name)
    S0, S1 = spatial(view.shape)
    out = node.outputs[0]
    tmp = out + ":pooled"
    ctx.g.shapes[tmp] = (view.shape[0], view.shape[1], *([1] * (len(x.shape) - 2)))
    average(ctx, node, view, tmp, (S0, S1), (1, 1), (0, 0, 0, 0), True)
    pooled = np.transpose(ctx.tensor(tmp).idx, np.argsort(perm))   # back to the input's axes
    ctx.set(out, Tensor(pooled.reshape(ctx.g.shape(out))))


def _features_in_lanes(ctx: Lowering, name: str, x: Tensor) -> Tensor:
    """``x`` ([N, C] or [N, T, C], the features last), moved so that each row of features
    lies along the lanes when it does not (every later reader of ``name`` reads the copy)."""
    view = Tensor(x.idx[:, None, :]) if len(x.shape) == 2 else x
    if LaneGroups.of(view, (0, 1, 2), ctx.n) is not None:
        return x
    moved = ctx.relaid(x, tuple(range(len(x.shape))))
    ctx.rebind(name, moved)
    return moved


# ---------------------------------------------------------------------------- Gemm, MatMul

def check_gemm(node, g, arch) -> list[str]:
    a, b = node.inputs[:2]
    if not g.is_const(b) and (node.op == "Gemm" or not g.is_const(a)):
        # B computed: weight tiles from local memory (see .attention); Gemm's C constant
        return consts_of(node, g, first=2) + check_product(node, g, arch)
    out = consts_of(node, g, first=1 if not g.is_const(node.inputs[0]) else 0)
    if node.op == "MatMul" and g.is_const(node.inputs[0]) and g.is_const(node.inputs[1]):
        return []
    if node.op == "MatMul":
        const = g.consts[b] if g.is_const(b) else g.consts[a]
        if const.ndim > 2 and any(d != 1 for d in const.shape[:-2]):
            return [f"a batched constant operand ({list(const.shape)}) is not supported"]
        if g.is_const(a):
            bshape = g.shapes[b]
            if len(bshape) < 2:
                return ["a constant times a vector is not supported"]
        return []
    return out


def matmul_rows(ctx: Lowering, a: Tensor, out_name: str, out_shape, wmat: np.ndarray,
                bias_rows: np.ndarray | None, macs: int) -> None:
    """``out[..., m, :] = a[..., m, :] @ wmat + bias`` where ``bias_rows`` is (1 or M', Nout)
    broadcast over the rows."""
    n = ctx.n
    K, Nout = wmat.shape
    rank = len(a.shape)
    gr = groups(a, tuple(range(rank - 1)), (rank - 1,), n)
    last_inner = tuple(range(rank))
    if gr is None:
        return matmul_rows(ctx, ctx.relaid(a, last_inner), out_name, out_shape, wmat,
                           bias_rows, macs)
    buf, y = ctx.new_activation(out_name, out_shape, order=tuple(range(len(out_shape))))
    b = LinearBuilder(buf, n)
    b.macs = macs
    ctx.begin(buf, b)
    ctx.set(out_name, y)
    rows = gr.base.reshape(-1)
    M = len(rows)
    yv = (y.idx.reshape(M, Nout) // n)[:, ::n] - buf.start      # first vector of each block
    nblk = yv.shape[1]
    uniform = bias_rows is None or bias_rows.shape[0] == 1 or \
        np.all(bias_rows == bias_rows[0])
    for s in range(gr.slots):
        ks, js = gr.lanes_of(s)
        for cob in range(nblk):
            kc = min(n, Nout - cob * n)
            tile = np.zeros((n + 1, n))
            tile[1 + js, :kc] = wmat[ks, cob * n:cob * n + kc]
            if s == 0 and bias_rows is not None and uniform:
                tile[0, :kc] = bias_rows[0, cob * n:cob * n + kc]
            if not tile.any() and s != 0:
                continue
            b.add(yv[:, cob], rows + gr.off[s], tile)
    if bias_rows is not None and not uniform:
        full = np.broadcast_to(bias_rows, (M, Nout))
        for m in range(M):
            for cob in range(nblk):
                kc = min(n, Nout - cob * n)
                tile = np.zeros((n + 1, n))
                tile[0, :kc] = full[m, cob * n:cob * n + kc]
                b.add([yv[m, cob]], [-1], tile)


@op("Gemm", check=check_gemm)
def gemm(node, ctx: Lowering):
    if not ctx.is_const(node.inputs[1]):
        return gemm_computed(node, ctx)
    a = ctx.tensor(node.inputs[0])
    if node.attr("transA", 0):
        a = Tensor(a.idx.T)
    w = ctx.const(node.inputs[1])
    if node.attr("transB", 0):
        w = w.T
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    out_shape = ctx.g.shape(node.outputs[0])
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        c = ctx.const(node.inputs[2]) * beta
        bias = np.broadcast_to(c, (out_shape[0] if c.ndim == 2 and c.shape[0] > 1 else 1,
                                   out_shape[1])).astype(np.float64)
    macs = int(np.prod(out_shape)) * w.shape[0]
    matmul_rows(ctx, a, node.outputs[0], out_shape, w * alpha, bias, macs)


def gemm_computed(node, ctx: Lowering) -> None:
    """Gemm whose B is computed: a product of two tensors (:mod:`.attention`; a constant A
    is read as data), alpha and beta·C folded into its tiles."""
    a_name, b_name = node.inputs[:2]
    a = ctx.const_tensor(a_name) if ctx.is_const(a_name) else ctx.tensor(a_name)
    b = ctx.tensor(b_name)
    if node.attr("transA", 0):
        a = Tensor(a.idx.T, a.name)
    if node.attr("transB", 0):
        b = Tensor(b.idx.T, b.name)
    out = node.outputs[0]
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = ctx.const(node.inputs[2]) * float(node.attr("beta", 1.0))
    product(ctx, node, a, b, out, ctx.g.shape(out), float(node.attr("alpha", 1.0)), bias)


@op("MatMul", check=check_gemm)
def matmul(node, ctx: Lowering):
    a_name, b_name = node.inputs
    out = node.outputs[0]
    out_shape = ctx.g.shape(out)
    if not ctx.is_const(a_name) and not ctx.is_const(b_name):
        product(ctx, node, ctx.tensor(a_name), ctx.tensor(b_name), out, out_shape)
        return
    if ctx.is_const(b_name):
        w = ctx.const(b_name)
        w = w.reshape(w.shape[-2:]) if w.ndim > 2 else w
        a = ctx.tensor(a_name)
        if a.idx.ndim == 1:                         # vector × matrix
            a = Tensor(a.idx.reshape(1, -1))
            tmp = out + ":row"
            ctx.g.shapes[tmp] = (1, w.shape[1])
            matmul_rows(ctx, a, tmp, (1, w.shape[1]), w, None, w.size)
            ctx.set(out, Tensor(ctx.tensor(tmp).idx.reshape(out_shape)))
            return
        macs = int(np.prod(out_shape)) * w.shape[0]
        matmul_rows(ctx, a, out, out_shape, w, None, macs)
        return
    # constant × activation: each output row is a weighted sum of the activation's rows
    a = ctx.const(a_name)
    a = a.reshape(a.shape[-2:]) if a.ndim > 2 else a
    bt = ctx.tensor(b_name)
    M, K = a.shape
    buf, y = ctx.new_activation(out, out_shape)
    lead = bt.idx.shape[:-2]
    sources = []
    for k in range(K):
        src = np.broadcast_to(bt.idx[..., k:k + 1, :], (*lead, M, bt.shape[-1]))
        sources.append((src, a[:, k][:, None]))
    b = ctx.gather(buf, y, sources)
    b.macs = int(np.prod(out_shape)) * K
    ctx.begin(buf, b)
    ctx.set(out, y)


# ------------------------------------------------------------------------- BatchNormalization

def check_bn(node, g, arch) -> list[str]:
    out = consts_of(node, g)
    if node.attr("training_mode", 0):
        out.append("training mode is not supported (inference only)")
    shape = g.shapes.get(node.inputs[0])
    if shape is not None and len(shape) < 2:
        out.append("input needs a channel axis")
    return out


def normalization(node, consts) -> tuple[np.ndarray, np.ndarray]:
    """(s, t) per channel with BatchNormalization ``node`` = s·x + t (its scale, bias, mean
    and variance looked up in ``consts``)."""
    scale, bias, mean, var = (np.asarray(consts[i], dtype=np.float64) for i in node.inputs[1:5])
    s = scale / np.sqrt(var + float(node.attr("epsilon", 1e-5)))
    return s, bias - mean * s


@op("BatchNormalization", check=check_bn)
def batch_norm(node, ctx: Lowering):
    x = ctx.tensor(node.inputs[0])
    s, t = normalization(node, ctx.g.consts)
    shape = [1] * len(x.shape)
    shape[1] = x.shape[1]
    ctx.fold_affine(node.inputs[0], s.reshape(shape), t.reshape(shape), node.outputs[0])
