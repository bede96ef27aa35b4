"""QMatMul: the product of two integer activations (attention's scores ``Q·Kᵀ`` and its
weighted sum ``P·V``; docs/integer.md, "Products of two activations").

With zero points z_a and z_b every output is an exact integer sum of three parts::

    Σ_k (a_ik − z_a)(b_kj − z_b) =  Σ_k a_ik·b_kj                   (the product)
                                  + (−z_b)·Σ_k a_ik                  (row term)
                                  + (−z_a)·Σ_k b_kj + K·z_a·z_b      (column term)

computed in the product's layer (:func:`.attention.product`: B relaid out as weight tiles
in local memory, as for the float types)::

    A's rows ───────────────▶ B's tiles ──▶ out[i, block] ◀── += A's rows ▶ −z_b tiles
    −z_a in each slot's lanes ▶ B's tiles ──▶ col[block]  ◀── += the same ▶ −z_b tiles
    out[i, block] = Requantize(out[i, block] + col[block])
                    (col moved into the bias register, vector by vector)

The column term is one extra vector per batch and block of n outputs (a buffer of its
own); its pass through the −z_b tiles adds K·z_a·z_b. The Requantize scale is
s_a·s_b / s_y (float32, as onnxruntime's QLinearMatMul). A zero point whose negation the
type cannot hold (−z = 2^(W−1)) goes in as two halves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ir import ceil_div
from ..kernels import LinearBuilder, data_linear
from ..quant import DOMAIN
from ..registry import op
from .attention import check_product, product
from .integer import requantize_paired

if TYPE_CHECKING:
    from ..lower import Lowering
    from .attention import ProductBuilder


def parts(value: int, dt) -> list[int]:
    """``value`` as at most two integers of data type ``dt`` that add up to it (none for 0)."""
    if value == 0:
        return []
    if dt.min_raw <= value <= dt.max_raw:
        return [value]
    return [value // 2, value - value // 2]


def _slot_vectors(ctx: Lowering, pb: ProductBuilder, values: list[int], key: str) -> dict:
    """Per (batch, slot) of A: the constant vectors holding each of ``values`` in the lanes
    that slot's elements occupy (zero elsewhere)."""
    n = ctx.n
    rows, patterns, index = [], {}, {}
    for k, gr in enumerate(pb.rows):
        for s in range(gr.slots):
            lanes = gr.lanes_of(s)[1]
            for v in values:
                vec = np.zeros(n)
                vec[lanes] = v
                sig = vec.tobytes()
                if sig not in patterns:
                    patterns[sig] = len(rows)
                    rows.append(vec)
                index.setdefault((k, s), []).append(patterns[sig])
    if not rows:
        return {}
    ctx.g.consts[key] = np.stack(rows)
    first = int(ctx.const_tensor(key).idx.reshape(-1)[0] // n)
    return {ks: [first + p for p in ps] for ks, ps in index.items()}


def _row_tile(n: int, lanes: np.ndarray, columns: int, value: int) -> np.ndarray:
    """A constant tile adding ``value`` times the sum of input ``lanes`` to the first
    ``columns`` outputs."""
    tile = np.zeros((n + 1, n))
    tile[np.ix_(1 + np.asarray(lanes), np.arange(columns))] = value
    return tile


@op("QMatMul", check=check_product, domain=DOMAIN)
def qmatmul(node, ctx: Lowering):
    """``y = z_y + round(s_a·s_b/s_y · Σ_k (a − z_a)(b − z_b))`` (see the module)."""
    dt, n = ctx.arch.dtype, ctx.n
    pa, pb_, py = node.attr("a"), node.attr("b"), node.attr("y")
    out = node.outputs[0]
    pb = product(ctx, node, ctx.tensor(node.inputs[0]), ctx.tensor(node.inputs[1]), out,
                 ctx.g.shape(out))
    layer = pb.layer
    G, M, N = pb.y3.shape
    nblk = ceil_div(N, n)
    yv = pb.y3[:, :, ::n] // n - pb.out.start          # (G, M, blocks)
    col_x = _slot_vectors(ctx, pb, parts(-pa.zero_point, dt), f"{out}:minus_zero_point_a")
    cols = ctx.space.new(f"{out}:columns", G * nblk) if col_x else None
    if cols is not None:
        o, x, t = zip(*[(k * nblk + cob, v, tid) for tid, (k, s, cob, _) in enumerate(pb.plan)
                        for v in col_x[k, s]])
        layer.steps.append(data_linear(cols, o, x, t, pb.data_tiles))
    rows_b = LinearBuilder(pb.out, n)
    cols_b = LinearBuilder(cols, n) if cols is not None else None
    for value in parts(-pb_.zero_point, dt):
        for k, s, cob, _ in pb.plan:
            gr = pb.rows[k]
            tile = _row_tile(n, gr.lanes_of(s)[1], min(n, N - cob * n), value)
            rows_b.add(yv[k, :, cob], gr.base.reshape(-1) + gr.off[s], tile)
            if cols_b is not None:
                cols_b.add(np.full(len(col_x[k, s]), k * nblk + cob), col_x[k, s], tile)
    layer.steps += [b for b in (rows_b, cols_b) if b is not None]
    scale = float(np.float32(pa.scale) * np.float32(pb_.scale))
    for cob in range(nblk):
        aux = np.repeat(np.arange(G) * nblk + cob, M) if cols is not None else None
        requantize_paired(ctx, layer, yv[:, :, cob].reshape(-1), aux, cols, scale,
                          N - cob * n, py, node.attr("clip"), f"{out}:{cob}")
