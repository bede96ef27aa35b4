"""DRAM engine: DataMoves between local memory (port B) and DRAM0/DRAM1, in program order.

Each DRAM port of the core is a simple decoupled interface at vector granularity:

- ``req``   (valid/ready): ``write`` (1), ``addr`` (vector address), ``len`` (vectors − 1) —
  one transfer of consecutive vectors; requests are served in order;
- ``rdata`` (valid/ready): read data, in request order;
- ``wdata`` (valid/ready): write data, in request order (it may precede its request).

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

Ports (``name_`` prefix): ``enq_valid``/``enq_data`` (``dram_struct(arch).width``)/
``enq_ready``; ``entries`` = [(valid, record)] of the queue (for the dispatcher's range
checks). Per DRAM port k (:func:`port_wires`; ``ports[k]``): ``dramK_req_valid``,
``dramK_req_ready``, ``dramK_req_write``, ``dramK_req_addr`` (max(Dk, 1) bits: the layout's
DRAMk address width), ``dramK_req_len`` (the size field's width: vectors − 1),
``dramK_rdata_valid``, ``dramK_rdata_ready``, ``dramK_rdata`` (n·W), ``dramK_wdata_valid``,
``dramK_wdata_ready``, ``dramK_wdata`` (n·W); local port B as ``port_b_valid``/
``port_b_ready`` (for the sampler); status ``idle``, ``busy`` (a vector moved on port B
this cycle), ``stall``. Latency: an enqueued move's first request goes out two cycles after
it enters the queue; a vector read from local memory (port B) reaches ``dramK_wdata`` two
cycles after its read address.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..arch import Architecture
from ..isa import clog2
from .compute import _step
from .decoder import dram_struct, field_widths
from .local_memory import LocalMemory
from .stream import RegFifo, fit, name_ports, named


#: Signals of a DRAM port driven by the core, and by the memory side.
PORT_FROM_CORE = ("req_valid", "req_write", "req_addr", "req_len", "rdata_ready",
                  "wdata_valid", "wdata")
PORT_TO_CORE = ("req_ready", "rdata_valid", "rdata", "wdata_ready")


def port_wires(prefix: str, addr_bits: int, len_bits: int, width: int,
               signals=PORT_FROM_CORE + PORT_TO_CORE) -> dict:
    """Named wires ``<prefix>_<signal>`` of a DRAM port: ``req_addr`` (``addr_bits``),
    ``req_len`` (``len_bits``), ``rdata``/``wdata`` (``width``: one vector), the rest 1 bit."""
    widths = {"req_addr": addr_bits, "req_len": len_bits, "rdata": width, "wdata": width}
    return {sig: WireVector(widths.get(sig, 1), f"{prefix}_{sig}") for sig in signals}


def connect_port(port, memory) -> None:
    """Wire a DramEngine port namespace to a memory side (a DRAM model or an AXI master)
    whose attributes have the same names."""
    for sig in PORT_FROM_CORE:
        wire = getattr(memory, sig)
        wire <<= getattr(port, sig)
    for sig in PORT_TO_CORE:
        wire = getattr(port, sig)
        wire <<= getattr(memory, sig)


class DramEngine:
    def __init__(self, arch: Architecture, local: LocalMemory, queue_depth: int = 4,
                 name: str = "dram") -> None:
        n, w = arch.array_size, arch.dtype.width
        vec = n * w
        f = field_widths(arch)
        lay = arch.layout
        dbits = [max(lay.D0, 1), max(lay.D1, 1)]
        rec = dram_struct(arch)
        q = RegFifo(rec.width, queue_depth, f"{name}_queue")
        self.enq_valid, self.enq_data, self.enq_ready = q.enq_valid, q.enq_data, q.enq_ready
        self.entries = list(q.entries)

        # ------------------------------------------------------------------ DRAM ports
        self.ports = []
        for k in range(2):
            self.ports.append(SimpleNamespace(**port_wires(f"dram{k}", dbits[k], f.size, vec)))

        # ------------------------------------------------------------------ requests
        pbits = max(clog2(queue_depth + 1), 1)
        req_ptr = Register(pbits, f"{name}_req_ptr")
        rg_active = Register(1, f"{name}_rg_active")
        rg_addr = Register(f.D, f"{name}_rg_addr")
        rg_left = Register(f.size + 1, f"{name}_rg_left")        # vectors still to request
        rg_step = Register(f.D, f"{name}_rg_step")
        valids = [v for v, _ in q.entries]
        datas = [d for _, d in q.entries]
        sel_valid = pyrtl.mux(req_ptr, *valids, default=Const(0, 1))
        rg = sel = rec.unpack(pyrtl.mux(req_ptr, *datas, default=Const(0, rec.width)))

        # the instruction being requested stays at req_ptr until done
        port = rg.port
        mask = pyrtl.select(port, Const((1 << dbits[1]) - 1, f.D), Const((1 << dbits[0]) - 1, f.D))
        contiguous = rg.ds == 0
        room = (mask - rg_addr)[:f.D]                             # vectors before the wrap - 1
        left_m1 = (rg_left - 1)[:f.size + 1]
        fits = room.zero_extended(max(f.D, f.size + 1) + 1) >= left_m1.zero_extended(
            max(f.D, f.size + 1) + 1)
        length = pyrtl.select(contiguous, pyrtl.select(fits, left_m1[:f.size], fit(room, f.size)),
                              Const(0, f.size))
        req_fire = Const(0, 1)
        for k, p in enumerate(self.ports):
            mine = rg_active & (port == k)
            p.req_valid <<= mine
            p.req_write <<= ~rg.to_local
            p.req_addr <<= fit(rg_addr, dbits[k])
            p.req_len <<= length
            req_fire = req_fire | (mine & p.req_ready)
        moved = (length.zero_extended(f.size + 1) + 1)[:f.size + 1]
        rg_done = req_fire & (moved == rg_left)
        start = ~rg_active & sel_valid
        rg_active.next <<= start | (rg_active & ~rg_done)
        advance = named(pyrtl.select(contiguous, fit(moved, f.D), rg_step), f"{name}_rg_advance")
        rg_addr.next <<= pyrtl.select(start, sel.daddr, pyrtl.select(
            req_fire, (rg_addr + advance)[:f.D] & mask, rg_addr))
        rg_left.next <<= pyrtl.select(start, (sel.size.zero_extended(f.size + 1) + 1)[:f.size + 1],
                                      pyrtl.select(req_fire, (rg_left - moved)[:f.size + 1], rg_left))
        rg_step.next <<= pyrtl.select(start, _step(sel.ds, f.D), rg_step)

        # ------------------------------------------------------------------ local side
        head = rec.unpack(q.deq_data)
        ls_active = Register(1, f"{name}_ls_active")
        ls_addr = Register(f.L, f"{name}_ls_addr")
        ls_left = Register(f.size + 1, f"{name}_ls_left")
        ls_step = Register(f.L, f"{name}_ls_step")
        ls_finished = Register(1, f"{name}_ls_finished")       # head moved, awaiting its pop
        ls_start = q.deq_valid & ~ls_active & ~ls_finished
        # skid buffer for write data: (port, data)
        skid = RegFifo(vec + 1, 3, f"{name}_skid")
        inflight = Register(1, f"{name}_read_inflight")
        inflight_port = Register(1, f"{name}_read_port")

        reading = ls_active & head.to_local                      # DRAM -> local
        writing = ls_active & ~head.to_local                     # local -> DRAM
        rfire = Const(0, 1)
        rdata = Const(0, vec)
        for k, p in enumerate(self.ports):
            take = reading & (head.port == k)
            p.rdata_ready <<= take
            rfire = rfire | (take & p.rdata_valid)
            rdata = pyrtl.select(take, p.rdata, rdata)
        room_skid = (skid.count + inflight) <= 2
        rd_issue = writing & room_skid
        step_now = rfire | rd_issue
        local.b_addr <<= ls_addr
        local.b_write <<= rfire
        local.b_wdata <<= rdata
        skid.enq_valid <<= inflight
        skid.enq_data <<= pyrtl.concat(inflight_port, local.b_rdata)
        inflight.next <<= rd_issue
        inflight_port.next <<= head.port
        skid_port = skid.deq_data[-1]
        skid_fire = Const(0, 1)
        for k, p in enumerate(self.ports):
            mine = skid.deq_valid & (skid_port == k)
            p.wdata_valid <<= mine
            p.wdata <<= skid.deq_data[:vec]
            skid_fire = skid_fire | (mine & p.wdata_ready)
        skid.deq_ready <<= skid_fire

        ls_last = step_now & (ls_left == 1)
        ls_active.next <<= ls_start | (ls_active & ~ls_last)
        ls_addr.next <<= pyrtl.select(ls_start, head.laddr, pyrtl.select(
            step_now, (ls_addr + ls_step)[:f.L], ls_addr))
        ls_left.next <<= pyrtl.select(ls_start, (head.size.zero_extended(f.size + 1) + 1)[:f.size + 1],
                                      pyrtl.select(step_now, (ls_left - 1)[:f.size + 1], ls_left))
        ls_step.next <<= pyrtl.select(ls_start, _step(head.ls, f.L), ls_step)

        # the head leaves once the local side has finished it and its requests are issued
        requested = (req_ptr != 0) | (rg_done & (req_ptr == 0))
        done_now = ls_finished | ls_last
        pop = q.deq_valid & done_now & requested
        q.deq_ready <<= pop
        ls_finished.next <<= done_now & ~pop
        req_ptr.next <<= (req_ptr + rg_done - pop)[:pbits]

        # ------------------------------------------------------------------ status
        self.busy = step_now
        self.stall = (q.deq_valid | rg_active) & ~step_now & ~req_fire
        self.idle = ~q.deq_valid & ~skid.deq_valid & ~inflight
        self.port_b_valid = ls_active
        self.port_b_ready = step_now
        name_ports(self, name)
