"""Instruction emission: each layer is cut into partitions of its output buffer (see
:mod:`compiler_lite.partition`), and each partition is load → compute → store.

Per layer the local-memory arena holds the weight tiles (all of them when they fit, else two
chunks that stream), the layer's constant vectors, the staging areas of the sources that live
in DRAM (two each when they fit: the next partition's DRAM loads are issued before this
partition's compute, so the DRAM unit works while the array does) and, for each buffer the
layer stores that lives in DRAM (its output, and any :class:`~.kernels.Save` copy; in DRAM0
or DRAM1, :mod:`.ports`), two output staging areas. The accumulators hold the constant
vectors, then one region per buffer the layer's steps write (twice when they fit:
partitions alternate between the two, so one partition's MatMuls run while the drain moves
the other's outputs to local memory).

When the constants live in DRAM1, a ring at the top of local memory holds the tiles and
constants of the layers ahead, loaded while earlier layers compute (:mod:`.prefetch`); such a
layer's arena has no tiles or constants of its own (mode "held").

Two variants: an exact integer sum whose one staged source does not fit even for the smallest
partition loads it chunk by chunk into two source areas in turn, the loads going between the
terms (:meth:`Emitter._emit_chunked`; one output staging area); and a layer whose tiles
stream and whose pixels hold many channel blocks may order its accumulators by channel
groups (:mod:`compiler_lite.groups`): its partitions are ranges of those positions, and the
stores put the vectors back in place.

Within a partition (:meth:`Emitter.emit_partition`) the producer's terms are emitted tile by
tile (one LoadWeights, then its MatMuls rolled up into strided runs), then each in-place step
(a Save stores the partition's output vectors as they are at that point), then the store;
the DRAM1 stores go last, after DRAM0's (:meth:`Emitter._flush_stores`). The last
partition's copies into local memory that nothing reads soon (a residual block's raw sum
beside the rectified one the next layer reads) move after the next layer's instructions
(:meth:`Emitter._defer_late`).

::

    local:  [ residents | tiles (all, or 2 chunks) | consts | src stage ×2 | out stage ×2 …
              … | ring ]
    acc:    [ consts | region per written buffer (this partition's span) | (again) ]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Callable

import numpy as np

from tcu_hw.errors import CompileError
from tcu_hw.isa import (SIMD, DataMove, DataMoveKind, LoadLUT, LoadWeights, MatMul,
                        SimdOp as Op)

from .defer import defer, depths_of
from .groups import choose_groups, group_units, grouped, regroup_tiles
from .ir import Buffer, Space, distinct, first_indices
from .kernels import (ACCUMULATE, ANY, OVERWRITE, Layer, Linear, Load, Reduce, Save, Simd,
                      Zero, sums_in_any_order)
from .partition import (Arena, Partitioning, PartitionSearch, Stage, layout_arena, ranges_fn,
                        spans_fn)
from .plan import LayerConsts, MemoryPlan, acc_buffers
from .prefetch import Block, LayerRoom, Prefetcher, plan_ring
from .rollup import runs, whole_runs
from .summary import estimate

KIND_IN = {"dram0": DataMoveKind.DRAM0_TO_LOCAL, "dram1": DataMoveKind.DRAM1_TO_LOCAL}
KIND_OUT = {"dram0": DataMoveKind.LOCAL_TO_DRAM0, "dram1": DataMoveKind.LOCAL_TO_DRAM1}


@dataclass
class LayerStats:
    """Figures about one emitted layer (for the summaries)."""

    name: str
    nodes: list
    instructions: int = 0
    partitions: int = 0
    stages: int = 1
    macs: int = 0
    matmul_vectors: int = 0
    cycles: int = 0
    dram_vectors: int = 0
    by_kind: dict = field(default_factory=dict)
    local_used: int = 0
    acc_used: int = 0
    const_util: float | None = None
    saturated: int = 0
    groups: int = 1                 # channel groups of the output (compiler_lite.groups)


# ------------------------------------------------------------------------------ partitions

@dataclass
class LayerJob:
    """One layer being emitted: its constants, partitioning and arena."""

    layer: Layer
    lc: LayerConsts
    part: Partitioning
    arena: Arena
    acc_bufs: list[Buffer]          # buffers the steps write, in accumulator order
    ranges_of: Callable             # (a, b) → {acc buffer: (lo, hi)}
    spans_of: Callable              # ranges → {staged buffer: Stage}
    stats: LayerStats
    order: np.ndarray | None = None     # accumulator position → output vector (groups)

    def slot(self, p: int) -> int:
        """Which copy of the staging areas partition ``p`` uses."""
        return p % (2 if self.part.double else 1)


@dataclass
class LayerCut:
    """A layer's partition search and the functions it was made from."""

    search: PartitionSearch
    staged: list[Buffer]            # sources staged from DRAM
    acc_bufs: list[Buffer]
    ranges_of: Callable
    spans_of: Callable
    layer: Layer                    # the layer as emitted (in group-major positions, groups)
    order: np.ndarray | None = None     # accumulator position → output vector (groups)
    groups: int = 1


@dataclass
class PartitionView:
    """One partition's view of memory: the vectors of each accumulator buffer it covers
    (``ranges``) and their addresses (``acc_at[buf]`` = address of the buffer's vector 0),
    and where its sources are staged."""

    ranges: dict                    # acc buffer → (lo, hi)
    spans: dict                     # staged source → Stage
    acc_at: dict                    # acc buffer → accumulator address of its vector 0
    stage: dict[Buffer, int]        # staged source → this partition's staging area
    space: Space

    def local_of(self, xv: np.ndarray) -> np.ndarray:
        """Local addresses of virtual vectors ``xv`` (resident or staged)."""
        out = np.empty(len(xv), dtype=np.int64)
        own = self.space.owner(xv)
        for k in distinct(own):
            buf = self.space.buffers[k]
            sel = own == k
            if buf.home[0] == "local":
                out[sel] = buf.home[1] + xv[sel] - buf.start
                continue
            stg = self.spans[buf]
            rel = xv[sel] - buf.start
            if stg.needed is None:
                out[sel] = self.stage[buf] + rel - stg.lo
            else:
                out[sel] = self.stage[buf] + np.searchsorted(stg.needed, rel)
        return out


def folded_relu(layer: Layer, order: np.ndarray | None = None) -> Simd | None:
    """The layer's last step when it is a ReLU over every vector of its output that holds
    elements (a frame's channel blocks padded up to a power of two hold none and are never
    read): the store applies it instead (acc→local moves of kind 0x4,
    docs/isa_extensions.md), so it costs no SIMD instruction. ``order``: the output vector
    at each accumulator position of a layer in channel groups (the steps' positions)."""
    s = layer.steps[-1] if layer.steps else None
    if not (isinstance(s, Simd) and s.is_relu and s.buf is layer.out):
        return None
    F, o = layer.out, np.sort(s.o)
    if np.array_equal(o, np.arange(F.vectors)):
        return s
    if F.extent is not None:
        used = F.extent > 0 if order is None else F.extent[order] > 0
        if np.array_equal(o, np.flatnonzero(used)):
            return s
    return None


def trailing_saves(layer: Layer, relu: Simd | None) -> list[Save]:
    """The copies (``Save`` steps) the layer stores after its last step that changes the
    accumulators (the ReLU its store applies, ``relu``, does not): they hold the same values
    at the end, so they are stored after the output, which the next layer waits for."""
    late = []
    for s in reversed(layer.steps):
        if s is relu:
            continue
        if not isinstance(s, Save):
            break
        late.append(s)
    return late[::-1]


class Emitter:
    """Emits the program of a list of layers with a memory plan (see the module)."""

    def __init__(self, arch, space: Space, layers: list[Layer], plan: MemoryPlan,
                 source: str = "model", beats: int = 1) -> None:
        self.arch = arch
        self.beats = beats                      # AXI beats per DRAM vector (cycle estimate)
        self.n = arch.array_size
        self.layout = arch.layout
        self.space = space
        self.layers = layers
        self.plan = plan
        self.source = source
        self.out: list = []
        self.stores: list = []                  # the partition's DRAM1 stores, held back
        self.acc_draining = (0, 0)              # the last partition's accumulators [lo, hi)
        self.late = None                        # the last layer's trailing copies [lo, hi)
        self.clock = self.clocked = 0           # _now(): estimated time, instructions seen
        self.port_free = [0, 0]                 # when DRAM0, DRAM1 are done (estimated)
        self.stats: list[LayerStats] = []
        self.max_count = 1 << self.layout.op2_addr_bits
        self.s0 = arch.stride0_depth
        self.s1 = arch.stride1_depth
        self.current_tile = None                # (step, tile) the array holds, if known
        self.cuts: dict[int, LayerCut] = {}
        self.ring = 0                           # vectors at the top of local memory
        self.blocks: dict[int, Block] = {}      # layer → its block in the ring
        self.barriers: set[int] = set()         # layers that run with the ring empty
        self.prefetch: Prefetcher | None = None
        self.fed = 0                            # instructions the prefetcher has seen
        self.li, self.st = 0, LayerStats("", [])  # the layer being emitted

    # ------------------------------------------------------------------------ helpers

    def fail(self, layer: Layer, message: str):
        raise CompileError(f"{self.source}: layer {layer.name!r} "
                           f"(nodes {', '.join(layer.nodes)}): {message}")

    def _now(self) -> int:
        """The compute time of the instructions emitted so far, by the estimate."""
        if len(self.out) > self.clocked:
            self.clock += estimate(self.out[self.clocked:], self.arch, self.beats)[0]
            self.clocked = len(self.out)
        return self.clock

    def move(self, kind, local, other, count, c0=0, c1=0) -> None:
        """DataMove(s) of ``count`` vectors starting at (local, other) with stride codes."""
        if (self.plan.consts_mirror is not None or self.plan.input_mirror) and \
                kind.memory != "acc":
            # when each DRAM port will be done (_dram0_share splits by it)
            port = kind.memory == "dram1"
            self.port_free[port] = max(self.port_free[port], self._now()) + count * self.beats
        step0, step1 = 1 << c0, 1 << c1
        done = 0
        while done < count:
            k = min(self.max_count, count - done)
            self.out.append(DataMove(kind, local + done * step0, c0, other + done * step1,
                                     c1, k - 1))
            done += k

    def load_consts(self, local: int, offset: int, count: int) -> None:
        """``count`` vectors of the constants image from ``offset`` into local memory from
        ``local`` on: from DRAM1, or with a copy of the image in DRAM0 (consts ports
        "both") the first part from there and the rest from DRAM1, split so that both
        ports end together by the estimate of when each is done (:meth:`_dram0_share`)."""
        mirror = self.plan.consts_mirror
        half = 0 if mirror is None else self._dram0_share(count)
        if half:
            self.move(DataMoveKind.DRAM0_TO_LOCAL, local, mirror + offset, half)
        self.move(DataMoveKind.DRAM1_TO_LOCAL, local + half, offset + half, count - half)

    def _dram0_share(self, count: int) -> int:
        """How many of ``count`` vectors that both DRAM ports hold to load from DRAM0 (the
        first ones; the rest from DRAM1) so that both ports end together, by the estimate
        of when each is done (:meth:`move`)."""
        now = self._now()
        lead = max(self.port_free[1], now) - max(self.port_free[0], now)
        return int(np.clip(round((lead / self.beats + count) / 2), 0, count))

    def moves(self, kind, local: np.ndarray, other: np.ndarray) -> None:
        """Vector-by-vector moves rolled up into runs."""
        for i, cnt, c0, c1, _ in runs(local, other, s0=self.s0, s1=self.s1,
                                      max_count=self.max_count):
            self.move(kind, int(local[i]), int(other[i]), cnt, c0, c1)

    # ------------------------------------------------------------------------- program

    def emit(self) -> list:
        self._plan_ring()
        for li, layer in enumerate(self.layers):
            start = len(self.out)
            st = LayerStats(layer.name, layer.nodes, macs=layer.macs)
            self.stats.append(st)
            self.li, self.st = li, st
            late, self.late = self.late, None
            self.emit_layer(li, layer, st)
            if late is not None:
                start = self._defer_late(late, start)
            st.instructions = len(self.out) - start
            st.by_kind.update(Counter(map(attrgetter("name"), self.out[start:])))
            compute, dram = estimate(self.out[start:], self.arch, self.beats)
            st.cycles = max(compute, dram)
            lc = self.plan.layers[li]
            st.saturated = lc.saturated
            stored = lc.tile_vectors * self.n
            if stored:
                block = self.plan.image[lc.tile_base:lc.tile_base + lc.tile_vectors]
                st.const_util = float(np.count_nonzero(block)) / stored
        return self.out

    # -------------------------------------------------------------------------- layer

    def emit_layer(self, li: int, layer: Layer, st: LayerStats) -> None:
        """Choose the partitioning and the arena, load the constants (unless the ring holds
        them, :mod:`compiler_lite.prefetch`), emit the partitions."""
        lc: LayerConsts = self.plan.layers[li]
        cut = self._cut(li)
        held = self.blocks.get(li)
        if self.prefetch is not None:
            self._load_blocks(self.prefetch.needed(li), st)
        lo, hi = self.plan.local_top[li], self.arch.local_depth - 1
        if li not in self.barriers:                 # (the ring is empty during a barrier)
            hi -= self.ring
        search = cut.search.resized(hi - lo, held is not None)
        part = search.choose() or search.chunked()
        if part is None:
            need = search.smallest()
            self.fail(layer, f"does not fit: the smallest partition ({search.units[-1]} "
                             f"vectors of {layer.out.vectors}) needs {need.acc} accumulator "
                             f"vectors (the architecture has {self.arch.accumulator_depth}) "
                             f"and {need.local + search.fixed_local} local vectors besides "
                             f"weights (the arena has {search.arena}, weights need "
                             f"{lc.tile_vectors})")
        arena = layout_arena(part, lc, lo, search.room(part.need), cut.staged,
                             search.out_staged, self.plan.consts_to_local,
                             None if held is None else held.consts_at)
        if arena.top > hi:
            self.fail(layer, f"does not fit in local memory: its weight tiles, constants and "
                             f"staging areas need vectors {lo}..{arena.top - 1}, the "
                             f"arena is {lo}..{hi - 1}")
        st.partitions = len(part.bounds)
        ring_live = self.ring and li not in self.barriers
        st.local_used = self.arch.local_depth - 1 if ring_live else arena.top
        part = self._place_accumulators(part)
        st.acc_used = part.acc_offset + part.acc_span
        st.stages = max(1, -(-lc.tile_vectors // arena.chunk)) if arena.chunk else 1
        self._prologue(lc, part, arena, st)
        self._feed()
        self.current_tile = None
        job = LayerJob(cut.layer, lc, part, arena, cut.acc_bufs, cut.ranges_of, cut.spans_of,
                       st, cut.order)
        st.groups = cut.groups
        if part.double and part.bounds:
            self._load_sources(job, 0)
        for p in range(len(part.bounds)):
            self.emit_partition(job, p)

    def _cut(self, li: int) -> LayerCut:
        """Layer ``li``'s partition search and what it was made from (made once), its
        output in channel groups when that pays (:mod:`compiler_lite.groups`: the tiles
        are then laid out again in the constants image, before anything loads them, in a
        copy of their own when other layers share them)."""
        if li not in self.cuts:
            layer, lc = self.layers[li], self.plan.layers[li]
            plain = self._make_cut(layer, lc, None)
            found = None
            if not self.plan.consts_to_local:
                arena = self.arch.local_depth - 1 - self.plan.local_top[li]
                found = choose_groups(layer, plain.search,
                                      lambda lay, u: self._make_cut(lay, lc, u).search,
                                      lc, arena, self.beats, 1 << (self.s1 - 1))
            if found is not None and not self.plan.own_tiles(lc, self.arch.dram1_depth):
                found = None                    # (no room for a copy of shared tiles)
            if found is None:
                self.cuts[li] = plain
            else:
                regroup_tiles(self.plan.image, lc, layer, found.groups)
                found = grouped(layer, found.groups)        # (the renumbered tiles)
                cut = self._make_cut(found.layer, lc, group_units(layer.out, found.groups))
                cut.order, cut.groups = found.order, found.groups
                self.cuts[li] = cut
        return self.cuts[li]

    def _make_cut(self, layer: Layer, lc: LayerConsts, units: list[int] | None) -> LayerCut:
        """The partition search of ``layer`` (partition ``units``: default rows, pixels)."""
        to_local = self.plan.consts_to_local
        acc_bufs = acc_buffers(layer)
        staged = [b for b in self._sources(layer) if b.home[0] != "local"]
        ranges_of = ranges_fn(layer, acc_bufs)
        spans_of = spans_fn(self.space, layer, staged)
        search = PartitionSearch(layer.out, staged, ranges_of, spans_of, lc, 0,
                                 0 if to_local else lc.simd_local + lc.lut_vectors,
                                 self.arch.accumulator_depth, to_local,
                                 tuple(layer.written[1:]),
                                 self.arch.dtype.is_integer and sums_in_any_order(layer), units,
                                 beats=self.beats)
        return LayerCut(search, staged, acc_bufs, ranges_of, spans_of, layer)

    # -------------------------------------------------------------------- the ring

    def _plan_ring(self) -> None:
        """The ring of blocks loaded ahead (:mod:`compiler_lite.prefetch`), when the
        constants live in DRAM1 and every layer fits as it would without it."""
        if self.plan.consts_to_local:
            return
        top = self.arch.local_depth - 1
        rooms = []
        for li in range(len(self.layers)):
            lc, search = self.plan.layers[li], self._cut(li).search
            alone = search.resized(top - self.plan.local_top[li], False)
            part = alone.choose() or alone.chunked()
            if part is None:
                return                          # emit_layer says why
            room = alone.room(part.need)
            consts = lc.simd_local + lc.lut_vectors
            starts = tuple(sorted({r.offset - lc.tile_base for refs in lc.tiles for r in refs}))
            barrier = part.mode == "stream" or part.chunk
            arena = layout_arena(part, lc, self.plan.local_top[li], room,
                                 self._cut(li).staged, alone.out_staged, False)
            stores = tuple((at, at + part.need.out) for areas in arena.out_stage.values()
                           for at in areas)
            rooms.append(LayerRoom(lc.tile_vectors, consts, None if barrier else room + consts,
                                   starts or (0,), stores))
        self.ring, self.blocks, self.barriers = plan_ring(rooms, top)
        if self.blocks:
            self.prefetch = Prefetcher(self.blocks, self.beats)

    def _load_blocks(self, blocks: list[Block], st: LayerStats) -> None:
        """DRAM1 → the ring: each layer's constants, then its tiles; runs that follow each
        other in local memory and in DRAM1 go as one move."""
        runs: list[list[int]] = []                  # [local, DRAM1, vectors]
        for b in blocks:
            lc = self.plan.layers[b.layer]
            parts = [(b.consts_at, lc.base, b.consts)] if b.consts else []
            parts += [(at, lc.tile_base + first, n) for at, first, n in b.pieces]
            for local, dram, n in parts:
                if runs and runs[-1][0] + runs[-1][2] == local and \
                        runs[-1][1] + runs[-1][2] == dram:
                    runs[-1][2] += n
                else:
                    runs.append([local, dram, n])
            st.dram_vectors += b.size
        for local, dram, n in runs:
            self.load_consts(local, dram, n)

    def _feed(self) -> None:
        """Compute time passes by the instructions emitted since the last call; the ring's
        loads that are due go out (during the current layer)."""
        if self.prefetch is None:
            return
        self.prefetch.advance(estimate(self.out[self.fed:], self.arch, self.beats)[0])
        self.fed = len(self.out)
        self._load_blocks(self.prefetch.due(self.li), self.st)

    def _sources(self, layer: Layer) -> list[Buffer]:
        """Buffers the layer reads from memory (local or staged), in order of first read."""
        out: list[Buffer] = []
        for s in layer.steps:
            if not isinstance(s, (Linear, Load)):
                continue
            x = s.sources() if isinstance(s, Linear) else s.x[s.x >= 0]
            if not len(x):
                continue
            for k in self.space.owners(x):
                buf = self.space.buffers[k]
                if buf.home is None:
                    self.fail(layer, f"internal: source {buf.name!r} has no home")
                if buf not in out:
                    out.append(buf)
        return out

    def _place_accumulators(self, part: Partitioning) -> Partitioning:
        """``part`` with its accumulators after the area the previous layer's last
        partition drains, when they overlap it and fit there: that drain (its acc→local
        moves) is still running when this layer's first MatMuls would overwrite it."""
        lo, hi = self.acc_draining
        if lo < hi and lo < part.acc_span and hi + part.acc_span <= self.arch.accumulator_depth:
            part = replace(part, acc_offset=hi)
        last = part.acc_base(max(len(part.bounds) - 1, 0))
        self.acc_draining = (last, last + part.need.acc - part.acc_consts)
        return part

    def _prologue(self, lc: LayerConsts, part: Partitioning, arena: Arena,
                  st: LayerStats) -> None:
        """Constants into local memory (from DRAM1) and the accumulators; resident tiles."""
        to_local, mode = self.plan.consts_to_local, part.mode
        block = lc.simd_local + lc.lut_vectors if mode != "held" else 0
        if block and not to_local:
            self.load_consts(arena.consts, lc.base, block)
        for d in range(lc.simd_digits if lc.simd_count else 0):
            kind = DataMoveKind.LOCAL_TO_ACC_SHIFT if d else DataMoveKind.LOCAL_TO_ACC
            self.move(kind, arena.consts + d * lc.simd_count, part.acc_offset, lc.simd_count)
        if mode == "all" and lc.tile_vectors:       # ("held": in the ring already)
            self.load_consts(arena.tiles, lc.tile_base, lc.tile_vectors)
        loaded = 0 if to_local else block + (lc.tile_vectors if mode == "all" else 0)
        st.dram_vectors += loaded
        if self.prefetch is not None and loaded:
            self.prefetch.load(loaded)

    def _load_sources(self, job: LayerJob, p: int) -> None:
        """DRAM → local loads of partition ``p``'s staged sources."""
        a, b = job.part.bounds[p]
        for buf, stg in job.spans_of(job.ranges_of(a, b)).items():
            self._load_stage(buf, stg, job.arena.stage[buf][job.slot(p)], job.stats)

    def _load_stage(self, buf: Buffer, stg: Stage, base: int, stats: LayerStats) -> None:
        """DRAM → local load of ``stg`` of staged source ``buf`` to local ``base`` on (an
        input with a copy in DRAM1, input ports "both": from both ports)."""
        kind = KIND_IN[buf.home[0]]
        copy = self.plan.input_mirror.get(buf.name) if buf.role == "input" else None
        if copy is not None:
            vec = np.arange(stg.lo, stg.hi) if stg.needed is None else stg.needed
            local = base + np.arange(len(vec))
            half = self._dram0_share(len(vec))
            for kind, at, part in ((kind, buf.home[1], slice(0, half)),
                                   (DataMoveKind.DRAM1_TO_LOCAL, copy, slice(half, None))):
                if len(vec[part]):
                    self.moves(kind, local[part], at + vec[part])
        elif stg.needed is None:
            self.move(kind, base, buf.home[1] + stg.lo, stg.hi - stg.lo)
        else:
            self.moves(kind, base + np.arange(len(stg.needed)), buf.home[1] + stg.needed)
        stats.dram_vectors += stg.size

    def emit_partition(self, job: LayerJob, p: int) -> None:
        """Partition ``p``: its loads (the next partition's when double-buffered), the
        layer's steps over its ranges, the store of its output vectors."""
        part = job.part
        if part.double:
            if p + 1 < len(part.bounds):
                self._load_sources(job, p + 1)
        elif not part.chunk:                    # (chunks load as the terms go)
            self._load_sources(job, p)
        a, b = part.bounds[p]
        R = job.ranges_of(a, b)
        acc_at = {}
        base = part.acc_base(p)                 # after the constants (two areas: alternating)
        for buf in job.acc_bufs:
            lo, hi = R.get(buf, (0, 0))
            acc_at[buf] = base - lo
            base += hi - lo
        stage = {buf: areas[job.slot(p)] for buf, areas in job.arena.stage.items()}
        view = PartitionView(R, job.spans_of(R), acc_at, stage, self.space)
        relu = folded_relu(job.layer, job.order)
        late = trailing_saves(job.layer, relu)
        for k, s in enumerate(job.layer.steps):
            self._feed()
            if s is relu or any(s is t for t in late):
                continue                        # (the store rectifies, kind 0x4; see below)
            if isinstance(s, Linear) and part.chunk:
                self._emit_chunked(job, k, s, view)
            elif isinstance(s, Linear):
                self._emit_linear(job, k, s, view)
            elif isinstance(s, Load):
                self._emit_load(s, view)
            elif isinstance(s, Simd):
                self._emit_simd(s, view, job)
            elif isinstance(s, Reduce):
                self._emit_reduce(s, view)
            elif isinstance(s, Zero):
                self._emit_zero(s, view)
            elif isinstance(s, Save):
                self._store(job, p, acc_at[job.layer.out] + a, s.to)
        self._store(job, p, acc_at[job.layer.out] + a, job.layer.out,
                    DataMoveKind.ACC_TO_LOCAL_RELU if relu else DataMoveKind.ACC_TO_LOCAL)
        first_late = len(self.out)
        for s in late:                          # copies after the output the next layer reads
            self._store(job, p, acc_at[job.layer.out] + a, s.to)
        last_late = len(self.out)
        self._flush_stores()
        if p == len(job.part.bounds) - 1 and len(self.out) == last_late > first_late and \
                all(s.to.home[0] == "local" for s in late):
            self.late = (first_late, last_late)     # (moved later: _defer_late)

    def _defer_late(self, late: tuple[int, int], start: int) -> int:
        """Move the previous layer's trailing copies to local memory (``late``: the
        instructions just before this layer's, which start at ``start``) past this layer's
        instructions, up to the first one that touches what they read or write
        (:mod:`compiler_lite.defer`): the output this layer reads then drains alone, not
        sharing the accumulators' read port with them. Returns where this layer's
        instructions now start."""
        lo, hi = late
        block = self.out[lo:hi]
        passed = 0 if hi != start else \
            defer(self.out, lo, hi, len(self.out), depths_of(self.arch))
        if not passed:
            return start
        if self.late is not None and self.late[0] < hi + passed:    # (this layer's own,
            a, b = self.late                                        # which the block passed)
            self.late = (a - len(block), b - len(block)) if b <= hi + passed else None
        prev = self.stats[-2]
        prev.instructions -= len(block)
        for name, count in Counter(map(attrgetter("name"), block)).items():
            prev.by_kind[name] -= count
        prev.cycles = max(estimate(self.out[lo - prev.instructions:lo], self.arch, self.beats))
        return lo

    def _flush_stores(self) -> None:
        """The partition's DRAM1 stores, held back until its DRAM0 stores are out: a DRAM0
        store waits until DRAM1's earlier stores have landed (the host's flush probe,
        :mod:`tcu_hw.blocks.dram_engine`), a DRAM1 store does not wait for DRAM0's, so in
        this order both ports store at once."""
        for emit_store in self.stores:
            emit_store()
        self.stores = []

    def _dram_store(self, job: LayerJob, F: Buffer, emit_store: Callable) -> None:
        """Emit a store to ``F``'s home now (DRAM0), or at the partition's end (DRAM1)."""
        if F.home[0] == "dram1":
            self.stores.append(emit_store)
        else:
            emit_store()

    def _store(self, job: LayerJob, p: int, acc_a: int, F: Buffer,
               kind: DataMoveKind = DataMoveKind.ACC_TO_LOCAL) -> None:
        """Partition ``p``'s output vectors from accumulator ``acc_a`` on to the same vectors
        of ``F`` (the layer's output or a saved copy), at its home (through an output
        staging area to its DRAM port; DRAM1's at the partition's end: :meth:`_flush_stores`),
        by acc→local moves of ``kind`` (0x4: rectified)."""
        a, b = job.part.bounds[p]
        if job.order is not None:               # channel groups: back in place
            self._store_grouped(job, p, acc_a, F, kind)
            return
        if F.home[0] == "local":
            self.move(kind, F.home[1] + a, acc_a, b - a)
            return
        dst = job.arena.out_stage[F][job.slot(p)]
        self.move(kind, dst, acc_a, b - a)
        out = self._kind_out(job, F)
        self._dram_store(job, F, lambda: self.move(out, dst, F.home[1] + a, b - a))
        job.stats.dram_vectors += b - a

    def _kind_out(self, job: LayerJob, F: Buffer) -> DataMoveKind:
        """The local → DRAM kind of a store to ``F``'s home."""
        if F.home[0] not in KIND_OUT:
            self.fail(job.layer, f"internal: output buffer home {F.home}")
        return KIND_OUT[F.home[0]]

    def _store_grouped(self, job: LayerJob, p: int, acc_a: int, F: Buffer,
                       kind: DataMoveKind) -> None:
        """:meth:`_store` of a layer in channel groups: accumulator positions a..b-1 hold
        output vectors ``order[a:b]`` (a group's blocks of consecutive pixels)."""
        a, b = job.part.bounds[p]
        vec = job.order[a:b]
        if F.home[0] == "local":
            self.moves(kind, F.home[1] + vec, acc_a + np.arange(b - a))
            return
        dst = job.arena.out_stage[F][job.slot(p)]
        self.move(kind, dst, acc_a, b - a)
        out = self._kind_out(job, F)
        self._dram_store(job, F, lambda: self.moves(out, dst + np.arange(b - a),
                                                    F.home[1] + vec))
        job.stats.dram_vectors += b - a

    # ------------------------------------------------------------------------- tiles

    def _tile_address(self, job: LayerJob, k: int, t: int) -> int:
        """Local address of tile ``t`` of step ``k`` (resident: all loaded, or local consts)."""
        ref = job.lc.tiles[k][t]
        if self.plan.consts_to_local:
            return ref.offset
        if job.part.mode == "held":
            return self.blocks[self.li].tile_address(ref.offset - job.lc.tile_base)
        return job.arena.tiles + ref.offset - job.lc.tile_base

    @staticmethod
    def _chunk_base(job: LayerJob, c: int) -> int:
        """Local address of streamed chunk ``c`` (chunks alternate between two areas)."""
        return job.arena.tiles + (c % 2) * job.arena.chunk

    def _load_chunk(self, job: LayerJob, refs: list, chunks: list, c: int) -> None:
        """DRAM1 → local load of streamed chunk ``c`` (see :func:`tile_chunks`)."""
        first, _, size = chunks[c]
        self.load_consts(self._chunk_base(job, c), refs[first].offset, size)
        job.stats.dram_vectors += size

    def _emit_linear(self, job: LayerJob, k: int, s: Linear, view: PartitionView) -> None:
        lo, hi = view.ranges[s.out]
        sel = np.nonzero((s.o >= lo) & (s.o < hi))[0]
        if not len(sel):
            return
        o, x, t, first = s.o[sel], s.x[sel], s.t[sel], s.first[sel]
        aa = view.acc_at[s.out] + o
        la = np.zeros(len(x), dtype=np.int64)
        real = x >= 0
        if real.any():
            la[real] = view.local_of(x[real])
        refs = job.lc.tiles[k]
        # segments of equal tile
        cut = np.nonzero(np.diff(t) != 0)[0] + 1
        seg_starts = np.concatenate([[0], cut])
        seg_ends = np.concatenate([cut, [len(t)]])
        stream = job.part.mode == "stream" and not self.plan.consts_to_local and not s.data
        if stream:
            chunks, seg_chunk = tile_chunks(refs, t[seg_starts], job.arena.chunk)
            self._load_chunk(job, refs, chunks, 0)
            if len(chunks) > 1:
                self._load_chunk(job, refs, chunks, 1)  # the DRAM unit runs a chunk ahead
            self.current_tile = None
        current_chunk = 0
        # segments whose MatMuls are one run (most of them) need no call of runs()
        whole = whole_runs(la, aa, ~real, first, seg_starts, s0=self.s0, s1=self.s1,
                           max_count=self.max_count)
        batched = self._batched_runs(whole, seg_starts, seg_ends, o, real, first, la, aa)
        for j_seg, (s0_, e0_) in enumerate(zip(seg_starts.tolist(), seg_ends.tolist())):
            tid = int(t[s0_])
            if s.data:                          # a tile written by an earlier layer
                addr = int(view.local_of(s.tiles.at[tid:tid + 1])[0])
                rows = int(s.tiles.rows[tid])
            elif stream:
                rows = refs[tid].rows
                c = seg_chunk[j_seg]
                if c != current_chunk:
                    current_chunk = c
                    self.current_tile = None
                    if c + 1 < len(chunks):
                        self._load_chunk(job, refs, chunks, c + 1)
                addr = self._chunk_base(job, c) + refs[tid].offset - refs[chunks[c][0]].offset
            else:
                rows = refs[tid].rows
                addr = self._tile_address(job, k, tid)
            key = (id(s), tid)
            self._feed()
            if self.current_tile != key:
                self.out.append(LoadWeights(addr, 0, rows, False))
                self.current_tile = key
            one = whole[j_seg]
            if one is not None:
                c0, c1, flag = one
                zero_flag = not real[s0_]
                acc_flag = flag == ACCUMULATE or (flag == ANY and s.accumulate)
                self.out.append(MatMul(0 if zero_flag else int(la[s0_]), c0, int(aa[s0_]), c1,
                                       e0_ - s0_ - 1, acc_flag, zero_flag))
                job.stats.matmul_vectors += e0_ - s0_
                continue
            if j_seg in batched:
                for j, cnt, c0, c1, flag, zero_flag in batched[j_seg]:
                    acc_flag = flag == ACCUMULATE or (flag == ANY and s.accumulate)
                    self.out.append(MatMul(int(la[j]) if not zero_flag else 0, c0,
                                           int(aa[j]), c1, cnt - 1, acc_flag, zero_flag))
                    job.stats.matmul_vectors += cnt
                continue
            seg = slice(s0_, e0_)
            zs = ~real[seg]
            fl = first[seg]
            for m, zero_flag in zero_phases(o[seg], zs, fl):
                if not m.any():
                    continue
                idx = np.nonzero(m)[0]
                for i, cnt, c0, c1, flag in runs(la[seg][idx], aa[seg][idx], s0=self.s0,
                                                 s1=self.s1, max_count=self.max_count,
                                                 flags=fl[idx], a0_free=zero_flag):
                    j = idx[i]
                    acc_flag = flag == ACCUMULATE or (flag == ANY and s.accumulate)
                    self.out.append(MatMul(int(la[seg][j]) if not zero_flag else 0, c0,
                                           int(aa[seg][j]), c1, cnt - 1, acc_flag, zero_flag))
                    job.stats.matmul_vectors += cnt

    def _emit_chunked(self, job: LayerJob, k: int, s: Linear, view: PartitionView) -> None:
        """Linear step ``k`` with its one staged source loaded chunk by chunk (partitioning
        ``chunk``, :meth:`.partition.PartitionSearch.chunked`): the two areas take chunks in
        turn (the next loads while this one's terms run), the terms go chunk by chunk in
        tile order within each, and each output vector's first term overwrites. The sums
        are exact (integer types), so their order does not change them."""
        if not view.spans:                      # (nothing of the source in this partition)
            self._emit_linear(job, k, s, view)
            return
        (buf, stg), = view.spans.items()
        rel = np.arange(stg.lo, stg.hi) if stg.needed is None else stg.needed
        size = job.part.chunk
        lo, hi = view.ranges[s.out]
        sel = np.nonzero((s.o >= lo) & (s.o < hi))[0]
        which = np.zeros(len(sel), dtype=np.int64)      # the chunk of every term (resident
        x = s.x[sel] - buf.start                        # sources and zeroes: the first)
        staged = (x >= 0) & (x < buf.vectors) & (s.x[sel] >= 0)
        which[staged] = np.searchsorted(rel, x[staged]) // size
        order = np.argsort(which, kind="stable")
        sel, which = sel[order], which[order]
        o = s.o[sel]
        first = np.full(len(sel), ACCUMULATE, dtype=np.int64)
        if not s.accumulate:
            first[first_indices(o)] = OVERWRITE
        areas = job.arena.stage[buf]
        pieces = [Stage.exactly(rel[j:j + size]) for j in range(0, len(rel), size)]
        for j, piece in enumerate(pieces):
            if j == 0:
                self._load_stage(buf, piece, areas[0], job.stats)
            if j + 1 < len(pieces):
                self._load_stage(buf, pieces[j + 1], areas[(j + 1) % 2], job.stats)
            m = which == j
            sub = Linear(s.out, o[m], s.x[sel][m], s.t[sel][m], first[m], s.tiles, 0,
                         s.accumulate)
            self._emit_linear(job, k, sub, replace(view, spans={buf: piece},
                                                   stage={buf: areas[j % 2]}))

    def _batched_runs(self, whole, seg_starts, seg_ends, o, real, first, la, aa) -> dict:
        """The runs of the segments :func:`whole_runs` did not answer and whose terms go in
        the usual order (real MatMuls, then zero ones): one :func:`runs` call per kind for
        all of them, cut at segment bounds. {segment: [(op, count, code0, code1, flag, zero
        flag)]}; segments that need another order (:func:`zero_phases`) are left out."""
        zero = ~real
        seg_of = np.repeat(np.arange(len(seg_starts)), seg_ends - seg_starts)
        usual = np.array([w is None for w in whole])
        # only a segment with a zero term that overwrites may need another order
        cand = np.add.reduceat((zero & (first == OVERWRITE)).astype(np.int64), seg_starts) > 0
        for j_seg in np.nonzero(usual & cand)[0].tolist():
            seg = slice(seg_starts[j_seg], seg_ends[j_seg])
            usual[j_seg] = len(zero_phases(o[seg], zero[seg], first[seg])) == 2
        out: dict = {}
        if not usual.any():
            return out
        for zero_flag in (False, True):
            idx = np.nonzero(usual[seg_of] & (zero == zero_flag))[0]
            if not len(idx):
                continue
            sg = seg_of[idx]
            for i, cnt, c0, c1, flag in runs(la[idx], aa[idx], s0=self.s0, s1=self.s1,
                                             max_count=self.max_count, flags=first[idx],
                                             a0_free=zero_flag, cut=sg[1:] != sg[:-1]):
                out.setdefault(int(sg[i]), []).append((int(idx[i]), cnt, c0, c1, flag,
                                                       zero_flag))
        for j_seg in np.nonzero(usual)[0].tolist():
            out.setdefault(j_seg, [])
        # real runs first, then zero runs, in each segment
        return {j: sorted(v, key=lambda r: r[5]) for j, v in out.items()}

    # ------------------------------------------------------------------- other steps

    def _emit_load(self, s: Load, view: PartitionView) -> None:
        lo, hi = view.ranges[s.out]
        sel = np.nonzero((s.o >= lo) & (s.o < hi))[0]
        if not len(sel):
            return
        order = sel[np.argsort(s.o[sel], kind="stable")]
        la = view.local_of(s.x[order])
        aa = view.acc_at[s.out] + s.o[order]
        kind = DataMoveKind.LOCAL_TO_ACC_ACCUMULATE if s.add else DataMoveKind.LOCAL_TO_ACC
        self.moves(kind, la, aa)

    def _setup(self, setup, job: LayerJob) -> None:
        lc = job.lc
        for item in setup:
            if item[0] == "zero":
                self.out.append(SIMD(Op.ZERO, 0, 0, item[1]))
            elif item[0] == "lut":
                off, count, per = lc.lut[item[1]]
                for t in range(count):
                    self.out.append(LoadLUT(job.arena.consts + off + t * per, 0, t))
            else:
                _, reg, key = item
                self.out.append(SIMD(Op.MOVE, 0, 0, reg,
                                     read_address=job.part.acc_offset + lc.simd[key],
                                     read=True))

    def _emit_simd(self, s: Simd, view: PartitionView, job: LayerJob) -> None:
        lo, hi = view.ranges[s.buf]
        i0, i1 = np.searchsorted(s.o, [lo, hi])
        if i1 <= i0:
            return
        self._setup(s.setup, job)
        base = view.acc_at[s.buf]
        abase = view.acc_at[s.aux_buf] if s.aux_buf is not None else 0
        selfs = (base + s.o[i0:i1]).tolist()
        auxs = (abase + s.aux[i0:i1]).tolist() if s.aux is not None else [0] * len(selfs)
        which = {"self": 0, "aux": 1, None: 2}         # index into (self, aux, 0)
        body = [(op, which[op.read], which[op.write]) for op in s.body]
        out = self.out
        for self_addr, aux_addr in zip(selfs, auxs):
            addr = (self_addr, aux_addr, 0)
            for op, rd, wr in body:
                out.append(SIMD(op.op, op.left, op.right, op.dest, read_address=addr[rd],
                                write_address=addr[wr], read=op.read is not None,
                                write=op.write is not None, accumulate=op.accumulate))

    def _emit_reduce(self, s: Reduce, view: PartitionView) -> None:
        lo, hi = view.ranges[s.out]
        ob, sb = view.acc_at[s.out], view.acc_at[s.src]
        for v in range(lo, hi):
            w = s.indices[s.indptr[v]:s.indptr[v + 1]]
            if not len(w):
                continue
            w = [int(sb + i) for i in w]
            o = int(ob + v)
            if s.relu:
                self.out.append(SIMD(Op.ZERO, 0, 0, 1))
                chain = w
            elif len(w) == 1:
                self.out.append(SIMD(Op.MOVE, 0, 0, 0, read_address=w[0], write_address=o,
                                     read=True, write=True))
                continue
            else:
                self.out.append(SIMD(Op.MOVE, 0, 0, 1, read_address=w[0], read=True))
                chain = w[1:]
            for a in chain[:-1]:
                self.out.append(SIMD(s.op, 0, 1, 1, read_address=a, read=True))
            self.out.append(SIMD(s.op, 0, 1, 0, read_address=chain[-1], write_address=o,
                                 read=True, write=True))

    def _emit_zero(self, s: Zero, view: PartitionView) -> None:
        lo, hi = view.ranges[s.buf]
        i0, i1 = np.searchsorted(s.o, [lo, hi])
        if i1 <= i0:
            return
        aa = view.acc_at[s.buf] + s.o[i0:i1]
        rl = runs(None, aa, s0=self.s0, s1=self.s1, max_count=self.max_count, a0_free=True)
        if any(cnt > 1 for _, cnt, *_ in rl):
            self.out.append(LoadWeights(0, 0, 0, True))       # bias ← 0
            self.current_tile = None
        for i, cnt, _, c1, _ in rl:
            if cnt == 1 and not any(c > 1 for _, c, *_ in rl):
                self.out.append(SIMD(Op.ZERO, 0, 0, 0, write_address=int(aa[i]), write=True))
            else:
                self.out.append(MatMul(0, 0, int(aa[i]), c1, cnt - 1, False, True))


def zero_phases(o: np.ndarray, zero: np.ndarray, first: np.ndarray) -> list:
    """The order to emit one tile's terms in (``zero``: MatMuls with the zeroes flag, rolled
    up apart from the others): [(mask, zero flag)]. The others first, then the zero ones;
    but a zero term that overwrites a vector the others also write comes before them all."""
    cand = zero & (first == OVERWRITE)
    if not cand.any() or cand.all():
        return [(~zero, False), (zero, True)]
    early = cand & np.isin(o, o[~zero])
    if not early.any():
        return [(~zero, False), (zero, True)]
    return [(early, True), (~zero, False), (zero & ~early, True)]


def tile_chunks(refs: list, seg_tiles: np.ndarray, cap: int) -> tuple[list, list[int]]:
    """Chunks of consecutive tiles to stream, in the order segments that start with tiles
    ``seg_tiles`` need them: ([(first tile, last tile, vectors ≤ cap)], chunk per segment)."""
    chunks, seg_chunk = [], []
    for tid in seg_tiles:
        tid = int(tid)
        if not chunks or not chunks[-1][0] <= tid <= chunks[-1][1]:
            last, size = tid, refs[tid].rows + 1
            while last + 1 < len(refs) and size + refs[last + 1].rows + 1 <= cap:
                last += 1
                size += refs[last].rows + 1
            chunks.append((tid, last, size))
        seg_chunk.append(len(chunks) - 1)
    return chunks, seg_chunk
