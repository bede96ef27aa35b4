"""The compiler's view of data: buffers of vectors and tensors as index maps into them.

Every activation lives in a :class:`Buffer`: a run of vectors the planner later places in
DRAM0 or local memory. Buffers share one *virtual vector space* so that a vector anywhere is
one integer (``buffer.start + i``). A :class:`Tensor` is a view: ``idx`` has the tensor's
ONNX shape and holds, for every element, its virtual scalar address ``vector·n + lane``.
Reshape, Transpose, Squeeze, Slice, Split and Concat only rearrange ``idx`` (no
instructions); consumers read the structure they need from it (which vectors hold a pixel's
channels, and in which lanes) and fold any lane order into their weights.

Spatial buffers use a *frame* (:class:`Frame`): images stacked along the outer spatial axis,
pixels row-major with ``Cb`` vectors each (one per block of n channels), rows of pitch ``P``
pixels and ``M`` rows between images (the lowering uses ``P`` = the row's width and ``M`` = 0:
a padded window never reads outside its input, so no buffer needs zero margins).

::

    frame of one 2 × 4 image, Cb = 2 (channels 0..n-1 in a, n..2n-1 in b)

        a b a b a b a b        row 0: pixel (0, 0) … (0, 3)
        a b a b a b a b        row 1
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(x: int) -> int:
    return 1 << max(0, (int(x) - 1).bit_length())


# ------------------------------------------------------------- integer sets without sorting

def distinct(values) -> np.ndarray:
    """``np.unique(values)`` of an integer array, through a mask (no sort) when the values
    span a small range."""
    v = np.asarray(values).reshape(-1)
    if not v.size or v.dtype.kind not in "iu":
        return np.unique(v)
    lo, hi = int(v.min()), int(v.max())
    if hi - lo > 4 * v.size + 1024:
        return np.unique(v)
    mask = np.zeros(hi - lo + 1, dtype=bool)
    mask[v - lo] = True
    return (np.flatnonzero(mask) + lo).astype(v.dtype, copy=False)


def unique_columns(rows, return_inverse: bool = False):
    """``np.unique(np.stack(rows), axis=1)`` (and the inverse, flat) for equal-length integer
    arrays ``rows``, through one integer key per column: much faster than a unique along an
    axis, same result."""
    rows = [np.asarray(r, dtype=np.int64).reshape(-1) for r in rows]
    lows = [int(r.min()) for r in rows] if len(rows[0]) else []
    spans = [int(r.max()) - lo + 1 for r, lo in zip(rows, lows)]
    if not lows or int(np.prod(spans, dtype=object)) >= 1 << 62:
        out = np.unique(np.stack(rows), axis=1, return_inverse=return_inverse)
        return (out[0], out[1].reshape(-1)) if return_inverse else out
    key = rows[0] - lows[0]
    for r, lo, span in zip(rows[1:], lows[1:], spans[1:]):
        key = key * span + (r - lo)
    if return_inverse:
        u, inv = np.unique(key, return_inverse=True)
    else:
        u = np.unique(key)
    cols = []
    for lo, span in zip(reversed(lows), reversed(spans)):
        cols.append(u % span + lo)
        u = u // span
    out = np.stack(cols[::-1])
    return (out, inv.reshape(-1)) if return_inverse else out


def unique_pairs(a: np.ndarray, b: np.ndarray, return_inverse: bool = False):
    """``np.unique(np.stack([a, b]), axis=1)`` (see :func:`unique_columns`)."""
    return unique_columns([a, b], return_inverse)


def first_indices(o: np.ndarray) -> np.ndarray:
    """Index of the first occurrence of each value of ``o`` (in order of the values): the
    ``return_index`` of ``np.unique(o)``, without a stable sort."""
    if not len(o):
        return np.zeros(0, dtype=np.int64)
    lo = int(o.min())
    pos = np.full(int(o.max()) - lo + 1, len(o), dtype=np.int64)
    np.minimum.at(pos, o - lo, np.arange(len(o), dtype=np.int64))
    return pos[pos < len(o)]


def unique_rows(a: np.ndarray):
    """``np.unique(a, axis=0, return_inverse=True)`` (the inverse flat) for a 2-D array:
    rows of equal bytes are merged first (a fast sort of raw bytes), then ``np.unique`` sorts
    the distinct rows. When that merges rows of different bytes (0.0 and -0.0) or a row holds
    NaN, ``np.unique`` of all the rows decides, so the result is always the same."""
    a = np.ascontiguousarray(a)
    if a.ndim != 2 or not a.size:
        u, inv = np.unique(a, axis=0, return_inverse=True)
        return u, inv.reshape(-1)
    raw = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).reshape(-1)
    _, first, inv_raw = np.unique(raw, return_index=True, return_inverse=True)
    rows = a[first]
    u, inv = np.unique(rows, axis=0, return_inverse=True)
    if len(u) != len(rows) or (a.dtype.kind in "fc" and np.isnan(rows).any()):
        u, inv = np.unique(a, axis=0, return_inverse=True)
        return u, inv.reshape(-1)
    return u, inv.reshape(-1)[inv_raw.reshape(-1)]


@dataclass(eq=False)
class Buffer:
    """A run of ``vectors`` vectors holding (part of) one or more tensors.

    ``row``: vectors per row, the unit the planner partitions by.
    ``dirty``: lanes outside the tensor may hold non-zero values (e.g. after an op with
    f(0) ≠ 0); in a clean buffer they are zero, which lets a weight tile skip its zero rows.
    ``home``: where the planner put it: ("dram0"|"dram1"|"local", vector address).
    """

    name: str
    vectors: int
    start: int
    row: int = 1
    frame: "Frame | None" = None
    packed: int = 1                     # pixels per vector (packed_layout), else 1
    dirty: bool = False
    home: tuple | None = None
    role: str = "temp"                  # input | output | temp | const
    data: np.ndarray | None = None      # constant buffers: float values (vectors, n)
    elements: int = 0                   # logical elements its producer writes
    extent: np.ndarray | None = None    # per vector: 1 + highest lane holding an element

    def set_extent(self, idx: np.ndarray, n: int) -> None:
        """Record which lanes of each vector hold elements of ``idx`` (virtual scalar
        addresses into this buffer); other lanes stay zero unless the buffer is dirty."""
        ext = np.zeros(self.vectors, dtype=np.int64)
        v, lane = np.divmod(np.asarray(idx).reshape(-1) - self.start * n, n)
        np.maximum.at(ext, v, lane + 1)
        self.extent = ext

    def __repr__(self) -> str:
        return f"Buffer({self.name!r}, {self.vectors} vectors @{self.start})"


class Space:
    """The virtual vector space: allocates buffers and finds the owner of a vector."""

    def __init__(self, n: int, start: int = 0) -> None:
        self.n = n
        self.buffers: list[Buffer] = []
        self._next = start                  # the next buffer's first vector

    def new(self, name: str, vectors: int, **kw) -> Buffer:
        b = Buffer(name, int(vectors), self._next, **kw)
        self._next += max(1, int(vectors))
        self.buffers.append(b)
        return b

    def owner(self, vec) -> np.ndarray:
        """Index into :attr:`buffers` of the buffer holding each virtual vector."""
        starts = np.fromiter((b.start for b in self.buffers), dtype=np.int64,
                             count=len(self.buffers))
        return np.searchsorted(starts, np.asarray(vec), side="right") - 1

    def owners(self, vec) -> np.ndarray:
        """``np.unique(self.owner(vec))`` for a non-empty ``vec``, without sorting ``vec``:
        the sorted indices into :attr:`buffers` of the buffers holding any of the vectors."""
        vec = np.asarray(vec)
        ends = self.owner([vec.min(), vec.max()])
        if ends[0] == ends[1]:                          # owners grow with the vector
            return ends[:1]
        return np.flatnonzero(np.bincount(self.owner(vec).reshape(-1) + 1)) - 1


@dataclass(eq=False)
class Tensor:
    """A view: ``idx[element] = virtual vector · n + lane`` for every element of the shape."""

    idx: np.ndarray
    name: str = ""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.idx.shape)

    def vectors(self, n: int) -> np.ndarray:
        return distinct(self.idx // n)


# ------------------------------------------------------------------------------ layouts

def io_order(rank: int) -> tuple[int, ...]:
    """Axis order (outer → inner, the last in lanes) of a model input or output: channels-last
    for rank ≥ 3 (NCHW → NHWC, NCL → NLC), the last axis otherwise (TCU.md §5)."""
    if rank >= 3:
        return (0, *range(2, rank), 1)
    return tuple(range(rank))


def flat_layout(space: Space, name: str, shape, order, n: int, pad_pow2: bool = False,
                **kw) -> tuple[Buffer, Tensor]:
    """A new buffer holding ``shape`` with axes in ``order`` (last = lanes, zero-padded to a
    whole number of vectors); ``pad_pow2`` rounds the vectors per row up to a power of two."""
    shape = tuple(int(d) for d in shape)
    order = tuple(order) if shape else ()
    inner = shape[order[-1]] if shape else 1
    per_row = ceil_div(inner, n)
    pitch = next_pow2(per_row) if pad_pow2 else per_row
    outer = int(np.prod([shape[a] for a in order[:-1]])) if shape else 1
    buf = space.new(name, outer * pitch, row=pitch, elements=int(np.prod(shape, dtype=np.int64)),
                    **kw)
    if not shape:
        t = Tensor(np.array(buf.start * n, dtype=np.int64), name)
        buf.set_extent(t.idx, n)
        return buf, t
    perm_shape = [shape[a] for a in order]
    ar = np.arange(int(np.prod(perm_shape)), dtype=np.int64).reshape(perm_shape)
    o, c = np.divmod(ar, inner)
    idx = (buf.start + o * pitch + c // n) * n + c % n
    buf.set_extent(idx, n)
    return buf, Tensor(np.transpose(idx, np.argsort(order)), name)


def packed_layout(space: Space, name: str, shape, k: int, n: int) -> tuple[Buffer, Tensor]:
    """A new buffer for a [N, C, S0, S1] tensor with ``k`` neighbouring pixels of a row in
    each vector (C ≤ n/k): pixel (h, w) in vector (n·S0 + h)·⌈S1/k⌉ + w // k, its channels
    from lane (w mod k)·n/k. For few channels on a wide array: the lanes are used and there
    are k times fewer vectors to compute, move and store."""
    N, C, S0, S1 = (int(d) for d in shape)
    per_row = ceil_div(S1, k)
    buf = space.new(name, N * S0 * per_row, row=per_row, elements=N * C * S0 * S1, packed=k)
    nn, cc, hh, ww = np.meshgrid(np.arange(N), np.arange(C), np.arange(S0), np.arange(S1),
                                 indexing="ij")
    idx = (buf.start + (nn * S0 + hh) * per_row + ww // k) * n + (ww % k) * (n // k) + cc
    buf.set_extent(idx, n)
    return buf, Tensor(idx.astype(np.int64), name)


@dataclass(frozen=True)
class Frame:
    """Geometry of a spatial buffer [N, C, S0, S1] (S1 = 1 for 1-D signals).

    ``outer`` is the spatial axis (0 or 1 of S0, S1) stored outermost; rows of the other axis
    have pitch ``P`` pixels; ``M`` rows before, between and after images; ``Cb`` vectors
    per pixel (≥ ceil(C/n); a power of two keeps pixel strides encodable).
    """

    N: int
    S0: int
    S1: int
    Cb: int
    P: int
    M: int = 0
    outer: int = 0

    @property
    def rows(self) -> int:                         # logical rows of one image
        return self.S0 if self.outer == 0 else self.S1

    @property
    def cols(self) -> int:
        return self.S1 if self.outer == 0 else self.S0

    @property
    def row_vectors(self) -> int:
        return self.P * self.Cb

    @property
    def vectors(self) -> int:
        return (self.M + self.N * (self.rows + self.M)) * self.row_vectors

    def pixel(self, n, s0, s1):
        """Vector of channel block 0 of pixel (n, s0, s1) (numpy broadcasting; the formula
        extends past the image)."""
        r, c = (s0, s1) if self.outer == 0 else (s1, s0)
        return ((self.M + np.asarray(n) * (self.rows + self.M) + r) * self.P + c) * self.Cb


def frame_layout(space: Space, name: str, shape, frame: Frame, n: int,
                 **kw) -> tuple[Buffer, Tensor]:
    """A new framed buffer for a [N, C, S0(, S1)] tensor."""
    shape = tuple(shape)
    N, C = shape[0], shape[1]
    S0 = shape[2]
    S1 = shape[3] if len(shape) > 3 else 1
    assert (N, S0, S1) == (frame.N, frame.S0, frame.S1), (shape, frame)
    buf = space.new(name, frame.vectors, row=frame.row_vectors, frame=frame,
                    elements=int(np.prod(shape, dtype=np.int64)), **kw)
    nn, cc, s0, s1 = np.meshgrid(np.arange(N), np.arange(C), np.arange(S0), np.arange(S1),
                                 indexing="ij")
    idx = (buf.start + frame.pixel(nn, s0, s1) + cc // n) * n + cc % n
    buf.set_extent(idx, n)
    return buf, Tensor(idx.reshape(shape).astype(np.int64), name)


# --------------------------------------------------------------------- structure of a view

def lane_table(t: Tensor, n: int, values, fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(vectors of ``t``, sorted; (vectors, n) table): ``values`` (broadcast to ``t``'s shape)
    in the lanes that hold ``t``'s elements, ``fill`` elsewhere. Per-lane constants of SIMD
    passes come from such a table, one pass per distinct row."""
    v, lane = np.divmod(t.idx.reshape(-1), n)
    vecs = np.unique(v)
    table = np.full((len(vecs), n), float(fill))
    table[np.searchsorted(vecs, v), lane] = np.broadcast_to(
        np.asarray(values, dtype=np.float64), t.shape).reshape(-1)
    return vecs, table


def congruent_pairs(a: Tensor, b: Tensor, n: int) -> np.ndarray | None:
    """(vectors of ``a``, vectors of ``b``) pairs when every vector of ``a`` takes its
    elements from one vector of ``b`` (broadcast to ``a``'s shape) in the same lanes, so
    that whole-vector moves put ``b`` next to ``a``; else None."""
    ai, bi = a.idx.reshape(-1), np.broadcast_to(b.idx, a.shape).reshape(-1)
    if not np.array_equal(ai % n, bi % n):
        return None
    pairs = unique_pairs(ai // n, bi // n)
    if len(np.unique(pairs[0])) != pairs.shape[1]:
        return None
    return pairs


@dataclass
class Groups:
    """How a view stores "rows" of elements (pixels × channels, or matrix rows × columns).

    For every row r (flattened over the row axes) the elements sit in vectors
    ``base[r] + off[s]`` for slots s, element k of the row in slot ``slot[k]`` and lane
    ``lane[k]``; the same for every row. ``affine``: (origin, strides per row axis) when
    ``base`` is an affine function of the row coordinates (then positions outside the
    tensor can be extrapolated), else None.
    """

    base: np.ndarray            # shape of the row axes
    off: np.ndarray             # (slots,) vector offsets
    slot: np.ndarray            # (K,) slot of each element of a row
    lane: np.ndarray            # (K,)
    affine: tuple | None = None

    @property
    def slots(self) -> int:
        return len(self.off)

    def lanes_of(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(element indices k, lanes) held by slot s."""
        k = np.nonzero(self.slot == s)[0]
        return k, self.lane[k]


def groups(t: Tensor, row_axes, elem_axes, n: int) -> Groups | None:
    """Analyse ``t`` as rows (over ``row_axes``) of elements (over ``elem_axes``); None when
    rows do not all store their elements the same way (the caller then relayouts)."""
    idx = np.transpose(t.idx, (*row_axes, *elem_axes))
    rshape = idx.shape[:len(row_axes)]
    flat = idx.reshape(int(np.prod(rshape, dtype=np.int64)), -1)
    if flat.shape[1] == 0 or flat.shape[0] == 0:
        return None
    vec, lane = np.divmod(flat, n)
    if not (lane == lane[0]).all():
        return None
    rel = vec - vec[:, :1]
    if not (rel == rel[0]).all():
        return None
    offs, slot = np.unique(rel[0], return_inverse=True)
    # two elements of a row in one vector must not share a lane
    key = slot * n + lane[0]
    if len(np.unique(key)) != len(key):
        return None
    base = (vec[:, 0] + offs[0]).reshape(rshape)
    g = Groups(base, offs - offs[0], slot, lane[0].copy())
    g.affine = affine_fit(base)
    return g


def affine_fit(base: np.ndarray):
    """(origin, strides) with ``base[i, j, ...] = origin + Σ i_k·stride_k``, or None."""
    origin = int(base.flat[0])
    strides = []
    for ax in range(base.ndim):
        if base.shape[ax] > 1:
            sl = [0] * base.ndim
            sl[ax] = 1
            strides.append(int(base[tuple(sl)]) - origin)
        else:
            strides.append(0)
    grid = np.indices(base.shape, dtype=np.int64)
    pred = origin + sum(g * s for g, s in zip(grid, strides))
    return (origin, tuple(strides)) if np.array_equal(pred, base) else None
