"""The Tensil-compatible top (TCU.md §6): the core behind AXI-Stream and AXI4 ports.

::

    instruction_* (AXI-Stream) ─▶ InstructionStream ─▶ Core ─▶ AxiMaster ─▶ m_axi_dram0_*
                                                          └──▶ AxiMaster ─▶ m_axi_dram1_*
                                          Sampler (optional) ─▶ sample_*
    extra outputs: error, timeout, tracepoint, idle, dram_timeout

``timeout`` rises when anything has waited for the Configure timeout register's number of
cycles (default the ``decoder_timeout`` option): the decoder on an instruction it cannot
dispatch, a DRAM port on a slave that does not answer (``dram_timeout`` says which), or the
instruction stream stopped in the middle of an instruction (``timeout`` high, ``dram_timeout``
zero and ``idle`` high). Each flag falls as soon as the wait ends; reset clears them all.

:func:`port_list` gives the ports in Tensil's order with directions and widths (the
generator's wrapper and the tests use it); :class:`Top` builds the design in the working
block with one PyRTL Input/Output per port (``clock`` and the active-low ``reset`` are added
by the Verilog wrapper, see :mod:`tcu_hw.verilog`).
"""

from __future__ import annotations

import pyrtl

from typing import Mapping

from .arch import Architecture, Options
from .blocks.axi import AXI_INPUTS, AXI_PORT_ORDER, AxiMaster, axi_width
from .blocks.axis import InstructionStream
from .blocks.stream import connect
from .core import Core

#: Outputs we add to Tensil's ports: (name, width, meaning).
EXTRA_OUTPUTS = (("error", 1, "sticky error flag (TCU.md §4.8; an AXI SLVERR or DECERR too)"),
                 ("timeout", 1, "the decoder, a DRAM slave or the instruction stream has "
                                "waited the timeout register's cycles"),
                 ("tracepoint", 1, "the program counter equals the tracepoint register"),
                 ("idle", 1, "no instruction in flight"),
                 ("dram_timeout", 2, "bit k: DRAM k's slave has not answered for the timeout "
                                     "register's cycles"))


def port_list(arch: Architecture, options: Options, extras: bool = True
              ) -> list[tuple[str, str, int, str]]:
    """(name, direction, width, group) of every top-level port, in Tensil's order."""
    dw = options.axi_data_width
    ports = [("clock", "input", 1, "clock"), ("reset", "input", 1, "reset"),
             ("instruction_tdata", "input", dw, "instruction"),
             ("instruction_tvalid", "input", 1, "instruction"),
             ("instruction_tready", "output", 1, "instruction"),
             ("instruction_tlast", "input", 1, "instruction")]
    for dram in ("dram0", "dram1"):
        for sig in AXI_PORT_ORDER:
            direction = "input" if sig in AXI_INPUTS else "output"
            ports.append((f"m_axi_{dram}_{sig}", direction, axi_width(sig, dw), f"m_axi_{dram}"))
    if options.sample_block_size:
        ports += [("sample_tdata", "output", 64, "sample"), ("sample_tvalid", "output", 1, "sample"),
                  ("sample_tready", "input", 1, "sample"), ("sample_tlast", "output", 1, "sample")]
    if extras:
        ports += [(name, "output", width, "status") for name, width, _ in EXTRA_OUTPUTS]
    return ports


class Top:
    """Build the top in the working block; ``self.core`` is the composed core.

    ``external_rams``: build the memories as ports to Verilog RAM modules (for export)."""

    def __init__(self, arch: Architecture, options: Options,
                 external_rams: list | None = None) -> None:
        options.check_for(arch)
        self.arch, self.options = arch, options
        self.core = core = Core(arch, options, external_rams=external_rams)
        io = {}
        for name, direction, width, _ in port_list(arch, options):
            if name in ("clock", "reset"):
                continue
            io[name] = (pyrtl.Input if direction == "input" else pyrtl.Output)(width, name)
        self.io = io

        stream = InstructionStream(arch.layout.instruction_bytes, options.axi_data_width,
                                   name="axis")
        stream.words.valid <<= io["instruction_tvalid"]
        stream.words.payload.data <<= io["instruction_tdata"]
        io["instruction_tready"] <<= stream.words.ready
        connect(stream.instructions, core.instructions)
        # instruction_tlast is not needed (Tensil ignores it too); the lint waiver says so

        self.axi = []
        cfg = core.cfg
        for k, (port, offset, cache) in enumerate(((core.dram0, cfg.dram0_offset, cfg.dram0_cache),
                                                   (core.dram1, cfg.dram1_offset, cfg.dram1_cache))):
            m = AxiMaster.from_arch(arch, options, port.req.payload.addr.bitwidth,
                                    port.req.payload.len.bitwidth, name=f"dram{k}")
            connect(port, m.core)
            m.offset <<= offset
            m.cache <<= cache
            for sig, wire in m.signals().items():
                pin = io[f"m_axi_dram{k}_{sig}"]
                if sig in AXI_INPUTS:
                    wire <<= pin
                else:
                    pin <<= wire
            self.axi.append(m)

        if core.samples is not None:
            s = core.samples
            s.ready <<= io["sample_tready"]
            io["sample_tdata"] <<= s.payload.data
            io["sample_tvalid"] <<= s.valid
            io["sample_tlast"] <<= s.payload.last
        io["error"] <<= core.error | self.axi[0].bus_error | self.axi[1].bus_error
        stuck = [cfg.watch(m.slave_wait, f"dram{k}_timeout") for k, m in enumerate(self.axi)]
        cut = cfg.watch(stream.cut, "stream_timeout")
        io["dram_timeout"] <<= pyrtl.concat(stuck[1], stuck[0])
        io["timeout"] <<= core.timeout | stuck[0] | stuck[1] | cut
        io["tracepoint"] <<= core.tracepoint
        io["idle"] <<= core.idle & self.axi[0].idle & self.axi[1].idle


#: the status outputs a run reports
STATUS_OUTPUTS = ("error", "timeout", "dram_timeout", "idle")


def status_outputs(out: Mapping[str, int]) -> dict[str, int]:
    """The status outputs of one cycle's outputs (zeros before the first cycle)."""
    return {name: int(out.get(name, 0)) for name in STATUS_OUTPUTS}


def describe_status(status: Mapping[str, int]) -> str:
    """Words for a hang message from the status outputs, e.g. ``"; the DRAM1 slave stopped
    answering (dram_timeout)"`` (empty when no flag is up)."""
    words = []
    ports = [f"DRAM{k}" for k in (0, 1) if status.get("dram_timeout", 0) >> k & 1]
    if ports:
        words.append(f"the {' and '.join(ports)} slave stopped answering (dram_timeout)")
    elif status.get("timeout"):
        words.append("the instruction stream stopped inside an instruction"
                     if status.get("idle") else "the decoder is waiting (timeout)")
    if status.get("error"):
        words.append("error is high")
    return "; " + "; ".join(words) if words else ""
