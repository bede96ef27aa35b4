"""How a layer is cut into partitions, and where its working areas go in local memory.

A partition computes a range of the layer's output buffer: whole rows of its frame, or pixels
when a row does not fit. :class:`PartitionSearch` finds, for each way of holding the weight
tiles (all resident, or streamed in two chunks; or "held": loaded ahead into the ring, outside
the arena, see :mod:`compiler_lite.prefetch`) with and without double-buffered staging, the
largest partition that fits the accumulators and the local arena, and keeps the cheapest
(see the ``*_COST`` constants); when none fits and the layer's sum may go in any order, its
source loads in chunks (:meth:`PartitionSearch.chunked`). :func:`layout_arena` then places
tiles, constants and staging areas (see :mod:`compiler_lite.emit` for the picture).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .ir import Buffer, Space
from .kernels import Layer, Linear, Load, Reduce, Simd
from .plan import LayerConsts

#: Partitions of a layer are alike, so the search for the partition size looks at this many of
#: them at most (spread evenly), then confirms the size it chose on every partition.
SEARCH_SAMPLE = 48

#: A staged source span of at most this many vectors is always loaded whole.
SPARSE_MIN_SPAN = 16
#: A longer span loads only the vectors read when they are less than half of it and form at
#: most max(SPARSE_MIN_RUNS, vectors read // SPARSE_VECTORS_PER_RUN) runs of consecutive
#: vectors (each run is one DataMove or more).
SPARSE_MIN_RUNS = 64
SPARSE_VECTORS_PER_RUN = 32

#: The cost of a partitioning, in instructions (the lowest wins): every weight tile is loaded
#: again in every partition (LoadWeights, and its MatMul runs break there) ...
TILE_COST = 2
#: ... every partition loads each staged source and stores its output (two moves) ...
STORE_MOVES = 2
#: ... this many vectors moved from or to DRAM cost one instruction ...
DRAM_VECTORS_PER_INSTRUCTION = 16
#: ... and without double buffering each partition waits for its loads: an instruction, and
#: the staged vectors' AXI beats (as many instructions as as many DRAM vectors would cost);
#: with one accumulator area the next partition's first MatMul waits for the drain of
#: this one's outputs (a vector a cycle, counted the same way).
SINGLE_BUFFER_COST = 1

#: The fewest vectors a chunk of a source loaded chunk by chunk holds
#: (:meth:`PartitionSearch.chunked`).
CHUNK_MIN = 16


@dataclass
class Stage:
    """Vectors of one source buffer staged for a partition: the span [lo, hi), or only
    ``needed`` (sorted, packed in order) when most of the span is unused."""

    lo: int
    hi: int
    needed: np.ndarray | None = None

    @property
    def size(self) -> int:
        return self.hi - self.lo if self.needed is None else len(self.needed)

    @classmethod
    def exactly(cls, vectors: np.ndarray) -> Stage:
        """Exactly ``vectors`` (sorted, relative): their span when they fill it."""
        lo, hi = int(vectors[0]), int(vectors[-1]) + 1
        return cls(lo, hi, None if hi - lo == len(vectors) else vectors)


def stage_of(xs: np.ndarray) -> Stage:
    """What to load of a staged source whose vectors ``xs`` (relative, unsorted, repeats
    allowed) a partition reads: the span, or only those vectors when they are few and in few
    runs (see the ``SPARSE_*`` constants)."""
    lo, hi = int(xs.min()), int(xs.max()) + 1
    if hi - lo > SPARSE_MIN_SPAN:
        mask = np.zeros(hi - lo, dtype=bool)
        mask[xs - lo] = True
        count = int(mask.sum())
        if hi - lo > 2 * count:
            v = np.nonzero(mask)[0] + lo
            segments = 1 + int(np.count_nonzero(np.diff(v) != 1))
            if segments <= max(SPARSE_MIN_RUNS, count // SPARSE_VECTORS_PER_RUN):
                return Stage(lo, hi, v)         # load only what is read
    return Stage(lo, hi, None)


# ---------------------------------------------------------------------- partition ranges

def ranges_fn(layer: Layer, acc_bufs: list[Buffer]) -> Callable:
    """A function (a, b) → {acc buffer: (lo, hi)}: the vectors of every buffer the layer
    writes that a partition computing output vectors [a, b) needs."""
    F = layer.out
    steps = layer.steps

    def ranges(a, b):
        R = {F: (a, b)}

        def widen(buf, lo, hi):
            old = R.get(buf)
            if old and old[1] > old[0]:
                lo, hi = min(old[0], lo), max(old[1], hi)
            R[buf] = (lo, hi)

        for _ in range(len(steps) + 1):         # until the ranges stop growing
            before = dict(R)
            for s in reversed(steps):
                if isinstance(s, Reduce) and s.out in R:
                    lo, hi = R[s.out]
                    idx = s.indices[s.indptr[lo]:s.indptr[hi]]
                    if len(idx):
                        widen(s.src, int(idx.min()), int(idx.max()) + 1)
                elif isinstance(s, Simd) and s.aux_buf is not None and s.buf in R:
                    lo, hi = R[s.buf]
                    i0, i1 = np.searchsorted(s.o, [lo, hi])
                    if i1 > i0:
                        aux = s.aux[i0:i1]
                        widen(s.aux_buf, int(aux.min()), int(aux.max()) + 1)
            if R == before:
                break
        for buf in acc_bufs:
            R.setdefault(buf, (0, 0))
        return R
    return ranges


def spans_fn(space: Space, layer: Layer, staged: list[Buffer]) -> Callable:
    """A function ranges → {staged source buffer: :class:`Stage`}: what a partition with
    these accumulator ranges loads of each source that lives in DRAM."""
    per = []
    index = {id(b): k for k, b in enumerate(space.buffers)}
    for s in layer.steps:
        if isinstance(s, (Linear, Load)) and len(s.x):
            if isinstance(s, Linear):
                o, x = s.reads()                # data tiles are staged like sources
            else:
                ok = s.x >= 0
                o, x = s.o[ok], s.x[ok]
            own = space.owner(x)
            order = np.argsort(o, kind="stable")
            o, x, own = o[order], x[order], own[order]
            # per staged buffer: its vectors (relative) read by the step, by output vector
            by_buf = []
            for b in staged:
                sel = own == index[id(b)]
                if sel.any():
                    by_buf.append((b, o[sel], x[sel] - b.start))
            per.append((s.out, by_buf))

    def spans(R):
        found: dict = {}
        for buf_out, by_buf in per:
            lo, hi = R.get(buf_out, (0, 0))
            for b, o, xs in by_buf:
                i0, i1 = np.searchsorted(o, [lo, hi]).tolist()
                if i1 > i0:
                    found.setdefault(b, []).append(xs[i0:i1])
        return {b: stage_of(np.concatenate(parts) if len(parts) > 1 else parts[0])
                for b, parts in found.items()}
    return spans


# ---------------------------------------------------------------------- partition search

@dataclass
class Need:
    """What partitions of one size need: the most over the partitions looked at."""

    acc: int                            # accumulator vectors, the layer's constants included
    local: int                          # local vectors of the staging areas (all copies)
    bounds: list[tuple[int, int]]       # every partition's [a, b) in the output buffer
    stage: dict[Buffer, int]            # staged source → vectors of one staging area
    out: int                            # vectors of one output staging area


@dataclass
class Partitioning:
    """How a layer is cut: partitions of ``rows × units`` vectors of its output buffer.

    ``mode`` says where the weight tiles are in local memory: "all" loaded once, "stream" in
    two chunks loaded as the MatMuls go, "held" loaded ahead into the ring (outside
    this layer's arena), "none" read where the constants image has them (the constants live
    in local memory). ``acc_double``: partitions alternate between two accumulator areas,
    so one partition's MatMuls run while the drain moves the other's outputs out.
    ``chunk`` (:meth:`PartitionSearch.chunked`): the layer's one staged source is loaded
    into two areas of ``chunk`` vectors in turn, each partition's terms going chunk by
    chunk.
    """

    mode: str                           # tiles: "all", "stream", "held" or "none"
    double: bool                        # staging areas double-buffered
    rows: int
    units: int                          # vectors per row: a frame row, or one pixel
    need: Need                          # checked on every partition
    chunk: int = 0                      # > 0: the source loads in chunks of this many vectors
    acc_double: bool = False            # two accumulator areas, partitions alternating
    acc_consts: int = 0                 # accumulator vectors of the layer's constants
    acc_offset: int = 0                 # accumulator vector of the constants (then areas)

    @property
    def bounds(self) -> list[tuple[int, int]]:
        return self.need.bounds

    @property
    def acc_span(self) -> int:
        """Accumulator vectors the layer uses: its constants and one or two areas."""
        return self.need.acc + (self.need.acc - self.acc_consts) * self.acc_double

    def acc_base(self, p: int) -> int:
        """First accumulator vector of partition ``p``'s outputs (after the constants)."""
        area = self.need.acc - self.acc_consts
        first = self.acc_offset + self.acc_consts
        return first + (p % 2) * area if self.acc_double else first


class PartitionSearch:
    """Finds the partitioning of one layer that fits the accumulators and the local arena at
    the lowest cost (see the ``*_COST`` constants).

    ``ranges_of(a, b)`` gives the accumulator range of every buffer the layer writes for
    output vectors [a, b), ``spans_of(ranges)`` the vectors of each staged source they read.
    ``fixed_local`` is what the arena holds besides tiles and staging (the constants).
    ``saves``: buffers the layer also stores, partition by partition like ``out``.
    :meth:`resized` gives the search for another arena, or for tiles and constants already
    in local memory outside the arena (``held``, mode "held"). ``chunkable``: the layer may
    load its one staged source chunk by chunk when nothing else fits (:meth:`chunked`).
    ``units``: the partition units to try, largest first (default: a row of ``out``, then
    a pixel's channel blocks). ``beats``: AXI beats per DRAM vector, what a partition
    without double buffering waits for its loads.
    """

    def __init__(self, out: Buffer, staged: list[Buffer], ranges_of: Callable,
                 spans_of: Callable, lc: LayerConsts, arena: int, fixed_local: int,
                 acc_depth: int, to_local: bool, saves: tuple = (),
                 chunkable: bool = False, units: list[int] | None = None,
                 beats: int = 1) -> None:
        self.out = out
        self.beats = beats
        self.chunkable = chunkable and len(staged) == 1
        self.staged = staged
        self.ranges_of = ranges_of
        self.spans_of = spans_of
        self.arena = arena
        self.fixed_local = fixed_local
        self.acc_depth = acc_depth
        self.to_local = to_local
        self.held = False
        self.consts_local = fixed_local     # fixed_local when the arena holds the constants
        self.acc_consts = lc.simd_count
        self.tile_vectors = lc.tile_vectors
        self.tiles = sum(len(refs) for refs in lc.tiles)
        self.max_tile = max((r.rows + 1 for refs in lc.tiles for r in refs), default=0)
        # stored outputs that go to DRAM0 through a staging area
        self.out_staged = [b for b in (out, *saves) if b.home is None or b.home[0] != "local"]
        self.units = units or [out.row]     # whole frame rows, else pixels (one channel block)
        pixel = out.frame.Cb if out.frame is not None else 1
        if units is None and pixel < out.row:
            self.units.append(pixel)
        self._seen: dict = {}           # (units, rows, sampled) → what need() found

    def resized(self, arena: int, held: bool) -> PartitionSearch:
        """The same search over an arena of ``arena`` vectors, tiles ``held`` or not (what
        partitions need is shared, not looked at again)."""
        other = copy.copy(self)
        other.arena, other.held = arena, held
        other.fixed_local = 0 if held else self.consts_local
        return other

    def modes(self) -> list[str]:
        """The ways of holding the tiles this search considers."""
        if self.to_local:
            return ["none"]
        return ["held"] if self.held else ["all", "stream"]

    def rows(self, units: int) -> int:
        """Rows of ``units`` vectors in the output buffer."""
        return -(-self.out.vectors // units)

    def need(self, units: int, rows: int, double: bool, sample: bool = True) -> Need:
        """What partitions of ``rows`` rows need (on a sample of them when ``sample``)."""
        F = self.out
        bounds = [(r * units, min(F.vectors, (r + rows) * units))
                  for r in range(0, self.rows(units), rows)]
        sample = sample and len(bounds) > SEARCH_SAMPLE
        key = (units, rows, sample)                 # the same with and without double
        if key not in self._seen:
            picks = range(len(bounds))
            if sample:
                picks = sorted(set(np.linspace(0, len(bounds) - 1, SEARCH_SAMPLE).astype(int)))
            acc = 0
            stage = {b: 0 for b in self.staged}
            outv = 0
            for j in picks:
                a, b = bounds[j]
                R = self.ranges_of(a, b)
                acc = max(acc, sum(hi - lo for lo, hi in R.values()))
                for buf, stg in self.spans_of(R).items():
                    stage[buf] = max(stage[buf], stg.size)
                outv = max(outv, b - a)
            self._seen[key] = (acc, stage, outv)
        acc, stage, outv = self._seen[key]
        copies = 2 if double else 1
        local = (sum(stage.values()) + outv * len(self.out_staged)) * copies
        return Need(acc + self.acc_consts, local, bounds, dict(stage), outv)

    def room(self, need: Need) -> int:
        """Arena vectors left for weight tiles."""
        return self.arena - self.fixed_local - need.local

    def fits(self, need: Need, mode: str, acc_double: bool = False) -> bool:
        """Whether the accumulators hold ``need`` (twice with ``acc_double``) and the arena
        its staging and the tiles (held the way ``mode`` says)."""
        if need.acc + (need.acc - self.acc_consts if acc_double else 0) > self.acc_depth:
            return False
        if mode == "all":
            return self.room(need) >= self.tile_vectors
        if mode == "stream":
            return self.room(need) >= 2 * self.max_tile
        return self.room(need) >= 0

    def largest(self, units: int, mode: str, double: bool, acc_double: bool = False
                ) -> int | None:
        """The most rows per partition that fit (None when one row does not)."""
        lo, hi, best = 1, self.rows(units), None
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.fits(self.need(units, mid, double), mode, acc_double):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        while best is not None:                 # confirm on every partition
            if self.fits(self.need(units, best, double, sample=False), mode, acc_double):
                break
            best = best - 1 if best > 1 else None
        return best

    def cost(self, units: int, rows: int, mode: str, double: bool,
             acc_double: bool = False) -> float:
        """Instructions the partitioning costs, roughly (see ``TILE_COST`` and after)."""
        parts = -(-self.rows(units) // rows)
        need = self.need(units, rows, double)
        tile_dram = 0 if mode == "held" else self.tile_vectors * (parts if mode == "stream" else 1)
        if mode == "stream":
            chunk = max(1, self.room(need) // 2)
            tile_dram += parts * (-(-self.tile_vectors // chunk))
        return TILE_COST * self.tiles * parts + parts * (len(self.staged) + STORE_MOVES) + \
            (tile_dram + parts * sum(need.stage.values())) / DRAM_VECTORS_PER_INSTRUCTION + \
            (0 if double else parts * (SINGLE_BUFFER_COST + self.beats * sum(
                need.stage.values()) / DRAM_VECTORS_PER_INSTRUCTION)) + \
            (0 if acc_double or parts == 1 else
             parts * need.out * len(self.out_staged) / DRAM_VECTORS_PER_INSTRUCTION)

    def candidates(self, units: int) -> list[tuple[float, str, bool, int, bool]]:
        """(cost, mode, double, rows, acc_double) of every way that fits with rows of
        ``units``."""
        found = []
        for mode in self.modes():
            if mode == "stream" and self.tile_vectors <= 2 * self.max_tile:
                continue                        # streaming needs more than two chunks
            for double in (True, False):
                for acc_double in (False, True):
                    rows = self.largest(units, mode, double, acc_double)
                    if rows is not None:
                        found.append((self.cost(units, rows, mode, double, acc_double), mode,
                                      double, rows, acc_double))
        return found

    def choose(self) -> Partitioning | None:
        """The cheapest partitioning (rows before pixels); None when nothing fits."""
        for units in self.units:
            found = self.candidates(units)
            if found:
                _, mode, double, rows, acc_double = min(found, key=lambda c: c[0])
                return Partitioning(mode, double, rows, units,
                                    self.need(units, rows, double, sample=False),
                                    acc_double=acc_double, acc_consts=self.acc_consts)
        return None

    def chunked(self) -> Partitioning | None:
        """When no partition's sources fit the arena whole and the layer may sum its terms
        in any order (``chunkable``: one staged source, integer sums): partitions as large
        as the accumulators allow, the source loaded chunk by chunk into two areas that
        take what the tiles and the output staging leave (at least :data:`CHUNK_MIN`
        vectors each). None otherwise."""
        if not self.chunkable:
            return None
        mode = self.modes()[0]                  # "all", or "held" / "none"
        for units in self.units:
            lo, hi, rows = 1, self.rows(units), None
            while lo <= hi:                     # the most rows that fit, chunks as well
                mid = (lo + hi) // 2
                if self._chunk(units, mid, mode, True) >= CHUNK_MIN:
                    rows, lo = mid, mid + 1
                else:
                    hi = mid - 1
            while rows and self._chunk(units, rows, mode, False) < CHUNK_MIN:
                rows -= 1
            if rows:
                return Partitioning(mode, False, rows, units,
                                    self.need(units, rows, False, sample=False),
                                    self._chunk(units, rows, mode, False),
                                    acc_consts=self.acc_consts)
        return None

    def _chunk(self, units: int, rows: int, mode: str, sample: bool) -> int:
        """Vectors of each of two chunk areas that partitions of ``rows`` rows leave (0
        when the accumulators do not hold them)."""
        need = self.need(units, rows, False, sample)
        if need.acc > self.acc_depth:
            return 0
        staging = need.local - sum(need.stage.values())     # the output's
        tiles = self.tile_vectors if mode == "all" else 0
        return max(0, (self.arena - self.fixed_local - staging - tiles) // 2)

    def smallest(self) -> Need:
        """What the smallest partition needs (for the error when nothing fits)."""
        return self.need(self.units[-1], 1, False, sample=False)


# ---------------------------------------------------------------------------- arena layout

@dataclass
class Arena:
    """Local-memory addresses of one layer's working areas (see the module's picture)."""

    tiles: int | None               # the weight tiles, or the two streamed chunks
    chunk: int                      # vectors per streamed chunk (0 unless streaming)
    consts: int                     # the layer's constants block: SIMD vectors, then LUTs
    stage: dict[Buffer, list[int]]  # staged source → its staging areas (one or two)
    out_stage: dict[Buffer, list[int]]  # stored output → its staging areas (none if local)
    top: int                        # the first vector after all of them


def layout_arena(part: Partitioning, lc: LayerConsts, lo: int, chunk_room: int,
                 staged: list[Buffer], out_staged: list[Buffer], to_local: bool,
                 held_consts: int | None = None) -> Arena:
    """Place tiles, constants and staging areas from local vector ``lo`` on; ``chunk_room`` is
    what two streamed chunks may take; ``held_consts``: where the constants loaded ahead are
    (mode "held": the tiles are addressed through the ring's block)."""
    at = lo
    tiles, chunk = None, 0
    if part.mode == "all":
        tiles = at
        at += lc.tile_vectors
    elif part.mode == "stream":
        chunk = chunk_room // 2
        tiles = at
        at += 2 * chunk
    if part.mode == "held":
        consts = held_consts
    elif to_local:
        consts = lc.base
    else:
        consts = at
        at += lc.simd_local + lc.lut_vectors
    copies = 2 if part.double or part.chunk else 1
    stage = {}
    for buf in staged:
        size = part.chunk or part.need.stage[buf]
        stage[buf] = [at + j * size for j in range(copies)]
        at += size * copies
    copies = 2 if part.double else 1
    out_stage = {}
    for buf in out_staged:
        out_stage[buf] = [at + j * part.need.out for j in range(copies)]
        at += part.need.out * copies
    return Arena(tiles, chunk, consts, stage, out_stage, at)
