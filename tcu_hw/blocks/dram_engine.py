"""DRAM engine: DataMoves between local memory (port B) and DRAM0/DRAM1.

Each DRAM port of the core is a :class:`~tcu_hw.blocks.stream.DramPort` (core side): a
request stream (``write``, ``addr`` = vector address, ``len`` = vectors − 1; served in
order), the read data stream and the write data stream (one vector per transfer, in request
order; write data may precede its request).

Structure: one channel per DRAM port, sharing local port B (with a guest reader, e.g. the
compute unit's weight loader)::

               ┌▶ channel 0: queue ─▶ request generator ──────────▶ dram0_req   (runs ahead)
    moves ─────┤              └─────▶ local side ◀─ dram0_rdata / ─▶ dram0_wdata
    (by port,  │                          │
    range      └▶ channel 1: (the same, DRAM1)                        ▼
    checked)                guest ─▶ port B arbiter (guest first,  ─▶ local port B
                                          then round robin)
                                          └─ read data ─▶ skid of the reading channel

The two DRAMs are separate memories, so the channels run at once: a load of weights from
DRAM1 and a load of inputs from DRAM0 arrive together. A move enters its channel only when
its local range does not overlap (with a writer among the two) a move still in the other
channel, so moves on different ports only reorder when they touch different local words;
and a store (local → DRAM) enters its channel only once the other port's stores have
landed in their memory (``DramPort.writes_done``), so the host's flush probe (a DRAM0
store, TCU.md §7) completes only after every earlier store on either port.
Within a channel moves run in program order. A move with DRAM stride code 0 is one transfer
of size+1 vectors (split in two only where the vector address wraps around the DRAM's
address width); a strided move is size+1 one-vector transfers. The request generator walks
its queue ahead of the local side, so the requests of later moves overlap the data of
earlier ones. A queue entry leaves when its requests are issued and the local side has moved
all its vectors; until then its local range is visible to the dispatcher (``entries``).
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import Layout, clog2
from .decoder import dram_struct, local_conflict, pending, stride_step
from .stream import (SINK, DramPort, RamPort, RegFifo, RingFifo, SharedRead, Stream, fit,
                     named)

#: write vectors a channel holds for its DRAM port (read from local memory ahead of the port;
#: the AXI master sends its W beats from the head, in place)
SKID_DEPTH = 3


def round_robin(wants: list, name: str) -> list:
    """Grants for ``wants`` (1-bit wires), at most one, round robin: after a cycle in which
    several want, the one after the winner comes first."""
    k = len(wants)
    if k == 1:
        return [wants[0]]
    bits = max((k - 1).bit_length(), 1)
    first = Register(bits, f"{name}_first")
    grants = []
    for i in range(k):
        g = Const(0, 1)
        for s in range(k):                 # first == s: clients s, s+1, ... ahead of i
            ahead = [wants[(s + d) % k] for d in range((i - s) % k)]
            free = ~pyrtl.rtl_any(*ahead) if ahead else Const(1, 1)
            g = g | ((first == s) & free)
        grants.append(wants[i] & g)
    contested = pyrtl.rtl_any(*[wants[i] & wants[j] for i in range(k) for j in range(i)])
    after = Const(0, bits)
    for i in range(k):
        after = pyrtl.select(grants[i], Const((i + 1) % k, bits), after)
    first.next <<= pyrtl.select(contested, after, first)
    return grants


def _must_wait(new, entries, struct) -> WireVector:
    """``new`` (a record) must wait for the other channel's valid ``entries``: their local
    ranges overlap and one writes, or both are stores (local → DRAM)."""
    hit = Const(0, 1)
    for entry in entries:
        e = struct.unpack(entry.record)
        hit = hit | (entry.valid & (local_conflict(new, e) | (~new.to_local & ~e.to_local)))
    return hit


class _Channel:
    """The moves of one DRAM port, in order: queue, request generator, local side. The local
    side asks for port B (``want``) and moves a vector when ``grant``ed."""

    def __init__(self, layout: Layout, vec: int, port: int, queue_depth: int, name: str,
                 engine: str) -> None:
        f = layout.hardware
        dbits = max(layout.D1 if port else layout.D0, 1)
        rec = dram_struct(layout)
        self.q = q = RegFifo(rec, queue_depth, f"{name}_queue")
        self.dram = p = DramPort(dbits, f.size, vec, f"{engine}{port}", side="core")

        # ------------------------------------------------------------------ requests
        pbits = max(clog2(queue_depth + 1), 1)
        req_ptr = Register(pbits, f"{name}_req_ptr")
        rg_active = Register(1, f"{name}_rg_active")
        rg_addr = Register(f.D, f"{name}_rg_addr")
        rg_left = Register(f.size + 1, f"{name}_rg_left")        # vectors still to request
        rg_step = Register(f.D, f"{name}_rg_step")
        valids = [e.valid for e in q.entries]
        datas = [e.record for e in q.entries]
        sel_valid = pyrtl.mux(req_ptr, *valids, default=Const(0, 1))
        rg = sel = rec.unpack(pyrtl.mux(req_ptr, *datas, default=Const(0, rec.width)))

        # the instruction being requested stays at req_ptr until done
        mask = Const((1 << dbits) - 1, f.D)
        contiguous = rg.ds == 0
        room = (mask - rg_addr)[:f.D]                             # vectors before the wrap - 1
        left_m1 = (rg_left - 1)[:f.size + 1]
        fits = room.zero_extended(max(f.D, f.size + 1) + 1) >= left_m1.zero_extended(
            max(f.D, f.size + 1) + 1)
        length = pyrtl.select(contiguous, pyrtl.select(fits, left_m1[:f.size], fit(room, f.size)),
                              Const(0, f.size))
        p.req.drive(rg_active, write=~rg.to_local, addr=rg_addr, len=length)
        req_fire = p.req.fire
        moved = (length.zero_extended(f.size + 1) + 1)[:f.size + 1]
        rg_done = req_fire & (moved == rg_left)
        start = ~rg_active & sel_valid
        rg_active.next <<= start | (rg_active & ~rg_done)
        advance = named(pyrtl.select(contiguous, fit(moved, f.D), rg_step), f"{name}_rg_advance")
        rg_addr.next <<= pyrtl.select(start, sel.daddr, pyrtl.select(
            req_fire, (rg_addr + advance)[:f.D] & mask, rg_addr))
        rg_left.next <<= pyrtl.select(start, (sel.size.zero_extended(f.size + 1) + 1)[:f.size + 1],
                                      pyrtl.select(req_fire, (rg_left - moved)[:f.size + 1], rg_left))
        rg_step.next <<= pyrtl.select(start, stride_step(sel.ds, f.D), rg_step)

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
        ls_active.next <<= ls_start | (ls_active & ~ls_last)
        ls_addr.next <<= pyrtl.select(ls_start, head.laddr, pyrtl.select(
            step_now, (ls_addr + ls_step)[:f.L], ls_addr))
        ls_left.next <<= pyrtl.select(ls_start, (head.size.zero_extended(f.size + 1) + 1)[:f.size + 1],
                                      pyrtl.select(step_now, (ls_left - 1)[:f.size + 1], ls_left))
        ls_step.next <<= pyrtl.select(ls_start, stride_step(head.ls, f.L), ls_step)

        # the head leaves once the local side has finished it and its requests are issued
        requested = (req_ptr != 0) | (rg_done & (req_ptr == 0))
        done_now = ls_finished | ls_last
        q.deq.ready <<= done_now & requested
        pop = q.deq.fire
        ls_finished.next <<= done_now & ~pop
        req_ptr.next <<= (req_ptr + rg_done - pop)[:pbits]

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

        self.busy = step_now
        self.stall = (q.deq.valid | rg_active) & ~step_now & ~req_fire
        self.idle = ~q.deq.valid & ~skid.deq.valid & ~inflight
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
        queue_depth: moves in flight per port (each channel's in-flight table).
        name: prefix of the wires and registers (the DRAM ports are ``<name>0``,
            ``<name>1``, the channels ``<name>_c0``, ``<name>_c1``).
        guest: also share port B with a guest reader (``guest`` port).

    Ports:
        moves: :class:`~tcu_hw.blocks.stream.Stream` sink of
            :func:`~tcu_hw.blocks.decoder.dram_struct` records (DataMoves); ``ready`` also
            waits while the move's local range conflicts with a move of the other port, or
            while it is a store and the other port still has one.
        dram0, dram1: :class:`~tcu_hw.blocks.stream.DramPort` (core side; ``ports`` = both):
            ``req.addr`` has max(Dk, 1) bits (the layout's DRAMk address width),
            ``req.len`` the hardware size width, data n·W.
        local: :class:`~tcu_hw.blocks.stream.RamPort` (user side) to local memory port B.
        guest: :class:`~tcu_hw.blocks.stream.SharedRead` (arbiter side): reads of port B
            for a guest, granted whenever it wants (before the channels, which take turns);
            None without a guest.
        entries: list of ``valid`` (1) / ``record`` (packed, with its ``struct``) outputs:
            both queues, for the
            dispatcher's range checks.
        local_writes: list of ``valid`` (1) / ``lo`` / ``hi`` (L bits) outputs: the
            local-memory ranges DRAM→local moves have still to write (a running move's from
            its current address on), for reads chained behind them (:meth:`wait_for`).
        idle: output (1), nothing queued or in flight.
        busy: output (1), a vector moved on port B this cycle.
        stall: output (1), a move is waiting (neither port moving nor requesting).
        port_b_valid, port_b_ready: outputs (1), status (not a handshake): local port B
            wanted / granted, the pair the sampler records.

    Latency: an enqueued move's first request goes out two cycles after it enters the queue;
    a vector read from local memory reaches ``wdata`` two cycles after its read address.
    """

    def __init__(self, layout: Layout, vector_bits: int, queue_depth: int = 2,
                 name: str = "dram", guest: bool = False) -> None:
        vec = vector_bits
        f = layout.hardware
        rec = dram_struct(layout)
        self.moves = Stream(rec, f"{name}_moves", SINK)
        ch = self.channels = [_Channel(layout, vec, k, queue_depth, f"{name}_c{k}", name)
                              for k in range(2)]
        self.dram0, self.dram1 = (c.dram for c in ch)
        self.local = local = RamPort(f.L, vec, f"{name}_local", side="user")
        self.entries = [SimpleNamespace(valid=e.valid, record=e.record, struct=rec)
                        for e in ch[0].q.entries + ch[1].q.entries]
        self.local_writes = ch[0].local_writes + ch[1].local_writes

        # ------------------------------------------------------------------ moves in
        new = self.moves.payload
        to1 = new.port
        # a store also waits until the other port's stores have landed, so that the host's
        # flush probe (a DRAM0 store) completes only after every earlier store on DRAM1
        store = ~new.to_local
        cross = named(pyrtl.select(
            to1, _must_wait(new, ch[0].q.entries, rec) | (store & ~ch[0].writes_settled),
            _must_wait(new, ch[1].q.entries, rec) | (store & ~ch[1].writes_settled)),
            f"{name}_cross_wait")
        for k, c in enumerate(ch):
            mine = to1 if k else ~to1
            c.q.enq.drive(self.moves.valid & mine & ~cross, self.moves.data)
        self.moves.ready <<= ~cross & pyrtl.select(to1, ch[1].q.enq.ready, ch[0].q.enq.ready)

        # ------------------------------------------------------------------ port B arbiter
        self.guest = g = SharedRead(f.L, vec, f"{name}_guest", side="arbiter") if guest \
            else None
        # the guest first (its reads feed compute; the channels' data waits in their skids
        # and in the DRAM), the channels in turn
        guest_read = g.want if g else Const(0, 1)
        grants = round_robin([c.want & ~guest_read for c in ch], f"{name}_port_b")
        for c, grant in zip(ch, grants):
            c.grant <<= grant
        addr = pyrtl.select(grants[1], ch[1].addr, ch[0].addr)
        if g:
            g.grant <<= guest_read
            g.rdata <<= local.rdata
            addr = pyrtl.select(guest_read, g.addr, addr)
        local.addr <<= addr
        local.write <<= ch[0].write | ch[1].write
        local.wdata <<= pyrtl.select(ch[1].write, ch[1].wdata, ch[0].wdata)
        for c in ch:
            c.rdata <<= local.rdata

        # ------------------------------------------------------------------ status
        moving = ch[0].busy | ch[1].busy
        self.busy = named(moving, f"{name}_busy")
        self.stall = named((ch[0].stall | ch[1].stall) & ~moving, f"{name}_stall")
        self.idle = named(ch[0].idle & ch[1].idle, f"{name}_idle")
        self.port_b_valid = named(ch[0].port_b_valid | ch[1].port_b_valid |
                                  (g.want if g else Const(0, 1)), f"{name}_port_b_valid")
        self.port_b_ready = named(moving | guest_read, f"{name}_port_b_ready")

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
                  guest: bool = False) -> "DramEngine":
        """The DRAM engine of an :class:`~tcu_hw.arch.Architecture`."""
        return cls(arch.layout, arch.array_size * arch.dtype.width, queue_depth, name, guest)
