"""Instruction emission: each layer is cut into partitions of its output buffer, and each
partition is load → compute → store.

Per layer the local-memory arena holds the weight tiles (all of them when they fit, else two
chunks that stream), the layer's constant vectors, the staging areas of the sources that live
in DRAM (two each when they fit: the next partition's DRAM loads are issued before this
partition's compute, so the DRAM unit works while the array does) and two output staging
areas. The accumulators hold the constant vectors, then one region per buffer the layer's
steps write. The partition size is the largest that fits both.

Within a partition the producer's terms are emitted tile by tile (one LoadWeights, then its
MatMuls rolled up into strided runs), then each in-place step, then the store.

::

    local:  [ residents | tiles (all, or 2 chunks) | consts | src stage ×2 | out stage ×2 ]
    acc:    [ consts | region per written buffer (this partition's span) ]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tcu_hw.errors import CompileError
from tcu_hw.isa import (SIMD, DataMove, DataMoveKind, LoadLUT, LoadWeights, MatMul,
                        SimdOp as Op)

from .ir import Buffer, Space
from .kernels import ACCUMULATE, ANY, Layer, Linear, Load, Reduce, Simd, Zero
from .plan import LayerConsts, MemoryPlan, acc_buffers
from .rollup import runs
from .summary import estimate

KIND_IN = {"dram0": DataMoveKind.DRAM0_TO_LOCAL, "dram1": DataMoveKind.DRAM1_TO_LOCAL}


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


@dataclass
class LayerStats:
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


class Emitter:
    def __init__(self, arch, space: Space, layers: list[Layer], plan: MemoryPlan,
                 source: str = "model") -> None:
        self.arch = arch
        self.n = arch.array_size
        self.layout = arch.layout
        self.space = space
        self.layers = layers
        self.plan = plan
        self.source = source
        self.out: list = []
        self.stats: list[LayerStats] = []
        self.max_count = 1 << self.layout.op2_addr_bits
        self.s0 = arch.stride0_depth
        self.s1 = arch.stride1_depth
        self.debug = False

    # ------------------------------------------------------------------------ helpers

    def fail(self, layer: Layer, message: str):
        raise CompileError(f"{self.source}: layer {layer.name!r} "
                           f"(nodes {', '.join(layer.nodes)}): {message}")

    def move(self, kind, local, other, count, c0=0, c1=0) -> None:
        """DataMove(s) of ``count`` vectors starting at (local, other) with stride codes."""
        step0, step1 = 1 << c0, 1 << c1
        done = 0
        while done < count:
            k = min(self.max_count, count - done)
            self.out.append(DataMove(kind, local + done * step0, c0, other + done * step1,
                                     c1, k - 1))
            done += k

    def moves(self, kind, local: np.ndarray, other: np.ndarray) -> None:
        """Vector-by-vector moves rolled up into runs."""
        for i, cnt, c0, c1, _ in runs(local, other, s0=self.s0, s1=self.s1,
                                      max_count=self.max_count):
            self.move(kind, int(local[i]), int(other[i]), cnt, c0, c1)

    # ------------------------------------------------------------------------- program

    def emit(self) -> list:
        for li, layer in enumerate(self.layers):
            start = len(self.out)
            st = LayerStats(layer.name, layer.nodes, macs=layer.macs)
            self.stats.append(st)
            self.emit_layer(li, layer, st)
            st.instructions = len(self.out) - start
            for ins in self.out[start:]:
                st.by_kind[ins.name] = st.by_kind.get(ins.name, 0) + 1
            compute, dram = estimate(self.out[start:], self.arch)
            st.cycles = max(compute, dram)
            lc = self.plan.layers[li]
            st.saturated = lc.saturated
            stored = lc.tile_count * self.n
            if stored:
                block = self.plan.image[lc.tile_base:lc.tile_base + lc.tile_count]
                st.const_util = float(np.count_nonzero(block)) / stored
        return self.out

    # -------------------------------------------------------------------------- layer

    def emit_layer(self, li: int, layer: Layer, st: LayerStats) -> None:
        A = self.arch
        lc: LayerConsts = self.plan.layers[li]
        F = layer.out
        steps = layer.steps
        abufs = acc_buffers(layer)
        arena_lo = self.plan.local_top[li]
        arena_hi = A.local_depth - 1
        to_local = self.plan.consts_to_local

        # sources read from local memory, per reading step
        reads = []                                  # (step index, positions, owner buffers)
        src_bufs: list[Buffer] = []
        for k, s in enumerate(steps):
            if isinstance(s, (Linear, Load)):
                x = s.x
                owner = np.full(len(x), -1, dtype=np.int64)
                ok = x >= 0
                if ok.any():
                    owner[ok] = self.space.owner(x[ok])
                for b in np.unique(owner[ok]):
                    buf = self.space.buffers[b]
                    if buf.home is None:
                        self.fail(layer, f"internal: source {buf.name!r} has no home")
                    if buf not in src_bufs:
                        src_bufs.append(buf)
                reads.append((k, owner))
        staged = [b for b in src_bufs if b.home[0] != "local"]
        F_local = F.home is not None and F.home[0] == "local"

        # sizes
        consts_n = lc.simd_count
        lut_vecs = lc.lut_count
        tiles_n = lc.tile_count
        acc_const = consts_n
        # partitions
        ranges_fn = self._ranges_fn(layer, abufs)
        spans_fn = self._spans_fn(layer, staged)
        fixed_local = (0 if to_local else consts_n + lut_vecs)
        arena = arena_hi - arena_lo
        ntiles = sum(len(refs) for refs in lc.tiles)
        max_tile = self._max_tile(lc)

        def need(units, k_rows, double, sample=True):
            total_rows = -(-F.vectors // units)
            bounds = [(r * units, min(F.vectors, (r + k_rows) * units))
                      for r in range(0, total_rows, k_rows)]
            picks = range(len(bounds))
            if sample and len(bounds) > 48:         # partitions are alike; check a sample
                picks = sorted(set(np.linspace(0, len(bounds) - 1, 48).astype(int)))
            acc = 0
            loc = {b: 0 for b in staged}
            outv = 0
            for j in picks:
                a, b = bounds[j]
                R = ranges_fn(a, b)
                acc = max(acc, sum(hi - lo for lo, hi in R.values()))
                for buf, stg in spans_fn(R).items():
                    loc[buf] = max(loc[buf], stg.size)
                outv = max(outv, b - a)
            mult = 2 if double else 1
            local = sum(loc.values()) * mult + (0 if F_local else outv * mult)
            return acc + acc_const, local, bounds, loc, outv

        def fits(acc, local, mode):
            room = arena - fixed_local - local
            if acc > A.accumulator_depth:
                return False
            if mode == "all":
                return room >= tiles_n
            if mode == "stream":
                return room >= 2 * max_tile
            return room >= 0

        def search(units):
            total_rows = -(-F.vectors // units)
            found = []
            for mode in (["none"] if to_local else ["all", "stream"]):
                if mode == "stream" and tiles_n <= 2 * max_tile:
                    continue
                for double in (True, False):
                    lo_k, hi_k, best = 1, total_rows, None
                    while lo_k <= hi_k:
                        mid = (lo_k + hi_k) // 2
                        acc, local, *_ = need(units, mid, double)
                        if fits(acc, local, mode):
                            best, lo_k = mid, mid + 1
                        else:
                            hi_k = mid - 1
                    while best is not None:         # confirm on every partition
                        acc, local, *_ = need(units, best, double, sample=False)
                        if fits(acc, local, mode):
                            break
                        best = best - 1 if best > 1 else None
                    if best is None:
                        continue
                    parts = -(-total_rows // best)
                    _, local, _, loc_, _ = need(units, best, double)
                    tile_dram = tiles_n * (parts if mode == "stream" else 1)
                    if mode == "stream":
                        chunk = max(1, (arena - fixed_local - local) // 2)
                        tile_dram += parts * (-(-tiles_n // chunk))
                    cost = 2 * ntiles * parts + parts * (len(staged) + 2) + \
                        (tile_dram + parts * sum(loc_.values())) / 16 + \
                        (0 if double else parts)
                    found.append((cost, mode, double, best, units))
            return found

        unit_choices = [F.row]
        small = F.frame.Cb if F.frame is not None else 1
        if small < F.row:
            unit_choices.append(small)
        for units in unit_choices:
            candidates = search(units)
            if candidates:
                break
        if not candidates:
            acc, local, *_ = need(unit_choices[-1], 1, False, sample=False)
            self.fail(layer, f"does not fit: the smallest partition ({unit_choices[-1]} "
                             f"vectors of {F.vectors}) needs {acc} accumulator vectors (the "
                             f"architecture has {A.accumulator_depth}) and "
                             f"{local + fixed_local} local vectors besides weights (the arena "
                             f"has {arena}, weights need {tiles_n})")
        _, mode, double, k_rows, units = min(candidates, key=lambda c: c[0])
        total_rows = -(-F.vectors // units)
        if self.debug:
            print(f"layer {layer.name}: mode {mode} double {double} rows {k_rows}/{total_rows}"
                  f" arena {arena} staged {[b.name for b in staged]} F_local {F_local}")
        acc_need, local_need, bounds, loc, outv = need(units, k_rows, double, sample=False)
        st.partitions = len(bounds)

        # local arena layout
        at = arena_lo
        tile_local = None
        chunk_cap = 0
        if mode == "all":
            tile_local = at
            at += tiles_n
        elif mode == "stream":
            chunk_cap = (arena - fixed_local - local_need) // 2
            tile_local = at
            at += 2 * chunk_cap
        const_local = at
        if not to_local:
            at += consts_n + lut_vecs
        stage = {}
        mult = 2 if double else 1
        for buf in staged:
            stage[buf] = [at + j * loc[buf] for j in range(mult)]
            at += loc[buf] * mult
        out_stage = [at + j * outv for j in range(mult)] if not F_local else []
        at += 0 if F_local else outv * mult
        assert at <= arena_hi, (at, arena_hi)
        st.local_used = at
        st.acc_used = acc_need
        st.stages = max(1, -(-tiles_n // chunk_cap)) if mode == "stream" and chunk_cap else 1

        # prologue: constants into local, then into the accumulators; LUTs; resident tiles
        self._stream_base = tile_local
        self._lut_local = lc.base if to_local else const_local
        if consts_n + lut_vecs:
            if to_local:
                src = lc.base
            else:
                self.move(DataMoveKind.DRAM1_TO_LOCAL, const_local, lc.base, consts_n + lut_vecs)
                src = const_local
            if consts_n:
                self.move(DataMoveKind.LOCAL_TO_ACC, src, 0, consts_n)
        tile_addr = self._tile_addresses(lc, mode, tile_local, to_local)
        if mode == "all" and tiles_n:
            self.move(DataMoveKind.DRAM1_TO_LOCAL, tile_local, lc.tile_base, tiles_n)
        st.dram_vectors += (0 if to_local else consts_n + (tiles_n if mode == "all" else 0))

        # per partition
        self.current_tile = None
        acc_base0 = acc_const
        P = len(bounds)

        def load_sources(p):
            a, b = bounds[p]
            R = ranges_fn(a, b)
            for buf, stg in spans_fn(R).items():
                kind = KIND_IN[buf.home[0]]
                base = stage[buf][p % mult]
                if stg.needed is None:
                    self.move(kind, base, buf.home[1] + stg.lo, stg.hi - stg.lo)
                else:
                    self.moves(kind, base + np.arange(len(stg.needed)),
                               buf.home[1] + stg.needed)
                st.dram_vectors += stg.size

        if double and P:
            load_sources(0)
        for p in range(P):
            if double:
                if p + 1 < P:
                    load_sources(p + 1)
            else:
                load_sources(p)
            a, b = bounds[p]
            R = ranges_fn(a, b)
            acc_at = {}
            base = acc_base0
            for buf in abufs:
                lo, hi = R.get(buf, (0, 0))
                acc_at[buf] = base - lo
                base += hi - lo
            spans = spans_fn(R)

            def local_of(xv: np.ndarray) -> np.ndarray:
                out = np.empty(len(xv), dtype=np.int64)
                own = self.space.owner(xv)
                for k in np.unique(own):
                    buf = self.space.buffers[k]
                    sel = own == k
                    if buf.home[0] == "local":
                        out[sel] = buf.home[1] + xv[sel] - buf.start
                        continue
                    stg = spans[buf]
                    rel = xv[sel] - buf.start
                    if stg.needed is None:
                        out[sel] = stage[buf][p % mult] + rel - stg.lo
                    else:
                        out[sel] = stage[buf][p % mult] + np.searchsorted(stg.needed, rel)
                return out

            for k, s in enumerate(steps):
                if isinstance(s, Linear):
                    self._emit_linear(layer, lc, k, s, R, acc_at, local_of, tile_addr, mode,
                                      chunk_cap, st, to_local)
                elif isinstance(s, Load):
                    self._emit_load(s, R, acc_at, local_of)
                elif isinstance(s, Simd):
                    self._emit_simd(s, R, acc_at, lc, acc_const)
                elif isinstance(s, Reduce):
                    self._emit_reduce(s, R, acc_at)
                elif isinstance(s, Zero):
                    self._emit_zero(s, R, acc_at)
            # store
            acc_a = acc_at[F] + a
            if F_local:
                self.move(DataMoveKind.ACC_TO_LOCAL, F.home[1] + a, acc_a, b - a)
            else:
                dst = out_stage[p % mult]
                self.move(DataMoveKind.ACC_TO_LOCAL, dst, acc_a, b - a)
                kind = DataMoveKind.LOCAL_TO_DRAM0 if F.home[0] == "dram0" else None
                if kind is None:
                    self.fail(layer, f"internal: output buffer home {F.home}")
                self.move(kind, dst, F.home[1] + a, b - a)
                st.dram_vectors += b - a

    # ------------------------------------------------------------------ partition ranges

    def _ranges_fn(self, layer: Layer, abufs):
        """(a, b) of the final buffer → {acc buffer: (lo, hi)} vectors this partition needs."""
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
            for buf in abufs:
                R.setdefault(buf, (0, 0))
            return R
        return ranges

    def _spans_fn(self, layer: Layer, staged: list[Buffer]):
        """acc ranges → {staged source buffer: Stage} of the vectors to load: a contiguous
        span, or only the vectors needed when the span is mostly unused."""
        per = []
        for s in layer.steps:
            if isinstance(s, (Linear, Load)) and len(s.x):
                ok = s.x >= 0
                o = s.o[ok]
                x = s.x[ok]
                own = self.space.owner(x)
                order = np.argsort(o, kind="stable")
                per.append((s.out, o[order], x[order], own[order]))
        index = {id(b): k for k, b in enumerate(self.space.buffers)}

        def spans(R):
            found: dict = {}
            for buf_out, o, x, own in per:
                lo, hi = R.get(buf_out, (0, 0))
                i0, i1 = np.searchsorted(o, [lo, hi])
                if i1 <= i0:
                    continue
                xs, os_ = x[i0:i1], own[i0:i1]
                for b in staged:
                    sel = os_ == index[id(b)]
                    if sel.any():
                        found.setdefault(b, []).append(xs[sel] - b.start)
            out = {}
            for b, parts in found.items():
                xs = np.concatenate(parts) if len(parts) > 1 else parts[0]
                lo, hi = int(xs.min()), int(xs.max()) + 1
                if hi - lo > 16:
                    mask = np.zeros(hi - lo, dtype=bool)
                    mask[xs - lo] = True
                    count = int(mask.sum())
                    if hi - lo > 2 * count:
                        v = np.nonzero(mask)[0] + lo
                        segments = 1 + int(np.count_nonzero(np.diff(v) != 1))
                        if segments <= max(64, count // 32):
                            out[b] = Stage(lo, hi, v)   # load only what is read
                            continue
                out[b] = Stage(lo, hi, None)
            return out
        return spans

    # ------------------------------------------------------------------------- tiles

    @staticmethod
    def _max_tile(lc: LayerConsts) -> int:
        return max((r.rows + 1 for refs in lc.tiles for r in refs), default=0)

    def _tile_addresses(self, lc: LayerConsts, mode, tile_local, to_local):
        """(step, tile) → local address (None when streaming: decided per chunk)."""
        if to_local:
            return lambda k, t: lc.tiles[k][t].offset
        if mode == "all":
            return lambda k, t: tile_local + lc.tiles[k][t].offset - lc.tile_base
        return None

    def _emit_linear(self, layer, lc, k, s: Linear, R, acc_at, local_of, tile_addr, mode,
                     chunk_cap, st, to_local) -> None:
        lo, hi = R[s.out]
        sel = np.nonzero((s.o >= lo) & (s.o < hi))[0]
        if not len(sel):
            return
        o, x, t, first = s.o[sel], s.x[sel], s.t[sel], s.first[sel]
        aa = acc_at[s.out] + o
        la = np.zeros(len(x), dtype=np.int64)
        real = x >= 0
        if real.any():
            la[real] = local_of(x[real])
        refs = lc.tiles[k]
        # segments of equal tile
        cut = np.nonzero(np.diff(t) != 0)[0] + 1
        seg_starts = np.concatenate([[0], cut])
        seg_ends = np.concatenate([cut, [len(t)]])
        stream = mode == "stream" and not to_local
        if stream:
            # chunks of consecutive tiles, in the order the segments need them
            chunks, seg_chunk = [], []
            for s0_ in seg_starts:
                tid = int(t[s0_])
                if not chunks or not chunks[-1][0] <= tid <= chunks[-1][1]:
                    last, size = tid, refs[tid].rows + 1
                    while last + 1 < len(refs) and size + refs[last + 1].rows + 1 <= chunk_cap:
                        last += 1
                        size += refs[last].rows + 1
                    chunks.append((tid, last, size))
                seg_chunk.append(len(chunks) - 1)

            def load_chunk(c):
                lo_t, _, size = chunks[c]
                dst = self._stream_base + (c % 2) * chunk_cap
                self.move(DataMoveKind.DRAM1_TO_LOCAL, dst, refs[lo_t].offset, size)
                st.dram_vectors += size

            load_chunk(0)
            if len(chunks) > 1:
                load_chunk(1)                   # the DRAM unit runs a chunk ahead
            self.current_tile = None
        current_chunk = 0
        for j_seg, (s0_, e0_) in enumerate(zip(seg_starts, seg_ends)):
            tid = int(t[s0_])
            ref = refs[tid]
            if stream:
                c = seg_chunk[j_seg]
                if c != current_chunk:
                    current_chunk = c
                    self.current_tile = None
                    if c + 1 < len(chunks):
                        load_chunk(c + 1)
                lo_t = chunks[c][0]
                addr = self._stream_base + (c % 2) * chunk_cap + ref.offset - refs[lo_t].offset
            else:
                addr = tile_addr(k, tid)
            key = (id(s), tid)
            if self.current_tile != key:
                self.out.append(LoadWeights(addr, 0, ref.rows, False))
                self.current_tile = key
            seg = slice(s0_, e0_)
            zs = ~real[seg]
            fl = first[seg]
            for zero_flag in (False, True):
                m = zs == zero_flag
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
                    st.matmul_vectors += cnt

    # ------------------------------------------------------------------- other steps

    def _emit_load(self, s: Load, R, acc_at, local_of) -> None:
        lo, hi = R[s.out]
        sel = np.nonzero((s.o >= lo) & (s.o < hi))[0]
        if not len(sel):
            return
        order = sel[np.argsort(s.o[sel], kind="stable")]
        la = local_of(s.x[order])
        aa = acc_at[s.out] + s.o[order]
        kind = DataMoveKind.LOCAL_TO_ACC_ACCUMULATE if s.add else DataMoveKind.LOCAL_TO_ACC
        self.moves(kind, la, aa)

    def _setup(self, setup, lc: LayerConsts) -> None:
        for item in setup:
            if item[0] == "zero":
                self.out.append(SIMD(Op.ZERO, 0, 0, item[1]))
            elif item[0] == "lut":
                off, count, per = lc.lut[item[1]]
                for t in range(count):
                    self.out.append(LoadLUT(self._lut_local + off + t * per, 0, t))
            else:
                _, reg, key = item
                self.out.append(SIMD(Op.MOVE, 0, 0, reg, read_address=lc.simd[key],
                                     read=True))

    def _emit_simd(self, s: Simd, R, acc_at, lc, acc_const) -> None:
        lo, hi = R[s.buf]
        i0, i1 = np.searchsorted(s.o, [lo, hi])
        if i1 <= i0:
            return
        self._setup(s.setup, lc)
        base = acc_at[s.buf]
        abase = acc_at[s.aux_buf] if s.aux_buf is not None else 0
        for j in range(i0, i1):
            self_addr = int(base + s.o[j])
            aux_addr = int(abase + s.aux[j]) if s.aux is not None else 0
            for op in s.body:
                rd = {"self": self_addr, "aux": aux_addr, None: 0}[op.read]
                wr = {"self": self_addr, "aux": aux_addr, None: 0}[op.write]
                self.out.append(SIMD(op.op, op.left, op.right, op.dest, read_address=rd,
                                     write_address=wr, read=op.read is not None,
                                     write=op.write is not None, accumulate=op.accumulate))

    def _emit_reduce(self, s: Reduce, R, acc_at) -> None:
        lo, hi = R[s.out]
        ob, sb = acc_at[s.out], acc_at[s.src]
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

    def _emit_zero(self, s: Zero, R, acc_at) -> None:
        lo, hi = R[s.buf]
        i0, i1 = np.searchsorted(s.o, [lo, hi])
        if i1 <= i0:
            return
        aa = acc_at[s.buf] + s.o[i0:i1]
        rl = runs(None, aa, s0=self.s0, s1=self.s1, max_count=self.max_count, a0_free=True)
        if any(cnt > 1 for _, cnt, *_ in rl):
            self.out.append(LoadWeights(0, 0, 0, True))       # bias ← 0
            self.current_tile = None
        for i, cnt, _, c1, _ in rl:
            if cnt == 1 and not any(c > 1 for _, c, *_ in rl):
                self.out.append(SIMD(Op.ZERO, 0, 0, 0, write_address=int(aa[i]), write=True))
            else:
                self.out.append(MatMul(0, 0, int(aa[i]), c1, cnt - 1, False, True))
