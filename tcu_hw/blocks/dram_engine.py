"""DRAM engine: DataMoves between local memory (port B) and DRAM0/DRAM1.

Each DRAM port of the core is a :class:`~tcu_hw.blocks.stream.DramPort` (core side): a
request stream (``write``, ``addr`` = vector address, ``len`` = vectors − 1; served in
order), the read data stream and the write data stream (one vector per transfer, in request
order; write data may precede its request).

Structure: one channel per DRAM port, sharing local port B (with a guest reader and a guest
writer, e.g. the compute unit's weight loader and accumulator drain)::

               ┌▶ channel 0: ─┬▶ DRAM fields ─▶ request generator ─▶ dram0_req (runs ahead)
    moves ─────┤              └▶ ring ─▶ queue ─▶ local side ◀─ dram0_rdata / ─▶ dram0_wdata
    (by port,  │                                    │
    range      └▶ channel 1: (the same, DRAM1)       ▼
    checked)      guests ─▶ port B arbiter (reader, channels ─▶ local port B
                                  (the one a chained reader waited for last), writer)
                                  └─ read data ─▶ skid of the reading channel

The two DRAMs are separate memories, so the channels run at once: a load of weights from
DRAM1 and a load of inputs from DRAM0 arrive together. A move enters its channel only when
its local range does not overlap (with a writer among the two) a move still in the other
channel, so moves on different ports only reorder when they touch different local words;
and a DRAM0 store (local → DRAM) enters its channel only once DRAM1's stores have landed in
their memory (``DramPort.writes_done``), so the host's flush probe (a DRAM0 store, TCU.md
§7) completes only after every earlier store on either port; a DRAM1 store runs beside
DRAM0's (a layer storing its output to one port and a copy to the other).
Within a channel moves run in program order. A move with DRAM stride code 0 is one transfer
of size+1 vectors (split in two only where the vector address wraps around the DRAM's
address width); a strided move is size+1 one-vector transfers. The request generator runs
ahead of the local side over every move the channel holds, so the requests of later moves
overlap the data of earlier ones. A move waits in a run-ahead ring (distributed RAM) for
room in the queue; a busy ring takes only a move in the same direction whose local range
starts where the ring's ends, so the ring's moves are one range for the checks (the union
of their ranges; a strided run counts as its hull, as everywhere) and a run of small moves
(a column of vector pairs) keeps up to 16 moves' requests in flight. A queue
entry leaves when its requests are issued and the local side has moved all its vectors (the
local side goes on to the next entry in the same cycle); until then its local range is
visible to the dispatcher (``entries``).

Port B: the guest reader first, then the channel whose load a chained reader (a MatMul, a weight
push) waited for in the cycle before (registered, so the range checks stay off the grant),
and after that still the channel favoured last, the other taking the
cycles it leaves: a load that a reader follows keeps the port while the reader works through
what it brought, instead of sharing it with a load nobody waits for yet. (No share is
guaranteed: a channel the other one is favoured over waits while that one streams, at most
until its moves run out; nothing waits on a move that cannot progress, so none hangs.) The
guest writer (the compute unit's accumulator drain, which also writes through port A) takes
the cycles nobody else wants.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import Layout, clog2
from .decoder import dram_struct, local_conflict, pending, stride_step
from .stream import (SINK, DramPort, RamPort, RegFifo, RingFifo, SharedRead, SharedWrite,
                     Stream, Struct, connect, fit, named)

#: moves a channel's run-ahead ring holds behind its queue (distributed RAM; with the queue's
#: two, 16 moves in flight: a DRAM model or AXI slave with 16 outstanding requests stays
#: busy on a run of small moves)
RUN_AHEAD = 14

#: write vectors a channel holds for its DRAM port (read from local memory ahead of the port;
#: the AXI master sends its W beats from the head, in place)
SKID_DEPTH = 3


def favor(wants: list, urgent: list, name: str) -> list:
    """Grants for two clients' ``wants`` (1-bit wires), at most one: the client that alone
    was ``urgent`` in the cycle before first, else the one that was last urgent alone (its
    reader will want it again: a load a chained reader follows keeps the port while the
    reader works through what it brought, instead of sharing it with a load nobody waits
    for yet); the other client takes every cycle the first does not want."""
    prefer = Register(1, f"{name}_prefer")                  # 1: client 1 comes first
    # urgency as it was a cycle ago (a preference, not an order: the range checks behind it
    # stay out of the grant and so of the AXI read-data READY)
    was = [Register(1, f"{name}_urgent{k}") for k in range(2)]
    for reg, u in zip(was, urgent):
        reg.next <<= u
    first1 = pyrtl.select(was[0] ^ was[1], was[1], prefer)
    prefer.next <<= first1
    g1 = wants[1] & (first1 | ~wants[0])
    return [wants[0] & ~g1, g1]


def _must_wait(new, entries, struct, stores: bool) -> WireVector:
    """``new`` (a record) must wait for the other channel's valid ``entries``: their local
    ranges overlap and one writes, or (with ``stores``) both are stores (local → DRAM)."""
    hit = Const(0, 1)
    for entry in entries:
        e = struct.unpack(entry.record)
        both = (~new.to_local & ~e.to_local) if stores else Const(0, 1)
        hit = hit | (entry.valid & (local_conflict(new, e) | both))
    return hit


class _Channel:
    """The moves of one DRAM port, in order: run-ahead ring, queue, request generator, local
    side. The local side asks for port B (``want``) and moves a vector when ``grant``ed.

    A move enters the run-ahead ring (``run_ahead`` moves, distributed RAM) and goes on to
    the queue (``queue_depth`` moves, each with its own range for hazard checks) as soon as there
    is room. Into an empty ring any move enters, into a busy one only a move of the same
    direction whose local range starts right after the ring's last one, so the ring's moves
    cover one contiguous range (``lo``..``hi``, their union), checked as one entry. Every move's
    requests go out in order as soon as it has entered (a ring of its DRAM fields), so a run
    of small moves (a DRAM column read a vector pair at a time) keeps many requests in
    flight. With ``run_ahead = 0`` moves enter the queue directly."""

    def __init__(self, layout: Layout, vec: int, port: int, queue_depth: int, run_ahead: int,
                 name: str, engine: str) -> None:
        f = layout.hardware
        dbits = max(layout.D1 if port else layout.D0, 1)
        rec = dram_struct(layout)
        self.enq = Stream(rec, f"{name}_enq", SINK)
        self.q = q = RegFifo(rec, queue_depth, f"{name}_queue")
        self.dram = p = DramPort(dbits, f.size, vec, f"{engine}{port}", side="core")
        new = self.enq.payload

        # ------------------------------------------------------------------ run-ahead ring
        entries = [SimpleNamespace(valid=e.valid, record=e.record) for e in q.entries]
        local_runs = []
        if run_ahead:
            # not full, from registers: the local side's progress stays off the dispatcher
            ring = RingFifo(rec, run_ahead, f"{name}_ring", pipe=False)
            busy = ring.deq.valid                                 # (registered)
            r_lo, r_hi = Register(f.L, f"{name}_ring_lo"), Register(f.L, f"{name}_ring_hi")
            r_to_local = Register(1, f"{name}_ring_to_local")
            after = (r_hi.zero_extended(f.L + 1) + 1)[:f.L + 1]
            abuts = named((new.lo.zero_extended(f.L + 1) == after) &
                          (new.to_local == r_to_local), f"{name}_abuts")
            connect(ring.deq, q.enq)
            ring.enq.drive(self.enq.valid & (abuts | ~busy), self.enq.data)
            room = (abuts | ~busy) & ring.enq.ready
            # the ring's range: its oldest move's lo .. its newest's hi
            taken, left = ring.enq.fire, ring.deq.fire
            alone = (ring.count == 0) | ((ring.count == 1) & left)
            oldest = rec.unpack(ring.deq.data)
            r_lo.next <<= pyrtl.select(taken & alone, new.lo, pyrtl.select(
                left, (oldest.hi + 1)[:f.L], r_lo))
            r_hi.next <<= pyrtl.select(taken, new.hi, r_hi)
            r_to_local.next <<= pyrtl.select(taken, new.to_local, r_to_local)
            entries.append(SimpleNamespace(
                valid=named(busy, f"{name}_ring_entry_valid"),
                record=named(rec.pack(to_local=r_to_local, uses=1, writes=r_to_local,
                                      lo=r_lo, hi=r_hi), f"{name}_ring_entry_record")))
            local_runs.append(("ring", busy & r_to_local, r_lo, r_hi))
        else:
            q.enq.drive(self.enq.valid, self.enq.data)
            room = q.enq.ready
        self.enq.ready <<= room
        accepted = self.enq.fire

        # ------------------------------------------------------------------ requests
        # every accepted move's DRAM fields, in order, for the request generator
        asks = RingFifo(Struct(to_local=1, daddr=f.D, ds=f.S1, size=f.size),
                        queue_depth + run_ahead, f"{name}_asks")
        asks.enq.drive(accepted, to_local=new.to_local, daddr=new.daddr, ds=new.ds,
                       size=new.size)
        abits = clog2(queue_depth + run_ahead + 1)
        ahead = Register(abits, f"{name}_requested_ahead")       # requested, not yet popped
        rg_active = Register(1, f"{name}_rg_active")
        rg_addr = Register(f.D, f"{name}_rg_addr")
        rg_left = Register(f.size + 1, f"{name}_rg_left")        # vectors still to request
        rg_step = Register(f.D, f"{name}_rg_step")
        rg_contiguous = Register(1, f"{name}_rg_contiguous")
        rg_done_w = WireVector(1, f"{name}_rg_done")
        rg_write = Register(1, f"{name}_rg_write")
        sel = asks.deq.payload
        # the next move's requests start in the cycle the last one's last request goes
        start = named((~rg_active | rg_done_w) & asks.deq.valid, f"{name}_rg_start")
        asks.deq.ready <<= start

        mask = Const((1 << dbits) - 1, f.D)
        room_d = (mask - rg_addr)[:f.D]                           # vectors before the wrap - 1
        left_m1 = (rg_left - 1)[:f.size + 1]
        fits = room_d.zero_extended(max(f.D, f.size + 1) + 1) >= left_m1.zero_extended(
            max(f.D, f.size + 1) + 1)
        length = pyrtl.select(rg_contiguous, pyrtl.select(fits, left_m1[:f.size],
                                                          fit(room_d, f.size)),
                              Const(0, f.size))
        p.req.drive(rg_active, write=rg_write, addr=rg_addr, len=length)
        req_fire = p.req.fire
        moved = (length.zero_extended(f.size + 1) + 1)[:f.size + 1]
        rg_done = req_fire & (moved == rg_left)
        rg_done_w <<= rg_done
        rg_active.next <<= start | (rg_active & ~rg_done)
        advance = named(pyrtl.select(rg_contiguous, fit(moved, f.D), rg_step),
                        f"{name}_rg_advance")
        rg_addr.next <<= pyrtl.select(start, sel.daddr, pyrtl.select(
            req_fire, (rg_addr + advance)[:f.D] & mask, rg_addr))
        rg_left.next <<= pyrtl.select(start, (sel.size.zero_extended(f.size + 1) + 1)[:f.size + 1],
                                      pyrtl.select(req_fire, (rg_left - moved)[:f.size + 1], rg_left))
        rg_step.next <<= pyrtl.select(start, stride_step(sel.ds, f.D), rg_step)
        rg_contiguous.next <<= pyrtl.select(start, sel.ds == 0, rg_contiguous)
        rg_write.next <<= pyrtl.select(start, ~sel.to_local, rg_write)

        # ------------------------------------------------------------------ local side
        head = q.deq.payload
        ls_active = Register(1, f"{name}_ls_active")
        ls_addr = Register(f.L, f"{name}_ls_addr")
        ls_left = Register(f.size + 1, f"{name}_ls_left")
        ls_step = Register(f.L, f"{name}_ls_step")
        ls_finished = Register(1, f"{name}_ls_finished")       # head moved, awaiting its pop
        ls_start = q.deq.valid & ~ls_active & ~ls_finished
        skid = RingFifo(vec, SKID_DEPTH, f"{name}_skid")        # write data
        inflight = Register(1, f"{name}_read_inflight")
        self.local_wait = WireVector(1, f"{name}_local_wait")
        self.grant = WireVector(1, f"{name}_grant")
        self.rdata = WireVector(vec, f"{name}_port_b_rdata")

        reading = ls_active & head.to_local                      # DRAM -> local
        writing = ls_active & ~head.to_local                     # local -> DRAM
        room_skid = (skid.count + inflight) <= SKID_DEPTH - 1
        can_read = writing & room_skid & ~self.local_wait
        self.want = named((reading & p.rdata.valid) | can_read, f"{name}_want")
        p.rdata.ready <<= reading & self.grant
        rfire = p.rdata.fire
        rd_issue = can_read & self.grant
        step_now = rfire | rd_issue
        self.addr, self.write = ls_addr, rfire
        self.wdata = p.rdata.payload.data
        skid.enq.drive(inflight, data=self.rdata)
        inflight.next <<= rd_issue
        out = skid.deq
        p.wdata.drive(out.valid, data=out.data)
        out.ready <<= p.wdata.ready

        ls_last = step_now & (ls_left == 1)
        # the next move's local side starts right after this one's last vector when it is
        # already queued behind it (the head leaves in that cycle), else from the head
        follows = named(ls_last & q.deq.fire & q.entries[1].valid, f"{name}_ls_follows") \
            if queue_depth > 1 else Const(0, 1)
        nxt = rec.unpack(q.entries[1].record) if queue_depth > 1 else head
        begin = ls_start | follows
        first = SimpleNamespace(**{k: pyrtl.select(follows, getattr(nxt, k), getattr(head, k))
                                   for k in ("laddr", "size", "ls")})
        ls_active.next <<= begin | (ls_active & ~ls_last)
        ls_addr.next <<= pyrtl.select(begin, first.laddr, pyrtl.select(
            step_now, (ls_addr + ls_step)[:f.L], ls_addr))
        ls_left.next <<= pyrtl.select(begin, (first.size.zero_extended(f.size + 1) + 1)[:f.size + 1],
                                      pyrtl.select(step_now, (ls_left - 1)[:f.size + 1], ls_left))
        ls_step.next <<= pyrtl.select(begin, stride_step(first.ls, f.L), ls_step)

        # the head leaves once the local side has finished it and its requests are issued
        # (the requests go in order: with none ahead, the ones finishing now are the head's)
        requested = (ahead != 0) | rg_done
        done_now = ls_finished | ls_last
        q.deq.ready <<= done_now & requested
        pop = q.deq.fire
        ls_finished.next <<= done_now & ~pop
        ahead.next <<= (ahead + rg_done - pop)[:abits]

        # local addresses still to be written by DRAM -> local moves: the head from its
        # current address on (the whole run if it wraps), the entries behind it whole
        self.local_addr = named(ls_addr, f"{name}_next_local_addr")
        self.local_writes = []
        for i, entry in enumerate(q.entries):
            e = rec.unpack(entry.record)
            valid, lo = entry.valid & e.writes, e.lo
            if i == 0:
                valid = valid & ~ls_finished
                lo = pyrtl.select(ls_active & ~e.wraps, ls_addr, e.lo)
            self.local_writes.append(SimpleNamespace(
                valid=named(valid, f"{name}_pending_write{i}_valid"),
                lo=named(lo, f"{name}_pending_write{i}_lo"),
                hi=named(e.hi, f"{name}_pending_write{i}_hi")))
        for what, valid, lo, hi in local_runs:
            self.local_writes.append(SimpleNamespace(
                valid=named(valid, f"{name}_pending_write_{what}_valid"),
                lo=named(lo, f"{name}_pending_write_{what}_lo"),
                hi=named(hi, f"{name}_pending_write_{what}_hi")))
        # moves still to touch local memory, for range checks: the queue's, the ring's run
        self.entries = entries

        self.busy = step_now
        self.stall = (q.deq.valid | rg_active) & ~step_now & ~req_fire
        self.idle = ~q.deq.valid & ~(ring.deq.valid if run_ahead else Const(0, 1)) & \
            ~skid.deq.valid & ~inflight
        # every vector this channel stored has landed in its memory
        self.writes_settled = ~skid.deq.valid & ~inflight & p.writes_done
        self.port_b_valid = ls_active


class DramEngine:
    """Runs DataMoves between local memory and the two DRAM ports: in program order on each
    port, both ports at once.

    Args:
        layout: the instruction :class:`~tcu_hw.isa.Layout` (DRAM address widths and the
            record widths).
        vector_bits: bits of one vector (n·W).
        queue_depth: moves in flight per port, each with its own range for hazard checks.
        run_ahead: further moves per port that may wait behind them (distributed RAM) while
            their requests go out, when their local ranges follow each other (one range
            for the checks); 0: none.
        name: prefix of the wires and registers (the DRAM ports are ``<name>0``,
            ``<name>1``, the channels ``<name>_c0``, ``<name>_c1``).
        guest: also share port B with a guest reader (``guest`` port).
        writer: also share port B with a guest writer (``writer`` port).

    Ports:
        moves: :class:`~tcu_hw.blocks.stream.Stream` sink of
            :func:`~tcu_hw.blocks.decoder.dram_struct` records (DataMoves); ``ready`` also
            waits while the move's local range conflicts with a move of the other port, or
            while it is a DRAM0 store and DRAM1 still has one.
        dram0, dram1: :class:`~tcu_hw.blocks.stream.DramPort` (core side; ``ports`` = both):
            ``req.addr`` has max(Dk, 1) bits (the layout's DRAMk address width),
            ``req.len`` the hardware size width, data n·W.
        local: :class:`~tcu_hw.blocks.stream.RamPort` (user side) to local memory port B.
        guest: :class:`~tcu_hw.blocks.stream.SharedRead` (arbiter side): reads of port B
            for a guest, granted whenever it wants (before the channels); None without a
            guest.
        writer: :class:`~tcu_hw.blocks.stream.SharedWrite` (arbiter side): writes to port B
            for a guest, granted in the cycles neither the guest reader nor a channel wants
            the port; None without one.
        entries: list of ``valid`` (1) / ``record`` (packed, with its ``struct``) outputs:
            both queues' moves and both run-ahead rings' ranges, for the dispatcher's range
            checks.
        local_writes: list of ``valid`` (1) / ``lo`` / ``hi`` (L bits) outputs: the
            local-memory ranges DRAM→local moves have still to write (a running move's from
            its current address on), for reads chained behind them (:meth:`wait_for`).
        idle: output (1), nothing queued or in flight.
        busy: output (1), a vector moved on port B this cycle.
        stall: output (1), a move is waiting (neither port moving nor requesting).
        port_b_valid, port_b_ready: outputs (1), status (not a handshake): local port B
            wanted / granted, the pair the sampler records.

    Call :meth:`chain` (the local readers that chain behind DRAM loads, or ``[]``) and
    :meth:`wait_for` (the local writes stores chain behind, or ``[]``) once each: they drive
    the waits and the port B preference.

    Latency: an accepted move's first request goes out two cycles after it is accepted
    (the next move's right after the last request of the one before); a vector read
    from local memory reaches ``wdata`` two cycles after its read address.
    """

    def __init__(self, layout: Layout, vector_bits: int, queue_depth: int = 2,
                 name: str = "dram", guest: bool = False, run_ahead: int = RUN_AHEAD,
                 writer: bool = False) -> None:
        if queue_depth < 1 or run_ahead < 0:
            raise ValueError(f"DRAM engine {name!r}: queue_depth must be at least 1 and "
                             f"run_ahead at least 0")
        vec = vector_bits
        f = layout.hardware
        rec = dram_struct(layout)
        self.name = name
        self.moves = Stream(rec, f"{name}_moves", SINK)
        ch = self.channels = [_Channel(layout, vec, k, queue_depth, run_ahead, f"{name}_c{k}",
                                       name) for k in range(2)]
        self.dram0, self.dram1 = (c.dram for c in ch)
        self.local = local = RamPort(f.L, vec, f"{name}_local", side="user")
        self.entries = [SimpleNamespace(valid=e.valid, record=e.record, struct=rec)
                        for e in ch[0].entries + ch[1].entries]
        self.local_writes = ch[0].local_writes + ch[1].local_writes

        # ------------------------------------------------------------------ moves in
        new = self.moves.payload
        to1 = new.port
        # a DRAM0 store also waits until DRAM1's stores have landed, so that the host's
        # flush probe (a DRAM0 store) completes only after every earlier store on DRAM1;
        # a DRAM1 store runs beside DRAM0's (a layer storing to both ports)
        store = ~new.to_local
        cross = named(pyrtl.select(
            to1, _must_wait(new, ch[0].entries, rec, stores=False),
            _must_wait(new, ch[1].entries, rec, stores=True) | (store & ~ch[1].writes_settled)),
            f"{name}_cross_wait")
        for k, c in enumerate(ch):
            mine = to1 if k else ~to1
            c.enq.drive(self.moves.valid & mine & ~cross, self.moves.data)
        self.moves.ready <<= ~cross & pyrtl.select(to1, ch[1].enq.ready, ch[0].enq.ready)

        # ------------------------------------------------------------------ port B arbiter
        self.guest = g = SharedRead(f.L, vec, f"{name}_guest", side="arbiter") if guest \
            else None
        # the guest first (its reads feed compute; the channels' data waits in their skids
        # and in the DRAM), then the channel a chained reader waits for (see chain)
        guest_read = g.want if g else Const(0, 1)
        self.writer = wr = SharedWrite(f.L, vec, f"{name}_writer", side="arbiter") if writer \
            else None
        self._urgent = [WireVector(1, f"{name}_c{k}_urgent") for k in range(2)]
        grants = favor([c.want & ~guest_read for c in ch], self._urgent, f"{name}_port_b")
        for c, grant in zip(ch, grants):
            c.grant <<= grant
        addr = pyrtl.select(grants[1], ch[1].addr, ch[0].addr)
        wdata = pyrtl.select(ch[1].write, ch[1].wdata, ch[0].wdata)
        written = ch[0].write | ch[1].write
        if wr:                      # the writer takes the cycles nobody else wants
            wr.grant <<= wr.want & ~guest_read & ~ch[0].want & ~ch[1].want
            addr = pyrtl.select(wr.grant, wr.addr, addr)
            wdata = pyrtl.select(wr.grant, wr.wdata, wdata)
            written = written | wr.grant
        if g:
            g.grant <<= guest_read
            g.rdata <<= local.rdata
            addr = pyrtl.select(guest_read, g.addr, addr)
        local.addr <<= addr
        local.write <<= written
        local.wdata <<= wdata
        for c in ch:
            c.rdata <<= local.rdata

        # ------------------------------------------------------------------ status
        moving = ch[0].busy | ch[1].busy
        self.busy = named(moving, f"{name}_busy")
        self.stall = named((ch[0].stall | ch[1].stall) & ~moving, f"{name}_stall")
        self.idle = named(ch[0].idle & ch[1].idle, f"{name}_idle")
        self.port_b_valid = named(ch[0].port_b_valid | ch[1].port_b_valid | guest_read |
                                  (wr.want if wr else Const(0, 1)), f"{name}_port_b_valid")
        self.port_b_ready = named(moving | guest_read | (wr.grant if wr else Const(0, 1)),
                                  f"{name}_port_b_ready")

    def chain(self, readers) -> None:
        """Chain ``readers`` (records with ``addr`` and ``wants`` outputs and a ``wait``
        input, e.g. :attr:`ComputeUnit.readers <tcu_hw.blocks.compute.ComputeUnit>`) behind
        the local words DRAM→local moves have still to write: drive each ``wait``, and give
        port B first (from the next cycle) to a channel that a reader wanting to read waits
        for (a MatMul or a
        weight push waiting for its load does not share the port with a load it does not
        need yet). ``[]``: nothing is chained. Call once."""
        hits = [[named(pending(reader.addr, c.local_writes), f"{self.name}_c{k}_holds_{i}")
                 for k, c in enumerate(self.channels)] for i, reader in enumerate(readers)]
        for k, urgent in enumerate(self._urgent):
            urgent <<= pyrtl.rtl_any(Const(0, 1), *[r.wants & h[k] for r, h in zip(readers, hits)])
        for reader, (in0, in1) in zip(readers, hits):
            reader.wait <<= in0 | in1

    def wait_for(self, ranges) -> None:
        """Chain the local reads of local→DRAM moves behind ``ranges`` (``valid``/``lo``/``hi``
        records of local words an earlier instruction has still to write, e.g. the compute
        unit's ``local_writes``); ``[]`` when nothing is chained. Call once."""
        for c in self.channels:
            c.local_wait <<= pending(c.local_addr, ranges)

    @property
    def ports(self) -> tuple[DramPort, DramPort]:
        """``(dram0, dram1)``."""
        return self.dram0, self.dram1

    @classmethod
    def from_arch(cls, arch, queue_depth: int = 2, name: str = "dram",
                  guest: bool = False, run_ahead: int = RUN_AHEAD,
                  writer: bool = False) -> "DramEngine":
        """The DRAM engine of an :class:`~tcu_hw.arch.Architecture`."""
        return cls(arch.layout, arch.array_size * arch.dtype.width, queue_depth, name, guest,
                   run_ahead, writer)
