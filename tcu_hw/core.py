"""The TCU core: blocks composed into a processor with vector-level DRAM ports.

::

    instr ─▶ [skid] ─▶ Decoder ─▶ [decode register] ─▶ dispatcher ─┬─▶ ComputeUnit ── port A
                                                         │         │   (array, SIMD,
                                                         │         │    accumulators, loader
                                                         │         │    and drain ── A/B)
                                                         │         └─▶ DramEngine ── port B
                                                         ▼                  │
                                                 ConfigRegisters (PC,    dram0_*, dram1_*
                                                 timeout, tracepoint)    ports

The dispatcher sends one instruction per cycle, in program order, to the unit that runs it:
compute instructions (MatMul, LoadWeights, SIMD, local↔accumulator moves, LoadLUT) to the
compute unit, DRAM moves to the DRAM engine; NoOps, Configures and instructions with an error
condition (TCU.md §4.8, which set the sticky ``error`` flag and do nothing) retire at once.
The two units run concurrently; sequential semantics hold because an instruction that writes
local memory is only dispatched when its range does not overlap any instruction still in
flight in the other unit — ranges are exact for contiguous runs and the run's hull for
strided ones (a run that wraps counts as all of local memory). An instruction that only
reads local memory is *chained* instead: it is dispatched at once, and each of its reads
waits until the other unit's earlier writes to that address are done (``local_writes``:
what an earlier DRAM→local or acc→local move has still to write, the running move's range
from its current address on). So a MatMul streams right behind the load of its inputs, and a
store right behind the acc→local move that fills it. Every range it waits on belongs to an
older instruction (a newer writer overlapping it is held at dispatch), so nothing waits in a
circle. With ``Options(chained_hazards=False)`` every conflict waits at dispatch. Inside the
compute unit, LoadWeights run in a weight loader beside the sequencer
(``Options(weight_loader=True)``): a LoadWeights is held at dispatch while its range
overlaps an acc→local move in flight in the sequencer, and an acc→local move while it
overlaps a LoadWeights in flight in the loader; the loader's reads are chained behind DRAM
loads like the sequencer's. A Configure of a DRAM offset or cache register waits until the
DRAM engine is idle.

Ports:

- ``instructions``: :class:`~tcu_hw.blocks.stream.Stream` sink, ``data`` (8·instruction
  bytes): one whole instruction per transfer; ``ready`` comes from registers (a skid of
  two instructions in front of the decoder), so the dispatcher's checks stay off it;
- ``dram0``/``dram1``: :class:`~tcu_hw.blocks.stream.DramPort` (core side);
- outputs ``idle`` (nothing in flight), ``error`` (sticky), ``error_pc`` (PC of the first
  error), ``pc``, ``timeout``, ``tracepoint``; the configuration registers (``cfg``) and
  status wires for counters and the sampler (``status``);
- with ``options.sample_block_size > 0``: ``samples``, the sampler's stream (``data`` 64,
  ``last``); else None.

``external_rams``: build the memories as ports to Verilog RAM modules (see
:mod:`tcu_hw.blocks.ram`), appending their descriptions to this list.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from .arch import Architecture, Options
from .blocks.compute import ComputeUnit
from .blocks.config_registers import ConfigRegisters
from .blocks.decoder import A2L, LW, Decoder, compute_struct, local_conflict
from .blocks.dram_engine import DramEngine
from .blocks.local_memory import LocalMemory
from .blocks.sampler import Sampler
from .blocks.stream import SINK, RegFifo, Stream, connect, named
from .isa import ConfigRegister


def _conflict(new, entries, chained: bool) -> WireVector:
    """New local range vs in-flight entries (:func:`~tcu_hw.blocks.decoder.local_conflict`)."""
    hit = Const(0, 1)
    for entry in entries:
        hit = hit | (entry.valid & local_conflict(new, entry.struct.unpack(entry.record),
                                                  chained))
    return new.uses & hit


class Core:
    def __init__(self, arch: Architecture, options: Options | None = None,
                 name: str = "core", external_rams: list | None = None) -> None:
        options = options or Options()
        arch.require_hardware()
        self.arch, self.options = arch, options
        lay = arch.layout
        vec = arch.array_size * arch.dtype.width

        self.instructions = Stream(8 * lay.instruction_bytes, "instr", SINK)
        self.local = local = LocalMemory(arch.local_depth, vec, name="local",
                                         external=external_rams)
        loader = options.weight_loader
        self.compute = cu = ComputeUnit(lay, arch.dtype, external=external_rams,
                                        weight_loader=loader)
        self.dram = de = DramEngine(lay, vec, guest=loader, writer=True)
        connect(cu.local, local.a)
        connect(de.local, local.b)
        connect(cu.drain_local, de.writer)
        if loader:
            connect(cu.weights_local, de.guest)
        self.dram0, self.dram1 = de.ports
        self.cfg = cfg = ConfigRegisters(options.decoder_timeout, name="cfg")

        # decode stage: the skid's head is decoded before the decode register, so the
        # dispatcher's range checks and the error flags start from registers (and the skid
        # gives the instruction stream a READY from registers)
        skid = RegFifo(self.instructions.fields, 2, "instr_skid", pipe=False)
        connect(self.instructions.flipped(), skid.enq)
        dec = Decoder(lay, skid.deq.payload.data)
        self.decoder = dec
        register = dec.fields.config_register
        waits_for_dram = dec.is_configure & pyrtl.rtl_any(*(
            register == int(r) for r in (ConfigRegister.DRAM0_OFFSET, ConfigRegister.DRAM0_CACHE,
                                         ConfigRegister.DRAM1_OFFSET, ConfigRegister.DRAM1_CACHE)))
        d_valid = Register(1, "dec_valid")
        take = skid.deq.fire

        def held(value: WireVector, what: str) -> Register:
            reg = Register(value.bitwidth, f"dec_{what}")
            reg.next <<= pyrtl.select(take, value, reg)
            return reg

        d = SimpleNamespace(**{k: held(getattr(dec, k), f"{k}_q") for k in (
            "to_compute", "to_dram", "is_configure", "error", "drop", "compute", "dram")})
        d.local = SimpleNamespace(**{k: held(getattr(dec.local, k), f"local_{k}")
                                     for k in ("uses", "writes", "lo", "hi")})
        d.register = held(register, "config_register")
        d.value = held(dec.fields.config_value, "config_value")
        d.waits_for_dram = held(waits_for_dram, "waits_for_dram")

        chained = options.chained_hazards
        compute_conflict = named(_conflict(d.local, de.entries, chained),
                                 "dec_conflict_with_dram")
        # the sequencer, the loader and the drain run side by side (see ComputeUnit): a
        # drained move waits for reads in flight of its range, a loaded tile for its writes
        cls = compute_struct(lay).unpack(d.compute).cls
        inside = (cls == A2L) & _conflict(d.local, cu.sequencer_entries + cu.loader_entries,
                                          False)
        if loader:
            inside = inside | ((cls == LW) & _conflict(d.local, cu.drain_entries, False))
        compute_conflict = compute_conflict | named(inside, "dec_conflict_in_compute")
        dram_conflict = named(_conflict(d.local, cu.entries, chained),
                              "dec_conflict_with_compute")
        de.chain(cu.readers if chained else [])
        if not chained:
            cu.wait_for([])
        de.wait_for(cu.local_writes if chained else [])

        cu.instructions.drive(d_valid & d.to_compute & ~compute_conflict, d.compute)
        de.moves.drive(d_valid & d.to_dram & ~dram_conflict, d.dram)
        retire = d.drop | (d.is_configure & (~d.waits_for_dram | de.idle))
        dispatch = named(d_valid & ((d.to_compute & ~compute_conflict &
                                     cu.instructions.ready) |
                                    (d.to_dram & ~dram_conflict & de.moves.ready) | retire),
                         "dec_dispatch")
        skid.deq.ready <<= ~d_valid | dispatch
        d_valid.next <<= take | (d_valid & ~dispatch)

        # configuration registers and program counter
        is_pc_write = d.register == int(ConfigRegister.PROGRAM_COUNTER)
        cfg.write.drive(dispatch & d.is_configure, register=d.register, value=d.value)
        cfg.dispatched <<= dispatch & ~(d.is_configure & is_pc_write)
        cfg.stalled <<= d_valid & ~dispatch

        # sticky error flag (§4.8) and the PC of the first error
        error = Register(1, "dec_error")
        error_pc = Register(32, "dec_error_pc")
        failing = dispatch & d.error
        error.next <<= error | failing
        error_pc.next <<= pyrtl.select(failing & ~error, cfg.pc, error_pc)

        self.error = named(error, "core_error")
        self.error_pc = named(error_pc, "core_error_pc")
        self.pc = named(cfg.pc, "core_pc")
        self.timeout = named(cfg.timeout, "core_timeout")
        self.tracepoint = named(cfg.tracepoint_hit, "core_tracepoint")
        self.idle = named(~d_valid & ~skid.deq.valid & cu.idle & de.idle, "core_idle")
        self.status = SimpleNamespace(
            dispatch=dispatch, decoder_stall=d_valid & ~dispatch,
            compute_issue=cu.issue, compute_stall=cu.stall, chain_stall=cu.chain_stall,
            matmul=cu.uop_matmul, weight_push=cu.weight_push, weight_wait=cu.weight_wait,
            dram_busy=de.busy, dram_stall=de.stall,
            hazard_stall=d_valid & ((d.to_compute & compute_conflict) |
                                    (d.to_dram & dram_conflict)),
            # valid/ready pairs for the sampler (TCU.md §6)
            pairs=[(cu.array_busy, cu.array_busy), (cu.acc_busy, cu.acc_busy),
                   (cu.issue | cu.stall, cu.issue),
                   (self.dram1.req.valid, self.dram1.req.ready),
                   (self.dram0.req.valid, self.dram0.req.ready),
                   (de.port_b_valid, de.port_b_ready), (cu.port_a_valid, cu.port_a_ready),
                   (self.instructions.valid, self.instructions.ready)])

        self.sampler, self.samples = None, None
        if options.sample_block_size:
            sampler = self.sampler = Sampler(options.sample_block_size, name="sampler")
            sampler.interval <<= cfg.sample_interval
            sampler.pc <<= cfg.pc
            sampler.pairs <<= pyrtl.concat_list([b for pair in self.status.pairs for b in pair])
            self.samples = sampler.samples
