"""Layers as the hardware sees them: a producer into the accumulators, then steps there.

A :class:`Layer` computes one buffer. Its first step produces vectors in the accumulators
(:class:`Linear`: MatMuls through weight tiles; :class:`Load`: local → accumulator moves);
the following steps work in place on them (:class:`Simd` passes, an accumulating :class:`Load`
of another buffer, a further accumulating :class:`Linear`), or reduce windows into a new buffer
(:class:`Reduce`, e.g. max pooling); :class:`Zero` clears vectors no term writes. A :class:`Save`
stores the output as it is at that point to a buffer of its own (a tensor that others read
as it was, before the layer goes on in place). The planner cuts a layer into partitions of its
final buffer and emits each step for each partition.

Every step names vectors by their index inside its buffer (``o``) and its sources by virtual
vector (``x``, see :mod:`compiler_lite.ir`); ``x = -1`` in a :class:`Linear` is a MatMul with
the zeroes flag (the tile's bias alone). A :class:`Linear`'s weight tiles are constants
(:class:`Tiles`, in the constants image) or data that an earlier layer wrote into a buffer
(:class:`DataTiles`, for products of two computed tensors); either way a tile is a bias row
then one row per input lane, loaded by one LoadWeights from local memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ir import Buffer, first_indices, unique_columns, unique_rows

#: Values of :attr:`Linear.first`.
ACCUMULATE, OVERWRITE, ANY = 0, 1, 2


class Tiles:
    """Weight tiles of one layer: float [n+1, n] arrays, row 0 = bias, row 1+j = the weights
    that input lane j contributes to each output lane. Identical tiles are stored once."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.values: list[np.ndarray] = []
        self._index: dict[bytes, int] = {}

    def add(self, tile: np.ndarray) -> int:
        tile = np.ascontiguousarray(tile, dtype=np.float64)
        assert tile.shape == (self.n + 1, self.n), tile.shape
        key = tile.tobytes()
        k = self._index.get(key)
        if k is None:
            k = self._index[key] = len(self.values)
            self.values.append(tile)
        return k

    def __len__(self) -> int:
        return len(self.values)

    def array(self) -> np.ndarray:
        return np.stack(self.values) if self.values else np.zeros((0, self.n + 1, self.n))


@dataclass(eq=False)
class DataTiles:
    """Weight tiles that are data, written into a buffer by an earlier layer (the right
    operand of a product of two computed tensors, :mod:`compiler_lite.ops.attention`): tile
    t is the ``rows[t] + 1`` virtual vectors from ``at[t]``, laid out as a constant tile (the
    bias row, then the row of each input lane), so one LoadWeights loads it from wherever
    the buffer is in local memory (resident, or staged there from DRAM0)."""

    at: np.ndarray              # virtual vector of each tile's bias row
    rows: np.ndarray            # LoadWeights size: rows after the bias row

    def __len__(self) -> int:
        return len(self.at)

    def span(self, t) -> tuple[np.ndarray, np.ndarray]:
        """(k, vector): every virtual vector of tile ``t[k]``, for each k."""
        t = np.asarray(t, dtype=np.int64)
        count = self.rows[t] + 1
        k = np.repeat(np.arange(len(t)), count)
        within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        return k, self.at[t][k] + within


@dataclass(eq=False)
class Linear:
    """``acc[o] (+)= tile_t(x)`` for every term, terms in emission order (tile-major).

    ``first``: per term, OVERWRITE for the first term of a vector, ACCUMULATE for the rest
    (ANY, either, is allowed by the emitter). ``accumulate``: every term accumulates (a step
    after the producer). ``tiles``:
    constants (:class:`Tiles`) or data in a buffer (:class:`DataTiles`).
    """

    out: Buffer
    o: np.ndarray
    x: np.ndarray
    t: np.ndarray
    first: np.ndarray
    tiles: Tiles | DataTiles
    macs: int = 0
    accumulate: bool = False

    @property
    def term_count(self) -> int:
        """MatMul vectors: one per term."""
        return len(self.o)

    @property
    def data(self) -> bool:
        """Whether the tiles are data in a buffer (not constants)."""
        return isinstance(self.tiles, DataTiles)

    def sources(self) -> np.ndarray:
        """Virtual vectors read from memory: the terms' inputs (and the data tiles)."""
        x = self.x[self.x >= 0]
        if self.data and len(self.tiles):
            x = np.concatenate([x, self.tiles.span(np.arange(len(self.tiles)))[1]])
        return x

    def reads(self) -> tuple[np.ndarray, np.ndarray]:
        """(o, x) pairs: output vector ``o`` reads virtual vector ``x`` from memory (its
        terms' inputs, and every vector of their tiles when those are data)."""
        real = self.x >= 0
        o, x = self.o[real], self.x[real]
        if self.data:
            k, v = self.tiles.span(self.t)
            o, x = np.concatenate([o, self.o[k]]), np.concatenate([x, v])
        return o, x


def data_linear(out: Buffer, o, x, t, tiles: DataTiles, macs: int = 0) -> Linear:
    """A producer multiplying by data tiles: terms ordered tile-major (tiles in their
    numbering order), the first term of each output vector overwrites, the rest accumulate
    (so a vector's tiles must be numbered in the order its terms may run)."""
    o, x, t = (np.asarray(a, dtype=np.int64).ravel() for a in (o, x, t))
    order = np.lexsort((o, t))
    o, x, t = o[order], x[order], t[order]
    first = np.full(len(o), ACCUMULATE, dtype=np.int64)
    first[np.unique(o, return_index=True)[1]] = OVERWRITE
    return Linear(out, o, x, t, first, tiles, macs)


class LinearBuilder:
    """Collects terms group by group (a group = one tile over many outputs, emitted as runs)
    and orders them tile-major; the first term of each vector overwrites."""

    def __init__(self, out: Buffer, n: int, tiles: Tiles | None = None) -> None:
        self.out = out
        self.tiles = tiles or Tiles(n)
        self._parts: list[tuple] = []
        self.macs = 0
        self.clear: np.ndarray | None = None     # vectors with elements but no term

    def add(self, o, x, tile: np.ndarray) -> None:
        """Terms ``acc[o] += tile(x)``."""
        o = np.asarray(o, dtype=np.int64).ravel()
        x = np.asarray(x, dtype=np.int64).ravel()
        if not o.size:
            return
        t = self.tiles.add(tile)
        self._parts.append((t, len(self._parts), o, x))

    @property
    def term_count(self) -> int:
        """MatMul vectors of the terms added so far."""
        return sum(len(p[2]) for p in self._parts)

    def sources(self) -> np.ndarray:
        """Virtual vectors the terms added so far read (padding terms left out)."""
        if not self._parts:
            return np.zeros(0, dtype=np.int64)
        x = np.concatenate([p[3] for p in self._parts])
        return x[x >= 0]

    def covered(self) -> np.ndarray:
        """Per vector of ``out``: whether a term added so far writes it."""
        mask = np.zeros(self.out.vectors, dtype=bool)
        for _, _, o, _ in self._parts:
            mask[o] = True
        return mask

    def build(self, accumulate: bool = False, scale: np.ndarray | None = None,
              offset: np.ndarray | None = None) -> Linear:
        """Order the terms and fix their flags. ``scale``/``offset`` (out.vectors × n) fold
        ``y' = scale·y + offset`` into the tiles: every tile's output lanes are scaled, and
        the offset joins the bias of each vector's first term (tiles split where needed)."""
        e = np.zeros(0, dtype=np.int64)
        n = self.tiles.n
        if not self._parts:
            return Linear(self.out, e, e, e, e, Tiles(n), self.macs, accumulate)
        rank: dict[int, int] = {}                       # tile → position of first use
        for t, *_ in self._parts:
            rank.setdefault(t, len(rank))
        parts = sorted(self._parts, key=lambda p: (rank[p[0]], p[1]))
        o = np.concatenate([p[2] for p in parts])
        x = np.concatenate([p[3] for p in parts])
        lens = np.array([len(p[2]) for p in parts], dtype=np.int64)
        t = np.repeat(np.array([rank[p[0]] for p in parts], dtype=np.int64), lens)
        g = np.repeat(np.arange(len(parts), dtype=np.int64), lens)
        # groups are already tile-major; inside a group, by output (usually already so)
        if len(o) > 1 and not np.all((g[1:] != g[:-1]) | (o[1:] >= o[:-1])):
            order = np.lexsort((o, g))
            o, x, t = o[order], x[order], t[order]
        else:
            order = np.arange(len(o))
        values = [self.tiles.values[old] for old in sorted(rank, key=rank.get)]
        first_idx = first_indices(o)
        first = np.full(len(o), ACCUMULATE, dtype=np.int64)
        if not accumulate:
            first[first_idx] = OVERWRITE
        tiles = Tiles(n)
        if scale is None and offset is None:
            for v in values:
                tiles.add(v)
            return Linear(self.out, o, x, t, first, tiles, self.macs, accumulate)
        rows = self.out.vectors
        scale = np.ones((rows, n)) if scale is None else scale
        offset = np.zeros((rows, n)) if offset is None else offset
        spat, s_of = unique_rows(scale)
        opat, o_of = unique_rows(offset)
        is_first = np.zeros(len(o), dtype=bool)
        is_first[first_idx] = not accumulate
        ukey, new_t = unique_columns([t, s_of[o], np.where(is_first, o_of[o], -1)],
                                     return_inverse=True)
        ukey = ukey.T
        # keep the group order (first terms stay first); inside a group, tile-major (and a
        # vector's first term before its others when a group gives a vector several terms)
        keys = [o, new_t, g[order]]
        if unique_columns([g[order], o]).shape[1] < len(o):
            keys.insert(2, first != OVERWRITE)
        reorder = np.lexsort(keys)
        o, x, new_t, first = o[reorder], x[reorder], new_t[reorder], first[reorder]
        ids = []
        for old, sp, op_ in ukey:
            tile = values[old] * spat[sp][None, :]
            if op_ >= 0:
                tile = tile.copy()
                tile[0] += opat[op_]
            ids.append(tiles.add(tile))
        remap = np.array(ids, dtype=np.int64)
        return Linear(self.out, o, x, remap[new_t], first, tiles, self.macs, accumulate)


@dataclass(eq=False)
class Load:
    """``acc[o] = local[x]`` (DataMove local → accumulators), or accumulate with ``add``."""

    out: Buffer
    o: np.ndarray
    x: np.ndarray
    add: bool = False

    @property
    def term_count(self) -> int:
        """Vectors moved: one per term."""
        return len(self.o)

    def sources(self) -> np.ndarray:
        """Virtual vectors read from memory (``x`` < 0: none)."""
        return self.x[self.x >= 0]


@dataclass(frozen=True)
class SimdStep:
    """One SIMD instruction per vector: ``op(left, right)``; sources/dest as in TCU.md §4.4
    (source 0 = the input vector). ``read``/``write`` say which accumulator vector is read
    and written: None, "self" (the pass's vector) or "aux" (its paired vector)."""

    op: int
    left: int = 0
    right: int = 0
    dest: int = 0
    read: str | None = "self"
    write: str | None = "self"
    accumulate: bool = False


def register_step(op: int, left: int, right: int, dest: int, read: str | None = None,
                  write: str | None = None) -> SimdStep:
    """A :class:`SimdStep` that, unless told, neither reads nor writes the accumulators
    (the steps of a long computation in the registers)."""
    return SimdStep(op, left, right, dest, read=read, write=write)


@dataclass(eq=False)
class Simd:
    """A pass over vectors ``o`` of ``buf``: ``setup`` once per partition (register loads:
    ("zero", r) or ("const", r, key) with ``consts[key]`` a float vector put in the
    accumulators; table loads: ("lut", key) with ``luts[key]`` the tables), then ``body`` for
    each vector in order. ``aux`` pairs each vector with a vector of ``aux_buf``, another
    accumulator buffer (a temporary, or an operand loaded by an earlier step)."""

    buf: Buffer
    o: np.ndarray
    setup: list
    body: list[SimdStep]
    aux: np.ndarray | None = None
    aux_buf: Buffer | None = None
    consts: dict = field(default_factory=dict)      # key → float vector (n,)
    luts: dict = field(default_factory=dict)        # key → lookup tables (float arrays)
    is_relu: bool = False                           # a ReLU (a max pooling can absorb it)


@dataclass(eq=False)
class Reduce:
    """``out[o] = op over src[window]`` (op = SIMD Max or Add) by a chain through register 1
    (``relu``, for Max: the chain starts from zero, which also applies a ReLU)."""

    out: Buffer
    src: Buffer
    indptr: np.ndarray          # CSR over out vectors 0..out.vectors-1
    indices: np.ndarray         # src vector indices
    relu: bool = False
    op: int = 15                # tcu_hw.isa.SimdOp.MAX


@dataclass(eq=False)
class Zero:
    """Clear vectors ``o`` of ``buf`` (outputs that no term writes)."""

    buf: Buffer
    o: np.ndarray


@dataclass(eq=False)
class Save:
    """Store every vector of the layer's ``out`` as it is now to ``to`` (laid out like
    ``out``: vector k to vector k), each partition its own range."""

    to: Buffer


@dataclass(eq=False)
class Layer:
    """One partitioned computation of ``out``: ``steps[0]`` produces into the accumulators."""

    name: str
    nodes: list[str]
    steps: list
    out: Buffer
    macs: int = 0
    fold: tuple | None = None                       # (scale, offset) for the producer
    #: no later node may work on the output in the accumulators (an integer layer: its
    #: requantized values saturate to the data type only on the way to memory)
    sealed: bool = False

    @property
    def written(self) -> list[Buffer]:
        """Buffers the layer stores: its output, then those its :class:`Save` steps write."""
        return [self.out] + [s.to for s in self.steps if isinstance(s, Save)]


def sums_in_any_order(layer: Layer) -> bool:
    """Whether only the layer's producer reads memory, as a sum of terms that could go in
    any order when its type sums exactly: a Linear over constant tiles, then only in-place
    SIMD and Zero steps (no Load, Reduce or second Linear reads memory, no Save stores
    midway)."""
    head, *rest = layer.steps
    return isinstance(head, Linear) and not head.data and \
        all(isinstance(s, (Simd, Zero)) for s in rest)
