"""Weight tiles and layer constants loaded ahead of their layer, so the array does not wait
for DRAM1 at each layer's start.

Without this each layer loads its constants and weight tiles when it starts, and the array
waits for them. With it a *ring* at the top of local memory holds the blocks (constants, then
tiles) of the layers ahead, loaded while earlier layers compute::

    local:  [ residents | the layer's arena (staging) ...     | ring: blocks of next layers ]
                                                               ^ top − capacity

Planning (:func:`plan_ring`): the ring takes room that layers leave beside their residents
and staging areas with the partitioning they would have had anyway (no layer is cut finer for
it). A layer that leaves less, streams its tiles, or has a block larger than the ring is a
barrier: it loads its own block as before, no load for a later layer is issued before it
ends, so the ring is empty while it runs and it keeps its whole arena
(:func:`ring_capacity` chooses the size). Blocks are placed one after another, wrapping to
the ring's start (tiles cut between two tiles, constants whole); a block's load is issued
during the layer after the last one whose block it overwrites. The first block after a
barrier goes above the barrier's output staging areas where the ring has room there: the
barrier's stores to DRAM0 still read them while the next layer starts.

Pacing (:class:`Prefetcher`): the DRAM unit runs each port's moves in order and queues two,
and the dispatcher waits at a third, holding up the compute instructions behind it. So the
loads are spread through the instruction stream: the next goes out when, by the compiler's
estimate of compute time, the one before it is nearly done (:data:`GUARD`); small blocks go
with the ones after them (:data:`SMALL_BLOCK`). The emitter calls the pacer between steps
and between tiles, and forces a layer's own block out before the layer starts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

#: Estimated cycles before the previous load ends when the next may be issued: it then
#: waits in the DRAM unit's queue, which keeps the port busy, for about this long.
GUARD = 256
#: Cycles a load takes besides its beats (the DRAM's read latency and the request).
LOAD_LATENCY = 24
#: Blocks smaller than this many vectors go out together with the ones after them (as one
#: move where they follow each other in local memory and in DRAM1), up to this many.
SMALL_BLOCK = 64


@dataclass
class Block:
    """Layer ``layer``'s constants (``consts`` vectors at local ``consts_at``) and weight
    tiles, in pieces ``(local vector, offset in the layer's tiles, vectors)`` (two when the
    ring wraps, cut between tiles), loaded during layer ``issue``."""

    layer: int
    consts_at: int
    consts: int
    pieces: list[tuple[int, int, int]]
    issue: int

    @property
    def size(self) -> int:
        return self.consts + sum(n for _, _, n in self.pieces)

    def tile_address(self, offset: int) -> int:
        """Local address of the tile at ``offset`` in the layer's tiles."""
        for at, first, n in self.pieces:
            if first <= offset < first + n:
                return at + offset - first
        raise ValueError(f"tile offset {offset} outside layer {self.layer}'s block")

    def spans(self) -> list[tuple[int, int]]:
        """The local ranges [lo, hi) the block takes."""
        tiles = [(at, at + n) for at, _, n in self.pieces]
        return [(self.consts_at, self.consts_at + self.consts), *tiles] if self.consts else tiles


@dataclass
class LayerRoom:
    """What planning needs of one layer: its constants and weight tiles (to load from DRAM1;
    ``starts``: where each tile begins in them), the room its arena leaves with them in
    the ring (``ring_room``; None when it streams its tiles) and ``stores``: the local
    ranges [lo, hi) its arena stages outputs in when it has the whole arena (a barrier),
    which its stores to DRAM0 still read after it ends."""

    tiles: int
    consts: int
    ring_room: int | None
    starts: tuple[int, ...] = (0,)
    stores: tuple[tuple[int, int], ...] = ()

    @property
    def size(self) -> int:
        return self.tiles + self.consts

    @property
    def footprint(self) -> int:
        """The most ring vectors the block may take, with what a wrap leaves unused."""
        longest = max(np.diff([*self.starts, self.tiles]), default=0) if self.tiles else 0
        return self.size + self.consts + int(longest)


#: Ring sizes tried (spread over the rooms the layers leave).
CAPACITY_CANDIDATES = 48


def ring_capacity(rooms: list[LayerRoom]) -> tuple[int, set[int]]:
    """(ring vectors, the layers whose blocks go in it); (0, set()) when there is none.

    A layer that leaves less room than the ring (or streams) is a barrier: the ring is
    empty while it runs, and it keeps its whole arena. Of the sizes tried the one whose
    ring holds the most vectors that can load while the layer before computes wins."""
    eligible = [i for i, r in enumerate(rooms) if r.size and r.ring_room is not None]
    sizes = sorted({r.ring_room for r in rooms if r.ring_room is not None and r.ring_room > 0})
    if not eligible or not sizes:
        return 0, set()
    picks = np.unique(np.linspace(0, len(sizes) - 1, CAPACITY_CANDIDATES).astype(int))
    best: tuple[int, int, set[int]] = (0, 0, set())
    for cap in (sizes[k] for k in picks):
        holds = [r.ring_room is not None and r.ring_room >= cap for r in rooms]
        ring = {i for i in eligible if holds[i] and rooms[i].footprint <= cap}
        beside = [i in ring or (holds[i] and not r.size) for i, r in enumerate(rooms)]
        score = sum(rooms[i].size for i in ring if i > 0 and beside[i - 1])
        if (score, cap) > best[:2]:
            best = (score, cap, ring)
    return (best[1], best[2]) if best[0] else (0, set())


def barriers(rooms: list[LayerRoom], cap: int, ring: set[int]) -> set[int]:
    """The layers the ring must be empty for: those that load their own block, and those
    that leave less room than the ring."""
    return {i for i, r in enumerate(rooms) if i not in ring and
            (r.size or r.ring_room is None or r.ring_room < cap)}


class _Ring:
    """Places blocks one after another in [base, base + cap), wrapping."""

    def __init__(self, base: int, cap: int) -> None:
        self.base, self.cap, self.at = base, cap, 0

    def skip(self, busy, n: int) -> None:
        """Move past the ranges [lo, hi) of ``busy`` that the next ``n`` vectors would
        overlap, where they fit above them before the ring's end."""
        start = self.base + self.at
        for lo, hi in sorted(busy):
            if start < hi and lo < start + n and hi + n <= self.base + self.cap:
                start = hi
        self.at = start - self.base

    def take(self, n: int, starts=None) -> list[tuple[int, int, int]]:
        """Pieces (local vector, offset, vectors) for ``n`` vectors: whole when ``starts``
        is None, else cut at one of ``starts`` when the ring wraps."""
        room = self.cap - self.at
        if n > room:
            cut = max((s for s in (starts or ()) if 0 < s <= room), default=0)
            first = [(self.base + self.at, 0, cut)] if cut else []
            self.at = n - cut
            return first + [(self.base, cut, n - cut)]
        self.at += n
        return [(self.base + self.at - n, 0, n)]


def plan_ring(rooms: list[LayerRoom], top: int) -> tuple[int, dict[int, Block], set[int]]:
    """(the ring's capacity, {layer: its block}, the barriers) for a ring ending below local
    vector ``top`` (see the module)."""
    cap, ring = ring_capacity(rooms)
    walls = barriers(rooms, cap, ring) if cap else set()
    place = _Ring(top - cap, cap)
    blocks: dict[int, Block] = {}
    last_issue, last_wall, placed = 0, -1, []
    for li, room in enumerate(rooms):
        if li in walls:
            last_wall = li
        if li not in ring:
            continue
        if last_wall == li - 1 >= 0:            # loaded while the barrier's stores still run
            place.skip(rooms[last_wall].stores, room.size)
        consts = place.take(room.consts)[0][0] if room.consts else 0
        pieces = place.take(room.tiles, room.starts) if room.tiles else []
        b = Block(li, consts, room.consts, pieces, 0)
        latest = last_wall
        for m in reversed(placed):
            if m <= latest:
                break
            if _overlap(b.spans(), blocks[m].spans()):
                latest = m
                break
        last_issue = b.issue = max(last_issue, latest + 1)
        blocks[li] = b
        placed.append(li)
    return cap, blocks, walls


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    return any(lo < h and l2 < hi for lo, hi in a for l2, h in b)


class Prefetcher:
    """When to issue the ring's loads: a model of time (the compiler's compute estimate)
    and of DRAM1 (``beats`` cycles per vector, moves in order). (With the constants on
    both ports, :meth:`compiler_lite.emit.Emitter.load_consts`, a load ends sooner than
    this says; pacing by the split measured slower: the next load then queues late.)"""

    def __init__(self, blocks: dict[int, Block], beats: int) -> None:
        self.queue = deque(sorted(blocks.values(), key=lambda b: b.layer))
        self.beats = beats
        self.t = 0                      # compute time so far (estimated cycles)
        self.busy = 0                   # when DRAM1 has done what it was given
        self.last_end = 0               # when the latest block's load ends

    def advance(self, work: int) -> None:
        """Compute time passed: ``work`` cycles."""
        self.t += work

    def load(self, vectors: int) -> None:
        """A load the layer makes itself (a barrier's): DRAM1 runs it, compute waits."""
        self.busy = max(self.t, self.busy) + LOAD_LATENCY + vectors * self.beats
        self.t = self.busy

    def due(self, layer: int) -> list[Block]:
        """The blocks to load now, during ``layer``: the next, when the one before it ends
        within :data:`GUARD` cycles (one at a time: the DRAM unit queues two moves a port),
        with the small ones after it (:data:`SMALL_BLOCK`)."""
        out: list[Block] = []
        if not self.queue or self.queue[0].issue > layer or self.t < self.last_end - GUARD:
            return out
        while self.queue and self.queue[0].issue <= layer and \
                (not out or sum(b.size for b in out) + self.queue[0].size <= SMALL_BLOCK):
            out.append(self._start(self.queue.popleft()))
        return out

    def needed(self, layer: int) -> list[Block]:
        """Blocks still to load before ``layer`` starts (its own included). (Compute does
        not wait for the whole block: each read waits for its own word.)"""
        out = []
        while self.queue and self.queue[0].layer <= layer:
            out.append(self._start(self.queue.popleft()))
        return out

    def _start(self, b: Block) -> Block:
        self.busy = self.last_end = max(self.t, self.busy) + LOAD_LATENCY + \
            b.size * self.beats
        return b
