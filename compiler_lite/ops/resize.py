"""Resize (nearest and linear) as separable passes through the array.

Along each resized spatial axis the output is a weighted sum of at most two input lines
(one for nearest): for output line i and tap h, one MatMul run of the tile ``w·I`` copies
every vector of input line h into output line i. A 2-D resize first works along rows into a
column-major intermediate (so that the second pass's lines are contiguous runs too), then
along columns into the output. Coordinates follow the model's ONNX semantics; with
``resize_mode='tensil'`` linear resizes use half-pixel centres whatever the model says, as
Tensil's compiler does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..geometry import spatial
from ..ir import Tensor, groups, next_pow2
from ..kernels import LinearBuilder
from ..registry import consts_of, op

if TYPE_CHECKING:
    from ..lower import Lowering

COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
          "tf_half_pixel_for_nn")


#: ONNX Resize ``nearest_mode``: the input index of output coordinate ``x``
NEAREST_MODES = {"round_prefer_floor": lambda x: np.ceil(x - 0.5),
                 "round_prefer_ceil": lambda x: np.floor(x + 0.5),
                 "floor": np.floor, "ceil": np.ceil}


def axis_matrix(in_len: int, out_len: int, scale: float, mode: str, coord: str,
                nearest: str) -> np.ndarray:
    """(out_len, in_len) interpolation weights along one axis (ONNX Resize semantics)."""
    x = np.arange(out_len, dtype=np.float64)
    if coord == "half_pixel":
        xo = (x + 0.5) / scale - 0.5
    elif coord == "pytorch_half_pixel":
        xo = (x + 0.5) / scale - 0.5 if out_len > 1 else np.zeros(out_len)
    elif coord == "align_corners":
        xo = x * (in_len - 1) / (out_len - 1) if out_len > 1 else np.zeros(out_len)
    elif coord == "asymmetric":
        xo = x / scale
    else:                                           # tf_half_pixel_for_nn
        xo = (x + 0.5) / scale
    R = np.zeros((out_len, in_len))
    rows = np.arange(out_len)
    if mode == "nearest":
        idx = NEAREST_MODES[nearest](xo)
        R[rows, np.clip(idx, 0, in_len - 1).astype(np.int64)] = 1.0
        return R
    xo = np.clip(xo, 0, in_len - 1)
    x0 = np.floor(xo).astype(np.int64)
    x1 = np.minimum(x0 + 1, in_len - 1)
    w1 = xo - x0
    np.add.at(R, (rows, x0), 1.0 - w1)
    np.add.at(R, (rows, x1), w1)
    return R


def _sizes(node, g):
    x = node.inputs[0]
    in_shape = g.shapes[x]
    out_shape = g.shapes[node.outputs[0]]
    scales = g.resize_scales.get(node.outputs[0])
    if scales is None and len(node.inputs) > 2 and node.inputs[2] and \
            node.inputs[2] in g.consts and g.consts[node.inputs[2]].size:
        scales = np.asarray(g.consts[node.inputs[2]], dtype=np.float64)
    if scales is None or len(scales) != len(in_shape):
        scales = np.asarray(out_shape, dtype=np.float64) / np.asarray(in_shape)
    return in_shape, out_shape, scales


def check_resize(node, g, arch) -> list[str]:
    out = []
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        out.append(f"mode '{mode}' is not supported (nearest and linear are)")
    coord = node.attr("coordinate_transformation_mode", "half_pixel")
    if coord not in COORDS:
        out.append(f"coordinate_transformation_mode '{coord}' is not supported; supported: "
                   + ", ".join(COORDS))
    nearest = node.attr("nearest_mode", "round_prefer_floor")
    if mode == "nearest" and nearest not in NEAREST_MODES:
        out.append(f"nearest_mode '{nearest}' is not supported; supported: "
                   + ", ".join(NEAREST_MODES))
    if node.attr("antialias", 0):
        out.append("antialias is not supported")
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        out.append(f"keep_aspect_ratio_policy '{node.attr('keep_aspect_ratio_policy')}' is "
                   f"not supported (stretch is)")
    out += consts_of(node, g)
    in_shape = g.shapes.get(node.inputs[0])
    if in_shape is None or spatial(in_shape) is None:
        out.append("only [N,C,H,W] and [N,C,L] inputs are supported")
    elif not out:
        _, out_shape, _ = _sizes(node, g)
        if tuple(out_shape[:2]) != tuple(in_shape[:2]):
            out.append("resizing the batch or channel axis is not supported")
    return out


def axis_pass(ctx: Lowering, src: Tensor, axis: int, R: np.ndarray, buf, dst: Tensor,
              macs: int) -> None:
    """A layer writing ``dst = R ·_axis src`` (both [N, C, S0, S1] index maps with channels
    standard within each pixel: channel c in lane c % n of the pixel's vector c // n)."""
    n = ctx.n
    C = src.shape[1]
    nblk = -(-C // n)
    spb = src.idx[:, 0] // n                        # (N, S0, S1) pixel vectors
    dpb = dst.idx[:, 0] // n - buf.start
    b = LinearBuilder(buf, n)
    b.macs = macs
    lanes_of = [np.arange(C)[cb * n:(cb + 1) * n] % n for cb in range(nblk)]
    for i in range(R.shape[0]):
        d = np.take(dpb, i, axis=axis - 1).ravel()
        for h in np.nonzero(R[i])[0]:
            s = np.take(spb, h, axis=axis - 1).ravel()
            for cb in range(nblk):
                tile = np.zeros((n + 1, n))
                ln = lanes_of[cb]
                tile[1 + ln, ln] = R[i, h]
                b.add(d + cb, s + cb, tile)
    ctx.begin(buf, b)


def _standard(ctx: Lowering, t: Tensor, name: str) -> Tensor:
    """``t`` as [N, C, S0, S1] with standard lanes (copied when it is not)."""
    n = ctx.n
    N, C = t.shape[:2]
    S0, S1 = spatial(t.shape)
    t4 = Tensor(t.idx.reshape(N, C, S0, S1))
    gr = groups(t4, (0, 2, 3), (1,), n)
    c = np.arange(C)
    if gr is not None and np.array_equal(gr.lane, c % n) and np.array_equal(gr.off[gr.slot],
                                                                           c // n):
        return t4
    buf, nt = ctx.new_activation(name, t.shape)
    ctx.begin(buf, ctx.copy_step(t, nt))
    return Tensor(nt.idx.reshape(N, C, S0, S1))


@op("Resize", check=check_resize)
def resize(node, ctx: Lowering):
    g = ctx.g
    in_shape, out_shape, scales = _sizes(node, g)
    mode = node.attr("mode", "nearest")
    coord = node.attr("coordinate_transformation_mode", "half_pixel")
    if mode == "linear" and ctx.resize_mode == "tensil" and coord != "half_pixel":
        ctx.notes.append(f"{node.label}: linear resize with half-pixel coordinates "
                         f"(Tensil's rule) instead of the model's '{coord}'")
        coord = "half_pixel"
    nearest = node.attr("nearest_mode", "round_prefer_floor")
    x = _standard(ctx, ctx.tensor(node.inputs[0]), f"{node.outputs[0]}:input")
    N, C, S0, S1 = x.shape
    oS0, oS1 = spatial(out_shape)
    sp_scales = list(scales[2:]) if len(in_shape) == 4 else [1.0, scales[2]]
    R0 = axis_matrix(S0, oS0, sp_scales[0], mode, coord, nearest)
    R1 = axis_matrix(S1, oS1, sp_scales[1], mode, coord, nearest)
    out = node.outputs[0]
    buf, y = ctx.new_activation(out, out_shape)
    y4 = Tensor(y.idx.reshape(N, C, oS0, oS1))
    macs = int(np.prod(out_shape))
    todo = [(2, R0)] if not np.array_equal(R0, np.eye(S0)) or S0 != oS0 else []
    if not np.array_equal(R1, np.eye(S1)) or S1 != oS1:
        todo.append((3, R1))
    if not todo:
        ctx.begin(buf, ctx.copy_step(x, y4))
    elif len(todo) == 1:
        axis_pass(ctx, x, todo[0][0], todo[0][1], buf, y4, macs)
    else:
        # rows first, into a column-major intermediate [N][S1][P][Cb] with P = pow2 ≥ oS0
        n = ctx.n
        cb = next_pow2(-(-C // n))
        P = next_pow2(oS0)
        mid = ctx.space.new(f"{out}:rows", N * S1 * P * cb, row=P * cb,
                            elements=N * C * oS0 * S1)
        nn, cc, ii, ww = np.meshgrid(np.arange(N), np.arange(C), np.arange(oS0),
                                     np.arange(S1), indexing="ij")
        midx = (mid.start + ((nn * S1 + ww) * P + ii) * cb + cc // n) * n + cc % n
        mt = Tensor(midx.astype(np.int64))
        mid.set_extent(mt.idx, n)
        axis_pass(ctx, x, 2, R0, mid, mt, int(N * C * oS0 * S1))
        ctx.set(f"{out}:rows", mt, internal=True)
        axis_pass(ctx, mt, 3, R1, buf, y4, macs)
    ctx.set(out, y)
