"""Operators that only rearrange elements: views (no instructions) and copies.

Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Gather (constant
indices), Expand and Tile rearrange the index map of their input (see :mod:`..ir`); a reader
that needs a particular arrangement folds it into its weights or copies the data. Pad writes
a new tensor: a copy through the array (interior), the constant as bias, edge/reflect
padding by copying the mirrored elements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ir import Tensor
from ..registry import consts_of, op

if TYPE_CHECKING:
    from ..lower import Lowering


def _input(ctx: Lowering, name: str) -> Tensor:
    return ctx.const_tensor(name) if ctx.is_const(name) else ctx.tensor(name)


def _view(ctx: Lowering, node, idx: np.ndarray, k: int = 0) -> None:
    ctx.set(node.outputs[k], Tensor(np.ascontiguousarray(idx)))


@op("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(node, ctx: Lowering):
    t = ctx.tensor(node.inputs[0])
    _view(ctx, node, t.idx.reshape(ctx.g.shape(node.outputs[0])))


@op("Transpose")
def transpose(node, ctx: Lowering):
    t = ctx.tensor(node.inputs[0])
    perm = node.attr("perm") or list(reversed(range(t.idx.ndim)))
    _view(ctx, node, np.transpose(t.idx, perm))


@op("Concat")
def concat(node, ctx: Lowering):
    parts = [_input(ctx, i).idx for i in node.inputs if i]
    axis = int(node.attr("axis"))
    _view(ctx, node, np.concatenate(parts, axis=axis))


def _check_split(node, g, arch) -> list[str]:
    if len(node.inputs) > 1 and node.inputs[1] and not g.is_const(node.inputs[1]):
        return ["split sizes must be constant"]
    return []


@op("Split", check=_check_split)
def split(node, ctx: Lowering):
    t = ctx.tensor(node.inputs[0])
    axis = int(node.attr("axis", 0)) % t.idx.ndim
    sizes = None
    if len(node.inputs) > 1 and node.inputs[1]:
        sizes = [int(v) for v in ctx.const(node.inputs[1])]
    elif node.attr("split") is not None:
        sizes = list(node.attr("split"))
    else:
        sizes = [ctx.g.shape(o)[axis] for o in node.outputs]
    edges = np.cumsum(sizes)[:-1]
    for k, part in enumerate(np.split(t.idx, edges, axis=axis)):
        if node.outputs[k]:
            _view(ctx, node, part, k)


def _constant_operands(node, g, arch) -> list[str]:
    """Every input after the data (starts, ends, repeats, shape ...) must be a constant."""
    return consts_of(node, g)


@op("Slice", check=_constant_operands)
def slice_(node, ctx: Lowering):
    t = ctx.tensor(node.inputs[0])
    rank = t.idx.ndim

    def arg(k, default):
        if len(node.inputs) > k and node.inputs[k]:
            return [int(v) for v in ctx.const(node.inputs[k])]
        return default

    starts, ends = arg(1, None), arg(2, None)
    axes = arg(3, list(range(len(starts))))
    steps = arg(4, [1] * len(starts))
    sl = [slice(None)] * rank
    for s, e, a, st in zip(starts, ends, axes, steps):
        a %= rank
        dim = t.idx.shape[a]
        lo, hi, _ = slice(s, e, st).indices(dim)
        sl[a] = slice(lo, hi if hi >= 0 or st > 0 else None, st)
    _view(ctx, node, t.idx[tuple(sl)])


def _check_gather(node, g, arch) -> list[str]:
    if not g.is_const(node.inputs[1]):
        return ["indices must be constant (a lookup by computed indices is not supported)"]
    return []


@op("Gather", check=_check_gather)
def gather(node, ctx: Lowering):
    t = _input(ctx, node.inputs[0])
    ind = np.asarray(ctx.g.consts[node.inputs[1]]).astype(np.int64)
    axis = int(node.attr("axis", 0)) % t.idx.ndim
    ind = np.where(ind < 0, ind + t.idx.shape[axis], ind)
    _view(ctx, node, np.take(t.idx, ind, axis=axis))


@op("Expand", check=_constant_operands)
def expand(node, ctx: Lowering):
    t = ctx.tensor(node.inputs[0])
    _view(ctx, node, np.broadcast_to(t.idx, ctx.g.shape(node.outputs[0])))


@op("Tile", check=_constant_operands)
def tile(node, ctx: Lowering):
    t = ctx.tensor(node.inputs[0])
    reps = [int(v) for v in ctx.const(node.inputs[1])]
    _view(ctx, node, np.tile(t.idx, reps))


def _check_pad(node, g, arch) -> list[str]:
    out = [f"input {k} must be constant" for k, name in enumerate(node.inputs)
           if k > 0 and name and not g.is_const(name)]
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        out.append(f"mode '{mode}' is not supported (constant, reflect, edge, wrap are)")
    return out


@op("Pad", check=_check_pad)
def pad(node, ctx: Lowering):
    t = ctx.tensor(node.inputs[0])
    rank = t.idx.ndim
    if len(node.inputs) > 1 and node.inputs[1]:
        pads = [int(v) for v in ctx.const(node.inputs[1])]
    else:
        pads = list(node.attr("pads"))
    value = 0.0
    if len(node.inputs) > 2 and node.inputs[2]:
        value = float(np.asarray(ctx.const(node.inputs[2])).reshape(-1)[0]) \
            if np.asarray(ctx.g.consts[node.inputs[2]]).size else 0.0
    elif node.attr("value") is not None:
        value = float(node.attr("value"))
    axes = list(range(rank))
    if len(node.inputs) > 3 and node.inputs[3]:
        axes = [int(a) % rank for a in ctx.const(node.inputs[3])]
    k = len(axes)
    width = [(0, 0)] * rank
    for j, a in enumerate(axes):
        width[a] = (pads[j], pads[j + k])
    idx = t.idx
    # negative pads crop
    crop = tuple(slice(max(0, -b), idx.shape[a] - max(0, -e)) for a, (b, e) in enumerate(width))
    idx = idx[crop]
    width = [(max(0, b), max(0, e)) for b, e in width]
    mode = node.attr("mode", "constant")
    if mode == "constant":
        src = np.pad(idx, width, mode="constant", constant_values=-1)
    else:
        src = np.pad(idx, width, mode={"reflect": "reflect", "edge": "edge",
                                       "wrap": "wrap"}[mode])
    out = node.outputs[0]
    buf, y = ctx.new_activation(out, src.shape)
    const = np.where(src < 0, value, 0.0) if mode == "constant" and value != 0 else None
    b = ctx.gather(buf, y, [(src, 1.0)], const)
    ctx.begin(buf, b)
    ctx.set(out, y)
