"""Run the Tensil-compatible top (AXI ports) in PyRTL with Python AXI slave memories.

Cycle by cycle (Python per cycle, so for small programs): the instruction stream is fed as
AXI-Stream words, the two DRAM ports are served by :class:`sim.axi_model.AxiSlaveModel`
(which checks the AXI rules), and the run ends when the flush probe completes, as on a real
board. Used to test the AXI converters and the top before they go through Verilator. A run
is hung when no handshake happens on the instruction stream or either AXI port for
``stall_cycles`` cycles (as for the core, :data:`sim.pyrtl_backend.STALL_CYCLES`); the
:class:`~sim.pyrtl_backend.SimulationHang` then carries the top's status outputs
(``error``, ``timeout``, ``dram_timeout``, ``idle``) and names a DRAM port whose slave the
hardware saw stop answering. Faults for tests: an :class:`~sim.axi_model.AxiFault` on one
slave, and ``feed_bytes`` to stop the instruction stream early.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from tcu_hw import numeric
from tcu_hw.arch import Architecture, Options
from tcu_hw.blocks.axi import AXI_INPUTS, AXI_PORT_ORDER
from tcu_hw.isa import Instruction, flush_probe
from tcu_hw.top import describe_status, status_outputs
from tcu_hw.verilog import build_top

from .axi_model import AxiFault, AxiSlaveModel
from .model import dram_image, probe_pattern
from .pyrtl_backend import STALL_CYCLES, SimulationHang
from .pyrtl_sim import ArraySimulation

#: (VALID, READY) pairs of an AXI4 port: a handshake on any of them is progress
_HANDSHAKES = [("arvalid", "arready"), ("rvalid", "rready"), ("awvalid", "awready"),
               ("wvalid", "wready"), ("bvalid", "bready")]


class PyrtlTop:
    def __init__(self, arch: Architecture, options: Options | None = None) -> None:
        self.arch, self.options = arch, options or Options()
        self.block, self.top, _ = build_top(arch, self.options)
        self.sim = ArraySimulation(block=self.block)
        self._fresh = True

    def run(self, program: Sequence[Instruction], dram0: Mapping[int, np.ndarray] = (),
            dram1: Mapping[int, np.ndarray] = (), latency: int = 4, stall: float = 0.0,
            seed: int = 1, max_cycles: int | None = None,
            stall_cycles: int = STALL_CYCLES, fault: AxiFault | None = None,
            feed_bytes: int | None = None) -> int:
        """Run to the flush probe; returns the cycle count. DRAM contents in ``self.drams``,
        the status outputs at the end in ``self.status``. Raises
        :class:`~sim.pyrtl_backend.SimulationHang` when nothing moves for ``stall_cycles``
        cycles, or the probe has not completed after ``max_cycles``. ``fault``: a slave
        that misbehaves; ``feed_bytes``: stream only that many bytes of the program (whole
        words), then stop."""
        if not self._fresh:
            self.sim.reset()
        self._fresh = False
        arch, lay, dw = self.arch, self.arch.layout, self.options.axi_data_width
        vb = arch.vector_bytes
        data = lay.encode_program(list(program) + flush_probe(arch))
        data += bytes((-len(data)) % (dw // 8))
        self.drams = []
        for k, (depth, images) in enumerate(((arch.dram0_depth, dram0),
                                             (arch.dram1_depth, dram1))):
            s = AxiSlaveModel(depth * vb, dw, latency=latency, stall=stall, seed=seed + k,
                              name=f"dram{k}",
                              fault=fault if fault is not None and fault.port == k else None)
            s.mem[:] = dram_image(arch, depth, images)
            self.drams.append(s)
        src, dst = (arch.dram0_depth - 1) * vb, (arch.dram0_depth - 2) * vb
        pattern = probe_pattern(arch)
        self.drams[0].mem[src:src + vb] = pattern
        fed, wb = 0, dw // 8
        feed = len(data) if feed_bytes is None else min(len(data), feed_bytes - feed_bytes % wb)
        quiet, cycle, out = 0, 0, {}
        while True:
            if quiet >= stall_cycles or (max_cycles is not None and cycle >= max_cycles):
                why = (f"nothing moved for {quiet:,} cycles" if quiet >= stall_cycles
                       else f"the flush probe did not complete in {max_cycles:,} cycles")
                self.status = status_outputs(out)
                hang = SimulationHang(f"the top stopped: {why} at cycle {cycle:,} ({fed} of "
                                      f"{len(data)} instruction bytes fed)"
                                      f"{describe_status(self.status)}")
                hang.status = self.status
                raise hang
            inputs = {"instruction_tvalid": int(fed < feed),
                      "instruction_tdata": int.from_bytes(data[fed:fed + wb], "little"),
                      "instruction_tlast": int(fed + wb >= len(data))}
            for k, s in enumerate(self.drams):
                for sig, value in s.outputs().items():
                    inputs[f"m_axi_dram{k}_{sig}"] = value
            if self.options.sample_block_size:
                inputs["sample_tready"] = 1
            out = self.sim.run_cycles(1, inputs)
            moved = inputs["instruction_tvalid"] and out["instruction_tready"]
            if moved:
                fed += wb
            for k in range(2):
                sig = {**{s: inputs[f"m_axi_dram{k}_{s}"] for s in AXI_INPUTS},
                       **{s: out[f"m_axi_dram{k}_{s}"] for s in AXI_PORT_ORDER
                          if s not in AXI_INPUTS}}
                moved = moved or any(sig[v] and sig[r] for v, r in _HANDSHAKES)
            quiet = 0 if moved else quiet + 1
            for k, s in enumerate(self.drams):
                s.sample({sig: out[f"m_axi_dram{k}_{sig}"] for sig in AXI_PORT_ORDER
                          if sig not in AXI_INPUTS})
            if fed >= len(data) and self.drams[0].mem[dst:dst + vb] == pattern:
                self.error = bool(out["error"])
                self.status = status_outputs(out)
                self.drams[0].mem[src:src + vb] = bytes(vb)
                self.drams[0].mem[dst:dst + vb] = bytes(vb)
                return cycle + 1
            cycle += 1

    def read_dram(self, k: int, base: int, count: int) -> np.ndarray:
        vb = self.arch.vector_bytes
        blob = bytes(self.drams[k].mem[base * vb:(base + count) * vb])
        return numeric.decode_vectors(blob, self.arch.dtype, self.arch.array_size)

