"""Compute unit: MatMul, LoadWeights, SIMD, local↔accumulator moves and LoadLUT, in order.

A queue of decoded compute instructions (:func:`tcu_hw.blocks.decoder.compute_struct`)
feeds a sequencer that issues one micro-op (one vector) per cycle; consecutive
instructions follow each other without a bubble. Two units run beside the sequencer:
LoadWeights go to a :class:`~tcu_hw.blocks.weight_loader.WeightLoader` (reading local
memory port A in the cycles the sequencer does not want it or waits for the loader's tile,
else port B), so the next tile's
pushes overlap this tile's MatMuls (without the loader they take the sequencer's slot too);
acc→local moves (kinds 0xC and 0x4) go to an :class:`~tcu_hw.blocks.acc_drain.AccDrain`
(the accumulators' outside read port; local port A when the sequencer and the loader leave
it, else port B), so a layer's output goes to local memory while the next MatMuls run::

    instructions ─┬─ LoadWeights ──────▶ weight loader ── push ─▶ array weights
                  ├─ acc→local moves ──▶ accumulator drain ◀── acc read port
                  │    (token: acc writers before it)  └──▶ local port A / B writes
                  └─ the rest ─▶ [queue] ─▶ sequencer ─▶ array ─▶ accumulator writes

Every sequencer micro-op has the same shape::

    t0  issue: local port A read address / accumulator read address      (registered reads)
    t1  data:  MatMul      local → array (x)                 ─┐
               local→acc   local → array pass-through        ─┤ array: n+1 cycles,
               SIMD        acc → register                     │ pass-through keeps
               LoadLUT     local → lookup table               │ the value exact
               (LoadWeights local → array weight push, without the loader)
    t2         SIMD        register → ALU → array pass-through ─┘
    t1+n+1     array out → accumulator write / accumulate (in issue order; a SIMD's a cycle
               later, as it entered the array a cycle later)

Router: local port A is read at t0 (the sequencer, else the loader) or written by the
drain; the array input takes the local data at t1, or the SIMD result at t2, or the local
data as pass-through at t1; the accumulator write port always takes the array output.
Because every accumulator write goes through the same pipeline, writes stay in program
order. The accumulators' outside read port serves the drain first, then a SIMD read.

Weight tiles switch explicitly: the first MatMul after LoadWeights carries ``switch`` on
its first vector. With the loader, that MatMul waits until the loader has pushed every
LoadWeights before it (``token``), and a LoadWeights waits until every switch before it has
happened (``epoch``), see :mod:`tcu_hw.blocks.weight_loader`. The drain carries the count
of accumulator writers (MatMuls, local→acc moves, SIMDs that write) given to the sequencer
before each move and reads once they have all issued. Between the three units and local
memory the sender (the core's dispatcher) keeps order: it holds a LoadWeights while it
overlaps a move in the drain (``drain_entries``) and a move while it overlaps a read in
flight in the sequencer or the loader (``sequencer_entries``, ``loader_entries``), as it
does for the DRAM engine.

Hazards (the sequencer stalls the micro-op at t0):

- accumulator read-after-write: an accumulator read (SIMD with read) waits while a write to
  the same address is in the array pipeline, at t1 or at t2 (the array carries the address
  in its stage tags), and while the drain claims the read port (``acc_claim``: it has a
  word to read and no older writer left, held or not);
- accumulator write-after-read: a micro-op that writes an address a move in the drain
  (with no older writer left) has still to read waits;
- array entry: a MatMul or local→acc micro-op cannot issue right after a SIMD that writes
  the accumulators (that SIMD's result enters the array from t2 in the cycle the new
  micro-op would enter from t1): one bubble where a SIMD run meets a MatMul;
- chaining: a local read waits while ``local_wait`` says an earlier instruction in another
  unit (a DRAM→local move) has still to write its address, or while the drain has still to
  write it;
- weights: a switching MatMul waits for the loader (``token``); without the loader, a
  weight push waits while the tile in use is only in the array's staging chain
  (``SystolicArray.push_ok_next``).
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..arch import COMPUTE_QUEUE_DEPTH
from ..isa import Layout
from ..numeric import DataType
from . import lanes
from .acc_drain import AccDrain
from .accumulator import Accumulator
from .decoder import (A2L, L2A, LUT, LW, MM, SIMD_CLS, TOKEN_BITS, ActiveInstruction,
                      compute_struct, pending, stride_step)
from .simd import SimdArray
from .stream import SINK, RamPort, RegFifo, Stream, Struct, connect, named
from .systolic_array import SystolicArray
from .weight_loader import WeightLoader


#: record fields the t1 stage keeps
T1_FIELDS = ("cls", "zeroes", "accumulate", "read", "write", "op", "left", "right", "dest",
             "table", "switch")


class ComputeUnit:
    """The compute sequencer with the systolic array, the accumulators and the SIMD array.

    Args:
        layout: the instruction :class:`~tcu_hw.isa.Layout` (array size, accumulator depth,
            SIMD registers, lookup tables and the record widths).
        dt: the fixed-point or integer data type (W bits per lane in local memory; an
            integer type's accumulators, array sums and SIMD lanes are its accumulator
            type's, and a move to local memory saturates them to W bits).
        queue_depth: decoded instructions queued ahead of the active one.
        name: prefix of the wires and registers (the array, accumulators and SIMD array are
            ``array``, ``acc`` and ``simd``; the weight loader ``wl``, the drain ``drain``).
        external: build the accumulator RAM as ports to Verilog RAM modules.
        weight_loader: run LoadWeights in a :class:`~tcu_hw.blocks.weight_loader.WeightLoader`
            reading local memory port A when the sequencer does not want it (or waits for the
            loader's tile), else port B (``weights_local``); False: through the sequencer.

    Ports:
        instructions: :class:`~tcu_hw.blocks.stream.Stream` sink of
            :func:`~tcu_hw.blocks.decoder.compute_struct` records (no LoadWeights that
            overlaps an acc→local move in flight, no acc→local move that overlaps a read in
            flight in the sequencer or the loader).
        local: :class:`~tcu_hw.blocks.stream.RamPort` (user side) to local memory port A.
        drain_local: :class:`~tcu_hw.blocks.stream.SharedWrite` (client side) to local
            memory port B, the drain's writes when port A is busy.
        weights_local: :class:`~tcu_hw.blocks.stream.SharedRead` (client side) to local
            memory port B, the loader's reads when port A is busy (None without the
            loader; the loader reads port A in the cycles the sequencer does not want it).
        entries, sequencer_entries, loader_entries, drain_entries: lists of ``valid`` (1)
            / ``record`` (packed, with its ``struct``) outputs: every instruction still to
            touch local memory (for the dispatcher's range checks), and those of the
            sequencer, the loader (``[]`` without it) and the drain.
        local_writes: list of ``valid`` (1) / ``lo`` / ``hi`` (L bits) outputs: the
            local-memory words the drain has still to write (the active move's from its
            next address on), for reads chained behind them.
        read_addr: output (L), the local address the next micro-op reads (when it reads).
        local_wait: input (1), that read must wait: an earlier instruction has still to
            write the address (driven by :meth:`wait_for`, as is the loader's).
        readers: list of the local readers that chain (the sequencer, then the loader):
            ``addr`` (L) and ``wants`` (1: a read waits to issue) outputs, ``wait`` (1)
            input (that read must wait), for
            :meth:`~tcu_hw.blocks.dram_engine.DramEngine.chain`.
        idle: output (1), nothing queued or in flight.
        issue: output (1), a micro-op issued this cycle.
        stall: output (1), work waiting.
        chain_stall: output (1), waiting only for a chained local read (``local_wait``).
        weight_wait: output (1), waiting only for weights: a switching MatMul for the
            loader's pushes (without the loader: a push while the tile in use is only in the
            array's staging chain).
        uop_matmul: output (1), a MatMul vector entered the array.
        weight_push: output (1), a weight vector was pushed into the array.
        array_busy, acc_busy: outputs (1), activity of the array and the accumulators.
        port_a_valid, port_a_ready: outputs (1), status (not a handshake): local port A
            wanted / granted, the pair the sampler records.

    Latency: a queued instruction issues its first micro-op one cycle after it enters; a
    micro-op's accumulator write lands n + 4 cycles after it issues (a SIMD's n + 5); an
    acc→local move reads its first vector two cycles after it enters (once its writers have
    issued and landed) and writes it to local memory two cycles after that at the earliest.
    """

    def __init__(self, layout: Layout, dt: DataType, queue_depth: int = COMPUTE_QUEUE_DEPTH,
                 name: str = "cu", external: list | None = None,
                 weight_loader: bool = True) -> None:
        n = layout.array_size
        w, aw = dt.width, dt.accumulator.width   # aw: accumulators, array sums, SIMD lanes
        f = layout.hardware
        if queue_depth + 2 >= 1 << TOKEN_BITS:
            raise ValueError(f"compute unit {name!r}: queue depth {queue_depth} is too deep "
                             f"for the {TOKEN_BITS}-bit weight counters (at most "
                             f"{(1 << TOKEN_BITS) - 3})")
        rec = compute_struct(layout)
        self.record = rec

        self.instructions = Stream(rec, f"{name}_instructions", SINK)
        # not full, from registers: the sequencer's issue stays off the dispatcher
        q = RegFifo(rec, queue_depth, f"{name}_queue", pipe=False)
        deq = q.deq
        self.local = local = RamPort(f.L, n * w, f"{name}_local", side="user")

        # ---------------------------------------------------------------- blocks
        tag = Struct(accumulate=1, addr=f.A, **({"shift": 1} if dt.is_integer else {}))
        self.array = array = SystolicArray(n, dt, tag_width=tag.width, name="array",
                                           explicit_switch=True)
        self.loader = wl = WeightLoader(layout, n * w, name="wl") if weight_loader else None
        self.weights_local = wl.local_b if wl else None
        self.acc = acc = Accumulator(layout.accumulator_depth, n, dt, name="acc",
                                     external=external)
        self.simd = simd = SimdArray(n, dt, layout.simd_registers_depth, layout.lut_count,
                                     layout.lut_depth, name="simd")
        self.drain = drain = AccDrain(layout, dt, name="drain")
        self.drain_local = drain.local_b

        # ---------------------------------------------------------------- active instruction
        active = ActiveInstruction(rec, deq, f, name)
        act_valid, act_bits, act = active.valid, active.bits, active.fields
        index, laddr = active.index, active.laddr
        oaddr = Register(f.A, f"{name}_oaddr")
        ostep = Register(f.A, f"{name}_ostep")

        # ---------------------------------------------------------------- input routing
        # the first MatMul after LoadWeights switches tiles once the loader has pushed the
        # LoadWeights enqueued before it (token); a LoadWeights waits for the switches
        # enqueued before it (epoch)
        inp = self.instructions
        new = rec.unpack(inp.data)
        took = inp.fire
        lw_since = Register(1, f"{name}_lw_since_matmul")
        lw_enq = Register(TOKEN_BITS, f"{name}_lw_enqueued")
        sw_enq = Register(TOKEN_BITS, f"{name}_switches_enqueued")
        new_lw, new_mm, new_a2l = new.cls == LW, new.cls == MM, new.cls == A2L
        fields = vars(new) | dict(switch=new_mm & lw_since, token=lw_enq)
        # an acc→local move goes to the drain with the count of accumulator writers given to
        # the sequencer before it (token); it reads once they have all issued
        writers_enq = Register(TOKEN_BITS, f"{name}_acc_writers_enqueued")
        writers_enq.next <<= (writers_enq + (took & _writes_acc(new)))[:TOKEN_BITS]
        drain.moves.drive(inp.valid & new_a2l, drain.record(new, writers_enq))
        to_queue = ~new_a2l
        ready = pyrtl.select(new_a2l, drain.moves.ready, q.enq.ready)
        if wl:
            wl.loads.drive(inp.valid & new_lw, zeroes=new.zeroes, laddr=new.laddr, ls=new.ls,
                           size=new.size, epoch=sw_enq, uses=new.uses, lo=new.lo, hi=new.hi)
            to_queue = to_queue & ~new_lw
            ready = pyrtl.select(new_lw, wl.loads.ready, ready)
        q.enq.drive(inp.valid & to_queue, rec.pack(**fields))
        inp.ready <<= ready
        lw_since.next <<= pyrtl.select(took & new_lw, Const(1, 1),
                                       pyrtl.select(took & new_mm, Const(0, 1), lw_since))
        lw_enq.next <<= (lw_enq + (took & new_lw))[:TOKEN_BITS]
        sw_enq.next <<= (sw_enq + (took & new_mm & lw_since))[:TOKEN_BITS]

        cls = {c: act.cls == c for c in (MM, LW, SIMD_CLS, L2A, LUT)}
        if wl:
            cls[LW] = Const(0, 1)                       # LoadWeights never reach the sequencer
        needs_local = (cls[MM] & ~act.zeroes) | (cls[LW] & ~act.zeroes) | cls[L2A] | cls[LUT]
        needs_acc = cls[SIMD_CLS] & act.read
        writes_acc = _writes_acc(act)
        acc_write_addr = pyrtl.select(cls[SIMD_CLS], act.oaddr, oaddr)

        # ---------------------------------------------------------------- t1 stage
        t1_valid = Register(1, f"{name}_t1_valid")
        t1_bits = Register(rec.width, f"{name}_t1")
        t1 = rec.unpack(t1_bits)
        t1_oaddr = Register(f.A, f"{name}_t1_oaddr")
        t1_index = Register(f.size, f"{name}_t1_index")
        t1c = {c: t1_valid & (t1.cls == c) for c in (MM, LW, SIMD_CLS, L2A, LUT)}
        if wl:
            t1c[LW] = Const(0, 1)
        t1_writes_acc = t1c[MM] | (t1c[SIMD_CLS] & t1.write) | t1c[L2A]
        t1_enters = t1c[MM] | t1c[L2A]                 # enters the array from t1

        # ---------------------------------------------------------------- t2 stage (SIMD)
        # a SIMD micro-op's accumulator data is registered and the ALU runs at t2, so no path
        # holds both a RAM read and the ALU; its result enters the array from t2
        t2_valid = Register(1, f"{name}_t2_valid")
        t2 = SimpleNamespace(**{k: Register(getattr(t1, k).bitwidth, f"{name}_t2_{k}")
                                for k in ("op", "left", "right", "dest", "write",
                                          "accumulate")})
        t2_oaddr = Register(f.A, f"{name}_t2_oaddr")
        t2_input = Register(n * aw, f"{name}_t2_input")
        t2_enters = t2_valid & t2.write

        # ---------------------------------------------------------------- hazards at t0
        def writes_pending(addr: WireVector) -> WireVector:
            hit = (t1_writes_acc & (t1_oaddr == addr)) | (t2_enters & (t2_oaddr == addr)) | \
                (acc.pending.valid & (acc.pending.addr == addr))
            for stage in array.stages:
                hit = hit | (stage.valid & (tag.unpack(stage.tag).addr == addr))
            return hit

        self.local_wait = WireVector(1, f"{name}_local_wait")
        drain.acc_hold <<= writes_pending(drain.acc_addr)
        stall_chain = named(needs_local & (self.local_wait |
                                           pending(laddr, drain.local_writes)),
                            f"{name}_stall_chain")
        # a read waits for writes in flight and while the drain claims the read port; a
        # write waits while the drain has still to read the address
        stall_acc = named((needs_acc & (writes_pending(act.raddr) | drain.acc_claim)) |
                          (writes_acc & pending(acc_write_addr, drain.acc_reads)),
                          f"{name}_stall_acc")
        # a vector that enters the array from t1 cannot follow a SIMD result that enters it
        # from t2 in the next cycle
        stall_array = named((cls[MM] | cls[L2A]) & t1c[SIMD_CLS] & t1.write,
                            f"{name}_stall_array")
        if wl:
            stall_push = named(cls[MM] & act.switch & (index == 0) &
                               (wl.done_next != act.token), f"{name}_stall_push")
        else:
            stall_push = named(cls[LW] & ~array.push_ok_next, f"{name}_stall_push")
        issue = named(act_valid & ~(stall_acc | stall_push | stall_chain | stall_array),
                      f"{name}_issue")

        # advance or load the next instruction (no bubble between instructions); LoadWeights
        # read top-down
        load, finishing = active.advance(issue, down=cls[LW])
        head = deq.payload
        ostep.next <<= pyrtl.select(load, stride_step(head.os, f.A), ostep)
        oaddr.next <<= pyrtl.select(load, head.oaddr,
                                    pyrtl.select(issue, (oaddr + ostep)[:f.A], oaddr))
        writers_done = Register(TOKEN_BITS, f"{name}_acc_writers_issued")
        writers_done.next <<= (writers_done + (finishing & writes_acc))[:TOKEN_BITS]
        drain.writers_done <<= writers_done

        t1_valid.next <<= issue
        # t1 keeps only what the router and the SIMD stage read (the other fields register
        # as constant zero, which synthesis removes)
        t1_fields = T1_FIELDS + (("shift",) if dt.is_integer else ())
        t1_bits.next <<= rec.pack(**{k: getattr(act, k) for k in t1_fields})
        t1_oaddr.next <<= acc_write_addr
        t1_index.next <<= index

        def widen(v: WireVector) -> WireVector:
            """Local-memory lanes (W bits) as the array's (A bits), sign-extended."""
            return v if aw == w else lanes.join([lane.sign_extended(aw)
                                                 for lane in lanes.split(v, n)])

        # ---------------------------------------------------------------- router at t1
        zero = Const(0, n * w)
        local_data = local.rdata
        acc_data = acc.r_data
        wide_zero = zero if aw == w else Const(0, n * aw)
        addr = laddr
        # port A: the sequencer's reads, then the loader's (when the sequencer does not want
        # the port or waits for the loader's tile: so the loader's choice of port, and port
        # B's arbiter after it, do not look at this cycle's issue), then the drain's writes
        taken = issue & needs_local
        if wl:
            wl.local_a.grant <<= wl.local_a.want & ~(act_valid & needs_local & ~stall_push)
            wl.local_a.rdata <<= local.rdata
            addr = pyrtl.select(wl.local_a.grant, wl.local_a.addr, addr)
            taken = taken | wl.local_a.want
        drain.local_a.grant <<= drain.local_a.want & ~taken
        local.addr <<= pyrtl.select(drain.local_a.grant, drain.local_a.addr, addr)
        local.write <<= drain.local_a.grant
        local.wdata <<= drain.local_a.wdata
        acc.r_addr <<= pyrtl.select(drain.acc_read, drain.acc_addr, act.raddr)
        drain.acc_data <<= acc_data

        t2_valid.next <<= t1c[SIMD_CLS]
        for k, reg in vars(t2).items():
            reg.next <<= getattr(t1, k)
        t2_oaddr.next <<= t1_oaddr
        t2_input.next <<= pyrtl.select(t1.read, acc_data, wide_zero)
        simd.command.drive(t2_valid, op=t2.op, left=t2.left, right=t2.right, dest=t2.dest,
                           input=t2_input)
        if layout.lut_count:
            simd.lut.drive(t1c[LUT], table=t1.table, index=t1_index, data=local_data)

        x = pyrtl.select(t1.zeroes, zero, local_data)
        switching = named(t1c[MM] & t1.switch & (t1_index == 0), f"{name}_tile_switch")
        shift = {"shift": ~t2_enters & t1.shift} if dt.is_integer else {}
        array.input.drive(t1_enters | t2_enters, passthrough=~t1c[MM],
                          data=pyrtl.select(t1c[MM], widen(x), pyrtl.select(
                              t2_enters, simd.out, widen(local_data))),
                          tag=tag.pack(accumulate=pyrtl.select(t2_enters, t2.accumulate,
                                                               t1.accumulate),
                                       addr=pyrtl.select(t2_enters, t2_oaddr, t1_oaddr),
                                       **shift),
                          switch=switching)
        if wl:
            # the next tile's first read waits for the switching vector to enter (t1), so
            # the loader never pushes beside a switching vector and its readiness does not
            # look at this cycle's issue
            connect(wl.push, array.weights)
            switched = Register(TOKEN_BITS, f"{name}_switched")
            switch_issue = issue & cls[MM] & act.switch & (index == 0)
            switched.next <<= (switched + switch_issue)[:TOKEN_BITS]
            wl.push_ok_next <<= array.push_ok_next
            wl.switched_next <<= switched
        else:
            array.weights.drive(t1c[LW], data=x)

        out_tag = tag.unpack(array.output.payload.tag)
        acc.write.drive(array.output.valid, addr=out_tag.addr, accumulate=out_tag.accumulate,
                        data=array.output.payload.data,
                        **({"shift": out_tag.shift} if dt.is_integer else {}))

        # ---------------------------------------------------------------- status
        self.sequencer_entries = [SimpleNamespace(valid=e.valid, record=e.record, struct=rec)
                                  for e in q.entries] + [
            SimpleNamespace(valid=named(v, f"{name}_{stage}_entry_valid"),
                            record=named(d, f"{name}_{stage}_entry_record"), struct=rec)
            for stage, v, d in (("act", act_valid, act_bits),)]
        self.loader_entries = wl.entries if wl else []
        self.drain_entries = drain.entries
        self.entries = self.sequencer_entries + self.loader_entries + self.drain_entries
        self.local_writes = drain.local_writes
        self.read_addr = named(laddr, f"{name}_read_addr")
        self.readers = [SimpleNamespace(addr=self.read_addr, wait=self.local_wait,
                                        wants=named(act_valid & needs_local,
                                                    f"{name}_wants_local"))]
        if wl:
            self.readers.append(SimpleNamespace(addr=wl.read_addr, wait=wl.local_wait,
                                                wants=wl.wants_local))
        in_flight = t1_valid | t2_valid | acc.busy | ~drain.idle
        for stage in array.stages:
            in_flight = in_flight | stage.valid
        if wl:
            in_flight = in_flight | ~wl.idle
        self.idle = named(~act_valid & ~deq.valid & ~in_flight, f"{name}_idle")
        self.issue = issue
        self.stall = named(act_valid & ~issue, f"{name}_stall")
        self.chain_stall = named(act_valid & stall_chain & ~(stall_acc | stall_push |
                                                             stall_array),
                                 f"{name}_chain_stall")
        self.weight_wait = named(act_valid & stall_push & ~(stall_acc | stall_chain |
                                                            stall_array),
                                 f"{name}_weight_wait")
        self.uop_matmul = named(t1c[MM], f"{name}_uop_matmul")
        self.weight_push = named(array.weights.valid, f"{name}_weight_push")
        self.array_busy = named(array.output.valid | array.input.valid, f"{name}_array_busy")
        self.acc_busy = named(acc.busy, f"{name}_acc_busy")
        # local port A as a valid/ready pair: a read wanted (granted when it issues), a read
        # of the loader or a write of the drain (granted)
        others = drain.local_a.grant | (wl.local_a.grant if wl else Const(0, 1))
        self.port_a_valid = named((act_valid & needs_local) | others, f"{name}_port_a_valid")
        self.port_a_ready = named((issue & needs_local) | others, f"{name}_port_a_ready")

    def wait_for(self, ranges) -> None:
        """Chain local reads behind ``ranges`` (``valid``/``lo``/``hi`` records of local words
        an earlier instruction has still to write); ``[]`` when nothing is chained. Call once,
        or instead let the DRAM engine drive the waits
        (:meth:`~tcu_hw.blocks.dram_engine.DramEngine.chain` with :attr:`readers`). (The
        loader's reads wait behind the same ranges.)"""
        for reader in self.readers:
            reader.wait <<= pending(reader.addr, ranges)

    @classmethod
    def from_arch(cls, arch, queue_depth: int = COMPUTE_QUEUE_DEPTH, name: str = "cu",
                  external: list | None = None, weight_loader: bool = True) -> "ComputeUnit":
        """The compute unit of an :class:`~tcu_hw.arch.Architecture`."""
        return cls(arch.layout, arch.dtype, queue_depth, name, external, weight_loader)


def _writes_acc(e) -> WireVector:
    """1 when the compute record ``e`` writes the accumulators: a MatMul, a local→acc move
    or a SIMD with ``write``."""
    return (e.cls == MM) | (e.cls == L2A) | ((e.cls == SIMD_CLS) & e.write)
