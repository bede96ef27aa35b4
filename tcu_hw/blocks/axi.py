"""AXI4 master for one DRAM port: vector transfers as INCR bursts (TCU.md §6).

The core side is a :class:`~tcu_hw.blocks.stream.DramPort` (memory side): requests
(``write``, ``addr`` = vector address, ``len`` = vectors − 1) and in-order read and write
data, one vector per transfer. This block turns each transfer into bursts on the AXI4
channels::

    req ─▶ [queue] ─▶ burst generator ─┬─▶ AR ────────────────────────────▶ slave
                                       └─▶ AW ─────────────────────────────▶
                                           └─▶ [burst lengths] ─┐
    wdata ─▶ vector → beats ────────────────────────────────────┴─▶ W (WLAST)
    rdata ◀─ [vectors] ◀─ beats → vector ◀──────────────────────────── R
                                                        B ─▶ write bursts done

- Byte address = (offset << :data:`~tcu_hw.isa.DRAM_OFFSET_SHIFT`) + vector address × vector
  bytes (mod 2^32), where the offset and AxCACHE come from the configuration registers. A
  vector is ``lanes`` slots of ``slot_bits`` (a lane is zero-extended to its slot on write,
  its low ``lane_bits`` taken on read) and spans ``vector bits / data width`` beats; widths
  that do not divide the vector are refused.
- Bursts are at most ``max_burst`` (≤ 256) beats and never cross a 4 KiB boundary; AxSIZE =
  log2(data bytes), AxBURST = INCR, AxID = 0, WSTRB all ones, AxLOCK/AxPROT/AxQOS = 0.
- Up to ``max_outstanding`` read bursts are in flight, and up to ``writes_ahead`` write
  bursts presented whose data is not yet sent. Requests are served in order (the next one
  starts in the cycle the last burst of the one before is taken, so one-vector requests go
  out one a cycle), and the
  direction only changes when the other direction is complete (all read data in before a
  write burst is issued, all write responses in before a read burst), so a read after a write
  to the same address sees the new data and a write never overtakes an earlier read.
- No VALID waits for a READY, and none depends on one combinationally (AXI4 A3.3.1): a write
  burst's length is queued for the W channel when its AW is first presented, so W data flows
  whether or not the slave has taken the AW (a slave may wait for WVALID before AWREADY, or
  for AWVALID before WREADY).
- BRESP/RRESP other than OKAY raise the sticky ``bus_error`` output.
- ``slave_wait`` is high in a cycle where the master waits on its slave and nothing moves: a
  VALID is offered without READY, or read data or a write response is owed (a read burst
  accepted and not complete while the master is ready for data; a write burst whose AW and
  last W beat are both taken and whose B has not come), with no handshake on any channel and
  no R beat held back by the master. Counted against the timeout register it tells a slave
  that stopped answering from a long transfer (:meth:`tcu_hw.blocks.config_registers.ConfigRegisters.watch`).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import DRAM_OFFSET_SHIFT, clog2
from .lanes import join, split
from .stream import (SINK, SOURCE, DramPort, RegFifo, RingFifo, Stream, Struct, connect, fit,
                     named)

ID_BITS = 6
BOUNDARY = 4096                 # bytes: no burst crosses a multiple of this (AXI4)
MAX_BURST = 256                 # beats of an INCR burst (AXI4)
#: requests a master holds (the one it serves, the next one)
REQUEST_DEPTH = 2
#: write bursts whose AW may be presented before their data is sent: AW runs ahead of W by
#: this much (W, one beat a cycle, is the bottleneck; bursts are up to 256 beats)
WRITES_AHEAD = 4


def axi_channels(data_width: int) -> dict[str, tuple[str, Struct]]:
    """The five channels of an AXI4 master: name → (role seen from the master, payload);
    field names are Tensil's signal names without the channel prefix (``awaddr`` = ``aw``
    ``addr``)."""
    address = Struct(id=ID_BITS, addr=32, len=8, size=3, burst=2, lock=2, cache=4, prot=3,
                     qos=4)
    return {"aw": (SOURCE, address),
            "w": (SOURCE, Struct(id=ID_BITS, data=data_width, strb=data_width // 8, last=1)),
            "b": (SINK, Struct(id=ID_BITS, resp=2)),
            "ar": (SOURCE, address),
            "r": (SINK, Struct(id=ID_BITS, data=data_width, resp=2, last=1))}


#: Tensil's port order within one AXI master.
AXI_PORT_ORDER = ("awready", "awvalid", "awid", "awaddr", "awlen", "awsize", "awburst",
                  "awlock", "awcache", "awprot", "awqos", "wready", "wvalid", "wid", "wdata",
                  "wstrb", "wlast", "bready", "bvalid", "bid", "bresp", "arready", "arvalid",
                  "arid", "araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot",
                  "arqos", "rready", "rvalid", "rid", "rdata", "rresp", "rlast")


def axi_signal(signal: str) -> tuple[str, str]:
    """``"awaddr"`` → (``"aw"``, ``"addr"``): the channel and the member of a signal name."""
    channel = signal[:2] if signal[:2] in ("aw", "ar") else signal[0]
    return channel, signal[len(channel):]


def _is_input(signal: str) -> bool:
    channel, member = axi_signal(signal)
    role = axi_channels(8)[channel][0]
    return (member == "ready") == (role == SOURCE)


#: The signals a master takes as inputs (the slave drives them).
AXI_INPUTS = tuple(s for s in AXI_PORT_ORDER if _is_input(s))


def axi_width(signal: str, data_width: int) -> int:
    """Bits of one AXI signal for a ``data_width``-bit bus."""
    channel, member = axi_signal(signal)
    if member in ("valid", "ready"):
        return 1
    return axi_channels(data_width)[channel][1].widths[member]


class AxiMaster:
    """An AXI4 master that moves vectors between a core's DRAM port and an AXI4 slave.

    Args:
        addr_bits: bits of a vector address on the core side (``req.addr``).
        len_bits: bits of a transfer's vector count − 1 (``req.len``).
        lanes: scalars per vector.
        lane_bits: bits of one scalar on the core side.
        data_width: AXI data bits (8 · a power of two; divides ``lanes · slot_bits``).
        slot_bits: bits a scalar occupies in DRAM (≥ ``lane_bits``; default ``lane_bits``).
        max_burst: beats per burst, 1..256.
        max_outstanding: read bursts in flight.
        writes_ahead: write bursts presented on AW whose W beats are not all sent (each
            holds its length for WLAST).
        name: prefix of the wires (``<name>_<port>_*``) and registers (``<name>_axi_*``).

    Ports:
        core: :class:`~tcu_hw.blocks.stream.DramPort` (memory side) to the core.
        offset: input (32; the low 16 bits used), the DRAM offset register, taken when a
            request starts.
        cache: input (4), AxCACHE, taken when a request starts.
        aw, w, ar: :class:`~tcu_hw.blocks.stream.Stream` sources (payloads in
            :func:`axi_channels`; :meth:`signals` gives every wire by Tensil's name).
        b, r: :class:`~tcu_hw.blocks.stream.Stream` sinks.
        idle: output (1), nothing queued, in flight or buffered.
        bus_error: output (1), sticky: a response other than OKAY.
        slave_wait: output (1), this cycle the master waits on the slave and nothing moves.

    ``beats_per_vector`` is a Python int. Latency: a request reaches AR/AW two cycles after
    it is accepted; a read vector's last beat on R reaches ``rdata`` one cycle later. A write
    vector is sent from ``core.wdata`` as it is offered (its first beat in the same cycle,
    once its burst's AW is presented; W never waits for AWREADY) and taken (``wdata.ready``)
    with its last beat, so the core must hold it until then: the master keeps no copy.
    """

    def __init__(self, addr_bits: int, len_bits: int, lanes: int, lane_bits: int,
                 data_width: int, slot_bits: int | None = None, max_burst: int = MAX_BURST,
                 max_outstanding: int = 16, writes_ahead: int = WRITES_AHEAD,
                 name: str = "dram0") -> None:
        n, w = lanes, lane_bits
        slot = slot_bits or lane_bits
        dw = data_width
        vbits = n * slot
        if dw < 8 or dw & (dw - 1) or vbits % dw or slot < w:
            raise ValueError(f"AXI master {name!r}: data width {dw} must be 8 · a power of two "
                             f"dividing a vector of {n} × {slot} bits (slots ≥ {w} bits)")
        if not 1 <= max_burst <= MAX_BURST or max_outstanding < 1 or writes_ahead < 1:
            raise ValueError(f"AXI master {name!r}: max_burst must be 1..{MAX_BURST}, "
                             f"max_outstanding and writes_ahead at least 1")
        beats = vbits // dw                                  # beats per vector (>= 1)
        beat_bytes, vector_bytes = dw // 8, vbits // 8
        self.beats_per_vector = beats

        # ------------------------------------------------------------------ ports
        for ch, (role, payload) in axi_channels(dw).items():
            setattr(self, ch, Stream(payload, f"{name}_{ch}", role))
        self.core = DramPort(addr_bits, len_bits, n * w, f"{name}_core", side="memory")
        self.offset = WireVector(32, f"{name}_offset")
        self.cache = WireVector(4, f"{name}_cache")
        aw, wch, b, ar, r = self.aw, self.w, self.b, self.ar, self.r

        # ------------------------------------------------------------------ requests
        # ready from registers: the AR/AW handshake stays off the core's request generator
        rq = RingFifo(self.core.req.fields, REQUEST_DEPTH, f"{name}_axi_requests", pipe=False)
        connect(self.core.req.flipped(), rq.enq)
        head = rq.deq.payload
        # write requests queued (for writes_done; the ring's entries are not visible)
        queued_writes = Register(clog2(REQUEST_DEPTH + 1), f"{name}_axi_queued_writes")
        queued_writes.next <<= (queued_writes + (rq.enq.fire & rq.enq.payload.write) -
                                (rq.deq.fire & head.write))[:queued_writes.bitwidth]

        beat_count_bits = max(len_bits + clog2(beats) + 1, 14)      # >= beats in 4 KiB
        active = Register(1, f"{name}_axi_active")
        writing = Register(1, f"{name}_axi_writing")
        addr = Register(32, f"{name}_axi_addr")
        left = Register(beat_count_bits, f"{name}_axi_left")             # beats to request
        start = rq.deq.fire
        # AxCACHE is taken with the request, like the offset: a Configure of the cache
        # register while a request is still in flight does not change its bursts
        cache = Register(4, f"{name}_axi_cache_latched")
        cache.next <<= pyrtl.select(start, self.cache, cache)
        shift = DRAM_OFFSET_SHIFT
        base = (pyrtl.concat(self.offset[:32 - shift], Const(0, shift)) +
                (head.addr * Const(vector_bytes)))[:32]
        total = fit((head.len.zero_extended(beat_count_bits) + 1) * Const(beats),
                    beat_count_bits)

        # burst length: min(left, max_burst, beats to the next 4 KiB boundary)
        boundary_bits = clog2(BOUNDARY)
        to_boundary = (Const(BOUNDARY, boundary_bits + 1) -
                       addr[:boundary_bits].zero_extended(boundary_bits + 1))[:boundary_bits + 1]
        room = fit(to_boundary[clog2(beat_bytes):], beat_count_bits) if beat_bytes > 1 \
            else fit(to_boundary, beat_count_bits)
        cap = pyrtl.select(room < max_burst, room, Const(max_burst, beat_count_bits))
        burst = pyrtl.select(left < cap, left, cap)
        burst_len = (burst - 1)[:8]

        # outstanding bursts per direction
        out_bits = clog2(max_outstanding + 1)
        reads_out = Register(out_bits + 1, f"{name}_axi_reads_out")
        writes_out = Register(16, f"{name}_axi_writes_out")
        r_done = r.fire & r.payload.last
        b_done = b.fire

        # a write burst's length goes to the W side when its AW is first presented, so W
        # never waits for AWREADY; "full" is a register, so AWVALID never waits on WREADY
        wlens = RegFifo(8, writes_ahead, f"{name}_axi_wlens")
        aw_logged = Register(1, f"{name}_axi_aw_logged")       # this burst's length is queued
        can_read = active & ~writing & (writes_out == 0) & (reads_out < max_outstanding)
        may_write = active & writing & (reads_out == 0)
        log = may_write & ~aw_logged & ~wlens.full
        can_write = may_write & (aw_logged | ~wlens.full)
        size_code = clog2(beat_bytes)
        for ch, valid in ((ar, can_read), (aw, can_write)):
            ch.drive(valid, id=0, addr=addr, len=burst_len, size=size_code, burst=1, lock=0,
                     cache=cache, prot=0, qos=0)                         # INCR
        fired = ar.fire | aw.fire
        wlens.enq.drive(log, data=burst_len)
        aw_logged.next <<= (aw_logged | log) & ~aw.fire
        last_burst = fired & (burst == left)
        # the next request starts in the cycle the last burst of this one is taken, so
        # one-burst requests (strided moves) go out one a cycle
        rq.deq.ready <<= ~active | last_burst
        active.next <<= start | (active & ~last_burst)
        writing.next <<= pyrtl.select(start, head.write, writing)
        step = fit(burst, 32 - clog2(beat_bytes))
        addr.next <<= pyrtl.select(start, base, pyrtl.select(
            fired, (addr + pyrtl.concat(step, Const(0, clog2(beat_bytes)))
                    if beat_bytes > 1 else addr + step)[:32], addr))
        left.next <<= pyrtl.select(start, total, pyrtl.select(fired, (left - burst)[:beat_count_bits],
                                                              left))
        reads_out.next <<= (reads_out + ar.fire - r_done)[:out_bits + 1]
        writes_out.next <<= (writes_out + aw.fire - b_done)[:16]
        b.ready <<= Const(1, 1)

        # ------------------------------------------------------------------ write data
        def to_slots(vector: WireVector) -> WireVector:
            if slot == w:
                return vector
            return join([lane.zero_extended(slot) for lane in split(vector, n)])

        def from_slots(vector: WireVector) -> WireVector:
            if slot == w:
                return vector
            return join([lane[:w] for lane in split(vector, n)])

        # W beats are cut from the core's write vector where it waits (the core holds it
        # until the last beat is sent: wdata.ready); nothing is copied here
        wdata = self.core.wdata
        wbeat = Register(max(clog2(beats), 1), f"{name}_axi_wbeat")
        wcount = Register(8, f"{name}_axi_wcount")                    # beat within the burst
        wvec = to_slots(wdata.payload.data)
        beats_out = [wvec[k * dw:(k + 1) * dw] for k in range(beats)]
        wlast = wcount == wlens.deq.payload.data
        wch.drive(wdata.valid & wlens.deq.valid, id=0, strb=(1 << (dw // 8)) - 1, last=wlast,
                  data=pyrtl.mux(wbeat, *beats_out, default=Const(0, dw)) if beats > 1
                  else beats_out[0])
        w_fire = wch.fire
        vector_sent = w_fire & (wbeat == beats - 1)
        wlens.deq.ready <<= w_fire & wlast
        wcount.next <<= pyrtl.select(w_fire, pyrtl.select(wlast, Const(0, 8),
                                                          (wcount + 1)[:8]), wcount)
        wbeat.next <<= pyrtl.select(w_fire, pyrtl.select(vector_sent, Const(0, wbeat.bitwidth),
                                                         (wbeat + 1)[:wbeat.bitwidth]), wbeat)
        wdata.ready <<= vector_sent

        # ------------------------------------------------------------------ read data
        # READY from registers: the core's port B arbitration stays off the AXI port
        vectors = RingFifo(n * w, 2, f"{name}_axi_rvectors", pipe=False)
        if beats == 1:
            assembled = r.payload.data
            complete = r.valid
        else:
            parts = [Register(dw, f"{name}_axi_rpart{k}") for k in range(beats - 1)]
            rbeat = Register(clog2(beats), f"{name}_axi_rbeat")
            for k, part in enumerate(parts):
                part.next <<= pyrtl.select(r.fire & (rbeat == k), r.payload.data, part)
            complete = r.valid & (rbeat == beats - 1)
            rbeat.next <<= pyrtl.select(r.fire, pyrtl.select(complete, Const(0, rbeat.bitwidth),
                                                             (rbeat + 1)[:rbeat.bitwidth]), rbeat)
            assembled = pyrtl.concat_list(parts + [r.payload.data])
        r.ready <<= vectors.enq.ready
        vectors.enq.drive(complete, data=from_slots(assembled))
        connect(vectors.deq, self.core.rdata.flipped())

        # ------------------------------------------------------------------ status
        bad = (b_done & (b.payload.resp != 0)) | (r.fire & (r.payload.resp != 0))
        bus_error = Register(1, f"{name}_axi_bus_error_q")
        bus_error.next <<= bus_error | bad
        self.bus_error = named(bus_error, f"{name}_bus_error")
        # bursts whose last W beat is sent and whose B has not come (B follows AW and WLAST)
        wsent = Register(writes_out.bitwidth, f"{name}_axi_wbursts_sent")
        wsent.next <<= (wsent + (w_fire & wlast) - b_done)[:writes_out.bitwidth]
        offered = ar.valid | aw.valid | wch.valid
        owed = ((reads_out != 0) & r.ready) | ((writes_out != 0) & (wsent != 0))
        moved = ar.fire | aw.fire | wch.fire | r.fire | b.fire
        self.slave_wait = named((offered | owed) & ~moved & ~(r.valid & ~r.ready),
                                f"{name}_slave_wait")
        self.idle = named(~rq.deq.valid & ~active & (reads_out == 0) & (writes_out == 0) &
                          ~wdata.valid & ~vectors.deq.valid, f"{name}_idle")
        self.core.writes_done <<= (queued_writes == 0) & ~(active & writing) & (writes_out == 0) & \
            ~wdata.valid

    @classmethod
    def from_arch(cls, arch, options, addr_bits: int, len_bits: int, name: str = "dram0",
                  max_outstanding: int = 16) -> "AxiMaster":
        """The master for a DRAM port of a core of :class:`~tcu_hw.arch.Architecture`
        ``arch`` with :class:`~tcu_hw.arch.Options` ``options`` (AXI data width)."""
        options.check_for(arch)
        return cls(addr_bits, len_bits, arch.array_size, arch.dtype.width,
                   options.axi_data_width, slot_bits=8 * arch.dtype.bytes_per_scalar,
                   max_outstanding=max_outstanding, name=name)

    def signals(self) -> dict[str, WireVector]:
        """Every AXI wire by Tensil's signal name (``awvalid``, ``awaddr`` ...), in
        :data:`AXI_PORT_ORDER`."""
        out = {}
        for sig in AXI_PORT_ORDER:
            channel, member = axi_signal(sig)
            stream = getattr(self, channel)
            out[sig] = getattr(stream, member) if member in ("valid", "ready") else \
                getattr(stream.payload, member)
        return out

