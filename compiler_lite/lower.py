"""Lowering: ONNX nodes → layers on buffers (see :mod:`compiler_lite.kernels`).

:class:`Lowering` walks the graph in order. View operators only rearrange index maps;
operators with weights start a layer whose producer is a :class:`~.kernels.Linear`; an
element-wise operator extends the last layer in place when it is the only reader of that
layer's buffer (ReLU after a convolution, a residual add, max pooling), and otherwise starts a
layer that first loads its input into the accumulators. A per-channel affine map right after a
linear producer (BatchNormalization, Mul/Add/Sub/Div by constants) is folded into its weights.

:func:`check_graph` first checks every node against the operators :mod:`compiler_lite.ops`
registers (:mod:`compiler_lite.registry`). Spatial tensors are stored in a frame
(:class:`~.ir.Frame`: pixels row-major, one vector per block of n channels); a padded window
never reads outside its input, so no buffer keeps zero margins.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np

from tcu_hw.errors import CompileError
from tcu_hw.isa import SimdOp as Op

from . import ops  # noqa: F401 - registers the operators
from .frontend import Graph, Node
from .geometry import spatial
from .ir import (Buffer, Frame, Space, Tensor, ceil_div, distinct, flat_layout,
                 frame_layout, io_order, next_pow2, unique_pairs, unique_rows)
from .kernels import Layer, LinearBuilder, Load, Reduce, Save, Simd, SimdStep, Zero
from .registry import OPS, model_operators


# --------------------------------------------------------------------------------- checks

#: ONNX's default domain, and the integer operators of :mod:`compiler_lite.quant`
DOMAINS = ("", "ai.onnx", "tcu")

def check_graph(g: Graph, arch) -> None:
    """Raise one :class:`CompileError` listing every node the compiler cannot lower."""
    problems = []
    for node in g.nodes:
        spec = OPS.get(node.op) if node.domain in DOMAINS else None
        if spec is None:
            where = f" from domain '{node.domain}'" if node.domain not in DOMAINS else ""
            problems.append(f"{node.label}: operator{where} not supported")
            continue
        dynamic = [o for o in node.outputs if o and o not in g.shapes]
        if dynamic:
            problems.append(f"{node.label}: the shape of its output '{dynamic[0]}' is not "
                            f"static after shape inference")
            continue
        if spec.needs_lut and arch.lut_count < 1:
            hint = ""
            if spec.domain:                 # an integer table (compiler_lite.quant)
                hint = ("; lut_depth ≥ 256 makes every INT8 function exact"
                        if arch.dtype.width == 8 else
                        "; INT16 functions need lut_count ≥ 3 and simd_registers_depth ≥ "
                        "lut_count + 3 (piecewise linear, docs/integer.md)")
            elif any(o in g.outputs for o in node.outputs) and node.inputs:
                hint = f"; or stop before it with -o '{node.inputs[0]}'"
            problems.append(f"{node.label}: needs lookup tables: the architecture must have "
                            f"lut_count ≥ 1 and lut_depth ≥ 2 (it has lut_count "
                            f"{arch.lut_count}){hint}")
            continue
        reasons = spec.check(node, g, arch) if spec.check else []
        problems.extend(f"{node.label}: {r}" for r in reasons)
    if problems:
        supported = ", ".join(model_operators())
        raise CompileError(f"{g.source}: {len(problems)} node(s) cannot be compiled:\n  "
                           + "\n  ".join(problems)
                           + f"\nsupported operators: {supported}")


# ------------------------------------------------------------------------------- lowering

class Lowering:
    """State of one lowering run; op functions call the helpers below."""

    def __init__(self, g: Graph, arch, resize_mode: str = "onnx") -> None:
        self.g = g
        self.arch = arch
        self.n = arch.array_size
        self.resize_mode = resize_mode
        self.space = Space(self.n)
        self.values: dict[str, Tensor] = {}
        self.layers: list[Layer] = []
        self.open: Layer | None = None
        self.remaining = Counter()
        for node in g.nodes:
            for x in set(i for i in node.inputs if i):
                self.remaining[x] += 1
        self.refs: dict[int, set[str]] = {}
        self.internal: set[str] = set()            # names an op made for its own use
        self.deferred: dict[str, tuple] = {}       # name → (node, inputs, lower, fusable)
        self.notes: list[str] = []
        self.node: Node | None = None
        self.relaid_copies: dict[tuple, Tensor] = {}   # see relaid()

    # ----------------------------------------------------------------- values and consts

    def fail(self, message: str):
        where = f"{self.node.label}: " if self.node is not None else ""
        raise CompileError(f"{self.g.source}: {where}{message}")

    def tensor(self, name: str) -> Tensor:
        if name in self.deferred:
            self._materialize(name)
        try:
            return self.values[name]
        except KeyError:
            self.fail(f"input '{name}' is not an activation")

    def const(self, name: str) -> np.ndarray:
        return np.asarray(self.g.consts[name], dtype=np.float64)

    def is_const(self, name: str) -> bool:
        return bool(name) and self.g.is_const(name)

    def set(self, name: str, t: Tensor, internal: bool = False) -> None:
        if internal:
            self.internal.add(name)
        t.name = name
        self.values[name] = t
        for b in self.buffers_of(t):
            self.refs.setdefault(id(b), set()).add(name)

    def defer(self, name: str, inputs, lower, fusable) -> None:
        """Postpone computing ``name``, the current node's output that one later node reads:
        that node may compute it into its own accumulators (:meth:`take_deferred`,
        ``lower(into=…)``) when ``fusable()`` says so then; any other read lowers it first,
        as a layer of its own (``lower()``). ``inputs`` stay alive until then."""
        for i in inputs:
            self.remaining[i] += 1
        self.deferred[name] = (self.node, list(inputs), lower, fusable)

    def fusable(self, name: str) -> bool:
        """Whether deferred ``name`` can be computed into the open layer now (its inputs
        read in place, none of them saved by that layer)."""
        _, inputs, _, ok = self.deferred[name]
        return ok() and not (self.open is not None and self.reads_saved(self.open, inputs))

    def take_deferred(self, name: str):
        """(node, lower) of deferred ``name``, which the caller now computes."""
        node, inputs, lower, _ = self.deferred.pop(name)
        for i in inputs:
            self.remaining[i] -= 1
        return node, lower

    def _materialize(self, name: str) -> None:
        node, lower = self.take_deferred(name)
        here, self.node = self.node, node
        try:
            lower()
        finally:
            self.node = here

    def buffers_of(self, t: Tensor) -> list[Buffer]:
        if not t.idx.size:
            return []
        owners = self.space.owners(t.idx // self.n)
        return [self.space.buffers[k] for k in owners]

    def alive(self, name: str) -> bool:
        return self.remaining[name] > 0 or name in self.g.outputs

    def exclusive(self, name: str) -> Buffer | None:
        """The buffer of ``name`` if the current node may overwrite it in place: the tensor is
        the buffer's whole content and nothing else will read the buffer (the current node
        included: an operand it reads twice, as in ``Add(a, a)``, is read from memory while
        the other use changes it in the accumulators)."""
        t = self.tensor(name)
        bufs = self.buffers_of(t)
        readers = 1 if name in self.internal else self.remaining[name]
        uses = self.node.inputs.count(name) if self.node is not None else 1
        if len(bufs) != 1 or name in self.g.outputs or readers != 1 or uses > 1:
            return None
        b = bufs[0]
        if b.role in ("input", "const") or t.idx.size != b.elements:
            return None
        if any(self.alive(w) for w in self.refs.get(id(b), ()) if w != name):
            return None
        return b

    # --------------------------------------------------------------------------- layouts

    def frame_for(self, shape) -> Frame | None:
        sp = spatial(shape)
        if sp is None:
            return None
        cb = next_pow2(ceil_div(shape[1], self.n))
        return Frame(shape[0], sp[0], sp[1], cb, sp[1])

    def new_activation(self, name: str, shape, frame: Frame | None = None,
                       order=None) -> tuple[Buffer, Tensor]:
        """A buffer for a new tensor ``name``: framed when spatial, else the model's I/O
        layout (or axes in ``order``, the last in lanes)."""
        shape = tuple(int(d) for d in shape)
        if order is not None:
            return flat_layout(self.space, name, shape, order, self.n)
        frame = frame or self.frame_for(shape)
        if frame is not None:
            if len(shape) == 3:
                shape4 = (shape[0], shape[1], 1, shape[2])
                buf, t = frame_layout(self.space, name, shape4, frame, self.n)
                return buf, Tensor(t.idx.reshape(shape), name)
            return frame_layout(self.space, name, shape, frame, self.n)
        return flat_layout(self.space, name, shape, io_order(len(shape)), self.n)

    def like(self, name: str, t: Tensor) -> tuple[Buffer, Tensor]:
        """A new buffer for ``name`` storing ``t``'s elements in the same lanes, one vector per
        vector of ``t`` (in order): a copy moves whole vectors, and operands laid out like
        ``t`` pair with it vector by vector."""
        n = self.n
        v, lane = np.divmod(t.idx, n)
        vecs, rank = np.unique(v, return_inverse=True)
        buf = self.space.new(name, len(vecs), elements=int(t.idx.size))
        idx = (buf.start + rank.reshape(t.idx.shape)) * n + lane
        buf.set_extent(idx, n)
        buf.dirty = self.carries_more(t)
        return buf, Tensor(idx, name)

    def carries_more(self, t: Tensor) -> bool:
        """Whether whole-vector copies of ``t``'s vectors may bring along non-zero lanes that
        are not ``t``'s elements (a dirty source, or a view of part of its vectors)."""
        n = self.n
        vecs, used = np.unique(np.unique(t.idx) // n, return_counts=True)
        for src in self.buffers_of(t):
            sel = (vecs >= src.start) & (vecs < src.start + src.vectors)
            ext = src.extent[vecs[sel] - src.start] if src.extent is not None else None
            if src.dirty or ext is None or np.any(ext > used[sel]):
                return True
        return False

    # ---------------------------------------------------------------------------- layers

    def begin(self, out: Buffer, producer, nodes=None) -> Layer:
        """Start a layer computing ``out`` (closes the previous one)."""
        self.close()
        node_names = nodes if nodes is not None else ([self.node.name] if self.node else [])
        layer = Layer(out.name, list(node_names), [producer], out)
        layer.fold = None
        self.layers.append(layer)
        self.open = layer
        return layer

    def close(self) -> None:
        """Finish the open layer: build its weight terms (with any folded affine map)."""
        layer, self.open = self.open, None
        if layer is None:
            return
        p = layer.steps[0]
        if isinstance(p, LinearBuilder):
            scale, offset = layer.fold if layer.fold is not None else (None, None)
            layer.steps[0] = p.build(scale=scale, offset=offset)
            layer.macs += p.macs
            if p.clear is not None and len(p.clear):
                layer.steps.insert(1, Zero(p.out, np.asarray(p.clear, dtype=np.int64)))
        for k, s in enumerate(layer.steps[1:], 1):
            if isinstance(s, LinearBuilder):
                layer.steps[k] = s.build(accumulate=True)
                layer.macs += s.macs

    def extend(self, name: str, allow_reduce: bool = True) -> tuple[Layer, Tensor] | None:
        """The open layer and tensor ``name`` when the current node may work on it in place
        in the accumulators."""
        layer = self.open
        b = self.exclusive(name)
        if layer is None or b is None or layer.out is not b or not self._may_extend(layer,
                                                                                 allow_reduce):
            return None
        if self.node is not None and self.node.name not in layer.nodes:
            layer.nodes.append(self.node.name)
        return layer, self.tensor(name)

    def _may_extend(self, layer: Layer, allow_reduce: bool) -> bool:
        """Whether the current node may add steps to ``layer``: not a Reduce
        (``allow_reduce`` False) after a Reduce or a Save (a Save stores the layer's output
        partition by partition, which a Reduce would change), and not when the node reads a
        buffer that ``layer`` saves (in memory only once the layer is done)."""
        if layer.sealed or not allow_reduce and any(isinstance(s, (Reduce, Save))
                                                    for s in layer.steps):
            return False
        return not self.reads_saved(layer, self.node.inputs if self.node else ())

    def reads_saved(self, layer: Layer, names) -> bool:
        """Whether any of tensors ``names`` lies in a buffer that ``layer`` saves."""
        saved = {id(b) for b in layer.written[1:]}
        return bool(saved) and any(id(b) in saved for x in names
                                   if x and x in self.values
                                   for b in self.buffers_of(self.values[x]))

    def fork(self, name: str, allow_reduce: bool = True) -> tuple[Layer, Tensor] | None:
        """The open layer and tensor ``name`` for in-place work when the layer computes
        ``name`` whole and later nodes read it too: the layer first saves it as it is now
        (a :class:`Save` into a buffer of its own, which ``name`` then names), then goes on
        in place. One store instead of a copy layer's store, load back and store.

        Not when the buffer holds other live tensors, when the current node reads ``name``
        twice, or when it will reduce (a Save stores the output the layer ends with, range by
        range)."""
        layer = self.open
        t = self.values.get(name)
        if layer is None or self.node is None or t is None:
            return None
        b = layer.out
        bufs = self.buffers_of(t)
        if len(bufs) != 1 or bufs[0] is not b or t.idx.size != b.elements or \
                b.role != "temp" or self.node.inputs.count(name) > 1:
            return None
        if any(self.alive(w) for w in self.refs.get(id(b), ()) if w != name):
            return None
        if not allow_reduce or not self._may_extend(layer, allow_reduce):
            return None
        saved = self.space.new(name, b.vectors, row=b.row, frame=b.frame,
                               elements=b.elements, dirty=b.dirty, extent=b.extent)
        layer.steps.append(Save(saved))
        self.refs.get(id(b), set()).discard(name)
        self.set(name, Tensor(t.idx + (saved.start - b.start) * self.n))
        if self.node.name not in layer.nodes:
            layer.nodes.append(self.node.name)
        return layer, Tensor(t.idx, name)

    def in_acc(self, name: str, allow_reduce: bool = True) -> tuple[Layer, Tensor]:
        """Tensor ``name`` in the accumulators, ready for in-place work: the open layer when
        possible, else a new layer that loads a copy."""
        got = self.extend(name, allow_reduce) or self.fork(name, allow_reduce)
        if got is not None:
            return got
        out_name = self.node.outputs[0] if self.node else name
        return self.copy_layer(self.tensor(name), out_name)

    def copy_layer(self, t: Tensor, out_name: str) -> tuple[Layer, Tensor]:
        """A new layer whose producer copies ``t`` into the accumulators. A tensor that fills
        a framed buffer is copied whole, frame and all (one run); anything else into the
        default layout for ``out_name``. The copy is for in-place work, so an element that
        ``t`` holds more than once (``Concat(a, a)``) gets a place of its own."""
        bufs = self.buffers_of(t)
        flat = t.idx.reshape(-1)
        order = np.argsort(flat, kind="stable")
        head = np.ones(flat.size, dtype=bool)
        head[1:] = flat[order][1:] != flat[order][:-1]
        repeat = np.empty_like(flat)            # how many times the element came before
        repeat[order] = np.arange(flat.size) - np.maximum.accumulate(
            np.where(head, np.arange(flat.size), 0))
        if len(bufs) == 1 and bufs[0].frame is not None and t.idx.size == bufs[0].elements \
                and bufs[0].role != "const" and not repeat.any():
            src = bufs[0]
            buf = self.space.new(out_name, src.vectors, row=src.row, frame=src.frame,
                                 elements=src.elements, dirty=src.dirty, extent=src.extent)
            nt = Tensor(t.idx + (buf.start - src.start) * self.n)
            allv = np.arange(src.vectors)
            layer = self.begin(buf, Load(buf, allv, allv + src.start))
            return layer, nt
        if len(bufs) == 1 and bufs[0].frame is None and not repeat.any():
            buf, nt = self.like(out_name, t)         # keep its lanes (e.g. [B, T, C] rows)
        elif len(bufs) == 1 and bufs[0].frame is None:
            # like that, a repeat in a vector of its own (copied whole from the same source)
            n = self.n
            keys, slot = np.unique(repeat * (flat.max() // n + 1) + flat // n,
                                   return_inverse=True)
            buf = self.space.new(out_name, len(keys), elements=flat.size, dirty=True)
            idx = (buf.start + slot.reshape(-1)) * n + flat % n
            buf.set_extent(idx, n)
            nt = Tensor(idx.reshape(t.shape), out_name)
        else:
            buf, nt = self.new_activation(out_name, t.shape)
        layer = self.begin(buf, self.copy_step(t, nt))
        return layer, nt

    def rebind(self, name: str, t: Tensor) -> None:
        """Later readers of ``name`` read ``t``: the same values, stored elsewhere."""
        for b in self.buffers_of(self.tensor(name)):
            self.refs.get(id(b), set()).discard(name)
        self.set(name, t, internal=name in self.internal)

    def relaid(self, t: Tensor, order) -> Tensor:
        """``t`` copied into the layout with its axes in ``order`` (the last in lanes) by a
        layer of its own, made once per tensor and order: a LayerNorm's output that the
        query, key and value projections each read in rows is moved once."""
        key = (t.name, tuple(order), t.idx.shape,
               hashlib.blake2b(t.idx.tobytes(), digest_size=16).digest())
        if key not in self.relaid_copies:
            buf, copy = self.new_activation(f"{t.name}:relayout", t.shape, order=order)
            self.begin(buf, self.copy_step(t, copy), nodes=[self.node.name])
            self.relaid_copies[key] = copy
        return self.relaid_copies[key]

    def copy_step(self, src: Tensor, dst: Tensor):
        """A producer writing ``src``'s elements into ``dst``'s places: vector moves when each
        destination vector comes whole from one source vector in the same lanes, else
        permutation MatMuls."""
        n = self.n
        s, d = src.idx.ravel(), dst.idx.ravel()
        buf = self.buffers_of(dst)[0]
        same_lane = np.array_equal(s % n, d % n)
        dv, sv = d // n, s // n
        pairs = unique_pairs(dv, sv)
        if same_lane and len(np.unique(pairs[0])) == pairs.shape[1]:
            load = Load(buf, pairs[0] - buf.start, pairs[1])
            buf.dirty = buf.dirty or self.carries_more(src)
            return load
        return self.gather(buf, dst, [(src.idx, 1.0)])

    def gather(self, buf: Buffer, dst: Tensor, sources, const=None,
               into: LinearBuilder | None = None) -> LinearBuilder:
        """Weighted gather: ``dst[e] = Σ w_k · sources_k[e] (+ const[e])`` as MatMuls whose
        tiles map lanes of one source vector into lanes of one destination vector.

        ``sources``: [(virtual scalar index array (broadcast to dst), weight (broadcast))];
        an index < 0 contributes nothing. Destination vectors holding elements but no term
        are cleared (their values are the constant or zero). ``into``: add the terms to this
        builder (after its own: one gather per tap keeps each tap's MatMuls one run).
        """
        n = self.n
        b = into if into is not None else LinearBuilder(buf, n)
        shape = dst.shape
        d = dst.idx.reshape(-1)
        dv, dl = np.divmod(d, n)
        parts = []
        for idx, w in sources:
            si = np.broadcast_to(np.asarray(idx, dtype=np.int64), shape).reshape(-1)
            wi = np.broadcast_to(np.asarray(w, dtype=np.float64), shape).reshape(-1)
            ok = (si >= 0) & (wi != 0)
            parts.append((dv[ok], dl[ok], si[ok] // n, si[ok] % n, wi[ok]))
        if parts:
            odv, odl, osv, osl, ow = (np.concatenate(a) for a in zip(*parts))
        else:
            odv = odl = osv = osl = np.zeros(0, dtype=np.int64)
            ow = np.zeros(0)
        # one tile per distinct (lane map, weights) of a (destination, source) vector pair
        pair_key, pair_idx = unique_pairs(odv, osv, return_inverse=True)
        pair_idx = pair_idx.ravel()
        npairs = pair_key.shape[1]
        mat = np.zeros((npairs, n, n))
        np.add.at(mat, (pair_idx, osl, odl), ow)
        flat = mat.reshape(npairs, n * n)
        pats, pat_of = unique_rows(flat)
        for p in range(len(pats)):
            sel = pat_of == p
            tile = np.zeros((n + 1, n))
            tile[1:] = pats[p].reshape(n, n)
            b.add(pair_key[0, sel] - buf.start, pair_key[1, sel], tile)
        if const is not None:
            cv = np.zeros((buf.vectors, n))
            c = np.broadcast_to(np.asarray(const, dtype=np.float64), shape).reshape(-1)
            cv[dv - buf.start, dl] = c
            rows = np.unique(dv - buf.start)
            nz = rows[np.any(cv[rows] != 0, axis=1)]
            if nz.size:
                pats, pat_of = np.unique(cv[nz], axis=0, return_inverse=True)
                for p in range(len(pats)):
                    tile = np.zeros((n + 1, n))
                    tile[0] = pats[p]
                    sel = nz[pat_of.ravel() == p]
                    b.add(sel, np.full(len(sel), -1), tile)
        written = set(np.unique(pair_key[0] - buf.start).tolist()) if npairs else set()
        if const is not None:
            written |= set(nz.tolist())
        if into is not None:
            written |= set(np.flatnonzero(b.covered()).tolist())
        missing = np.setdiff1d(np.unique(dv - buf.start), np.fromiter(written, dtype=np.int64,
                                                                        count=len(written)))
        b.clear = missing
        return b

    # ------------------------------------------------------------------------------ steps

    def fold_affine(self, name: str, scale, offset, out_name: str) -> None:
        """``out = scale·name + offset`` element-wise (arrays broadcast to the shape): folded
        into the open layer's weights when its linear producer writes ``name`` and nothing
        follows it yet, otherwise into a new layer that copies ``name`` through the array."""
        got = self.extend(name)
        if got is None or len(got[0].steps) != 1 or not isinstance(
                got[0].steps[0], (LinearBuilder, Load)):
            layer, t = self.copy_layer(self.tensor(name), out_name)
        else:
            layer, t = got
        p = layer.steps[0]
        if isinstance(p, Load):
            if p.add:
                self.fail("internal: cannot fold into an accumulating load")
            b = LinearBuilder(p.out, self.n)
            b.add(p.o, p.x, np.vstack([np.zeros(self.n), np.eye(self.n)]))
            layer.steps[0] = p = b
        self.fold_into(layer, t, scale, offset)
        self.set(out_name, Tensor(t.idx, out_name))

    def fold_into(self, layer: Layer, t: Tensor, scale, offset) -> None:
        """Make ``layer``'s producer (a builder) compute ``scale·y + offset`` for the elements
        of ``t`` (in its output) instead of ``y``."""
        out = layer.out
        n = self.n
        v, lane = np.divmod(t.idx.reshape(-1), n)
        v = v - out.start
        s2 = np.ones((out.vectors, n))
        t2 = np.zeros((out.vectors, n))
        s2[v, lane] = np.broadcast_to(np.asarray(scale, dtype=np.float64), t.shape).reshape(-1)
        t2[v, lane] = np.broadcast_to(np.asarray(offset, dtype=np.float64), t.shape).reshape(-1)
        if out.frame is not None:
            # vectors outside the tensor (channel blocks beyond C, up to a power of two) take
            # the map of their channel block, so that runs do not break at them
            cb = out.frame.Cb
            logical = np.zeros(out.vectors, dtype=bool)
            logical[v] = True
            for k in range(cb):
                at = np.nonzero(logical[k::cb])[0]
                if len(at):
                    rows = np.arange(k, out.vectors, cb)
                    rest = rows[~logical[rows]]
                    s2[rest] = s2[rows[at[0]]]
                    t2[rest] = t2[rows[at[0]]]
        if layer.fold is None:
            layer.fold = (s2, t2)
        else:
            s1, t1 = layer.fold
            layer.fold = (s2 * s1, s2 * t1 + t2)

    def relu_pass(self, layer: Layer, t: Tensor) -> Simd:
        vecs = self.vectors_in(t, layer.out)
        step = Simd(layer.out, vecs, [("zero", 1)], [SimdStep(Op.MAX, 0, 1, 0)], is_relu=True)
        layer.steps.append(step)
        return step

    def const_tensor(self, name: str) -> Tensor:
        """A constant used as data (e.g. concatenated to an activation): a buffer in DRAM1
        with the model's I/O layout."""
        if name in self.values:
            return self.values[name]
        value = self.const(name)
        buf, t = flat_layout(self.space, name, value.shape, io_order(value.ndim), self.n,
                             role="const")
        data = np.zeros((buf.vectors * self.n,))
        data[t.idx.reshape(-1) - buf.start * self.n] = value.reshape(-1)
        buf.data = data.reshape(buf.vectors, self.n)
        self.set(name, t)
        return t

    def vectors_in(self, t: Tensor, buf: Buffer) -> np.ndarray:
        """Indices inside ``buf`` of the vectors holding ``t``'s elements."""
        return distinct(t.idx // self.n) - buf.start

    # ------------------------------------------------------------------------------- run

    def run(self) -> None:
        g = self.g
        for name in g.inputs:
            shape = g.shape(name)
            order = self._input_order(name, shape)
            buf, t = flat_layout(self.space, name, shape, order, self.n, role="input")
            buf.order = order
            self.set(name, t)
        for node in g.nodes:
            self.node = node
            OPS[node.op].lower(node, self)
            for x in set(i for i in node.inputs if i):
                self.remaining[x] -= 1
        self.node = None
        if self.deferred:
            raise CompileError(f"{self.g.source}: internal: {sorted(self.deferred)} never "
                               f"computed")
        for name in g.outputs:
            self._output(name)
        self.close()

    def _input_order(self, name: str, shape) -> tuple[int, ...]:
        """Channels-last for the model's inputs, unless the input only feeds a Transpose:
        then the order that makes the transposed tensor channels-last (tf2onnx NHWC)."""
        users = self.g.consumers(name)
        if len(shape) >= 3 and len(users) == 1 and users[0].op == "Transpose":
            perm = users[0].attr("perm") or list(reversed(range(len(shape))))
            return tuple(perm[a] for a in io_order(len(shape)))
        return io_order(len(shape))

    def _output(self, name: str) -> None:
        """Make output ``name`` a whole buffer in the model's I/O layout (channels-last,
        padded lanes zero), placed in DRAM0 for the host."""
        t = self.values.get(name)
        if t is None:
            raise CompileError(f"{self.g.source}: output '{name}' is a constant or an input; "
                               f"nothing to compute")
        order = io_order(len(t.shape))
        bufs = self.buffers_of(t)
        if len(bufs) == 1 and bufs[0].role == "temp" and not bufs[0].dirty:
            b = bufs[0]
            probe = Space(self.n, start=b.start)
            pb, pt = flat_layout(probe, name, t.shape, order, self.n)
            if pb.vectors == b.vectors and np.array_equal(pt.idx, t.idx):
                b.role = "output"
                b.order = order
                b.output_name = name
                return
        buf, nt = flat_layout(self.space, name, t.shape, order, self.n, role="output")
        buf.order = order
        buf.output_name = name
        self.begin(buf, self.copy_step(t, nt), nodes=[f"output {name}"])
