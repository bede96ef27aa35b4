"""Standalone normalizations moved into their neighbours' weights.

A BatchNormalization whose input other nodes read too cannot fold into the layer that
produced that input. ResNet v2's pre-activation ``relu(bn(x))`` on a residual sum ``x`` is the
common case: it costs a layer of its own (``x`` read back through the array, a diagonal MatMul
per vector, then a ReLU pass and a store). When every channel's scale ``s`` is positive,
``relu(s·x + t) = s·relu(x + t/s)``, and with ``c = t/s`` per channel::

    x = Add(p, q)            p = Conv(…, bias + c): the sum becomes x' = x + c
    relu(bn(x))     ──▶      relu(x')               the sum's layer saves x', then ReLU in place
    Conv(relu(…), W)         Conv(relu(x'), W·s)    s scales the weights' input channels
    Add(x, Conv(…, b))       Add(x', Conv(…, b − c))        readers of x take c back
    Conv(x, W, b), no pads   Conv(x', W, b − W·c)

so the normalization costs nothing. It applies when the sum is an Add fed by a convolution
that nothing else reads, every reader of the normalization's ReLU is a convolution of it, and
every other reader of ``x`` is one of the two forms above (and none of these tensors is a
model output). Exact in real arithmetic; ``s`` must lie within [:data:`SCALE_MIN`,
:data:`SCALE_MAX`] and, in fixed point, ``|c|`` and every bias change within
:data:`OFFSET_MAX` of the data type's range, else the normalization is lowered as before.

A LayerNorm's affine map moves the same way into the MatMuls that read it::

    MatMul(x̂·γ + β, W) + c   ──▶   MatMul(x̂, diag(γ)·W) + (c + β·W)

(``x̂`` the normalized rows, the decomposition's Mul marked ``normalized``): no layer of its
own and one rounding less. In fixed point ``|γ|`` must lie within [:data:`SCALE_MIN`,
:data:`SCALE_MAX`] and ``β·W`` within :data:`OFFSET_MAX` of the range.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .frontend import Graph, Node
from .geometry import window_attrs
from .ops.linear import normalization

#: Per-channel scales outside [SCALE_MIN, SCALE_MAX] are not moved into the weights (small
#: weights would lose precision, large ones range; a near-dead channel's t/s would swamp x).
SCALE_MIN, SCALE_MAX = 0.25, 4.0
#: Offsets t/s (and the bias changes W·t/s they cause) larger than this fraction of a
#: fixed-point type's largest value are not made (the sums would get closer to saturation).
OFFSET_MAX = 1 / 16


def offset_limit(dtype) -> float:
    """The largest offset or bias change moved into weights: :data:`OFFSET_MAX` of a
    fixed-point type's range (none for FLOAT32)."""
    return np.inf if dtype.is_float else OFFSET_MAX * dtype.max_raw / dtype.one


def _conv_with_consts(g: Graph, node: Node | None) -> bool:
    return node is not None and node.op == "Conv" and len(node.inputs) > 1 and \
        g.is_const(node.inputs[1]) and (len(node.inputs) < 3 or not node.inputs[2]
                                        or g.is_const(node.inputs[2]))


def _only_reader(g: Graph, name: str, node: Node) -> bool:
    users = g.consumers(name)
    return name not in g.outputs and len(users) == 1 and users[0] is node and \
        node.inputs.count(name) == 1


def _unpadded(g: Graph, conv: Node) -> bool:
    """Whether ``conv`` reads no padding (its pads, ``auto_pad`` resolved, are all zero)."""
    shape = g.shapes.get(conv.inputs[0])
    if shape is None or len(shape) < 3:
        return False
    kernel = np.asarray(g.consts[conv.inputs[1]]).shape[2:]
    return not any(window_attrs(conv, shape, kernel)[3])


def _plan(g: Graph, bn: Node, dtype):
    """What moving ``bn`` needs: (relu, producer conv, {conv: bias change}, readers of the
    ReLU to scale), or None when it does not apply."""
    if bn.attr("training_mode", 0) or not all(g.is_const(i) for i in bn.inputs[1:5]):
        return None
    x, y = bn.inputs[0], bn.outputs[0]
    users = g.consumers(y)
    if y in g.outputs or len(users) != 1 or users[0].op != "Relu" or x in g.outputs:
        return None
    relu = users[0]
    r = relu.outputs[0]
    readers = g.consumers(r)
    if r in g.outputs or not readers or any(
            not _conv_with_consts(g, c) or c.inputs[0] != r or r in c.inputs[1:]
            for c in readers):
        return None
    s, t = normalization(bn, g.consts)
    c = t / np.where(s != 0, s, 1)
    if not np.all(s > 0) or s.min() < SCALE_MIN or s.max() > SCALE_MAX:
        return None
    limit = offset_limit(dtype)
    if np.abs(c).max() > limit:
        return None
    add = g.producer(x)
    if add is None or add.op != "Add" or len([i for i in add.inputs if i]) != 2:
        return None
    shape = g.shapes.get(x)
    if shape is None or len(shape) < 3 or shape[1] != len(s):
        return None
    feeds = [g.producer(i) for i in add.inputs
             if i and _only_reader(g, i, add) and g.shapes.get(i) == shape]
    feeds = [p for p in feeds if _conv_with_consts(g, p)]
    if not feeds:
        return None
    changes = {id(feeds[0]): (feeds[0], c)}
    for user in g.consumers(x):
        if user is bn:
            continue
        if user.op == "Add" and user.inputs.count(x) == 1 and \
                len([i for i in user.inputs if i]) == 2:
            other = next(i for i in user.inputs if i and i != x)
            conv = g.producer(other)
            if _only_reader(g, other, user) and _conv_with_consts(g, conv) and \
                    id(conv) not in changes and g.shapes.get(other) == shape:
                changes[id(conv)] = (conv, -c)
                continue
        if user.op == "Conv" and user.inputs[0] == x and x not in user.inputs[1:] and \
                _conv_with_consts(g, user) and _unpadded(g, user) and id(user) not in changes:
            back = _weights_times(g, user, c)
            if np.abs(back).max() <= limit:         # the bias moves by as much as c at most
                changes[id(user)] = (user, -back)
                continue
        return None
    return relu, changes, readers, s


def _weights_times(g: Graph, conv: Node, c: np.ndarray) -> np.ndarray:
    """Per output channel of ``conv``: Σ over its window and input channels of W · c."""
    w = np.asarray(g.consts[conv.inputs[1]], dtype=np.float64)
    co, cig = w.shape[:2]
    group = int(conv.attr("group", 1))
    per = w.reshape(co, cig, -1).sum(axis=2)                      # (Co, Cig)
    cin = c.reshape(group, cig)                                    # each group's channels
    return np.einsum("oc,oc->o", per, np.repeat(cin, co // group, axis=0))


def _scale_inputs(w: np.ndarray, s: np.ndarray, group: int) -> np.ndarray:
    """Conv weights (Co, Cig, …) with input channel k of each group scaled by its s."""
    co, cig = w.shape[:2]
    per_out = np.repeat(s.reshape(group, cig), co // group, axis=0)     # (Co, Cig)
    return w * per_out.reshape(per_out.shape + (1,) * (w.ndim - 2))


def prescale(g: Graph, dtype) -> Graph:
    """``g`` with every normalization that :func:`_plan` accepts moved into its neighbours'
    weights, then every LayerNorm affine map :func:`_affine_plan` accepts moved into the
    MatMuls that read it (a new graph; ``g`` and its constants are left as they are)."""
    return _fold_affine_maps(_prescale_batch_norms(g, dtype), dtype)


def _prescale_batch_norms(g: Graph, dtype) -> Graph:
    nodes = list(g.nodes)
    consts = dict(g.consts)
    bias: dict[int, np.ndarray] = {}            # id(conv node) → its bias so far
    weights: dict[int, np.ndarray] = {}         # id(conv node) → its weights so far
    drop, rewire = set(), {}
    work = dataclasses.replace(g, nodes=nodes, consts=consts)
    for bn in [n for n in g.nodes if n.op == "BatchNormalization"]:
        got = _plan(work, bn, dtype)
        if got is None:
            continue
        relu, changes, readers, s = got
        for conv, delta in changes.values():
            co = np.asarray(consts[conv.inputs[1]]).shape[0]
            old = bias.get(id(conv))
            if old is None:
                has = len(conv.inputs) > 2 and conv.inputs[2]
                old = np.asarray(consts[conv.inputs[2]], dtype=np.float64) if has \
                    else np.zeros(co)
            bias[id(conv)] = old + delta
        for conv in readers:
            w = weights.get(id(conv), np.asarray(consts[conv.inputs[1]], dtype=np.float64))
            weights[id(conv)] = _scale_inputs(w, s, int(conv.attr("group", 1)))
        drop.add(id(bn))
        rewire[id(relu)] = bn.inputs[0]
    if not drop:
        return g
    out = []
    for k, node in enumerate(nodes):
        if id(node) in drop:
            continue
        ins = list(node.inputs)
        if id(node) in rewire:
            ins[0] = rewire[id(node)]
        key = id(node)
        if key in weights:
            ins[1] = f"{node.name}:{k}:prescaled:W"
            consts[ins[1]] = weights[key].astype(np.float32)
        if key in bias:
            ins = ins + [""] * (3 - len(ins))
            ins[2] = f"{node.name}:{k}:prescaled:B"
            consts[ins[2]] = bias[key].astype(np.float32)
        out.append(dataclasses.replace(node, inputs=ins) if ins != node.inputs else node)
    shapes = dict(g.shapes)
    for name in list(consts):
        if name.endswith((":prescaled:W", ":prescaled:B")):
            shapes[name] = tuple(consts[name].shape)
    return dataclasses.replace(g, nodes=out, consts=consts, shapes=shapes)


# ------------------------------------------------------------------ LayerNorm affine maps

def _affine_plan(g: Graph, mul: Node, dtype):
    """What moving ``y = x·γ (+ β)``, a LayerNorm's affine map over the last axis (its Mul
    marked ``normalized``: x has mean 0 and variance 1 per row, so the MatMuls' inputs keep
    their range), into the MatMuls reading ``y`` needs: (x, γ, β or None, the nodes to drop,
    the MatMuls), or None when it does not apply: every reader of ``y`` must be a MatMul of
    constant weights that reads ``y`` as its left operand, nothing in between may be a model
    output, and in fixed point every |γ| must lie within [:data:`SCALE_MIN`,
    :data:`SCALE_MAX`] (the weights keep their precision and range) and every bias change
    ``β·W`` within :data:`OFFSET_MAX` of the range."""
    const = [i for i in mul.inputs if g.is_const(i)]
    if mul.op != "Mul" or not mul.attr("normalized") or len(const) != 1 or \
            len(mul.inputs) != 2:
        return None
    x = next(i for i in mul.inputs if i != const[0])
    shape = g.shapes.get(x)
    gamma = np.asarray(g.consts[const[0]], dtype=np.float64)
    if shape is None or len(shape) < 2 or gamma.shape != (shape[-1],):
        return None
    if not dtype.is_float and not (SCALE_MIN <= np.abs(gamma).min() and
                                   np.abs(gamma).max() <= SCALE_MAX):
        return None
    y, drop, beta = mul.outputs[0], [mul], None
    users = g.consumers(y)
    if len(users) == 1 and users[0].op == "Add" and y not in g.outputs:
        add = users[0]
        other = [i for i in add.inputs if i != y]
        if len(add.inputs) == 2 and len(other) == 1 and g.is_const(other[0]) and \
                np.asarray(g.consts[other[0]]).shape == (shape[-1],):
            beta = np.asarray(g.consts[other[0]], dtype=np.float64)
            y, drop = add.outputs[0], [mul, add]
            users = g.consumers(y)
    if y in g.outputs or not users or any(
            u.op != "MatMul" or u.inputs[0] != y or u.inputs[1] == y or
            not g.is_const(u.inputs[1]) or np.asarray(g.consts[u.inputs[1]]).ndim != 2
            for u in users):
        return None
    limit = offset_limit(dtype)
    if beta is not None and any(
            np.abs(beta @ np.asarray(g.consts[u.inputs[1]], np.float64)).max() > limit
            for u in users):
        return None
    return x, gamma, beta, drop, users


def _bias_after(g: Graph, mm: Node, d: int):
    """The Add of a constant vector of ``d`` that alone reads ``mm``'s output, or None."""
    o = mm.outputs[0]
    users = g.consumers(o)
    if o in g.outputs or len(users) != 1 or users[0].op != "Add":
        return None
    add = users[0]
    other = [i for i in add.inputs if i != o]
    if len(add.inputs) != 2 or len(other) != 1 or not g.is_const(other[0]) or \
            np.asarray(g.consts[other[0]]).shape != (d,):
        return None
    return add


def _fold_affine_maps(g: Graph, dtype) -> Graph:
    """``MatMul(x·γ + β, W)`` → ``MatMul(x, diag(γ)·W)`` with ``β·W`` added to the bias Add
    that follows (or a new Add): a LayerNorm's affine map costs no layer of its own and one
    rounding less (:func:`_affine_plan` says when; on DeiT-tiny's encoder in FP16BP8 the
    output's error is unchanged within the spread of three weight seeds)."""
    nodes, consts, shapes = list(g.nodes), dict(g.consts), dict(g.shapes)
    drop, replace, extra = set(), {}, {}
    tag = {id(n): f"{n.name}:{k}:affine" for k, n in enumerate(nodes)}    # unique names
    for mul in [n for n in g.nodes if n.op == "Mul"]:
        got = _affine_plan(g, mul, dtype)
        if got is None or any(id(n) in drop for n in got[3]):
            continue
        x, gamma, beta, dropped, matmuls = got
        drop.update(id(n) for n in dropped)
        for mm in matmuls:
            w = np.asarray(g.consts[mm.inputs[1]], dtype=np.float64)
            name = f"{tag[id(mm)]}:W"
            consts[name] = (gamma[:, None] * w).astype(np.float32)
            replace[id(mm)] = dataclasses.replace(mm, inputs=[x, name])
            if beta is None:
                continue
            bw = beta @ w
            add = _bias_after(g, mm, w.shape[1])
            if add is not None:
                c = next(i for i in add.inputs if i != mm.outputs[0])
                consts[f"{tag[id(add)]}:B"] = (np.asarray(g.consts[c], np.float64) +
                                               bw).astype(np.float32)
                replace[id(add)] = dataclasses.replace(add, inputs=[
                    i if i != c else f"{tag[id(add)]}:B" for i in add.inputs])
                continue
            tmp = f"{mm.outputs[0]}:affine"
            replace[id(mm)] = dataclasses.replace(replace[id(mm)], outputs=[tmp])
            consts[f"{tmp}:B"] = bw.astype(np.float32)
            shapes[tmp] = shapes[mm.outputs[0]]
            extra[id(mm)] = Node("Add", tag[id(mm)], [tmp, f"{tmp}:B"],
                                 list(mm.outputs), {}, mm.domain)
    if not drop:
        return g
    out = []
    for node in nodes:
        if id(node) in drop:
            continue
        out.append(replace.get(id(node), node))
        if id(node) in extra:
            out.append(extra[id(node)])
    for name, value in consts.items():
        if name.endswith((":affine:W", ":affine:B")):
            shapes[name] = tuple(value.shape)
    return dataclasses.replace(g, nodes=out, consts=consts, shapes=shapes)
