"""AXI4 master for one DRAM port: the core's vector transfers as INCR bursts (TCU.md §6).

The core side is a :class:`~tcu_hw.blocks.dram_engine.DramEngine` port (``req`` = write,
vector address, vectors − 1; in-order ``rdata`` / ``wdata`` vectors). This block turns each
transfer into bursts on the AXI4 channels::

    req ─▶ [queue] ─▶ burst generator ─┬─▶ AR ────────────────────────────▶ slave
                                       └─▶ AW ──▶ [burst lengths] ─┐
    wdata ─▶ vector → beats ───────────────────────────────────────┴─▶ W (WLAST)
    rdata ◀─ [vectors] ◀─ beats → vector ◀──────────────────────────── R
                                                        B ─▶ write bursts done

- Byte address = ``offset << 16`` + vector address × vector bytes (mod 2^32), where the
  offset and AxCACHE come from the configuration registers. A vector is ``n`` scalar slots of
  8·bytes-per-scalar bits (FP18BP10 lanes are zero-extended to 32 bits on write, the low 18
  bits taken on read) and spans ``vector bits / data width`` beats; the generator refuses
  widths that do not divide the vector.
- Bursts are at most 256 beats and never cross a 4 KiB boundary; AxSIZE = log2(data bytes),
  AxBURST = INCR, AxID = 0, WSTRB all ones, AxLOCK/AxPROT/AxQOS = 0.
- Up to ``max_outstanding`` read bursts are in flight. Requests are served in order, and the
  direction only changes when the other direction is complete (all read data in before a
  write burst is issued, all write responses in before a read burst), so a read after a write
  to the same address sees the new data and a write never overtakes an earlier read.
- BRESP/RRESP other than OKAY raise the sticky ``bus_error`` output.

Ports:

- AXI channels as ``axi.<signal>`` (wires ``<name>_axi_<signal>``, Tensil's names and widths;
  the top connects them to ``m_axi_<name>_*``).
- Core side, the DramEngine port (wires ``<name>_core_*``): inputs ``req_valid`` (1),
  ``req_write`` (1), ``req_addr`` (``addr_bits``, vector address), ``req_len`` (``len_bits``,
  vectors − 1), ``rdata_ready`` (1), ``wdata_valid`` (1), ``wdata`` (n·W); outputs
  ``req_ready``, ``rdata_valid``, ``rdata`` (n·W), ``wdata_ready``. All valid/ready: a
  transfer happens in a cycle where both are high.
- Inputs ``offset`` (32; bits 15:0 used) and ``cache`` (4), both taken when a request starts.
- Status: ``idle`` (nothing queued, in flight or buffered), ``bus_error`` (sticky);
  ``beats_per_vector`` (a Python int).

Latency: a request reaches AR/AW two cycles after it is accepted; a read vector's last beat on
R reaches ``rdata_valid`` one cycle later; write data is accepted ahead of its AW.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..arch import Architecture, Options
from ..isa import clog2
from . import lanes
from .dram_engine import PORT_FROM_CORE, connect_port, port_wires
from .stream import RegFifo, fit, name_ports

ID_BITS = 6
AXI_OUTPUTS = {  # name: width (None = address width 32 or data-derived)
    "awvalid": 1, "awid": ID_BITS, "awaddr": 32, "awlen": 8, "awsize": 3, "awburst": 2,
    "awlock": 2, "awcache": 4, "awprot": 3, "awqos": 4,
    "wvalid": 1, "wid": ID_BITS, "wdata": None, "wstrb": None, "wlast": 1,
    "bready": 1,
    "arvalid": 1, "arid": ID_BITS, "araddr": 32, "arlen": 8, "arsize": 3, "arburst": 2,
    "arlock": 2, "arcache": 4, "arprot": 3, "arqos": 4,
    "rready": 1,
}
AXI_INPUTS = {"awready": 1, "wready": 1, "bvalid": 1, "bid": ID_BITS, "bresp": 2,
              "arready": 1, "rvalid": 1, "rid": ID_BITS, "rdata": None, "rresp": 2,
              "rlast": 1}
#: Tensil's port order within one AXI master.
AXI_PORT_ORDER = ("awready", "awvalid", "awid", "awaddr", "awlen", "awsize", "awburst",
                  "awlock", "awcache", "awprot", "awqos", "wready", "wvalid", "wid", "wdata",
                  "wstrb", "wlast", "bready", "bvalid", "bid", "bresp", "arready", "arvalid",
                  "arid", "araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot",
                  "arqos", "rready", "rvalid", "rid", "rdata", "rresp", "rlast")


def axi_width(signal: str, data_width: int) -> int:
    width = AXI_OUTPUTS.get(signal, AXI_INPUTS.get(signal))
    if width is None:
        return data_width // 8 if signal == "wstrb" else data_width
    return width


def dram_vector_bits(arch: Architecture) -> int:
    """Bits of one vector in DRAM: n scalar slots of 8·bytes-per-scalar bits."""
    return arch.vector_bytes * 8


class AxiMaster:
    def __init__(self, arch: Architecture, options: Options, addr_bits: int, len_bits: int,
                 name: str = "dram0", max_outstanding: int = 16) -> None:
        options.check_for(arch)
        n, w = arch.array_size, arch.dtype.width
        slot = 8 * arch.dtype.bytes_per_scalar
        dw = options.axi_data_width
        vbits = dram_vector_bits(arch)
        beats = vbits // dw                                  # beats per vector (>= 1)
        beat_bytes, vector_bytes = dw // 8, vbits // 8
        self.beats_per_vector = beats
        prefix = f"{name}_axi_"

        # ------------------------------------------------------------------ AXI wires
        self.axi = SimpleNamespace()
        for sig in AXI_PORT_ORDER:
            setattr(self.axi, sig, WireVector(axi_width(sig, dw), prefix + sig))
        a = self.axi
        # ------------------------------------------------------------------ core side
        vars(self).update(port_wires(f"{name}_core", addr_bits, len_bits, n * w,
                                     PORT_FROM_CORE))
        self.offset = WireVector(32, f"{name}_core_offset")
        self.cache = WireVector(4, f"{name}_core_cache")

        # constant fields
        size_code = clog2(beat_bytes)
        for ch in ("aw", "ar"):
            getattr(a, f"{ch}id").__ilshift__(Const(0, ID_BITS))
            getattr(a, f"{ch}size").__ilshift__(Const(size_code, 3))
            getattr(a, f"{ch}burst").__ilshift__(Const(1, 2))          # INCR
            getattr(a, f"{ch}lock").__ilshift__(Const(0, 2))
            getattr(a, f"{ch}prot").__ilshift__(Const(0, 3))
            getattr(a, f"{ch}qos").__ilshift__(Const(0, 4))
        a.wid <<= Const(0, ID_BITS)
        a.wstrb <<= Const((1 << (dw // 8)) - 1, dw // 8)

        # ------------------------------------------------------------------ requests
        rq = RegFifo(1 + addr_bits + len_bits, 2, f"{name}_axi_requests")
        rq.enq_valid <<= self.req_valid
        rq.enq_data <<= pyrtl.concat(self.req_len, self.req_addr, self.req_write)
        self.req_ready = rq.enq_ready
        head_write = rq.deq_data[0]
        head_addr = rq.deq_data[1:1 + addr_bits]
        head_len = rq.deq_data[1 + addr_bits:]

        beat_count_bits = max(len_bits + clog2(beats) + 1, 14)      # >= beats in 4 KiB
        active = Register(1, f"{name}_axi_active")
        writing = Register(1, f"{name}_axi_writing")
        addr = Register(32, f"{name}_axi_addr")
        left = Register(beat_count_bits, f"{name}_axi_left")             # beats to request
        start = rq.deq_valid & ~active
        rq.deq_ready <<= start
        # AxCACHE is taken with the request, like the offset: a Configure of the cache
        # register while a request is still in flight does not change its bursts
        cache = Register(4, f"{name}_axi_cache_latched")
        cache.next <<= pyrtl.select(start, self.cache, cache)
        a.awcache <<= cache
        a.arcache <<= cache
        base = (pyrtl.concat(self.offset[:16], Const(0, 16)) +
                (head_addr * Const(vector_bytes)))[:32]
        total = fit((head_len.zero_extended(beat_count_bits) + 1) * Const(beats),
                    beat_count_bits)

        # burst length: min(left, 256, beats to the next 4 KiB boundary)
        to_boundary = (Const(4096, 13) - addr[:12].zero_extended(13))[:13]
        room = fit(to_boundary[clog2(beat_bytes):], beat_count_bits) if beat_bytes > 1 \
            else fit(to_boundary, beat_count_bits)
        cap = pyrtl.select(room < 256, room, Const(256, beat_count_bits))
        burst = pyrtl.select(left < cap, left, cap)
        burst_len = (burst - 1)[:8]

        # outstanding bursts per direction
        out_bits = clog2(max_outstanding + 1)
        reads_out = Register(out_bits + 1, f"{name}_axi_reads_out")
        writes_out = Register(16, f"{name}_axi_writes_out")
        r_done = a.rvalid & a.rready & a.rlast
        b_done = a.bvalid & a.bready
        wlens = RegFifo(8, max_outstanding, f"{name}_axi_wlens")

        can_read = active & ~writing & (writes_out == 0) & (reads_out < max_outstanding)
        can_write = active & writing & (reads_out == 0) & wlens.enq_ready
        a.arvalid <<= can_read
        a.araddr <<= addr
        a.arlen <<= burst_len
        a.awvalid <<= can_write
        a.awaddr <<= addr
        a.awlen <<= burst_len
        ar_fire = can_read & a.arready
        aw_fire = can_write & a.awready
        fired = ar_fire | aw_fire
        wlens.enq_valid <<= aw_fire
        wlens.enq_data <<= burst_len
        last_burst = fired & (burst == left)
        active.next <<= start | (active & ~last_burst)
        writing.next <<= pyrtl.select(start, head_write, writing)
        step = fit(burst, 32 - clog2(beat_bytes))
        addr.next <<= pyrtl.select(start, base, pyrtl.select(
            fired, (addr + pyrtl.concat(step, Const(0, clog2(beat_bytes)))
                    if beat_bytes > 1 else addr + step)[:32], addr))
        left.next <<= pyrtl.select(start, total, pyrtl.select(fired, (left - burst)[:beat_count_bits],
                                                              left))
        reads_out.next <<= (reads_out + ar_fire - r_done)[:out_bits + 1]
        writes_out.next <<= (writes_out + aw_fire - b_done)[:16]
        a.bready <<= Const(1, 1)

        # ------------------------------------------------------------------ write data
        def to_slots(vector: WireVector) -> WireVector:
            if slot == w:
                return vector
            return lanes.join([lane.zero_extended(slot) for lane in lanes.split(vector, n)])

        def from_slots(vector: WireVector) -> WireVector:
            if slot == w:
                return vector
            return lanes.join([lane[:w] for lane in lanes.split(vector, n)])

        wvec = Register(vbits, f"{name}_axi_wvec")
        wfull = Register(1, f"{name}_axi_wfull")
        wbeat = Register(max(clog2(beats), 1), f"{name}_axi_wbeat")
        wcount = Register(8, f"{name}_axi_wcount")                    # beat within the burst
        beats_out = [wvec[k * dw:(k + 1) * dw] for k in range(beats)]
        a.wdata <<= pyrtl.mux(wbeat, *beats_out, default=Const(0, dw)) if beats > 1 \
            else beats_out[0]
        a.wvalid <<= wfull & wlens.deq_valid
        a.wlast <<= wcount == wlens.deq_data
        w_fire = a.wvalid & a.wready
        vector_sent = w_fire & (wbeat == beats - 1)
        wlens.deq_ready <<= w_fire & a.wlast
        wcount.next <<= pyrtl.select(w_fire, pyrtl.select(a.wlast, Const(0, 8),
                                                          (wcount + 1)[:8]), wcount)
        wbeat.next <<= pyrtl.select(w_fire, pyrtl.select(vector_sent, Const(0, wbeat.bitwidth),
                                                         (wbeat + 1)[:wbeat.bitwidth]), wbeat)
        self.wdata_ready = ~wfull | vector_sent
        take = self.wdata_valid & self.wdata_ready
        wfull.next <<= take | (wfull & ~vector_sent)
        wvec.next <<= pyrtl.select(take, to_slots(self.wdata), wvec)

        # ------------------------------------------------------------------ read data
        vectors = RegFifo(n * w, 2, f"{name}_axi_rvectors")
        if beats == 1:
            assembled = a.rdata
            complete = a.rvalid
        else:
            parts = [Register(dw, f"{name}_axi_rpart{k}") for k in range(beats - 1)]
            rbeat = Register(clog2(beats), f"{name}_axi_rbeat")
            r_fire = a.rvalid & a.rready
            for k, part in enumerate(parts):
                part.next <<= pyrtl.select(r_fire & (rbeat == k), a.rdata, part)
            complete = a.rvalid & (rbeat == beats - 1)
            rbeat.next <<= pyrtl.select(r_fire, pyrtl.select(complete, Const(0, rbeat.bitwidth),
                                                             (rbeat + 1)[:rbeat.bitwidth]), rbeat)
            assembled = pyrtl.concat_list(parts + [a.rdata])
        a.rready <<= vectors.enq_ready
        vectors.enq_valid <<= complete & vectors.enq_ready
        vectors.enq_data <<= from_slots(assembled)
        self.rdata_valid = vectors.deq_valid
        self.rdata = vectors.deq_data
        vectors.deq_ready <<= self.rdata_ready

        # ------------------------------------------------------------------ status
        bad = (b_done & (a.bresp != 0)) | (a.rvalid & a.rready & (a.rresp != 0))
        bus_error = Register(1, f"{name}_axi_bus_error")
        bus_error.next <<= bus_error | bad
        self.bus_error = bus_error
        self.idle = ~rq.deq_valid & ~active & (reads_out == 0) & (writes_out == 0) & ~wfull & \
            ~vectors.deq_valid
        name_ports(self, f"{name}_core")

    def attach(self, port, offset: WireVector, cache: WireVector) -> None:
        """Connect the core's DRAM port and the configuration registers."""
        connect_port(port, self)
        self.offset <<= offset
        self.cache <<= cache
