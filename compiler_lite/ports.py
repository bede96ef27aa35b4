"""DRAM port balance: which intermediate buffers the planner homes in DRAM1.

The TCU has two DRAM ports that run at once (TCU.md §6: ``m_axi_dram0``, ``m_axi_dram1``).
Tensil's compiler keeps every variable in DRAM0 and only constants in DRAM1, so a layer that
moves more activations than weights (a residual block storing its rectified output and its
raw sum, then reloading the sum for the next addition) waits on DRAM0 while DRAM1 idles.

The planner asks :class:`PortBalance` where each intermediate buffer that leaves local
memory should live. It keeps, per layer and port, the vectors the layer moves: DRAM1 starts
with the layer's constants, DRAM0 with the model's inputs and outputs. A buffer goes to the
port where the busiest layer it touches (its writer, which stores it, and its readers, which
load what they read) would be least busy; DRAM0 on a tie, so a program whose activations
do not compete with its weights stays as Tensil lays it out.

A buffer homed in DRAM1 lives above the constants (and the room kept for the copies of
shared tiles, :meth:`compiler_lite.plan.MemoryPlan.own_tiles`), inside ``dram1_depth``, where
it does not fit DRAM0 takes it. Tensil's hosts allocate DRAM1 by ``dram1_depth`` (its
tutorials: "the size of DRAM0 and DRAM1 memory buffers on the host side"); ours allocates
as far as the program reaches (:func:`sim.model.dram1_extent`), so no file format changes.
The hardware lets a DRAM1 store run beside DRAM0's, and the emitter stores a partition's
DRAM0 outputs first (:meth:`compiler_lite.emit.Emitter._flush_stores`).
"""

from __future__ import annotations

import numpy as np

from .ir import Buffer, Space

PORTS = ("dram0", "dram1")


def buffer_traffic(layers, space: Space, sources_of) -> dict[int, dict[int, int]]:
    """buffer id → {layer index: vectors of it the layer moves}: the writer stores all of it,
    each reader loads the distinct vectors it reads (a partition's halo reloads are not
    counted)."""
    out: dict[int, dict[int, int]] = {}
    for li, layer in enumerate(layers):
        for b in layer.written:
            out.setdefault(id(b), {})[li] = b.vectors
        reads = [x for x in sources_of(layer) if len(x)]
        if not reads:
            continue
        vecs = np.unique(np.concatenate(reads))
        owner = space.owner(vecs)
        ks, counts = np.unique(owner, return_counts=True)
        for k, count in zip(ks.tolist(), counts.tolist()):
            t = out.setdefault(id(space.buffers[k]), {})
            t[li] = t.get(li, 0) + count
    return out


class PortBalance:
    """Vectors each layer moves on each DRAM port, as the planner homes buffers."""

    def __init__(self, layers: int, traffic: dict[int, dict[int, int]]) -> None:
        self.load = {p: np.zeros(max(layers, 1), dtype=np.int64) for p in PORTS}
        self.traffic = traffic

    def add(self, port: str, b: Buffer) -> None:
        """Count buffer ``b``'s moves on ``port``."""
        for li, vectors in self.traffic.get(id(b), {}).items():
            self.load[port][li] += vectors

    def add_consts(self, li: int, vectors: int, split: bool) -> None:
        """Count layer ``li``'s constants: on DRAM1, or half on each port when ``split``
        (a copy of the constants in DRAM0, :data:`compiler_lite.plan.CONSTS_PORTS`)."""
        half = vectors // 2 if split else 0
        self.load["dram0"][li] += half
        self.load["dram1"][li] += vectors - half

    def busiest(self, port: str, b: Buffer) -> int:
        """The most vectors a layer ``b`` touches would move on ``port`` with ``b`` there."""
        t = self.traffic.get(id(b), {})
        return max((int(self.load[port][li]) + v for li, v in t.items()), default=0)

    def choose(self, b: Buffer) -> str:
        """The port for ``b``: DRAM1 only when it leaves the busiest layer less busy."""
        return "dram1" if self.busiest("dram1", b) < self.busiest("dram0", b) else "dram0"


class Heap:
    """First-fit allocation of vector runs in one memory between ``base`` and ``limit``,
    reusing runs freed when their buffer's last reader is done."""

    def __init__(self, base: int, limit: int) -> None:
        self.base = self.top = base
        self.limit = limit
        self.free: list[tuple[int, int]] = []

    def alloc(self, size: int) -> int | None:
        """The address of ``size`` free vectors, or None when they would pass ``limit``."""
        self.free.sort()
        for k, (s, sz) in enumerate(self.free):
            if sz >= size:
                self.free[k] = (s + size, sz - size)
                return s
        if self.top + size > self.limit:
            return None
        at, self.top = self.top, self.top + size
        return at

    def release(self, at: int, size: int) -> None:
        self.free.append((at, size))
