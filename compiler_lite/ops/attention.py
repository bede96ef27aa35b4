"""Products of two computed tensors: MatMul of two activations and Gemm with a computed B
(attention's scores ``Q·Kᵀ`` and its output ``P·V``, batched over heads).

LoadWeights reads its tile from local memory (TCU.md §4.3), so weights need not be
constants. For ``C = A·B`` (leading axes broadcast and flattened into a batch ``g``):

1. a *relayout* layer writes the right operand into a buffer of tiles laid out as constant
   ones (:class:`~compiler_lite.kernels.DataTiles`): for every batch, input slot of A (a
   vector of A's rows, see :class:`~compiler_lite.ir.Groups`) and block of n output columns,
   a bias row then one row per input lane, row ``1 + j`` holding the elements of B that lane
   ``j`` of the slot multiplies, each in the lane of its output column. The elements are
   gathered through the array (:meth:`~compiler_lite.lower.Lowering.gather`: a transpose
   such as ``Kᵀ`` costs a MatMul per pair of source and destination vectors); rows that no
   element of A meets stay zero, and so do unused bias rows.
2. the product layer runs, per tile, one LoadWeights from wherever that buffer is in local
   memory (resident, or staged from DRAM0 like any source: the planner and the partition
   search see the tile vectors as sources of the layer), then MatMuls over A's rows.

The tiles are written only when the product's layer closes (:class:`ProductBuilder`), so a
per-element affine map that follows the product (attention's ``1/√d``, a bias, a mask) goes
into them when it is the same for every row of a batch: the scale multiplies the relayout's
weights and the offset fills the bias rows. Otherwise the scale is a SIMD pass and the
offset an accumulating MatMul of constant bias tiles, after the product.

:func:`check_product` rejects products whose right operand cannot be held in local memory
for one row of the output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tcu_hw.errors import CompileError
from tcu_hw.isa import SimdOp as Op

from ..ir import Buffer, Tensor, ceil_div, groups
from ..kernels import DataTiles, Layer, LinearBuilder, Load, Simd, SimdStep, Zero, data_linear

if TYPE_CHECKING:
    from ..lower import Lowering


# ----------------------------------------------------------------------------------- check

def operand_shapes(node, g) -> tuple[tuple, tuple] | None:
    """Shapes of the two factors of a MatMul or Gemm (Gemm's transposes applied), or None
    when one is unknown."""
    sa, sb = (g.consts[x].shape if g.is_const(x) else g.shapes.get(x) for x in node.inputs[:2])
    if sa is None or sb is None:
        return None
    if node.op == "Gemm":
        sa = tuple(reversed(sa)) if node.attr("transA", 0) else tuple(sa)
        sb = tuple(reversed(sb)) if node.attr("transB", 0) else tuple(sb)
    return tuple(sa), tuple(sb)


def local_need(K: int, N: int, n: int) -> int:
    """Local vectors that one row of a product with a K×N right operand needs at least: its
    weight tiles (a bias row and n rows each, for every block of n inputs and of n outputs),
    the row of the left operand and the output row's staging area."""
    kb, nb = ceil_div(K, n), ceil_div(N, n)
    return kb * nb * (n + 1) + kb + nb


def check_product(node, g, arch) -> list[str]:
    """Reasons a product of two computed tensors cannot be compiled (see the module)."""
    shapes = operand_shapes(node, g)
    if shapes is None:
        return ["unknown operand shapes"]
    sa, sb = shapes
    if not sa or not sb:
        return ["scalar operands are not supported"]
    K = sa[-1]
    N = sb[-1] if len(sb) > 1 else 1
    n = arch.array_size
    need = local_need(K, N, n)
    limit = arch.local_depth - 1
    if need > limit:
        kb, nb = ceil_div(K, n), ceil_div(N, n)
        return [f"the product of two computed tensors loads its right operand ({K}×{N} per "
                f"batch) as weight tiles from local memory: one output row needs {need} "
                f"vectors ({kb}×{nb} tiles of {n + 1} vectors = ceil(K/{n})·ceil(N/{n})·"
                f"{n + 1}, plus {kb} for the input row and {nb} for the output row), the "
                f"architecture has {limit} usable (local_depth {arch.local_depth} minus the "
                f"flush-probe vector)"]
    return []


# -------------------------------------------------------------------------------- lowering

def _batched(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple]:
    """(A as (G, M, K), B as (G, K, N), the broadcast leading shape) of two index maps of
    rank ≥ 2 (ONNX MatMul broadcasting)."""
    lead = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    M, K = a.shape[-2:]
    N = b.shape[-1]
    a3 = np.broadcast_to(a, (*lead, M, K)).reshape(-1, M, K)
    b3 = np.broadcast_to(b, (*lead, K, N)).reshape(-1, K, N)
    return a3, b3, lead


def _rows_of(ctx: Lowering, a3: np.ndarray) -> list | None:
    """Per batch: how A's rows store their elements (:func:`~compiler_lite.ir.groups`), or
    None when some batch's rows are not all alike."""
    out = []
    for k in range(a3.shape[0]):
        gr = groups(Tensor(a3[k]), (0,), (1,), ctx.n)
        if gr is None:
            return None
        out.append(gr)
    return out


def _lanes_read(ctx: Lowering, xv: np.ndarray) -> int:
    """1 + the highest lane that can be non-zero in the virtual vectors ``xv`` (n when a
    buffer holding them may have other values in its padding lanes)."""
    n = ctx.n
    owner = ctx.space.owner(xv)
    most = 0
    for k in np.unique(owner):
        b = ctx.space.buffers[k]
        if b.dirty or b.extent is None:
            return n
        most = max(most, int(b.extent[xv[owner == k] - b.start].max()))
    return most


def product(ctx: Lowering, node, a: Tensor, b: Tensor, out_name: str, out_shape,
            alpha: float = 1.0, bias: np.ndarray | None = None) -> ProductBuilder:
    """``out = alpha · a @ b (+ bias)`` for two computed tensors (ONNX MatMul semantics:
    rank-1 operands are promoted, leading axes broadcast); ``bias`` is a constant that
    broadcasts to the output (Gemm's C, already times beta). Returns the product layer's
    producer (its tiles and terms, for steps that follow in the same layer)."""
    n = ctx.n
    ai, bi = a.idx, b.idx
    if ai.ndim == 1:
        ai = ai[None, :]
    if bi.ndim == 1:
        bi = bi[:, None]
    a3, b3, lead = _batched(ai, bi)
    rows = _rows_of(ctx, a3)
    if rows is None:                                # A's rows are not alike: relayout
        full = Tensor(np.broadcast_to(ai, (*lead, *ai.shape[-2:])).copy(), a.name)
        buf0, t0 = ctx.new_activation(f"{a.name}:relayout:{node.name}", full.shape,
                                      order=tuple(range(full.idx.ndim)))
        ctx.begin(buf0, ctx.copy_step(full, t0), nodes=[node.name])
        a3 = t0.idx.reshape(a3.shape)
        rows = _rows_of(ctx, a3)
    G, M, K = a3.shape
    N = b3.shape[2]
    nblk = ceil_div(N, n)
    # the tiles: per batch, slot of A and block of outputs; a batch's slot 0 comes first
    plan = []                                       # (batch, slot, block, rows)
    for k, gr in enumerate(rows):
        for s in range(gr.slots):
            used = int(gr.lanes_of(s)[1].max()) + 1
            lanes = max(used, _lanes_read(ctx, gr.base.reshape(-1) + gr.off[s]))
            for cob in range(nblk):
                plan.append((k, s, cob, min(n, lanes)))
    tile_rows = np.array([p[3] for p in plan], dtype=np.int64)
    at_rel = np.concatenate([[0], np.cumsum(tile_rows + 1)[:-1]]).astype(np.int64)
    W = ctx.space.new(f"{out_name}:tiles", int((tile_rows + 1).sum()))
    tiles = DataTiles(W.start + at_rel, tile_rows)
    relayout = ctx.begin(W, Load(W, np.zeros(0, np.int64), np.zeros(0, np.int64)),
                         nodes=[node.name])        # written when the product closes
    shape3 = (*lead, M, N)
    buf, y = ctx.new_activation(out_name, shape3, order=tuple(range(len(shape3))))
    y3 = y.idx.reshape(G, M, N)
    yv = y3[:, :, ::n] // n - buf.start             # first vector of each block of a row
    o, x, t = [], [], []
    for tid, (k, s, cob, _) in enumerate(plan):
        gr = rows[k]
        o.append(yv[k, :, cob])
        x.append(gr.base.reshape(-1) + gr.off[s])
        t.append(np.full(M, tid, dtype=np.int64))
    builder = ProductBuilder(ctx, buf, relayout, W, tiles, plan, rows, b3, y3,
                             alpha, None if bias is None else
                             np.broadcast_to(bias, (*lead, M, N)).reshape(G, M, N))
    builder.terms = (np.concatenate(o), np.concatenate(x), np.concatenate(t))
    builder.macs = G * M * N * K
    builder.layer = ctx.begin(buf, builder, nodes=[node.name])
    ctx.set(out_name, Tensor(y.idx.reshape(out_shape)))
    return builder


class ProductBuilder(LinearBuilder):
    """The producer of a product layer until the layer closes: :meth:`build` writes the
    relayout layer's steps (the tiles, with what of a folded affine map goes into them) and
    returns the product's :class:`~compiler_lite.kernels.Linear` over those data tiles,
    putting the rest of the map in steps right after it (see the module)."""

    def __init__(self, ctx: Lowering, out: Buffer, relayout: Layer, W: Buffer,
                 tiles: DataTiles, plan: list, rows: list, b3: np.ndarray, y3: np.ndarray,
                 alpha: float, bias: np.ndarray | None) -> None:
        super().__init__(out, ctx.n)
        self.n = ctx.n
        self.ctx = ctx
        self.relayout = relayout
        self.W = W
        self.data_tiles = tiles
        self.plan = plan
        self.rows = rows
        self.b3 = b3
        self.y3 = y3
        self.alpha = alpha
        self.bias = bias
        self.terms: tuple = ()
        self.layer: Layer | None = None

    @property
    def term_count(self) -> int:
        """MatMul vectors of the product's terms (set once they are known)."""
        return len(self.terms[0]) if self.terms else 0

    def build(self, accumulate: bool = False, scale: np.ndarray | None = None,
              offset: np.ndarray | None = None):
        """The product's Linear; ``scale``/``offset`` (out.vectors × n) a folded affine map
        ``y' = scale·y + offset`` (see :meth:`LinearBuilder.build`)."""
        if accumulate:
            raise CompileError(f"internal: a product of computed tensors ({self.out.name}) "
                               f"cannot accumulate")
        n = self.n
        v, lane = np.divmod(self.y3, n)
        v = v - self.out.start
        s_el = np.ones(self.y3.shape) if scale is None else scale[v, lane]
        t_el = np.zeros(self.y3.shape) if offset is None else offset[v, lane]
        if self.bias is not None:
            t_el = t_el + s_el * self.bias
        s_tiles = np.all(s_el == s_el[:, :1, :])        # the same for every row of a batch
        t_tiles = s_tiles and np.all(t_el == t_el[:, :1, :])
        G, N = self.y3.shape[0], self.y3.shape[2]
        self._write_tiles(s_el[:, 0, :] if s_tiles else np.ones((G, N)),
                          t_el[:, 0, :] if t_tiles else np.zeros((G, N)))
        o, x, t = self.terms
        step = data_linear(self.out, o, x, t, self.data_tiles, self.macs)
        after = []
        if not s_tiles:
            after += self._scale_steps(s_el)
        if not t_tiles and np.any(t_el != 0):
            after.append(self._offset_step(t_el))
        self.layer.steps[1:1] = after
        return step

    # ------------------------------------------------------------------------------ parts

    def _write_tiles(self, scale: np.ndarray, offset: np.ndarray) -> None:
        """The relayout layer: ``alpha·scale[g, col]·B`` into the tile rows, ``offset[g, col]``
        into the bias rows of each batch's slot-0 tiles, zeros everywhere else."""
        n = self.n
        W = self.W
        dst, src, weight = [], [], []
        bdst, bval = [], []
        for tid, (k, s, cob, _) in enumerate(self.plan):
            ks, js = self.rows[k].lanes_of(s)
            cols = np.arange(cob * n, min(self.b3.shape[2], cob * n + n))
            first = (self.data_tiles.at[tid] + 1 + js)[:, None] * n + (cols - cob * n)[None, :]
            dst.append(first.ravel())
            src.append(self.b3[k][np.ix_(ks, cols)].ravel())
            weight.append(np.broadcast_to(self.alpha * scale[k, cols], first.shape).ravel())
            if s == 0:
                bdst.append(self.data_tiles.at[tid] * n + cols - cob * n)
                bval.append(offset[k, cols])
        dst, src, weight = (np.concatenate(p) for p in (dst, src, weight))
        bdst, bval = np.concatenate(bdst), np.concatenate(bval)
        nz = bval != 0
        every = np.concatenate([dst, bdst[nz]])
        target = Tensor(every)
        W.elements = len(every)
        W.set_extent(every, n)
        b = self.ctx.gather(W, target, [(np.concatenate([src, np.full(nz.sum(), -1)]),
                                         np.concatenate([weight, np.zeros(nz.sum())]))],
                            const=np.concatenate([np.zeros(len(dst)), bval[nz]]))
        steps = [b.build()]
        empty = np.nonzero(~b.covered())[0]
        if len(empty):
            steps.append(Zero(W, empty))
        self.relayout.steps = steps

    def _scale_steps(self, s_el: np.ndarray) -> list:
        """SIMD passes multiplying each output vector by its scale (one per pattern)."""
        n = self.n
        if self.ctx.arch.simd_registers_depth < 1:
            raise CompileError(f"{self.ctx.g.source}: a scale that varies along the rows of "
                               f"the product {self.out.name!r} needs a SIMD register (the "
                               f"architecture has simd_registers_depth 0)")
        per = np.ones((self.out.vectors, n))
        v, lane = np.divmod(self.y3.reshape(-1), n)
        per[v - self.out.start, lane] = s_el.reshape(-1)
        vecs = np.unique(v - self.out.start)
        pats, of = np.unique(per[vecs], axis=0, return_inverse=True)
        of = of.ravel()
        steps = []
        for k, vec in enumerate(pats):
            if np.all(vec == 1):
                continue
            key = f"scale:{self.out.name}:{k}"
            steps.append(Simd(self.out, vecs[of == k], [("const", 1, key)],
                              [SimdStep(Op.MULTIPLY, 0, 1, 0)], consts={key: vec}))
        return steps

    def _offset_step(self, t_el: np.ndarray) -> LinearBuilder:
        """Accumulating MatMuls (zeroes flag) adding each output vector's offset as the bias
        of a constant tile (one tile per pattern)."""
        n = self.n
        per = np.zeros((self.out.vectors, n))
        v, lane = np.divmod(self.y3.reshape(-1), n)
        per[v - self.out.start, lane] = t_el.reshape(-1)
        vecs = np.unique(v - self.out.start)
        vecs = vecs[np.any(per[vecs] != 0, axis=1)]
        pats, of = np.unique(per[vecs], axis=0, return_inverse=True)
        b = LinearBuilder(self.out, n)
        for k, vec in enumerate(pats):
            tile = np.zeros((n + 1, n))
            tile[0] = vec
            sel = vecs[of.ravel() == k]
            b.add(sel, np.full(len(sel), -1), tile)
        return b
