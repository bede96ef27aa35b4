"""Softmax and LogSoftmax (need lookup tables for exp, and 1/x or log).

``softmax(x) = exp(x − m) / Σ exp(x − m)`` with ``m`` the row maximum, so nothing overflows.
How a row is reduced depends on where its elements sit:

* across vectors, one lane (e.g. over W of an NHWC tensor): element-wise SIMD chains (Max,
  then Add) give every lane its own row's maximum and sum; one layer.
* across lanes (e.g. over the channels): the array broadcasts each element to all lanes
  (one MatMul per element, with a tile that copies lane l to every lane), a SIMD Max chain
  over those vectors gives the maximum in every lane; after ``exp`` the sum across lanes is
  one MatMul per vector with a tile of ones. The sum needs the exponentials in local
  memory, so this takes two layers (three for LogSoftmax).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tcu_hw.isa import SimdOp as Op

from ..ir import Space, Tensor, flat_layout, frame_layout, io_order
from ..kernels import LinearBuilder, Load, Reduce, Simd, SimdStep
from ..registry import op
from .lut import check_lut, function_node, lut_pass

if TYPE_CHECKING:
    from ..lower import Lowering


def _table(node, op_name, K: int) -> dict:
    """The function and range of each table a softmax uses: exp of x − max ≤ 0; 1/s and
    log s of a sum s in [1, K]."""
    fns = {"Exp": (np.exp, -16.0, 0.0),
           "Reciprocal": (lambda v: 1.0 / np.maximum(v, 1e-6), 0.5, K + 0.5),
           "Log": (lambda v: np.log(np.maximum(v, 1e-6)), 0.5, K + 0.5)}
    fn, lo, hi = fns[op_name]
    return {"node": function_node(node, op_name), "fn": fn, "grid": "linear", "lo": lo, "hi": hi}


def row_lanes(ctx: Lowering, t: Tensor, axis: int):
    """(vector, lane) of every element as (rows, K) arrays, the reduced axis last."""
    idx = np.moveaxis(t.idx, axis, -1)
    K = idx.shape[-1]
    return np.divmod(idx.reshape(-1, K), ctx.n)


def _csr(groups_of_vectors: list[np.ndarray], src_start: int):
    indptr = np.cumsum([0] + [len(g) for g in groups_of_vectors])
    indices = np.concatenate(groups_of_vectors) - src_start if groups_of_vectors else \
        np.zeros(0, dtype=np.int64)
    return indptr.astype(np.int64), indices.astype(np.int64)


def _pair(buf, o_vecs, aux_of) -> tuple[np.ndarray, np.ndarray]:
    o = np.asarray(o_vecs, dtype=np.int64)
    order = np.argsort(o)
    return o[order], np.asarray(aux_of, dtype=np.int64)[order]


def _bcast_simd(buf, o, aux, aux_buf, simd_op) -> Simd:
    """``x[o] = op(x[o], aux[o])`` with the aux vector moved into register 1 first."""
    o, aux = _pair(buf, o, aux)
    body = [SimdStep(Op.MOVE, 0, 0, 1, read="aux", write=None),
            SimdStep(simd_op, 0, 1, 0, read="self", write="self")]
    return Simd(buf, o, [], body, aux, aux_buf)


def _across_vectors(ctx: Lowering, node, x: str, vec, axis: int, log: bool) -> None:
    """Every row is one lane of a set of vectors (several rows share those vectors)."""
    out = node.outputs[0]
    K = vec.shape[1]
    layer, t = ctx.copy_layer(ctx.tensor(x), out)
    X = layer.out
    # redo the analysis on the copy: vectors of each row group, relative to X
    v2, _ = row_lanes(ctx, t, axis)
    seqs, inv = np.unique(v2 - X.start, axis=0, return_inverse=True)
    inv = inv.ravel()
    G = len(seqs)
    groups = [np.asarray(s) for s in seqs]
    M = ctx.space.new(f"{out}:max", G)
    S = ctx.space.new(f"{out}:sum", G)
    indptr, indices = _csr(groups, 0)
    layer.steps.append(Reduce(M, X, indptr, indices, op=Op.MAX))
    member = np.concatenate(groups)
    group_of = np.repeat(np.arange(G), [len(g) for g in groups])
    layer.steps.append(_bcast_simd(X, member, group_of, M, Op.SUBTRACT))
    if log:
        E = ctx.space.new(f"{out}:exp", X.vectors)
        o, a = _pair(X, member, member)
        layer.steps.append(Simd(X, o, [], [SimdStep(Op.MOVE, 0, 0, 0, read="self",
                                                  write="aux")], a, E))
        lut_pass(ctx, layer, None, **_table(node, "Exp", K), buf=E,
                 vecs=np.unique(member))
        layer.steps.append(Reduce(S, E, indptr, indices, op=Op.ADD))
        lut_pass(ctx, layer, None, **_table(node, "Log", K), buf=S,
                 vecs=np.arange(G))
        layer.steps.append(_bcast_simd(X, member, group_of, S, Op.SUBTRACT))
    else:
        lut_pass(ctx, layer, None, **_table(node, "Exp", K), buf=X,
                 vecs=np.unique(member))
        layer.steps.append(Reduce(S, X, indptr, indices, op=Op.ADD))
        lut_pass(ctx, layer, None, **_table(node, "Reciprocal", K), buf=S,
                 vecs=np.arange(G))
        layer.steps.append(_bcast_simd(X, member, group_of, S, Op.MULTIPLY))
    X.dirty = True
    ctx.set(out, Tensor(t.idx))


def _default_idx(ctx: Lowering, shape) -> np.ndarray:
    """The index map :meth:`~compiler_lite.lower.Lowering.new_activation` would give a
    tensor of ``shape`` (in a scratch space: nothing is allocated)."""
    probe = Space(ctx.n)
    frame = ctx.frame_for(shape)
    if frame is None:
        return flat_layout(probe, "probe", shape, io_order(len(shape)), ctx.n)[1].idx
    shape4 = tuple(shape) if len(shape) == 4 else (shape[0], shape[1], 1, shape[2])
    return frame_layout(probe, "probe", shape4, frame, ctx.n)[1].idx.reshape(shape)


def alike_buffer(ctx: Lowering, name: str, t: Tensor):
    """A new buffer for a tensor of ``t``'s shape that whole-vector moves fill from ``t``:
    the default layout when each of its vectors takes its elements from one vector of ``t``
    in the same lanes, else ``t``'s own vectors (in order) and lanes."""
    n = ctx.n
    d, s = _default_idx(ctx, t.shape).reshape(-1), t.idx.reshape(-1)
    pairs = np.unique(np.stack([d // n, s // n]), axis=1)
    if np.array_equal(d % n, s % n) and len(np.unique(pairs[0])) == pairs.shape[1]:
        return ctx.new_activation(name, t.shape)
    vecs, inv = np.unique(t.idx // n, return_inverse=True)
    buf = ctx.space.new(name, len(vecs), elements=t.idx.size)
    idx = (buf.start + inv.reshape(t.shape)) * n + t.idx % n
    buf.set_extent(idx, n)
    return buf, Tensor(idx.astype(np.int64), name)


def lane_tile(n, lanes_in, broadcast_lane=None) -> np.ndarray:
    tile = np.zeros((n + 1, n))
    if broadcast_lane is not None:
        tile[1 + broadcast_lane, :] = 1.0
    else:
        tile[1 + np.asarray(lanes_in), :] = 1.0
    return tile


def _across_lanes(ctx: Lowering, node, x: str, vec, lane, axis: int, log: bool) -> None:
    """Each vector holds elements of one row only; rows may span several vectors."""
    n = ctx.n
    out = node.outputs[0]
    t = ctx.tensor(x)
    R, K = vec.shape
    # layer 1: m by broadcasting every element to all lanes, max chain; d = x - m
    d_name = f"{out}:shifted"
    buf_d, td = alike_buffer(ctx, d_name, t)
    B = ctx.space.new(f"{out}:bcast", R * K)
    M = ctx.space.new(f"{out}:max", R)
    b = LinearBuilder(B, n)
    for l in range(n):
        sel = lane == l
        if sel.any():
            rr, kk = np.nonzero(sel)
            b.add(rr * K + kk, vec[rr, kk], lane_tile(n, None, l))
    layer = ctx.begin(B, b)
    layer.out = buf_d
    indptr = np.arange(R + 1, dtype=np.int64) * K
    layer.steps.append(Reduce(M, B, indptr, np.arange(R * K, dtype=np.int64), op=Op.MAX))
    pairs = np.unique(np.stack([td.idx.reshape(-1) // n, t.idx.reshape(-1) // n]), axis=1)
    layer.steps.append(Load(buf_d, pairs[0] - buf_d.start, pairs[1]))
    dv, _ = row_lanes(ctx, td, axis)
    member = np.concatenate([np.unique(dv[r]) for r in range(R)]) - buf_d.start
    row_of = np.concatenate([np.full(len(np.unique(dv[r])), r) for r in range(R)])
    layer.steps.append(_bcast_simd(buf_d, member, row_of, M, Op.SUBTRACT))
    if not log:
        lut_pass(ctx, layer, None, **_table(node, "Exp", K), buf=buf_d,
                 vecs=np.unique(member))
    buf_d.dirty = True
    ctx.set(d_name, td, internal=True)
    src = td
    if log:                                   # layer 2: e = exp(d) next to d
        e_name = f"{out}:exp"
        layer, te = ctx.copy_layer(td, e_name)
        lut_pass(ctx, layer, te, **_table(node, "Exp", K))
        ctx.set(e_name, te, internal=True)
        src = te
    # last layer: s = Σ lanes (ones tiles), 1/s or log s, then combine with e (or d)
    ev, el = row_lanes(ctx, src, axis)
    S = ctx.space.new(f"{out}:sum", R)
    b = LinearBuilder(S, n)
    for r in range(R):
        for v in np.unique(ev[r]):
            b.add([r], [v], lane_tile(n, el[r][ev[r] == v]))
    layer = ctx.begin(S, b)
    lut_pass(ctx, layer, None, **_table(node, "Log" if log else "Reciprocal", K), buf=S,
             vecs=np.arange(R))
    base = td if log else src
    buf_y, ty = alike_buffer(ctx, out, base)
    pairs = np.unique(np.stack([ty.idx.reshape(-1) // n, base.idx.reshape(-1) // n]), axis=1)
    layer.steps.append(Load(buf_y, pairs[0] - buf_y.start, pairs[1]))
    yv, _ = row_lanes(ctx, ty, axis)
    member = np.concatenate([np.unique(yv[r]) for r in range(R)]) - buf_y.start
    row_of = np.concatenate([np.full(len(np.unique(yv[r])), r) for r in range(R)])
    layer.steps.append(_bcast_simd(buf_y, member, row_of, S, Op.SUBTRACT if log
                                   else Op.MULTIPLY))
    layer.out = buf_y
    buf_y.dirty = True
    ctx.set(out, ty)


@op("Softmax", "LogSoftmax", check=check_lut, needs_lut=True)
def softmax(node, ctx: Lowering):
    x = node.inputs[0]
    t = ctx.tensor(x)
    axis = int(node.attr("axis", -1)) % t.idx.ndim
    vec, lane = row_lanes(ctx, t, axis)
    log = node.op == "LogSoftmax"
    one_lane = (lane == lane[:, :1]).all()
    distinct = all(len(np.unique(v)) == len(v) for v in vec) if one_lane else False
    if one_lane and distinct and vec.shape[1] > 1:
        return _across_vectors(ctx, node, x, vec, axis, log)
    name, vec, lane = lane_rows(ctx, node, x, axis)
    return _across_lanes(ctx, node, name, vec, lane, axis, log)


def _lanes_in_order(vec: np.ndarray, lane: np.ndarray, n: int) -> bool:
    """Whether element k of every row sits in lane k mod n of the row's vector k // n."""
    k = np.arange(vec.shape[1])
    return bool(np.all(lane == k % n) and np.all(vec == vec[:, :1] + k // n))


def lane_rows(ctx: Lowering, node, x: str, axis: int, flat: bool = False):
    """(tensor, vector, lane) of the rows of ``x`` along ``axis``: ``x`` itself when each
    vector holds elements of one row only, else a copy with ``axis`` moved last (a layer of
    its own), in the default layout or, with ``flat``, with ``axis`` in the lanes. With
    ``flat`` the rows are also in order: element k of a row in lane k mod n of the row's
    vector k // n (copied so when they are not, e.g. a Slice of the last axis)."""
    t = ctx.tensor(x)
    vec, lane = row_lanes(ctx, t, axis)
    owner_rows: dict[int, int] = {}
    if all(owner_rows.setdefault(int(v), r) == r
           for r in range(vec.shape[0]) for v in np.unique(vec[r])) and \
            (not flat or _lanes_in_order(vec, lane, ctx.n)):
        return x, vec, lane
    name = f"{x}:rows:{node.name}"
    perm = list(range(len(t.shape)))
    perm.append(perm.pop(axis))
    moved = Tensor(np.transpose(t.idx, perm))
    buf, nt = ctx.new_activation(name, moved.shape,
                                 order=tuple(range(len(perm))) if flat else None)
    ctx.begin(buf, ctx.copy_step(moved, nt))
    back = Tensor(np.transpose(nt.idx, np.argsort(perm)))
    ctx.set(name, back, internal=True)
    vec, lane = row_lanes(ctx, back, axis)
    return name, vec, lane


def rows_of_vectors(ctx: Lowering, t: Tensor, buf, axis: int):
    """(vectors of ``buf`` holding ``t``, the row of each), by vector."""
    yv, _ = row_lanes(ctx, t, axis)
    member = np.concatenate([np.unique(v) for v in yv]) - buf.start
    row_of = np.concatenate([np.full(len(np.unique(v)), r) for r, v in enumerate(yv)])
    order = np.argsort(member, kind="stable")
    return member[order], row_of[order]


def broadcast_layer(ctx: Lowering, out: str, t: Tensor, vec, lane):
    """A layer whose producer puts every element of ``t``'s rows (``vec``/``lane``: one row
    per line, K elements) in all lanes of a vector of its own (buffer B: row r, element k
    at r·K + k, a MatMul each) and whose output ``out`` is laid out like ``t``
    (:func:`.softmax.alike_buffer`): (layer, B, the output's buffer and tensor, the Load
    copying ``t`` into it)."""
    n = ctx.n
    R, K = vec.shape
    B = ctx.space.new(f"{out}:bcast", R * K)
    b = LinearBuilder(B, n)
    for ln in range(n):
        rr, kk = np.nonzero(lane == ln)
        if len(rr):
            b.add(rr * K + kk, vec[rr, kk], lane_tile(n, None, ln))
    layer = ctx.begin(B, b)
    buf_y, ty = alike_buffer(ctx, out, t)
    layer.out = buf_y
    pairs = np.unique(np.stack([ty.idx.reshape(-1) // n, t.idx.reshape(-1) // n]), axis=1)
    return layer, B, buf_y, ty, Load(buf_y, pairs[0] - buf_y.start, pairs[1])
