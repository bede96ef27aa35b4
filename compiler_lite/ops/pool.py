"""Max pooling: a SIMD ``Max`` chain through register 1 per output vector, reading the window's
vectors in the accumulators. Padding positions are skipped (they never win a max). A ReLU just
before the pool is folded into it: the chain starts from zero (``relu(max) = max(0, …)``), so
the ReLU costs one instruction per pooled vector instead of one per input vector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..geometry import check_spatial, spatial, window_attrs
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


def max_pool(ctx: Lowering, node, x_name: str, kernel, strides, dil, pads) -> None:
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
    out = node.outputs[0]
    got = ctx.extend(x_name, allow_reduce=False)
    if got is None:             # a copy of the input that only the windows read
        got = ctx.copy_layer(x, f"{out}:window")
        got[0].name = out
    layer, t = got
    src = layer.out
    gr = groups(Tensor(t.idx.reshape(N, C, S0, S1)), (0, 2, 3), (1,), n)
    out_shape = ctx.g.shape(out)
    Ho, Wo = spatial(out_shape)
    buf, y = ctx.new_activation(out, out_shape)
    F = buf.frame
    nblk = -(-C // n)
    KH, KW = kernel
    nn, rr, cc = (a.ravel() for a in np.meshgrid(np.arange(N), np.arange(Ho), np.arange(Wo),
                                                  indexing="ij"))
    lists = []                                  # per tap: (out vectors, src vectors)
    for kh in range(KH):
        for kw in range(KW):
            i0 = rr * strides[0] + kh * dil[0] - pads[0]
            i1 = cc * strides[1] + kw * dil[1] - pads[2]
            ok = (i0 >= 0) & (i0 < S0) & (i1 >= 0) & (i1 < S1)
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
    src.zero = None             # it stays in the accumulators: no reader may count on it
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
