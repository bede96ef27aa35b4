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
- weights: a weight push waits while vectors in flight still use the bank it would overwrite
  (``SystolicArray.push_ok_next``; with double buffering this only happens when a new tile
  follows within n cycles of the tile before the previous one).

Ports (``name_`` prefix): ``enq_valid``/``enq_data``/``enq_ready`` (instruction queue);
outputs ``entries`` = [(valid, record)] of every instruction still to touch local memory
(for the dispatcher's range checks), ``idle``, ``issue`` (a micro-op issued), ``stall``
(work waiting), ``uop_matmul`` (a MatMul vector entered the array), ``array_busy``,
``acc_busy`` and ``port_a_valid``/``port_a_ready`` (activity of the array, the accumulators
and local port A, for the sampler). All outputs are 1 bit except ``entries``.
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from ..arch import Architecture
from .accumulator import Accumulator
from .decoder import A2L, L2A, LUT, LW, MM, SIMD_CLS, compute_struct, field_widths
from .local_memory import LocalMemory
from .simd import SimdArray
from .stream import RegFifo, Struct, name_ports, named
from .systolic_array import SystolicArray


def _step(code: WireVector, bits: int) -> WireVector:
    """2^code modulo 2^bits (0 when code >= bits)."""
    amount_bits = max((bits).bit_length(), 1)
    small = code < bits
    amount = pyrtl.select(small, code.zero_extended(max(code.bitwidth, amount_bits))[:amount_bits],
                          Const(0, amount_bits))
    shifted = pyrtl.shift_left_logical(Const(1, bits + 1), amount)[:bits]
    return pyrtl.select(small, shifted, Const(0, bits))


class ComputeUnit:
    def __init__(self, arch: Architecture, local: LocalMemory, queue_depth: int = 2,
                 name: str = "cu", external: list | None = None) -> None:
        n, dt = arch.array_size, arch.dtype
        w = dt.width
        f = field_widths(arch)
        rec = compute_struct(arch)
        self.record = rec

        q = RegFifo(rec.width, queue_depth, f"{name}_queue")
        self.enq_valid, self.enq_data, self.enq_ready = q.enq_valid, q.enq_data, q.enq_ready

        # ---------------------------------------------------------------- blocks
        tag = Struct(accumulate=1, addr=f.A)
        self.array = array = SystolicArray(n, dt, tag_width=tag.width, name="array")
        self.acc = acc = Accumulator(arch.accumulator_depth, n, dt, name="acc", external=external)
        self.simd = simd = SimdArray(arch, name="simd")

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
            acc_valid, acc_addr = acc.pending
            hit = (t1_writes_acc & (t1_oaddr == addr)) | (acc_valid & (acc_addr == addr))
            for valid, stage_tag in array.stages:
                hit = hit | (valid & (tag.unpack(stage_tag).addr == addr))
            return hit

        stall_port = named(needs_local & t1c[A2L], f"{name}_stall_port")
        stall_acc = named(needs_acc & writes_pending(acc_read_addr), f"{name}_stall_acc")
        stall_push = named(cls[LW] & ~array.push_ok_next, f"{name}_stall_push")
        issue = named(act_valid & ~(stall_port | stall_acc | stall_push), f"{name}_issue")
        last = index == act.size
        finishing = issue & last

        # advance or load the next instruction (no bubble between instructions)
        load = q.deq_valid & (~act_valid | finishing)
        q.deq_ready <<= ~act_valid | finishing
        head = rec.unpack(q.deq_data)
        head_lstep = _step(head.ls, f.L)
        act_valid.next <<= load | (act_valid & ~finishing)
        act_bits.next <<= pyrtl.select(load, q.deq_data, act_bits)
        index.next <<= pyrtl.select(load, Const(0, f.size),
                                    pyrtl.select(issue, (index + 1)[:f.size], index))
        lstep.next <<= pyrtl.select(load, head_lstep, lstep)
        ostep.next <<= pyrtl.select(load, _step(head.os, f.A), ostep)
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
        local_data = local.a_rdata
        acc_data = acc.r_data
        local.a_addr <<= pyrtl.select(t1c[A2L], t1_laddr, laddr)
        local.a_write <<= t1c[A2L]
        local.a_wdata <<= acc_data
        acc.r_addr <<= acc_read_addr

        simd.valid <<= t1c[SIMD_CLS]
        simd.op <<= t1.op
        simd.left <<= t1.left
        simd.right <<= t1.right
        simd.dest <<= t1.dest
        simd.input <<= pyrtl.select(t1.read, acc_data, zero)
        if arch.lut_count:
            simd.lut_valid <<= t1c[LUT]
            simd.lut_table <<= t1.table[:simd.lut_table.bitwidth]
            simd.lut_index <<= t1_index[:simd.lut_index.bitwidth]
            simd.lut_data <<= local_data

        x = pyrtl.select(t1.zeroes, zero, local_data)
        array.in_valid <<= t1_writes_acc
        array.in_pass <<= ~t1c[MM]
        array.in_data <<= pyrtl.select(t1c[MM], x, pyrtl.select(t1c[SIMD_CLS], simd.out,
                                                                local_data))
        array.in_tag <<= tag.pack(accumulate=t1.accumulate, addr=t1_oaddr)
        array.load_valid <<= t1c[LW]
        array.load_data <<= x

        out_tag = tag.unpack(array.out_tag)
        acc.w_valid <<= array.out_valid
        acc.w_addr <<= out_tag.addr
        acc.w_accumulate <<= out_tag.accumulate
        acc.w_data <<= array.out_data

        # ---------------------------------------------------------------- status
        self.issue = issue
        self.stall = act_valid & ~issue
        self.uop_matmul = t1c[MM]
        self.entries = [(v, d) for v, d in q.entries] + [(act_valid, act_bits),
                                                         (t1_valid & t1_last, t1_bits)]
        in_flight = t1_valid | acc.busy
        for valid, _ in array.stages:
            in_flight = in_flight | valid
        self.idle = ~act_valid & ~q.deq_valid & ~in_flight
        self.array_busy = array.out_valid | t1_writes_acc
        self.acc_busy = acc.busy
        # local port A as a valid/ready pair: a read wanted (granted when it issues) or an
        # acc→local write (always granted)
        self.port_a_valid = (act_valid & needs_local) | t1c[A2L]
        self.port_a_ready = (issue & needs_local) | t1c[A2L]
        name_ports(self, name)
