"""DRAM engine: DataMoves between local memory (port B) and DRAM0/DRAM1, in program order.

Each DRAM port of the core is a :class:`~tcu_hw.blocks.stream.DramPort` (core side): a
request stream (``write``, ``addr`` = vector address, ``len`` = vectors − 1; served in
order), the read data stream and the write data stream (one vector per transfer, in request
order; write data may precede its request).

Structure::

    queue (in-flight table) ──▶ request generator ──▶ dramK_req        (runs ahead)
          │
          └──────────────────▶ local side ◀─ dramK_rdata ── local port B write
                                          ─▶ local port B read ─▶ skid ─▶ dramK_wdata

A move with DRAM stride code 0 is one transfer of size+1 vectors (split in two only where the
vector address wraps around the DRAM's address width); a strided move is size+1 one-vector
transfers. The request generator walks the queue ahead of the local side, so the requests of
later moves overlap the data of earlier ones. A queue entry leaves when its requests are
issued and the local side has moved all its vectors; until then its local range is visible
to the dispatcher (``entries``).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register

from ..isa import Layout, clog2
from .decoder import dram_struct, stride_step
from .stream import SINK, DramPort, RamPort, RegFifo, Stream, Struct, connect, fit, named


class DramEngine:
    """Runs DataMoves between local memory and the two DRAM ports, in program order.

    Args:
        layout: the instruction :class:`~tcu_hw.isa.Layout` (DRAM address widths and the
            record widths).
        vector_bits: bits of one vector (n·W).
        queue_depth: moves in flight (the in-flight table).
        name: prefix of the wires and registers (the DRAM ports are ``<name>0``,
            ``<name>1``).

    Ports:
        moves: :class:`~tcu_hw.blocks.stream.Stream` sink of
            :func:`~tcu_hw.blocks.decoder.dram_struct` records (DataMoves).
        dram0, dram1: :class:`~tcu_hw.blocks.stream.DramPort` (core side; ``ports`` = both):
            ``req.addr`` has max(Dk, 1) bits (the layout's DRAMk address width),
            ``req.len`` the hardware size width, data n·W.
        local: :class:`~tcu_hw.blocks.stream.RamPort` (user side) to local memory port B.
        entries: list of ``valid`` (1) / ``record`` (packed) outputs: the queue, for the
            dispatcher's range checks.
        idle: output (1), nothing queued or in flight.
        busy: output (1), a vector moved on port B this cycle.
        stall: output (1), a move is waiting (not moving, not requesting).
        port_b_valid, port_b_ready: outputs (1), status (not a handshake): local port B
            wanted / granted, the pair the sampler records.

    Latency: an enqueued move's first request goes out two cycles after it enters the queue;
    a vector read from local memory reaches ``wdata`` two cycles after its read address.
    """

    def __init__(self, layout: Layout, vector_bits: int, queue_depth: int = 4,
                 name: str = "dram") -> None:
        vec = vector_bits
        f = layout.hardware
        lay = layout
        dbits = [max(lay.D0, 1), max(lay.D1, 1)]
        rec = dram_struct(layout)
        self.moves = Stream(rec, f"{name}_moves", SINK)
        q = RegFifo(rec, queue_depth, f"{name}_queue")
        connect(self.moves.flipped(), q.enq)
        self.entries = q.entries
        self.dram0, self.dram1 = (DramPort(dbits[k], f.size, vec, f"{name}{k}", side="core")
                                  for k in range(2))
        self.local = local = RamPort(f.L, vec, f"{name}_local", side="user")

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
        mask = pyrtl.select(rg.port, Const((1 << dbits[1]) - 1, f.D), Const((1 << dbits[0]) - 1, f.D))
        contiguous = rg.ds == 0
        room = (mask - rg_addr)[:f.D]                             # vectors before the wrap - 1
        left_m1 = (rg_left - 1)[:f.size + 1]
        fits = room.zero_extended(max(f.D, f.size + 1) + 1) >= left_m1.zero_extended(
            max(f.D, f.size + 1) + 1)
        length = pyrtl.select(contiguous, pyrtl.select(fits, left_m1[:f.size], fit(room, f.size)),
                              Const(0, f.size))
        req_fire = Const(0, 1)
        for k, p in enumerate(self.ports):
            mine = rg_active & (rg.port == k)
            p.req.drive(mine, write=~rg.to_local, addr=rg_addr, len=length)
            req_fire = req_fire | p.req.fire
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
        # skid buffer for write data: (port, data)
        skid = RegFifo(Struct(data=vec, port=1), 3, f"{name}_skid")
        inflight = Register(1, f"{name}_read_inflight")
        inflight_port = Register(1, f"{name}_read_port")

        reading = ls_active & head.to_local                      # DRAM -> local
        writing = ls_active & ~head.to_local                     # local -> DRAM
        rfire = Const(0, 1)
        rdata = Const(0, vec)
        for k, p in enumerate(self.ports):
            take = reading & (head.port == k)
            p.rdata.ready <<= take
            rfire = rfire | p.rdata.fire
            rdata = pyrtl.select(take, p.rdata.payload.data, rdata)
        room_skid = (skid.count + inflight) <= 2
        rd_issue = writing & room_skid
        step_now = rfire | rd_issue
        local.addr <<= ls_addr
        local.write <<= rfire
        local.wdata <<= rdata
        skid.enq.drive(inflight, port=inflight_port, data=local.rdata)
        inflight.next <<= rd_issue
        inflight_port.next <<= head.port
        out = skid.deq
        skid_fire = Const(0, 1)
        for k, p in enumerate(self.ports):
            p.wdata.drive(out.valid & (out.payload.port == k), data=out.payload.data)
            skid_fire = skid_fire | p.wdata.fire
        out.ready <<= skid_fire

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

        # ------------------------------------------------------------------ status
        self.busy = named(step_now, f"{name}_busy")
        self.stall = named((q.deq.valid | rg_active) & ~step_now & ~req_fire, f"{name}_stall")
        self.idle = named(~q.deq.valid & ~skid.deq.valid & ~inflight, f"{name}_idle")
        self.port_b_valid = named(ls_active, f"{name}_port_b_valid")
        self.port_b_ready = named(step_now, f"{name}_port_b_ready")

    @property
    def ports(self) -> tuple[DramPort, DramPort]:
        """``(dram0, dram1)``."""
        return self.dram0, self.dram1

    @classmethod
    def from_arch(cls, arch, queue_depth: int = 4, name: str = "dram") -> "DramEngine":
        """The DRAM engine of an :class:`~tcu_hw.arch.Architecture`."""
        return cls(arch.layout, arch.array_size * arch.dtype.width, queue_depth, name)
