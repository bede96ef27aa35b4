"""Unfolded inputs: a model input whose only reader is a convolution of few channels is
stored with that convolution's kernel taps moved into its channels (``--input-layout
unfolded``; the host lays it out, :class:`tcu_hw.artifacts.Unfold`, docs/tensil.md).

A stem convolution of 3 channels on an n-lane array uses 3 of n rows in each of its
KH·KW tap MatMuls. Unfolded along the width its input holds KW·C channels and the
convolution becomes KH × 1 (KH·⌈KW·C/n⌉ MatMuls per output vector); unfolded along both
axes, KH·KW·C channels and a 1 × 1 convolution (⌈KH·KW·C/n⌉). The choice is the one with the
fewest MatMul and input vectors; an input is left as it is when neither is fewer. The
rewritten convolution carries its true MAC count (``tcu_true_macs``: padding taps are not
MACs, though the unfolded input stores them as zeros).
"""

from __future__ import annotations

import dataclasses
from math import ceil

import numpy as np

from tcu_hw.artifacts import Unfold
from tcu_hw.errors import CompileError

from .frontend import Graph, Node
from .geometry import pixel_grid, window_attrs, window_taps

INPUT_LAYOUTS = ("pixels", "unfolded")
IDENTITY = (0, 1, 2, 3)


def add_input_layout(parser) -> None:
    """The ``--input-layout`` option of the commands that compile (compiler_lite,
    sim.check)."""
    parser.add_argument(
        "--input-layout", choices=INPUT_LAYOUTS, default="pixels",
        help="pixels: a pixel per vector, as Tensil's driver writes it (default); unfolded: "
             "an input read by a convolution of few channels is stored with that "
             "convolution's kernel taps in its channels, fewer MatMuls (the host unfolds "
             "it: the .tio.json says how, docs/tensil.md)")


@dataclasses.dataclass
class Candidate:
    """An input read first by ``conv`` (through ``transpose`` when not NCHW)."""

    name: str
    conv: Node
    transpose: Node | None
    perm: tuple
    nchw: tuple                     # the input's shape as the convolution reads it


def candidates(g: Graph) -> list[Candidate]:
    """Inputs whose only reader is a 2-D, ungrouped Conv's data input (directly, or through a
    Transpose to NCHW that nobody else reads)."""
    out = []
    for name in g.inputs:
        users = g.consumers(name)
        if len(g.shapes.get(name, ())) != 4 or len(users) != 1 or name in g.outputs:
            continue
        node, transpose, perm = users[0], None, IDENTITY
        if node.op == "Transpose":
            transpose, perm = node, tuple(int(a) for a in node.attr("perm", (3, 2, 1, 0)))
            later = g.consumers(node.outputs[0])
            if len(later) != 1 or node.outputs[0] in g.outputs:
                continue
            node = later[0]
        data = transpose.outputs[0] if transpose else name
        if node.op != "Conv" or node.inputs[0] != data or data in node.inputs[1:] or \
                int(node.attr("group", 1)) != 1 or len(node.inputs) < 2 or \
                not g.is_const(node.inputs[1]):
            continue
        out.append(Candidate(name, node, transpose, perm, tuple(g.shapes[data])))
    return out


def choose(c: Candidate, g: Graph, n: int, beats: int = 1, room: int | None = None
           ) -> tuple[str, Unfold] | None:
    """(mode, :class:`Unfold`) with the fewest cycles, counting per output vector its MatMuls
    plus a store and a SIMD step, against its input's loads (``beats`` per vector at the
    board's AXI width) overlapping them: mode "w" along the width (a KH × 1 convolution
    follows), "hw" along both axes (1 × 1). An unfolding whose input is more than ``room``
    vectors larger than the pixels' is not taken (DRAM0 holds it). None when storing the
    input as pixels is as good."""
    N, C, H, W = c.nchw
    w = g.consts[c.conv.inputs[1]]
    kernel, strides, dil, pads = window_attrs(c.conv, c.nchw, w.shape[2:])
    KH, KW = kernel
    Ho, Wo = g.shapes[c.conv.outputs[0]][2:]
    outputs = N * Ho * Wo * ceil(w.shape[0] / n)
    pixels = N * H * W * ceil(C / n)

    def cost(taps: int, rest: int, vectors: int) -> tuple[int, int]:
        compute = outputs * (rest * ceil(taps * C / n) + 2)
        return max(compute, beats * vectors), compute + beats * vectors

    sizes = {None: pixels, "w": N * H * Wo * ceil(KW * C / n),
             "hw": N * Ho * Wo * ceil(KH * KW * C / n)}
    modes = [None, "hw"] + (["w"] if KW > 1 and KH > 1 else [])
    options = {m: cost(*{None: (1, KH * KW), "w": (KW, KH), "hw": (KH * KW, 1)}[m], sizes[m])
               for m in modes if room is None or sizes[m] <= pixels + room}
    best = min(options, key=lambda k: (options[k], k is not None))
    if best is None:
        return None
    if best == "w":
        return best, Unfold(c.perm, (1, KW), (1, strides[1]), (1, dil[1]), (0, pads[2]),
                            (H, Wo))
    return best, Unfold(c.perm, (KH, KW), tuple(strides), tuple(dil), (pads[0], pads[2]),
                        (Ho, Wo))


def true_macs(c: Candidate, g: Graph) -> int:
    """The convolution's MACs counted as :func:`.ops.linear.spatial_linear` counts them for
    pixels (Tensil's way: taps in the padding are not MACs)."""
    N, C, H, W = c.nchw
    w = g.consts[c.conv.inputs[1]]
    kernel, strides, dil, pads = window_attrs(c.conv, c.nchw, w.shape[2:])
    _, rows, cols = pixel_grid(N, *g.shapes[c.conv.outputs[0]][2:])
    inside = sum(int(np.count_nonzero(t[-1]))
                 for t in window_taps(rows, cols, H, W, kernel, strides, dil, pads))
    return w.shape[0] * C * inside


def unfolded_conv(c: Candidate, mode: str, g: Graph) -> tuple[Node, np.ndarray]:
    """The convolution reading the input unfolded in ``mode`` (:func:`choose`), and its
    weights (Co, K·C, KH or 1, 1)."""
    w = g.consts[c.conv.inputs[1]]
    Co, C, KH, KW = w.shape
    _, strides, dil, pads = window_attrs(c.conv, c.nchw, w.shape[2:])
    folded = w.transpose(0, 2, 3, 1)                       # (Co, KH, KW, C)
    attrs = {"group": 1, "tcu_true_macs": true_macs(c, g)}
    if mode == "w":                                        # along the width: KH × 1
        wk = folded.transpose(0, 2, 3, 1).reshape(Co, KW * C, KH, 1)
        attrs.update(kernel_shape=[KH, 1], strides=[strides[0], 1], dilations=[dil[0], 1],
                     pads=[pads[0], 0, pads[1], 0])
    else:                                                  # both axes: 1 × 1
        wk = folded.reshape(Co, KH * KW * C, 1, 1)
        attrs.update(kernel_shape=[1, 1], strides=[1, 1], dilations=[1, 1], pads=[0] * 4)
    inputs = [c.name, f"{c.conv.inputs[1]}:unfolded:{c.conv.name}"] + c.conv.inputs[2:]
    return Node("Conv", c.conv.name, inputs, list(c.conv.outputs), attrs, c.conv.domain), wk


def unfold_inputs(g: Graph, n: int, apply: bool, beats: int = 1, room: int | None = None
                  ) -> tuple[Graph, dict[str, Unfold], list]:
    """(the graph with its unfoldable inputs unfolded, input name → :class:`Unfold`, notes)
    for an n-lane array moving a vector in ``beats`` AXI beats, an unfolded input at most
    ``room`` vectors larger than its pixels. With ``apply`` False the graph is unchanged and
    the notes say what unfolding would save."""
    unfolds, notes = {}, []
    nodes, consts, shapes = list(g.nodes), dict(g.consts), dict(g.shapes)
    for c in candidates(g):
        chosen = choose(c, g, n, beats, room)
        if chosen is None:
            continue
        mode, u = chosen
        conv, wk = unfolded_conv(c, mode, g)
        _check_output(conv, u.shape(g.shapes[c.name]), wk, g.shapes[c.conv.outputs[0]])
        before = int(np.prod(g.consts[c.conv.inputs[1]].shape[2:])) * ceil(c.nchw[1] / n)
        after = int(np.prod(wk.shape[2:])) * ceil(wk.shape[1] / n)
        if not apply:
            notes.append(f"input '{c.name}': --input-layout unfolded (the host unfolds it, "
                         f"docs/tensil.md) would take '{c.conv.name}' from {before} to "
                         f"{after} MatMul vector(s) per output vector")
            continue
        unfolds[c.name] = u
        nodes = [conv if m is c.conv else m for m in nodes if m is not c.transpose]
        consts[conv.inputs[1]] = wk
        shapes[c.name] = u.shape(g.shapes[c.name])
        notes.append(f"input '{c.name}' is stored unfolded ({'×'.join(map(str, u.kernel))} "
                     f"taps in its channels): '{c.conv.name}' takes {after} MatMul vector(s) "
                     f"per output vector instead of {before}")
    if not unfolds:
        return g, {}, notes
    return dataclasses.replace(g, nodes=nodes, consts=consts, shapes=shapes), unfolds, notes


def _check_output(conv: Node, in_shape, wk: np.ndarray, want) -> None:
    """The rewritten convolution must give the original's output shape (ONNX's rule)."""
    k, st, d, p = (conv.attrs[a] for a in ("kernel_shape", "strides", "dilations", "pads"))
    got = tuple(in_shape[:1]) + (wk.shape[0],) + tuple(
        (in_shape[2 + a] + p[a] + p[a + 2] - d[a] * (k[a] - 1) - 1) // st[a] + 1
        for a in (0, 1))
    if got != tuple(want):
        raise CompileError(f"internal: node '{conv.name}' unfolded gives {list(got)}, "
                           f"not {list(want)}")
