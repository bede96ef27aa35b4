"""Compute unit: MatMul, LoadWeights, SIMD, local↔accumulator moves and LoadLUT, in order.

A queue of decoded compute instructions (:func:`tcu_hw.blocks.decoder.compute_struct`)
feeds a sequencer that issues one micro-op (one vector) per cycle; consecutive
instructions follow each other without a bubble. Every micro-op has the same shape::

    t0  issue: local port A read address / accumulator read address      (registered reads)
    t1  data:  MatMul      local → array (x)                 ─┐
               LoadWeights local → array weight push          │ array: n cycles,
               SIMD        acc → ALU → array pass-through    ─┤ pass-through keeps
               local→acc   local → array pass-through        ─┘ the value exact
               acc→local   acc → local port A write
               LoadLUT     local → lookup table
    t1+n       array out → accumulator write / accumulate (in issue order)

Router: local port A is read at t0 or written at t1 (acc→local); the array input takes the
local data, the SIMD result or the local data as pass-through; the accumulator write port
always takes the array output. Because every accumulator write goes through the same
pipeline, writes stay in program order.

Hazards (the sequencer stalls the micro-op at t0):

- accumulator read-after-write: an accumulator read (SIMD with read, acc→local) waits while
  a write to the same address is in the array pipeline or at t1 (the array carries the
  address in its stage tags);
- local port A: a local read cannot issue while the previous micro-op writes port A;
- chaining: a local read waits while ``local_wait`` says an earlier instruction in another
  unit (a DRAM→local move) has still to write its address;
- weights: a weight push waits while vectors in flight still use the bank it would overwrite
  (``SystolicArray.push_ok_next``; with double buffering this only happens when a new tile
  follows within n cycles of the tile before the previous one).
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import Layout
from ..numeric import DataType
from .accumulator import Accumulator
from .decoder import A2L, L2A, LUT, LW, MM, SIMD_CLS, compute_struct, pending, stride_step
from .simd import SimdArray
from .stream import SINK, RamPort, RegFifo, Stream, Struct, connect, named
from .systolic_array import SystolicArray


class ComputeUnit:
    """The compute sequencer with the systolic array, the accumulators and the SIMD array.

    Args:
        layout: the instruction :class:`~tcu_hw.isa.Layout` (array size, accumulator depth,
            SIMD registers, lookup tables and the record widths).
        dt: the fixed-point data type (W bits per lane).
        queue_depth: decoded instructions queued ahead of the active one.
        name: prefix of the wires and registers (the array, accumulators and SIMD array are
            ``array``, ``acc`` and ``simd``).
        external: build the accumulator RAM as ports to Verilog RAM modules.

    Ports:
        instructions: :class:`~tcu_hw.blocks.stream.Stream` sink of
            :func:`~tcu_hw.blocks.decoder.compute_struct` records.
        local: :class:`~tcu_hw.blocks.stream.RamPort` (user side) to local memory port A.
        entries: list of ``valid`` (1) / ``record`` (packed) outputs: every instruction still
            to touch local memory (for the dispatcher's range checks).
        local_writes: list of ``valid`` (1) / ``lo`` / ``hi`` (L bits) outputs: the
            local-memory ranges acc→local moves have still to write (the active one's from
            its next address on), for reads chained behind them.
        read_addr: output (L), the local address the next micro-op reads (when it reads).
        local_wait: input (1), that read must wait: an earlier instruction has still to
            write the address (driven by :meth:`wait_for`).
        idle: output (1), nothing queued or in flight.
        issue: output (1), a micro-op issued this cycle.
        stall: output (1), work waiting.
        chain_stall: output (1), waiting only for a chained local read (``local_wait``).
        uop_matmul: output (1), a MatMul vector entered the array.
        array_busy, acc_busy: outputs (1), activity of the array and the accumulators.
        port_a_valid, port_a_ready: outputs (1), status (not a handshake): local port A
            wanted / granted, the pair the sampler records.

    Latency: a queued instruction issues its first micro-op one cycle after it enters; a
    micro-op's accumulator write lands n + 3 cycles after it issues.
    """

    def __init__(self, layout: Layout, dt: DataType, queue_depth: int = 2, name: str = "cu",
                 external: list | None = None) -> None:
        n = layout.array_size
        w = dt.width
        f = layout.hardware
        rec = compute_struct(layout)
        self.record = rec

        self.instructions = Stream(rec, f"{name}_instructions", SINK)
        q = RegFifo(rec, queue_depth, f"{name}_queue")
        connect(self.instructions.flipped(), q.enq)
        deq = q.deq
        self.local = local = RamPort(f.L, n * w, f"{name}_local", side="user")

        # ---------------------------------------------------------------- blocks
        tag = Struct(accumulate=1, addr=f.A)
        self.array = array = SystolicArray(n, dt, tag_width=tag.width, name="array")
        self.acc = acc = Accumulator(layout.accumulator_depth, n, dt, name="acc",
                                     external=external)
        self.simd = simd = SimdArray(n, dt, layout.simd_registers_depth, layout.lut_count,
                                     layout.lut_depth, name="simd")

        # ---------------------------------------------------------------- active instruction
        act_valid = Register(1, f"{name}_act_valid")
        act_bits = Register(rec.width, f"{name}_act")
        act = rec.unpack(act_bits)
        index = Register(f.size, f"{name}_index")
        laddr = Register(f.L, f"{name}_laddr")
        oaddr = Register(f.A, f"{name}_oaddr")
        lstep = Register(f.L, f"{name}_lstep")
        ostep = Register(f.A, f"{name}_ostep")

        cls = {c: act.cls == c for c in (MM, LW, SIMD_CLS, L2A, A2L, LUT)}
        needs_local = (cls[MM] & ~act.zeroes) | (cls[LW] & ~act.zeroes) | cls[L2A] | cls[LUT]
        needs_acc = (cls[SIMD_CLS] & act.read) | cls[A2L]
        acc_read_addr = pyrtl.select(cls[SIMD_CLS], act.raddr, oaddr)

        # ---------------------------------------------------------------- t1 stage
        t1_valid = Register(1, f"{name}_t1_valid")
        t1_bits = Register(rec.width, f"{name}_t1")
        t1 = rec.unpack(t1_bits)
        t1_last = Register(1, f"{name}_t1_last")
        t1_laddr = Register(f.L, f"{name}_t1_laddr")
        t1_oaddr = Register(f.A, f"{name}_t1_oaddr")
        t1_index = Register(f.size, f"{name}_t1_index")
        t1c = {c: t1_valid & (t1.cls == c) for c in (MM, LW, SIMD_CLS, L2A, A2L, LUT)}
        t1_writes_acc = t1c[MM] | (t1c[SIMD_CLS] & t1.write) | t1c[L2A]

        # ---------------------------------------------------------------- hazards at t0
        def writes_pending(addr: WireVector) -> WireVector:
            hit = (t1_writes_acc & (t1_oaddr == addr)) | \
                (acc.pending.valid & (acc.pending.addr == addr))
            for stage in array.stages:
                hit = hit | (stage.valid & (tag.unpack(stage.tag).addr == addr))
            return hit

        self.local_wait = WireVector(1, f"{name}_local_wait")
        stall_port = named(needs_local & t1c[A2L], f"{name}_stall_port")
        stall_chain = named(needs_local & self.local_wait, f"{name}_stall_chain")
        stall_acc = named(needs_acc & writes_pending(acc_read_addr), f"{name}_stall_acc")
        stall_push = named(cls[LW] & ~array.push_ok_next, f"{name}_stall_push")
        issue = named(act_valid & ~(stall_port | stall_acc | stall_push | stall_chain),
                      f"{name}_issue")
        last = index == act.size
        finishing = issue & last

        # advance or load the next instruction (no bubble between instructions)
        deq.ready <<= ~act_valid | finishing
        load = deq.fire
        head = deq.payload
        head_lstep = stride_step(head.ls, f.L)
        act_valid.next <<= load | (act_valid & ~finishing)
        act_bits.next <<= pyrtl.select(load, deq.data, act_bits)
        index.next <<= pyrtl.select(load, Const(0, f.size),
                                    pyrtl.select(issue, (index + 1)[:f.size], index))
        lstep.next <<= pyrtl.select(load, head_lstep, lstep)
        ostep.next <<= pyrtl.select(load, stride_step(head.os, f.A), ostep)
        lnext = pyrtl.select(cls[LW], (laddr - lstep)[:f.L], (laddr + lstep)[:f.L])
        laddr.next <<= pyrtl.select(load, head.laddr, pyrtl.select(issue, lnext, laddr))
        oaddr.next <<= pyrtl.select(load, head.oaddr,
                                    pyrtl.select(issue, (oaddr + ostep)[:f.A], oaddr))

        t1_valid.next <<= issue
        t1_bits.next <<= act_bits
        t1_last.next <<= last
        t1_laddr.next <<= laddr
        t1_oaddr.next <<= pyrtl.select(cls[SIMD_CLS], act.oaddr, oaddr)
        t1_index.next <<= index

        # ---------------------------------------------------------------- router at t1
        zero = Const(0, n * w)
        local_data = local.rdata
        acc_data = acc.r_data
        local.addr <<= pyrtl.select(t1c[A2L], t1_laddr, laddr)
        local.write <<= t1c[A2L]
        local.wdata <<= acc_data
        acc.r_addr <<= acc_read_addr

        simd.command.drive(t1c[SIMD_CLS], op=t1.op, left=t1.left, right=t1.right, dest=t1.dest,
                           input=pyrtl.select(t1.read, acc_data, zero))
        if layout.lut_count:
            simd.lut.drive(t1c[LUT], table=t1.table, index=t1_index, data=local_data)

        x = pyrtl.select(t1.zeroes, zero, local_data)
        array.input.drive(t1_writes_acc, passthrough=~t1c[MM],
                          data=pyrtl.select(t1c[MM], x, pyrtl.select(t1c[SIMD_CLS], simd.out,
                                                                     local_data)),
                          tag=tag.pack(accumulate=t1.accumulate, addr=t1_oaddr))
        array.weights.drive(t1c[LW], data=x)

        out_tag = tag.unpack(array.output.payload.tag)
        acc.write.drive(array.output.valid, addr=out_tag.addr, accumulate=out_tag.accumulate,
                        data=array.output.payload.data)

        # ---------------------------------------------------------------- status
        self.entries = q.entries + [
            SimpleNamespace(valid=named(v, f"{name}_{stage}_entry_valid"),
                            record=named(d, f"{name}_{stage}_entry_record"))
            for stage, v, d in (("act", act_valid, act_bits), ("t1", t1_valid & t1_last, t1_bits))]
        # local addresses acc→local moves have still to write: queued ones whole, the active
        # one from its next address on (whole if it wraps), the one at t1 this cycle
        self.read_addr = named(laddr, f"{name}_read_addr")
        self.local_writes = []
        for stage, v, bits in [(f"q{i}", e.valid, e.record) for i, e in enumerate(q.entries)] \
                + [("act", act_valid, act_bits)]:
            e = rec.unpack(bits)
            lo = pyrtl.select(e.wraps, e.lo, laddr) if stage == "act" else e.lo
            self.local_writes.append(SimpleNamespace(
                valid=named(v & e.writes, f"{name}_pending_write_{stage}_valid"),
                lo=named(lo, f"{name}_pending_write_{stage}_lo"),
                hi=named(e.hi, f"{name}_pending_write_{stage}_hi")))
        self.local_writes.append(SimpleNamespace(
            valid=named(t1c[A2L], f"{name}_pending_write_t1_valid"),
            lo=named(t1_laddr, f"{name}_pending_write_t1_lo"),
            hi=named(t1_laddr, f"{name}_pending_write_t1_hi")))
        in_flight = t1_valid | acc.busy
        for stage in array.stages:
            in_flight = in_flight | stage.valid
        self.idle = named(~act_valid & ~deq.valid & ~in_flight, f"{name}_idle")
        self.issue = issue
        self.stall = named(act_valid & ~issue, f"{name}_stall")
        self.chain_stall = named(act_valid & stall_chain & ~(stall_port | stall_acc | stall_push),
                                 f"{name}_chain_stall")
        self.uop_matmul = named(t1c[MM], f"{name}_uop_matmul")
        self.array_busy = named(array.output.valid | t1_writes_acc, f"{name}_array_busy")
        self.acc_busy = named(acc.busy, f"{name}_acc_busy")
        # local port A as a valid/ready pair: a read wanted (granted when it issues) or an
        # acc→local write (always granted)
        self.port_a_valid = named((act_valid & needs_local) | t1c[A2L], f"{name}_port_a_valid")
        self.port_a_ready = named((issue & needs_local) | t1c[A2L], f"{name}_port_a_ready")

    def wait_for(self, ranges) -> None:
        """Chain local reads behind ``ranges`` (``valid``/``lo``/``hi`` records of local words
        an earlier instruction has still to write, e.g. the DRAM engine's ``local_writes``);
        ``[]`` when nothing is chained. Call once."""
        self.local_wait <<= pending(self.read_addr, ranges)

    @classmethod
    def from_arch(cls, arch, queue_depth: int = 2, name: str = "cu",
                  external: list | None = None) -> "ComputeUnit":
        """The compute unit of an :class:`~tcu_hw.arch.Architecture`."""
        return cls(arch.layout, arch.dtype, queue_depth, name, external)
