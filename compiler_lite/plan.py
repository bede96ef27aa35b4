"""Memory plan: where every buffer lives and what the constants image holds.

* DRAM0: the model's inputs from vector 0 (in input order), then its outputs, then the
  intermediate buffers that do not stay in local memory, with space reused once a buffer's
  last reader is done. The flush-probe vectors ``depth-2`` and ``depth-1`` stay free.
* Local memory (strategies ``local-vars``/``local-vars-and-consts``): an intermediate buffer
  stays in local memory from its writer to its last reader when it fits next to what the
  layers in between need for their own work; the rest of local memory is each layer's arena.
* Constants (DRAM1 from vector 0, or local memory from vector 0 with ``local-consts``), in
  first-use order, per layer: the SIMD constant vectors and lookup tables, then the weight
  tiles (bias row then only the rows that can be non-zero), then constant data tensors; a
  block of two tiles or more equal to one of its kind stored before is not stored again
  (the layers share it, :class:`ConstImage`).
* Reads: a layer reads only the inputs, constants and buffers that earlier layers stored
  (:meth:`Planner.settle_reads`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from tcu_hw import numeric
from tcu_hw.errors import CompileError
from tcu_hw.isa import lut_vectors

from .ir import Buffer, Space, distinct
from .kernels import Layer, Linear, Load, Simd
from .ports import Heap, PortBalance, buffer_traffic

STRATEGIES = ("local-isolated", "local-vars", "local-consts", "local-vars-and-consts")
#: Where constants are loaded from: DRAM1 (Tensil's), or both ports, from DRAM1 and a copy
#: the host also writes into DRAM0 (``dram0_consts`` in the .tmodel).
CONSTS_PORTS = ("dram1", "both")
#: Where inputs are loaded from: DRAM0 (Tensil's), or both ports, from DRAM0 and a copy the
#: host also writes into DRAM1 (``dram1_inputs`` in the .tmodel).
INPUT_PORTS = ("dram0", "both")


def add_port_options(parser) -> None:
    """The ``--consts-ports`` and ``--input-ports`` options of the commands that compile
    (compiler_lite, sim.check, the bench)."""
    parser.add_argument(
        "--consts-ports", choices=CONSTS_PORTS, default="dram1",
        help="dram1: constants load from DRAM1, as Tensil's driver stages them (default); "
             "both: the host also writes them into DRAM0 (the .tmodel's dram0_consts) and "
             "the compiler splits its constants loads over both ports (docs/tensil.md)")
    parser.add_argument(
        "--input-ports", choices=INPUT_PORTS, default="dram0",
        help="dram0: inputs load from DRAM0, where Tensil's driver writes them (default); "
             "both: the host also writes them into DRAM1 (the .tmodel's dram1_inputs) and "
             "the compiler splits their loads over both ports (docs/tensil.md)")


def sources_of(layer: Layer) -> list[np.ndarray]:
    """Virtual vectors the layer reads from local memory (per reading step)."""
    out = []
    for s in layer.steps:
        if isinstance(s, Linear):
            out.append(s.sources())
        elif isinstance(s, Load):
            out.append(s.x)
    return out


def acc_buffers(layer: Layer) -> list[Buffer]:
    """Buffers a layer's steps write in the accumulators, in order of first write."""
    out: list[Buffer] = []
    for s in layer.steps:
        for b in (getattr(s, "out", None), getattr(s, "buf", None), getattr(s, "aux_buf", None)):
            if b is not None and b not in out:
                out.append(b)
    return out


@dataclass
class TileRef:
    offset: int         # vector offset in the constants image
    rows: int           # LoadWeights size: rows after the bias row


@dataclass
class LayerConsts:
    base: int = 0                                   # image offset of the layer's block
    simd: dict = field(default_factory=dict)        # const key → its accumulator vector
    simd_count: int = 0                             # SIMD constant vectors (one per key)
    simd_digits: int = 1                            # local vectors per SIMD constant
    lut: dict = field(default_factory=dict)         # table key → (offset, tables, vectors each)
    lut_vectors: int = 0                            # vectors of lookup tables after the consts
    tiles: list = field(default_factory=list)       # per Linear step: [TileRef per tile]
    tile_base: int = 0
    tile_vectors: int = 0                           # vectors of weight tiles from tile_base
    saturated: int = 0
    shared_tiles: bool = False          # another layer uses the same tile block (see plan)

    @property
    def simd_local(self) -> int:
        """Local (and DRAM1) vectors of the SIMD constants."""
        return self.simd_count * self.simd_digits


def const_digits(dt) -> int:
    """Local vectors per SIMD constant: 1, or for an integer type the base-2^W digits of an
    accumulator-width value (:func:`tcu_hw.numeric.accumulator_digits`)."""
    if not dt.is_integer:
        return 1
    return numeric.accumulator_digit_count(dt)


def const_digit(v, dt, d: int) -> np.ndarray:
    """Digit ``d`` (0 = the top one) of SIMD constant ``v`` as local-memory values: the
    constant itself for other types (:func:`tcu_hw.numeric.accumulator_digits`)."""
    if not dt.is_integer:
        return np.asarray(v, dtype=np.float64)
    try:
        return numeric.accumulator_digits(v, dt)[d].astype(np.float64)
    except ValueError as e:
        raise CompileError(f"internal: SIMD constant: {e}") from None


class ConstImage:
    """The constants image as it is built: blocks of vectors appended in first-use order;
    a block equal to one already stored is not stored again (:meth:`add` returns the first
    copy's offset). A transformer's LayerNorms and relayouts of equal shapes, or layers with
    the same tables, then share one copy (DeiT-tiny: 5.5 M vectors → 0.38 M). Blocks shorter
    than two tiles (``2(n + 1)`` vectors) are stored for each layer: the copy costs little,
    and a layer's blocks that follow the previous layer's in DRAM1 load with them in one
    move. A layer that goes in channel groups gets a copy of its tiles of its own first
    (:meth:`MemoryPlan.own_tiles`)."""

    def __init__(self, n: int) -> None:
        self.n, self.size = n, 0
        self.min_shared = 2 * (n + 1)
        self._blocks: list[np.ndarray] = []
        self._starts: list[int] = []
        self._found: dict[bytes, list[int]] = {}    # digest → indices of blocks

    def add(self, block: np.ndarray, kind: str) -> int:
        """Offset of ``block`` ((vectors, n) values) in the image, stored if no block of the
        same ``kind`` ("tiles", "consts", "data") equals it or if it is shorter than
        ``min_shared`` (only tile blocks are ever laid out again: they share with tiles)."""
        block = np.ascontiguousarray(block, dtype=np.float64).reshape(-1, self.n)
        if not len(block):
            return self.size
        if len(block) < self.min_shared:
            return self._store(block, None)
        key = hashlib.blake2b(block.tobytes(), digest_size=16).digest() + \
            len(block).to_bytes(8, "little") + kind.encode()
        for i in self._found.get(key, ()):
            if np.array_equal(self._blocks[i], block):
                return self._starts[i]
        return self._store(block, key)

    def _store(self, block: np.ndarray, key: bytes | None) -> int:
        at = self.size
        if key is not None:
            self._found.setdefault(key, []).append(len(self._blocks))
        self._blocks.append(block)
        self._starts.append(at)
        self.size += len(block)
        return at

    def block(self, at: int, vectors: int) -> np.ndarray:
        """``vectors`` vectors from offset ``at`` (within one stored block)."""
        if not vectors:
            return np.zeros((0, self.n))
        i = int(np.searchsorted(self._starts, at, side="right")) - 1
        return self._blocks[i][at - self._starts[i]:at - self._starts[i] + vectors]

    def array(self) -> np.ndarray:
        """The whole image, (vectors, n)."""
        return np.concatenate(self._blocks) if self._blocks else np.zeros((0, self.n))


@dataclass
class MemoryPlan:
    image: np.ndarray                               # raw vectors of the constants image
    layers: list[LayerConsts]
    dram0_used: int
    local_top: list[int]                            # per layer: first arena vector
    consts_to_local: bool
    saturated_consts: int = 0
    dram0_aggregate: int = 0                        # vectors of all DRAM0 buffers
    tile_users: Counter = field(default_factory=Counter)    # tile block → layers using it
    dram1_scratch: tuple = (0, 0)   # DRAM1 vectors of intermediate buffers [start, end)
    consts_mirror: int | None = None    # DRAM0 vector of the constants' copy (CONSTS_PORTS)
    input_mirror: dict = field(default_factory=dict)   # input → DRAM1 vector of its copy

    def own_tiles(self, lc: LayerConsts, dram1_depth: int) -> bool:
        """Give layer constants ``lc`` a copy of their tile block, appended to the image,
        when other layers share the block (:func:`.groups.regroup_tiles` is about to lay it
        out again); False when DRAM1 has no room for the copy."""
        if self.tile_users[lc.tile_base] <= 1:
            lc.shared_tiles = False                 # (the others took copies)
            return True
        at = len(self.image)
        start, end = self.dram1_scratch
        limit = min([start if end > start else dram1_depth, *self.input_mirror.values()])
        if at + lc.tile_vectors > limit:
            return False
        block = self.image[lc.tile_base:lc.tile_base + lc.tile_vectors]
        self.image = np.concatenate([self.image, block])
        self.tile_users[lc.tile_base] -= 1
        self.tile_users[at] = 1
        lc.tiles = [[TileRef(r.offset - lc.tile_base + at, r.rows) for r in refs]
                    for refs in lc.tiles]
        lc.tile_base, lc.shared_tiles = at, False
        return True


class Planner:
    def __init__(self, arch, space: Space, layers: list[Layer], strategy: str,
                 source: str = "model", consts_ports: str = "dram1",
                 input_ports: str = "dram0") -> None:
        if strategy not in STRATEGIES:
            raise CompileError(f"strategy {strategy!r} is unknown; allowed: "
                               + ", ".join(STRATEGIES))
        if consts_ports not in CONSTS_PORTS:
            raise CompileError(f"consts_ports {consts_ports!r} is unknown; allowed: "
                               + ", ".join(CONSTS_PORTS))
        if input_ports not in INPUT_PORTS:
            raise CompileError(f"input_ports {input_ports!r} is unknown; allowed: "
                               + ", ".join(INPUT_PORTS))
        self.arch = arch
        self.n = arch.array_size
        self.space = space
        self.layers = layers
        self.strategy = strategy
        self.source = source
        self.local_vars = strategy in ("local-vars", "local-vars-and-consts")
        self.consts_to_local = strategy in ("local-consts", "local-vars-and-consts")
        if consts_ports == "both" and self.consts_to_local:
            raise CompileError(f"{source}: consts_ports 'both' (--consts-ports both) loads "
                               f"constants from DRAM0 and DRAM1; "
                               f"strategy {strategy} keeps them in local memory: choose "
                               f"local-isolated or local-vars")
        self.mirror = consts_ports == "both"
        self.input_copies = input_ports == "both"

    # ------------------------------------------------------------------------ lifetimes

    def lifetimes(self) -> dict[int, tuple[int, int]]:
        """buffer id → (writer layer, last reader layer) for buffers that leave a layer."""
        out = {}
        for li, layer in enumerate(self.layers):
            for b in layer.written:
                out[id(b)] = (li, li)
        for li, layer in enumerate(self.layers):
            for x in sources_of(layer):
                if not len(x):
                    continue
                for k in self.space.owners(x):
                    b = self.space.buffers[k]
                    w, _ = out.get(id(b), (-1, -1))
                    out[id(b)] = (w, max(li, out.get(id(b), (w, w))[1]))
        return out

    # --------------------------------------------------------------------------- reads

    def settle_reads(self) -> None:
        """Make every layer read only memory that holds the value at that point: the model's
        inputs, constants and buffers that earlier layers stored.

        A read of a buffer that is not in memory yet (the layer's own output) or ever (one
        that only lives in the accumulators) is a lowering bug."""
        stored: dict[int, int] = {}
        for li, layer in enumerate(self.layers):
            for b in layer.written:
                stored.setdefault(id(b), li)

        def unreadable(x: np.ndarray, li: int) -> np.ndarray:
            """Per virtual vector: its buffer is not in memory at layer ``li``."""
            bad = np.zeros(len(x), dtype=bool)
            owner = self.space.owner(x)
            for k in np.unique(owner):
                b = self.space.buffers[k]
                if b.role not in ("input", "const") and not stored.get(id(b), li) < li:
                    bad |= owner == k
            return bad

        for li, layer in enumerate(self.layers):
            for s in layer.steps:
                if not isinstance(s, (Linear, Load)):
                    continue
                x = s.sources() if isinstance(s, Linear) else s.x
                bad = x[unreadable(x, li)]
                if len(bad):
                    b = self.space.buffers[self.space.owner(bad[:1])[0]]
                    what = "its own output" if stored.get(id(b)) == li else \
                        "a buffer no earlier layer stores"
                    raise CompileError(
                        f"{self.source}: layer {layer.name!r} (nodes {', '.join(layer.nodes)}):"
                        f" internal: reads {b.name!r}, {what}")

    # ------------------------------------------------------------------------- constants

    def const_image(self) -> tuple[np.ndarray, list[LayerConsts], int]:
        """(raw image, per-layer constants, saturated values): per layer its SIMD constants
        and tables, its weight tiles, the constant tensors it reads first; a block equal to
        one already stored is not stored again (:class:`ConstImage`)."""
        dt = self.arch.dtype
        image = ConstImage(self.n)
        info, used = [], []                         # used: per layer, its blocks
        data_done: set[int] = set()
        for layer in self.layers:
            lc = LayerConsts()
            lc.base = image.add(self._consts_block(layer, lc), "consts")
            tiles, rel = self._tiles_block(layer)
            lc.tile_base, lc.tile_vectors = image.add(tiles, "tiles"), len(tiles)
            lc.tiles = [[TileRef(lc.tile_base + at, rows) for at, rows in refs] for refs in rel]
            used.append([image.block(lc.base, lc.simd_local + lc.lut_vectors), tiles])
            for b in self._new_data_consts(layer, data_done):
                b.home = ("local" if self.consts_to_local else "dram1",
                          image.add(b.data, "data"))
                used[-1].append(b.data)
            info.append(lc)
        vecs = image.array()
        self._refuse_nonfinite(vecs, info)
        for lc, blocks in zip(info, used):          # (per layer, shared blocks included)
            lc.saturated = sum(numeric.to_fixed(b, dt)[1] for b in blocks)
        raw, sat = numeric.to_fixed(vecs, dt)
        return raw, info, sat

    def _consts_block(self, layer: Layer, lc: LayerConsts) -> np.ndarray:
        """The layer's SIMD constants (digit-major: one move kind per digit) then its lookup
        tables; fills ``lc``'s SIMD and table fields (offsets relative to the block)."""
        dt, n = self.arch.dtype, self.n
        simd_vals: dict = {}
        for s in layer.steps:
            if isinstance(s, Simd):
                for k, v in s.consts.items():
                    simd_vals.setdefault(k, v)
        lc.simd_digits = const_digits(dt)
        lc.simd = {k: i for i, k in enumerate(simd_vals)}
        lc.simd_count = len(simd_vals)
        vecs = [const_digit(v, dt, d).reshape(1, n)
                for d in range(lc.simd_digits) for v in simd_vals.values()]
        at, per = lc.simd_local, lut_vectors(self.arch.lut_depth, n)
        for s in layer.steps:
            if not isinstance(s, Simd):
                continue
            for k, tables in s.luts.items():
                if k in lc.lut:
                    continue
                lc.lut[k] = (at, len(tables), per)
                for table in tables:
                    block = np.zeros(per * n)
                    block[:len(table)] = table
                    vecs.append(block.reshape(per, n))
                    at += per
                    lc.lut_vectors += per
        return np.concatenate(vecs) if vecs else np.zeros((0, n))

    def _tiles_block(self, layer: Layer) -> tuple[np.ndarray, list[list[tuple[int, int]]]]:
        """The layer's weight tiles, each its bias row and the rows that can be non-zero,
        and per Linear step (offset in the block, rows) of each tile (data tiles, written
        by an earlier layer, are not constants)."""
        n = self.n
        vecs, refs_of, at = [], [], 0
        for s in layer.steps:
            refs = []
            if isinstance(s, Linear) and not s.data and len(s.tiles):
                extent = self._lane_extent(s)
                # per tile: 1 + its last non-zero weight row (0 when none)
                nz = np.any(s.tiles.array()[:, 1:] != 0, axis=2)
                last = np.where(nz.any(axis=1), n - np.argmax(nz[:, ::-1], axis=1), 0)
                for tile, r, e in zip(s.tiles.values, last.tolist(), extent.tolist()):
                    rows = max(r, e)
                    refs.append((at, rows))
                    vecs.append(tile[:rows + 1])
                    at += rows + 1
            refs_of.append(refs)
        return (np.concatenate(vecs) if vecs else np.zeros((0, n))), refs_of

    def _new_data_consts(self, layer: Layer, done: set[int]) -> list[Buffer]:
        """Constant tensors the layer reads as data that no earlier layer read."""
        out = []
        for x in sources_of(layer):
            if not len(x):
                continue
            for k in self.space.owners(x):
                b = self.space.buffers[k]
                if b.role == "const" and id(b) not in done:
                    done.add(id(b))
                    out.append(b)
        return out

    def _refuse_nonfinite(self, image: np.ndarray, info: list[LayerConsts]) -> None:
        bad = ~np.isfinite(image).all(axis=1) if image.size else np.zeros(0, dtype=bool)
        if not bad.any():
            return
        v = int(np.argmax(bad))
        owner = [layer.name for layer, lc in zip(self.layers, info)
                 if lc.tile_base <= v < lc.tile_base + lc.tile_vectors or
                 lc.base <= v < lc.base + lc.simd_local + lc.lut_vectors]
        where = f"layer {owner[0]!r}" if owner else "the model"
        raise CompileError(f"{where}: a constant computed from the model's parameters is "
                           f"NaN or infinite (e.g. a division by zero in a "
                           f"normalization); the TCU computes on finite numbers")

    def _lane_extent(self, s: Linear) -> np.ndarray:
        """Per tile: 1 + the highest lane that can be non-zero in a vector it multiplies (a
        tile must load its rows up to there: later rows keep stale weights, harmless only
        against zero lanes)."""
        n = self.n
        ext = np.zeros(len(s.tiles), dtype=np.int64)
        xs = s.x >= 0
        if not xs.any():
            return ext
        x, t = s.x[xs], s.t[xs]
        owner = self.space.owner(x)
        lanes = np.full(len(x), n, dtype=np.int64)
        for k in distinct(owner):
            b = self.space.buffers[k]
            if b.dirty or b.extent is None:
                continue
            sel = owner == k
            lanes[sel] = b.extent[x[sel] - b.start]
        np.maximum.at(ext, t, lanes)
        return ext

    # ---------------------------------------------------------------------------- homes

    def place(self) -> MemoryPlan:
        A = self.arch
        self.settle_reads()
        image, info, saturated = self.const_image()
        if self.consts_to_local:
            if len(image) > A.local_depth - 1:
                raise CompileError(
                    f"{self.source}: strategy {self.strategy}: the constants need "
                    f"{len(image)} vectors of local memory, the architecture has "
                    f"{A.local_depth - 1} usable (local_depth {A.local_depth} minus the "
                    f"flush-probe vector); use local-isolated or local-vars")
        elif len(image) > A.dram1_depth:
            raise CompileError(f"{self.source}: the constants need {len(image)} vectors of "
                               f"DRAM1, the architecture has dram1_depth {A.dram1_depth}")
        life = self.lifetimes()
        limit = A.dram0_depth - 2
        balance = PortBalance(len(self.layers), buffer_traffic(self.layers, self.space,
                                                               sources_of))
        at = 0
        for role in ("input", "output"):
            for b in self.space.buffers:
                if b.role == role:
                    b.home = ("dram0", at)
                    at += b.vectors
                    balance.add("dram0", b)
        if at > limit:
            raise CompileError(f"{self.source}: the inputs and outputs need {at} vectors of "
                               f"DRAM0, the architecture has {limit} usable (dram0_depth "
                               f"{A.dram0_depth} minus the two flush-probe vectors)")
        users = Counter(lc.tile_base for lc in info if lc.tile_vectors)
        consts_room = self._scratch_base(image, info, users)
        mirror = None
        if self.mirror and len(image):
            mirror, at = at, at + consts_room
            if at > limit:
                raise CompileError(f"{self.source}: consts_ports both: the inputs, outputs "
                                   f"and the constants' copy need {at} vectors of DRAM0, the "
                                   f"architecture has {limit} usable (dram0_depth "
                                   f"{A.dram0_depth} minus the two flush-probe vectors)")
        if not self.consts_to_local:
            for li, lc in enumerate(info):
                balance.add_consts(li, lc.simd_local + lc.lut_vectors + lc.tile_vectors,
                                   mirror is not None)
        copies, scratch = self._input_copies(consts_room)
        heaps = {"dram0": Heap(at, limit), "dram1": Heap(scratch, A.dram1_depth)}
        local_base = len(image) if self.consts_to_local else 0
        local_limit = A.local_depth - 1
        local_top = [local_base] * len(self.layers)
        dying: dict[int, list[Buffer]] = {}
        residents: list[tuple[int, int, int]] = []  # (start, end, last layer)
        for li, layer in enumerate(self.layers):
            for b in layer.written:
                if b.role != "temp" or b.home is not None or id(b) not in life:
                    continue
                _, last = life[id(b)]
                if self.local_vars and last > li:
                    slot = self._local_slot(b, li, last, residents, local_base, local_limit)
                    if slot is not None:
                        b.home = ("local", slot)
                        residents.append((slot, slot + b.vectors, last))
                if b.home is None:
                    self._home_in_dram(b, layer, heaps, balance)
                    dying.setdefault(last, []).append(b)
            alive = [r for r in residents if r[2] >= li]
            local_top[li] = max([local_base] + [r[1] for r in alive])
            for d in dying.pop(li, []):
                heaps[d.home[0]].release(d.home[1], d.vectors)
            residents = [r for r in residents if r[2] > li]
        aggregate = sum(b.vectors for b in self.space.buffers
                        if b.home is not None and b.home[0] == "dram0")
        for lc in info:
            lc.shared_tiles = lc.tile_vectors > 0 and users[lc.tile_base] > 1
        d1 = heaps["dram1"]
        return MemoryPlan(image, info, heaps["dram0"].top, local_top, self.consts_to_local,
                          saturated, aggregate, users, dram1_scratch=(d1.base, d1.top),
                          consts_mirror=mirror, input_mirror=copies)

    def _input_copies(self, at: int) -> tuple[dict, int]:
        """DRAM1 homes of the inputs' copies from vector ``at`` on (input ports "both"):
        ({input: DRAM1 vector}, the first vector after them)."""
        copies = {}
        if self.input_copies:
            for b in self.space.buffers:
                if b.role == "input":
                    copies[b.name], at = at, at + b.vectors
            if at > self.arch.dram1_depth:
                raise CompileError(f"{self.source}: input_ports both: the constants and the "
                                   f"inputs' copy need {at} vectors of DRAM1, the "
                                   f"architecture has {self.arch.dram1_depth}")
        return copies, at

    def _scratch_base(self, image: np.ndarray, info: list[LayerConsts], users: Counter) -> int:
        """First DRAM1 vector of the intermediate buffers: after the constants and the room
        for a copy of every tile block that several layers share (``own_tiles``). (With
        ``local-consts`` the host still stages the constants in DRAM1 for every run.)"""
        return len(image) + sum(lc.tile_vectors for lc in info
                                if lc.tile_vectors and users[lc.tile_base] > 1)

    def _home_in_dram(self, b: Buffer, layer: Layer, heaps: dict, balance: PortBalance) -> None:
        """Home ``b`` in the DRAM port :class:`PortBalance` picks (DRAM0 when DRAM1 is full)."""
        port = balance.choose(b)
        at = heaps[port].alloc(b.vectors)
        if at is None and port == "dram1":
            port, at = "dram0", heaps["dram0"].alloc(b.vectors)
        if at is None:
            top = heaps["dram0"].top + b.vectors
            raise CompileError(
                f"{self.source}: layer {layer.name!r}: the intermediate tensors need {top} "
                f"vectors of DRAM0 at this point, the architecture has "
                f"{heaps['dram0'].limit} usable")
        b.home = (port, at)
        balance.add(port, b)

    def _local_slot(self, b: Buffer, li: int, last: int, residents, base: int,
                    limit: int) -> int | None:
        """A local address for ``b`` during layers li..last, keeping half of local memory
        (at least) for the arenas of those layers; None when it does not fit."""
        reserve = max((limit - base) // 2, 1)
        alive = sorted((s, e) for s, e, end in residents if end >= li)
        at = base
        for s, e in alive:
            if at + b.vectors <= s:
                break
            at = max(at, e)
        if at + b.vectors > limit - reserve:
            return None
        return at
