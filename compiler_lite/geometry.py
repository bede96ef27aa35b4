"""Spatial geometry shared by the lowering and the operators: the (S0, S1) plane of a
[N, C, L] or [N, C, H, W] tensor, and the windows (kernel, strides, dilations, pads) of
convolution and pooling nodes.
"""

from __future__ import annotations

import numpy as np

from .frontend import Node
from .ir import ceil_div


def spatial(shape) -> tuple[int, int] | None:
    """(S0, S1) of a [N, C, S...] tensor with 1 or 2 spatial axes (1-D as one row)."""
    if len(shape) == 3:
        return 1, int(shape[2])
    if len(shape) == 4:
        return int(shape[2]), int(shape[3])
    return None


def check_spatial(node, g, arch) -> list[str]:
    """Checker (see :mod:`compiler_lite.registry`) of ops whose input must be a 1-D or 2-D
    signal."""
    shape = g.shapes.get(node.inputs[0])
    if shape is None:
        return ["unknown input shape"]
    if spatial(shape) is None:
        return [f"input rank {len(shape)}: only 1-D and 2-D signals ([N,C,L] or [N,C,H,W]) "
                f"are supported"]
    return []


def conv_pads(node: Node, in_shape, kernel, strides, dilations) -> list[int]:
    """Explicit pads [b0, b1, ..., e0, e1, ...] after resolving ``auto_pad``."""
    dims = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", "", None):
        pads = list(node.attr("pads", [0] * 2 * dims))
        return pads if pads else [0] * 2 * dims
    if auto == "VALID":
        return [0] * 2 * dims
    begin, end = [], []
    for k in range(dims):
        size = in_shape[2 + k]
        out = ceil_div(size, strides[k])
        total = max(0, (out - 1) * strides[k] + (kernel[k] - 1) * dilations[k] + 1 - size)
        small, big = total // 2, total - total // 2
        b, e = (small, big) if auto == "SAME_UPPER" else (big, small)
        begin.append(b)
        end.append(e)
    return begin + end


def window_attrs(node: Node, in_shape, kernel=None):
    """(kernel, strides, dilations, pads [t, b, l, r] on (S0, S1)) of a Conv/Pool node on a
    1-D or 2-D input."""
    dims = len(in_shape) - 2
    kernel = list(kernel if kernel is not None else node.attr("kernel_shape"))
    strides = list(node.attr("strides", [1] * dims) or [1] * dims)
    dil = list(node.attr("dilations", [1] * dims) or [1] * dims)
    pads = conv_pads(node, in_shape, kernel, strides, dil)
    if dims == 1:                       # a 1-D signal is one row: its axis is S1
        return ([1, kernel[0]], [1, strides[0]], [1, dil[0]], [0, 0, pads[0], pads[1]])
    return kernel, strides, dil, [pads[0], pads[2], pads[1], pads[3]]


def ceil_mode_problems(node: Node, g) -> list[str]:
    """A pool with ``ceil_mode = 1`` whose last window starts past the input, in the end
    padding: onnxruntime (like PyTorch) leaves that window out and ONNX's shape inference
    keeps it, so the output's shape is not one thing; refused rather than computed."""
    shape, out = g.shapes.get(node.inputs[0]), g.shapes.get(node.outputs[0])
    if not node.attr("ceil_mode", 0) or shape is None or out is None or \
            spatial(shape) is None or spatial(out) is None:
        return []
    _, strides, _, pads = window_attrs(node, shape)
    size, count = spatial(shape), spatial(out)
    for axis, name in ((0, "rows"), (1, "columns")):
        start = (count[axis] - 1) * strides[axis] - pads[2 * axis]
        if start >= size[axis]:
            return [f"ceil_mode = 1 makes a last window along the {name} that starts at "
                    f"{start}, past the input's {size[axis]} (in the end padding): "
                    f"onnxruntime leaves it out, ONNX's shape inference keeps it; use less "
                    f"end padding or ceil_mode = 0"]
    return []


def pixel_grid(N: int, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, row, column) of every pixel of N images of rows × cols, flat, row-major."""
    return tuple(a.ravel() for a in np.meshgrid(np.arange(N), np.arange(rows), np.arange(cols),
                                                indexing="ij"))


def window_taps(rows, cols, S0: int, S1: int, kernel, strides, dil, pads):
    """Per kernel tap: (kh, kw, i0, i1, inside), the input pixel (i0, i1) that output pixels
    (``rows``, ``cols``: arrays of output coordinates) read through the tap, and whether it
    lies inside the S0 × S1 input (False: in the padding). ``pads`` is [t, b, l, r] as
    :func:`window_attrs` gives it."""
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            i0 = rows * strides[0] + kh * dil[0] - pads[0]
            i1 = cols * strides[1] + kw * dil[1] - pads[2]
            yield kh, kw, i0, i1, (i0 >= 0) & (i0 < S0) & (i1 >= 0) & (i1 < S1)
