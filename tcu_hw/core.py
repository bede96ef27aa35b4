"""The TCU core: blocks composed into a processor with vector-level DRAM ports.

::

    instr ─▶ [decode register] ─▶ Decoder ─▶ dispatcher ─┬─▶ ComputeUnit ── local port A
                                              │          │   (array, SIMD, accumulators)
                                              │          └─▶ DramEngine ─── local port B
                                              ▼                   │
                                      ConfigRegisters (PC,    dram0_*, dram1_* ports
                                      timeout, tracepoint)

The dispatcher sends one instruction per cycle, in program order, to the unit that runs it:
compute instructions (MatMul, LoadWeights, SIMD, local↔accumulator moves, LoadLUT) to the
compute unit, DRAM moves to the DRAM engine; NoOps, Configures and instructions with an error
condition (TCU.md §4.8, which set the sticky ``error`` flag and do nothing) retire at once.
The two units run concurrently; sequential semantics hold because an instruction is only
dispatched when its local-memory range does not conflict (overlap with at least one writer)
with any instruction still in flight in the other unit — ranges are exact for contiguous runs
and the run's hull for strided ones (a run that wraps counts as all of local memory). A
Configure of a DRAM offset or cache register waits until the DRAM engine is idle.

Ports (WireVectors on the object; inputs are driven with ``<<=``):

- ``instr_valid``, ``instr_data`` (8·instruction_bytes), ``instr_ready``: one whole
  instruction per transfer;
- ``dram0``/``dram1``: :class:`~tcu_hw.blocks.dram_engine.DramEngine` ports (``req_*``,
  ``rdata*``, ``wdata*``);
- outputs ``idle`` (nothing in flight), ``error`` (sticky), ``error_pc`` (PC of the first
  error), ``pc``, ``timeout``, ``tracepoint``, the configuration registers (``cfg``), and
  status wires for counters and the sampler (``status``);
- with ``options.sample_block_size > 0``: the sampler stream ``sample_tvalid``,
  ``sample_tdata`` (64), ``sample_tlast`` and the input ``sample_tready``.

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
from .blocks.decoder import Decoder, compute_struct, dram_struct
from .blocks.dram_engine import DramEngine
from .blocks.local_memory import LocalMemory
from .blocks.sampler import Sampler
from .blocks.stream import named
from .isa import CONFIG_VALUE_BITS, ConfigRegister


def _conflict(new, entries, struct) -> WireVector:
    """New local range vs in-flight entries: overlap and at least one of the two writes."""
    hit = Const(0, 1)
    for valid, bits in entries:
        e = struct.unpack(bits)
        overlap = (new.lo <= e.hi) & (e.lo <= new.hi)
        hit = hit | (valid & e.uses & overlap & (new.writes | e.writes))
    return new.uses & hit


class Core:
    def __init__(self, arch: Architecture, options: Options | None = None,
                 name: str = "core", external_rams: list | None = None) -> None:
        options = options or Options()
        arch.require_hardware()
        self.arch, self.options = arch, options
        lay = arch.layout
        vec = arch.array_size * arch.dtype.width

        self.instr_valid = WireVector(1, "instr_valid")
        self.instr_data = WireVector(8 * lay.instruction_bytes, "instr_data")

        self.local = local = LocalMemory(arch.local_depth, vec, name="local",
                                         external=external_rams)
        self.compute = cu = ComputeUnit(arch, local, external=external_rams)
        self.dram = de = DramEngine(arch, local)
        self.dram0, self.dram1 = de.ports
        self.cfg = cfg = ConfigRegisters(options.decoder_timeout, name="cfg")

        # decode register
        d_valid = Register(1, "dec_valid")
        d_word = Register(8 * lay.instruction_bytes, "dec_word")
        dec = Decoder(arch, d_word)
        self.decoder = dec

        compute_conflict = named(_conflict(dec.local, de.entries, dram_struct(arch)),
                                 "dec_conflict_with_dram")
        dram_conflict = named(_conflict(dec.local, cu.entries, compute_struct(arch)),
                              "dec_conflict_with_compute")
        waits_for_dram = dec.is_configure & (
            (dec.cfg_register == int(ConfigRegister.DRAM0_OFFSET)) |
            (dec.cfg_register == int(ConfigRegister.DRAM0_CACHE)) |
            (dec.cfg_register == int(ConfigRegister.DRAM1_OFFSET)) |
            (dec.cfg_register == int(ConfigRegister.DRAM1_CACHE)))

        cu.enq_valid <<= d_valid & dec.to_compute & ~compute_conflict
        cu.enq_data <<= dec.compute
        de.enq_valid <<= d_valid & dec.to_dram & ~dram_conflict
        de.enq_data <<= dec.dram
        retire = dec.drop | (dec.is_configure & (~waits_for_dram | de.idle))
        dispatch = named(d_valid & ((dec.to_compute & ~compute_conflict & cu.enq_ready) |
                                    (dec.to_dram & ~dram_conflict & de.enq_ready) | retire),
                         "dec_dispatch")
        named(dec.opcode, "dec_opcode")
        named(dec.error, "dec_error_now")
        self.instr_ready = WireVector(1, "instr_ready")
        self.instr_ready <<= ~d_valid | dispatch
        take = self.instr_valid & self.instr_ready
        d_valid.next <<= take | (d_valid & ~dispatch)
        d_word.next <<= pyrtl.select(take, self.instr_data, d_word)

        # configuration registers and program counter
        is_pc_write = dec.cfg_register == int(ConfigRegister.PROGRAM_COUNTER)
        cfg.write <<= dispatch & dec.is_configure
        cfg.register <<= dec.cfg_register
        cfg.value <<= dec.cfg_value.zero_extended(CONFIG_VALUE_BITS) \
            if dec.cfg_value.bitwidth < CONFIG_VALUE_BITS else dec.cfg_value[:CONFIG_VALUE_BITS]
        cfg.dispatched <<= dispatch & ~(dec.is_configure & is_pc_write)
        cfg.stalled <<= d_valid & ~dispatch

        # sticky error flag (§4.8) and the PC of the first error
        error = Register(1, "dec_error")
        error_pc = Register(32, "dec_error_pc")
        failing = dispatch & dec.error
        error.next <<= error | failing
        error_pc.next <<= pyrtl.select(failing & ~error, cfg.pc, error_pc)

        self.error, self.error_pc, self.pc = error, error_pc, cfg.pc
        self.timeout, self.tracepoint = cfg.timeout, cfg.tracepoint_hit
        self.idle = WireVector(1, "core_idle")
        self.idle <<= ~d_valid & cu.idle & de.idle
        self.status = SimpleNamespace(
            dispatch=dispatch, decoder_stall=d_valid & ~dispatch,
            compute_issue=cu.issue, compute_stall=cu.stall, matmul=cu.uop_matmul,
            dram_busy=de.busy, dram_stall=de.stall,
            hazard_stall=d_valid & ((dec.to_compute & compute_conflict) |
                                    (dec.to_dram & dram_conflict)),
            # valid/ready pairs for the sampler (TCU.md §6)
            pairs=[(cu.array_busy, cu.array_busy), (cu.acc_busy, cu.acc_busy),
                   (cu.issue | cu.stall, cu.issue), (self.dram1.req_valid, self.dram1.req_ready),
                   (self.dram0.req_valid, self.dram0.req_ready),
                   (de.port_b_valid, de.port_b_ready), (cu.port_a_valid, cu.port_a_ready),
                   (self.instr_valid, self.instr_ready)])

        self.sampler = None
        if options.sample_block_size:
            sampler = self.sampler = Sampler(options.sample_block_size, name="sampler")
            sampler.interval <<= cfg.sample_interval
            sampler.pc <<= cfg.pc
            sampler.pairs <<= pyrtl.concat_list([b for pair in self.status.pairs for b in pair])
            self.sample_tready = sampler.tready
            self.sample_tvalid, self.sample_tdata = sampler.tvalid, sampler.tdata
            self.sample_tlast = sampler.tlast
