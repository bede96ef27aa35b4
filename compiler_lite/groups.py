"""Channel-group partitions: a layer computes its output a group of channel blocks at a time.

A partition is a range of the accumulators, and the output buffer keeps a pixel's channel
blocks together, so a partition of a layer with many blocks per pixel holds few pixels (2,048
accumulators hold 8 pixels of 2,048 channels on an 8×8 array). When the weight tiles do not
fit local memory they stream from DRAM1 in every partition, each tile meeting only those few
pixels: its push (n + 1 cycles) is not hidden, and the tiles are loaded as many times as there
are partitions (ResNet-50v2's last stage: 9 times 442k vectors on Arty). Ordering the
accumulators group by group instead lets a partition hold many pixels of a few blocks::

    output buffer (pixel-major)     accumulator positions, 2 groups (group-major)
    p0: b0 b1 b2 b3                 g0: p0b0 p0b1 p1b0 p1b1 p2b0 p2b1 …
    p1: b0 b1 b2 b3                 g1: p0b2 p0b3 p1b2 p1b3 p2b2 p2b3 …
    …

Each partition then uses the tiles of its group only, laid out group by group in the constants
image (:func:`regroup_tiles`) so that a partition streams just its group's. Every output
vector's terms keep their order (a vector's tiles are all in its group, and the order within
a group is the old one), so every sum is the same, bit for bit; the stores put each
partition's vectors back in their places. :func:`choose_groups` compares the layer's cycles
under each grouping with a model of the compute unit (a tile costs the larger of its MatMuls
and its pushes) and of DRAM (beats per vector), and keeps a grouping only when it saves at
least :data:`MIN_GAIN` of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from .ir import Buffer
from .kernels import Layer, Linear, Load, Save, Simd, Tiles, Zero
from .partition import Partitioning, PartitionSearch
from .plan import LayerConsts, TileRef
from .summary import LOADER_START

#: A grouping is kept when the model says it takes at most this fraction of the cycles
#: of the layer's partitioning without groups.
MIN_GAIN = 0.9
#: DRAM cycles the model charges per store instruction of a grouped layer (its stores go a
#: run per pixel, or one vector each when the pixel stride is not encodable).
MOVE_CYCLES = 8


@dataclass
class Grouping:
    """A layer's output ordered group-major in the accumulators: ``position[v]`` is output
    vector v's accumulator position, ``order`` the inverse; ``layer`` has every step's
    vectors in positions."""

    groups: int
    position: np.ndarray
    order: np.ndarray
    layer: Layer


def eligible(layer: Layer) -> bool:
    """Whether the layer's steps all work on its output vector by vector (no Reduce, no
    data tiles; a SIMD step may pair its vectors with another buffer's, which keeps its own
    order unless it follows the output's, :func:`following`) and the output keeps ≥ 2
    channel blocks per pixel."""
    F = layer.out
    f = F.frame
    if f is None or f.Cb < 2 or F.packed > 1 or F.vectors % f.Cb:
        return False
    for s in layer.steps:
        if isinstance(s, Linear):
            ok = s.out is F and not s.data
        elif isinstance(s, Load):
            ok = s.out is F
        elif isinstance(s, Simd):
            ok = s.buf is F
        elif isinstance(s, Zero):
            ok = s.buf is F
        else:
            ok = isinstance(s, Save) and s.to.vectors == F.vectors
        if not ok:
            return False
    return True


def positions(F: Buffer, groups: int) -> np.ndarray:
    """Accumulator position of every vector of ``F`` with its blocks in ``groups`` groups."""
    cb = F.frame.Cb
    per = cb // groups
    pixel, block = np.divmod(np.arange(F.vectors, dtype=np.int64), cb)
    return (block // per) * (F.vectors // cb * per) + pixel * per + block % per


def tile_groups(s: Linear, F: Buffer, groups: int) -> np.ndarray | None:
    """The group of every tile of ``s``, or None when a tile serves two groups (an identical
    tile shared by blocks: its place could not follow both)."""
    per = F.frame.Cb // groups
    g = (s.o % F.frame.Cb) // per
    lo = np.full(len(s.tiles), groups, dtype=np.int64)
    hi = np.full(len(s.tiles), -1, dtype=np.int64)
    np.minimum.at(lo, s.t, g)
    np.maximum.at(hi, s.t, g)
    used = hi >= 0
    if np.any(lo[used] != hi[used]):
        return None
    return np.where(used, lo, 0)


def following(layer: Layer) -> set[int]:
    """ids of the buffers whose positions follow the output's: the output, and any buffer
    of its size that SIMD steps pair only vector for vector with it (a temporary)."""
    F = layer.out
    simd = [s for s in layer.steps if isinstance(s, Simd) and s.aux_buf is not None]
    same = {id(s.aux_buf) for s in simd if s.aux_buf.vectors == F.vectors}
    for s in simd:
        if s.aux_buf is not F and not np.array_equal(s.aux, s.o):
            same.discard(id(s.aux_buf))
    return same | {id(F)}


def grouped(layer: Layer, groups: int) -> Grouping | None:
    """The layer with its output's accumulators in ``groups`` groups (None when a tile
    serves two groups)."""
    F = layer.out
    if any(isinstance(s, Linear) and tile_groups(s, F, groups) is None for s in layer.steps):
        return None
    pos = positions(F, groups)
    order = np.empty_like(pos)
    order[pos] = np.arange(len(pos))
    follow = following(layer)
    steps = []
    for s in layer.steps:
        if isinstance(s, (Linear, Load)):
            s = replace(s, o=pos[s.o])
        elif isinstance(s, Simd):
            o = pos[s.o]
            srt = np.argsort(o, kind="stable")
            aux = pos[s.aux] if id(s.aux_buf) in follow else s.aux
            s = replace(s, o=o[srt], aux=None if aux is None else aux[srt])
        elif isinstance(s, Zero):
            s = replace(s, o=np.sort(pos[s.o]))
        steps.append(s)
    return Grouping(groups, pos, order, replace(layer, steps=steps))


def regroup_tiles(image: np.ndarray, lc: LayerConsts, layer: Layer, groups: int) -> None:
    """Lay out the tiles of every Linear step of ``layer`` group by group in the constants
    ``image`` (the order within a group kept), renumber the steps' tiles and put the terms
    group by group (stably: each output vector's terms keep their order)."""
    for k, s in enumerate(layer.steps):
        if not isinstance(s, Linear) or not len(s.tiles):
            continue
        group = tile_groups(s, layer.out, groups)
        new = np.argsort(group, kind="stable")                  # new number → old
        refs = lc.tiles[k]
        blocks = [image[r.offset:r.offset + r.rows + 1].copy() for r in refs]
        at, moved = refs[0].offset, []
        for old in new.tolist():
            image[at:at + len(blocks[old])] = blocks[old]
            moved.append(TileRef(at, refs[old].rows))
            at += len(blocks[old])
        lc.tiles[k] = moved
        number = np.empty_like(new)
        number[new] = np.arange(len(new))
        t = number[s.t]
        # group by group, in their order otherwise: a vector's terms are all in its group
        # and keep their order (which is not always tile order: a folded offset gives the
        # first term of a vector a tile of its own, numbered after one the vector reuses)
        srt = np.argsort(group[s.t], kind="stable")
        tiles = Tiles(s.tiles.n)
        for old in new.tolist():
            tiles.add(s.tiles.values[old])
        s.o, s.x, s.t, s.first, s.tiles = s.o[srt], s.x[srt], t[srt], s.first[srt], tiles


#: Up to this many (partition, tile) pairs are counted with a dense bincount.
DENSE_PAIRS = 1 << 24


def pair_counts(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``key`` (all below ``size``) and how often each occurs."""
    if size <= DENSE_PAIRS:
        count = np.bincount(key, minlength=size)
        used = np.flatnonzero(count)
        return used, count[used]
    return np.unique(key, return_counts=True)


def layer_cycles(layer: Layer, part: Partitioning, lc: LayerConsts, beats: int,
                 runs: bool, store_run: int | None = None) -> float:
    """Cycles of the layer cut as ``part``, modelled: per partition the larger of compute
    and DRAM (staged sources, the tiles when they stream, the output). Compute: per tile
    the partition uses, the larger of its MatMul vectors and its pushes when its MatMuls
    run over pixels (``runs``: the accumulator stride from pixel to pixel is encodable),
    else both and the loader's start (the pushes hide only behind a few queued
    instructions); plus the other steps' vectors. ``store_run``: vectors per store
    instruction (None: a partition's output in one), each costing :data:`MOVE_CYCLES`."""
    bounds = np.array([a for a, _ in part.bounds], dtype=np.int64)
    parts = len(bounds)
    compute = np.zeros(parts)
    tiles = np.zeros(parts)
    for k, s in enumerate(layer.steps):
        if isinstance(s, Linear) and len(s.o):
            rows = np.array([r.rows + 1 for r in lc.tiles[k]] or [0], dtype=np.int64)
            p = np.searchsorted(bounds, s.o, side="right") - 1
            key, count = pair_counts(p * len(rows) + s.t, parts * len(rows))
            pk, tk = np.divmod(key, len(rows))
            cost = np.maximum(count, rows[tk]) if runs else count + rows[tk] + LOADER_START
            compute += np.bincount(pk, cost, minlength=parts)
            tiles += np.bincount(pk, rows[tk], minlength=parts)
        elif isinstance(s, (Load, Simd, Zero)) and len(s.o):
            p = np.searchsorted(bounds, s.o, side="right") - 1
            compute += np.bincount(p, minlength=parts) * (len(s.body) if isinstance(s, Simd)
                                                           else 1)
    sizes = np.array([b - a for a, b in part.bounds], dtype=np.int64)
    dram = (sum(part.need.stage.values()) + sizes * len(layer.written)) * beats
    if part.mode == "stream":
        dram = dram + tiles * beats
    if store_run is not None:
        dram = dram + -(-sizes // store_run) * len(layer.written) * MOVE_CYCLES
    return float(np.maximum(compute + sizes, dram).sum())


def group_units(F: Buffer, groups: int) -> list[int]:
    """Partition units in group-major positions: a frame row of one group, then a pixel."""
    per = F.frame.Cb // groups
    return [F.row // F.frame.Cb * per, per]


def choose_groups(layer: Layer, plain: PartitionSearch, search_of: Callable,
                  lc: LayerConsts, arena: int, beats: int, max_stride: int) -> Grouping | None:
    """The grouping of ``layer``'s output that the model (:func:`layer_cycles`) finds
    fastest with an arena of ``arena`` vectors, when it saves enough (:data:`MIN_GAIN`) over
    none (``plain``, the layer's search without groups); None otherwise, and for layers
    whose tiles do not stream (nothing to gain). ``search_of(layer, units)`` makes the
    :class:`.partition.PartitionSearch` of a layer; ``max_stride``: the largest accumulator
    stride a MatMul encodes. Every grouping of 2, 4, … groups is tried, unless the layer
    without groups is within :data:`MIN_GAIN` of its MatMul vectors."""
    part = plain.resized(arena, False).choose()
    if part is None or part.mode != "stream" or len(part.bounds) < 2 or not eligible(layer):
        return None
    cb = layer.out.frame.Cb
    best = None
    best_cycles = MIN_GAIN * layer_cycles(layer, part, lc, beats, cb <= max_stride)
    floor = sum(s.term_count for s in layer.steps if isinstance(s, (Linear, Load)))
    if best_cycles <= floor:
        return None                             # (nothing a grouping could save)
    groups = 2
    while groups <= cb:
        g = grouped(layer, groups)
        if g is None:
            break
        part = search_of(g.layer, group_units(layer.out, groups)).resized(arena, False).choose()
        per = cb // groups          # stores: a run per pixel; one strided run, or vectors
        store_run = per if per > 1 else (1 << 30 if cb <= max_stride else 1)
        cycles = np.inf if part is None else \
            layer_cycles(g.layer, part, lc, beats, per <= max_stride, store_run)
        if cycles < best_cycles:
            best, best_cycles = g, cycles
        groups *= 2
    return best
