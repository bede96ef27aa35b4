"""Accumulator drain: acc→local moves beside the compute sequencer, through local port A or B.

A MatMul reads local memory port A and writes the accumulators through the array; a move
from the accumulators to local memory reads the accumulators' outside port and writes local
memory. The two share nothing, so the drain runs the moves (kinds 0xC and 0x4, the
rectified move of docs/isa_extensions.md) while the sequencer streams MatMuls: the outputs
of one layer go to local memory while the next layer's MatMuls follow them in. Each vector
is read from the accumulators at t0 and at t1 rectified (kind 0x4: negative lanes become
0) and narrowed to W bits (saturating, for an integer type), then held in a short buffer
and written to local memory through port A in a cycle the sequencer and the weight loader
leave it, else through port B when that port's arbiter grants it (after the DRAM engine's
channels)::

    compute unit ─ acc→local ─▶ [queue] ─▶ active ── acc read (t0) ─▶ t1 ─▶ [buffer] ─▶ local
                   move                      ▲ acc_hold: a write to   (rectify,      port A
                                             │ that address in flight  saturate)     or B

Program order with the sequencer, the weight loader and the DRAM engine holds because:

- accumulators, read after write: a move carries the count of accumulator writers
  (MatMuls, local→acc moves, SIMDs that write) the sequencer was given before it
  (``token``) and reads only once that many have issued (``writers_done``), and then an
  address only when no write to it is in the array's pipeline (``acc_hold``, driven by the
  compute unit);
- accumulators, write after read: a sequencer micro-op that writes an address the drain
  has still to read, for a move with no older writer left, waits (``acc_reads``: the queued
  move's run, the active one's from its next address on);
- the accumulators' outside read port: the drain reads first (``acc_read``); a SIMD read
  waits while the drain claims the port (``acc_claim``: it has a word to read and no older
  writer left);
- local memory: reads of words the drain has still to write wait for them (``local_writes``,
  chained like reads behind DRAM loads); the dispatcher holds a move whose range overlaps a
  read in flight, and reads and writes of the DRAM engine check ``entries``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Register, WireVector

from ..isa import Layout
from ..numeric import DataType
from . import fixed, lanes
from .decoder import TOKEN_BITS, address_run, stride_step
from .stream import SINK, RegFifo, RingFifo, SharedWrite, Stream, Struct, connect, named

#: vectors the buffer holds; a read issues only while the buffer and t1 hold fewer, so the
#: vector at t1 always finds room, and three keep one vector a cycle moving
BUFFER_DEPTH = 3


def drain_struct(layout: Layout) -> Struct:
    """Packed record of one acc→local move for the drain (widths: ``layout.hardware``):
    ``relu`` (kind 0x4: rectified), local and accumulator runs as in the instruction,
    ``uses``/``writes``/``lo``/``hi``/``wraps`` its local range, ``alo``/``ahi`` its
    accumulator range (the whole memory when the run wraps, as
    :func:`~tcu_hw.blocks.decoder.address_run` gives it) and ``token`` the accumulator
    writers the sequencer had been given before it."""
    h = layout.hardware
    return Struct(relu=1, laddr=h.L, ls=h.S0, oaddr=h.A, os=h.S1, size=h.size, uses=1,
                  writes=1, lo=h.L, hi=h.L, wraps=1, alo=h.A, ahi=h.A, awraps=1,
                  token=TOKEN_BITS)


class AccDrain:
    """Runs acc→local moves in order, one vector a cycle, from the accumulators' outside
    read port to local memory port A or B (one move queued ahead of the active one).

    Args:
        layout: the instruction :class:`~tcu_hw.isa.Layout` (array size, record and
            address widths).
        dt: the data type (an integer type's accumulator lanes are narrowed to its width,
            saturating).
        name: prefix of the wires and registers.

    Ports:
        moves: :class:`~tcu_hw.blocks.stream.Stream` sink of :func:`drain_struct` records
            (:meth:`record` makes one from a compute record).
        acc_addr: output (A), the accumulator address read this cycle when ``acc_read``.
        acc_read: output (1), the drain reads the accumulators this cycle (the read port is
            its).
        acc_claim: output (1), the drain would read this cycle but for ``acc_hold`` and a
            full buffer: other readers wait (from registers, so their issue does not look
            at ``acc_hold``).
        acc_data: input (n·A bits), the accumulators' read data (a cycle after the address).
        acc_hold: input (1), a write to ``acc_addr`` is still in flight: do not read it.
        writers_done: input (``TOKEN_BITS``), accumulator writers (MatMuls, local→acc moves,
            SIMDs that write) whose last micro-op has issued, counted as ``token`` is: a move
            reads once it reaches the move's ``token``.
        local_a, local_b: :class:`~tcu_hw.blocks.stream.SharedWrite` (client side) to
            local memory ports A and B; a write goes to port A when granted (a cycle the
            sequencer and the weight loader leave it), else asks port B.
        entries: list of ``valid`` (1) / ``record`` (with its ``struct``) outputs: the local
            words still to be written, for the dispatcher's range checks.
        local_writes: list of ``valid`` (1) / ``lo`` / ``hi`` (L) outputs: the same, the
            active move's from its next address on, for reads chained behind them.
        acc_reads: list of ``valid`` (1) / ``lo`` / ``hi`` (A) outputs: accumulator
            addresses still to be read (the active move's from its next address on).
        idle: output (1), nothing queued or in flight.

    Latency: an accepted move reads its first vector two cycles later (queue, then active);
    a vector read at t0 is written to local memory at t2 at the earliest (when a port is
    granted then); one vector a cycle while a port grants. A move stays active until its
    last vector is written (so the buffer only ever holds its vectors), and the next one
    reads from the cycle after.
    """

    def __init__(self, layout: Layout, dt: DataType, name: str = "drain") -> None:
        f = layout.hardware
        n, w, aw = layout.array_size, dt.width, dt.accumulator.width
        self.layout = layout
        rec = self.struct = drain_struct(layout)
        self.moves = Stream(rec, f"{name}_moves", SINK)
        # one entry (_clearance keeps one flag); ready from registers, off the dispatcher
        q = RegFifo(rec, 1, f"{name}_queue", pipe=False)
        connect(self.moves.flipped(), q.enq)
        self.writers_done = WireVector(TOKEN_BITS, f"{name}_writers_done")
        self.acc_data = WireVector(n * aw, f"{name}_acc_data")
        self.acc_hold = WireVector(1, f"{name}_acc_hold")
        self.local_a = pa = SharedWrite(f.L, n * w, f"{name}_local_a", side="client")
        self.local_b = pb = SharedWrite(f.L, n * w, f"{name}_local_b", side="client")

        act = _Active(rec, q, f, name)
        data = RingFifo(n * w, BUFFER_DEPTH, f"{name}_buffer")
        t1_valid = Register(1, f"{name}_t1_valid")
        q_clear, act_clear = self._clearance(q, act, name)
        issue = named(act.reading & act_clear & ~self.acc_hold &
                      (data.count + t1_valid < BUFFER_DEPTH), f"{name}_issue")
        write = pa.grant | pb.grant
        act.advance(issue, write)
        self.acc_addr = named(act.oaddr, f"{name}_acc_addr")
        self.acc_read = issue
        self.acc_claim = named(act.reading & act_clear, f"{name}_acc_claim")

        t1_valid.next <<= issue
        narrow = lanes.join([_narrow(v, w, act.fields.relu)
                             for v in lanes.split(self.acc_data, n)])
        data.enq.drive(t1_valid, narrow)                    # room kept by the count
        pa.want <<= data.deq.valid
        pb.want <<= data.deq.valid & ~pa.grant
        for port in (pa, pb):
            port.addr <<= act.waddr
            port.wdata <<= data.deq.data
        data.deq.ready <<= write

        self._ranges(q, act, name, q_clear, act_clear)
        self.idle = named(~act.valid & ~q.deq.valid, f"{name}_idle")

    def _clearance(self, q, act, name) -> tuple[WireVector, WireVector]:
        """Whether the queued and the active move have seen every older accumulator writer
        issue: ``writers_done`` reaches a move's ``token`` exactly once (it counts up by one
        at most per cycle, from fewer than 2^TOKEN_BITS below), and a flag per stage keeps
        it."""
        done = self.writers_done
        q_seen = Register(1, f"{name}_queue_clear")
        act_seen = Register(1, f"{name}_act_clear")
        q_clear = named(q_seen | (done == q.deq.payload.token), f"{name}_queue_cleared")
        act_clear = named(act_seen | (done == act.fields.token), f"{name}_act_cleared")
        q_seen.next <<= ~q.enq.fire & ~act.load & q_clear
        act_seen.next <<= pyrtl.select(act.load, q_clear, act_clear)
        return q_clear, act_clear

    def _ranges(self, q, act, name, q_clear, act_clear) -> None:
        """``entries``, ``local_writes`` and ``acc_reads`` (see the class docstring)."""
        rec, e = self.struct, act.fields

        def rng(kind, stage, valid, lo, hi):
            return SimpleNamespace(valid=named(valid, f"{name}_{kind}_{stage}_valid"),
                                   lo=named(lo, f"{name}_{kind}_{stage}_lo"),
                                   hi=named(hi, f"{name}_{kind}_{stage}_hi"))

        queued = [(f"q{i}", x.valid, rec.unpack(x.record), x.record)
                  for i, x in enumerate(q.entries)]
        self.entries = [SimpleNamespace(valid=v, record=bits, struct=rec)
                        for _, v, _, bits in queued]
        self.entries.append(SimpleNamespace(
            valid=named(act.valid, f"{name}_act_entry_valid"),
            record=named(act.bits, f"{name}_act_entry_record"), struct=rec))
        # the active move's words from the next one to write on (those read and buffered
        # too: a move leaves only once its last word is written)
        self.local_writes = [rng("pending_write", s, v, x.lo, x.hi) for s, v, x, _ in queued]
        self.local_writes.append(rng("pending_write", "act", act.valid,
                                     pyrtl.select(e.wraps, e.lo, act.waddr), e.hi))
        # only a move with no older writer left: otherwise the sequencer's writer is older
        self.acc_reads = [rng("pending_read", s, v & q_clear, x.alo, x.ahi)
                          for s, v, x, _ in queued]
        self.acc_reads.append(rng("pending_read", "act", act.reading & act_clear,
                                  pyrtl.select(e.awraps, e.alo, act.oaddr), e.ahi))

    def record(self, compute, token: WireVector) -> WireVector:
        """The :func:`drain_struct` record of an acc→local move given as an unpacked
        :func:`~tcu_hw.blocks.decoder.compute_struct` record (its accumulator run computed
        here) and its ``token``."""
        f = self.layout.hardware
        run = address_run(compute.oaddr, compute.os, compute.size, f.A)
        return self.struct.pack(relu=compute.relu, laddr=compute.laddr, ls=compute.ls,
                                oaddr=compute.oaddr, os=compute.os, size=compute.size,
                                uses=compute.uses, writes=compute.writes, lo=compute.lo,
                                hi=compute.hi,
                                wraps=compute.wraps, alo=run.lo, ahi=run.hi, awraps=run.wraps,
                                token=token)


def _narrow(lane: WireVector, w: int, relu: WireVector) -> WireVector:
    """One accumulator lane as a W-bit local lane: 0 when ``relu`` and it is negative, else
    saturated to W bits (itself when the widths agree)."""
    value = lane if lane.bitwidth == w else fixed.saturate(lane, w)
    return pyrtl.select(relu & lane[-1], pyrtl.Const(0, w), value)


class _Active:
    """The drain's active move: read side (``reading``, the accumulator address ``oaddr``)
    and write side (the local address ``waddr``); it leaves, and the next comes from the
    queue, when its last word is written (so every word read and not yet written is its)."""

    def __init__(self, rec: Struct, q: RegFifo, f, name: str) -> None:
        self._q, self._f = q, f
        self.valid = Register(1, f"{name}_act_valid")
        self.bits = Register(rec.width, f"{name}_act")
        self.fields = rec.unpack(self.bits)
        self.read_done = Register(1, f"{name}_read_done")
        self.reading = named(self.valid & ~self.read_done, f"{name}_reading")
        self.index = Register(f.size, f"{name}_index")
        self.written = Register(f.size, f"{name}_written")
        self.oaddr = Register(f.A, f"{name}_oaddr")
        self.ostep = Register(f.A, f"{name}_ostep")
        self.waddr = Register(f.L, f"{name}_waddr")
        self.lstep = Register(f.L, f"{name}_lstep")
        self.load = WireVector(1, f"{name}_load")

    def advance(self, issue: WireVector, write: WireVector) -> None:
        """Wire the next state given ``issue`` (a word is read) and ``write`` (a word is
        written). Call once."""
        f, q, size = self._f, self._q, self.fields.size
        retire = write & (self.written == size)
        q.deq.ready <<= ~self.valid | retire
        load, head = self.load, q.deq.payload
        load <<= q.deq.fire
        self.valid.next <<= load | (self.valid & ~retire)
        self.bits.next <<= pyrtl.select(load, q.deq.data, self.bits)
        self.read_done.next <<= ~load & (self.read_done | (issue & (self.index == size)))
        for reg, step_reg, start, code, bits, go in (
                (self.oaddr, self.ostep, head.oaddr, head.os, f.A, issue),
                (self.waddr, self.lstep, head.laddr, head.ls, f.L, write)):
            step_reg.next <<= pyrtl.select(load, stride_step(code, bits), step_reg)
            reg.next <<= pyrtl.select(load, start, pyrtl.select(go, (reg + step_reg)[:bits],
                                                                 reg))
        for count, go in ((self.index, issue), (self.written, write)):
            count.next <<= pyrtl.select(load, pyrtl.Const(0, f.size),
                                        pyrtl.select(go, (count + 1)[:f.size], count))
