"""Run the Tensil-compatible top (AXI ports) in PyRTL with Python AXI slave memories.

Cycle by cycle (Python per cycle, so for small programs): the instruction stream is fed as
AXI-Stream words, the two DRAM ports are served by :class:`sim.axi_model.AxiSlaveModel`
(which checks the AXI rules), and the run ends when the flush probe completes, as on a real
board. Used to test the AXI converters and the top before they go through Verilator.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from tcu_hw import numeric
from tcu_hw.arch import Architecture, Options
from tcu_hw.blocks.axi import AXI_INPUTS, AXI_PORT_ORDER
from tcu_hw.errors import TcuError
from tcu_hw.isa import Instruction, flush_probe
from tcu_hw.verilog import build_top

from .axi_model import AxiSlaveModel
from .model import probe_pattern
from .pyrtl_sim import ArraySimulation


class PyrtlTop:
    def __init__(self, arch: Architecture, options: Options | None = None) -> None:
        self.arch, self.options = arch, options or Options()
        self.block, self.top, _ = build_top(arch, self.options)
        self.sim = ArraySimulation(block=self.block)
        self._fresh = True

    def run(self, program: Sequence[Instruction], dram0: Mapping[int, np.ndarray] = (),
            dram1: Mapping[int, np.ndarray] = (), latency: int = 4, stall: float = 0.0,
            seed: int = 1, max_cycles: int = 200_000) -> int:
        """Run to the flush probe; returns the cycle count. DRAM contents in ``self.drams``."""
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
                              name=f"dram{k}")
            for base, raw in dict(images).items():
                blob = numeric.encode_vectors(np.asarray(raw).reshape(-1, arch.array_size),
                                              arch.dtype)
                s.mem[base * vb:base * vb + len(blob)] = blob
            self.drams.append(s)
        src, dst = (arch.dram0_depth - 1) * vb, (arch.dram0_depth - 2) * vb
        pattern = probe_pattern(arch)
        self.drams[0].mem[src:src + vb] = pattern
        fed, wb = 0, dw // 8
        for cycle in range(max_cycles):
            inputs = {"instruction_tvalid": int(fed < len(data)),
                      "instruction_tdata": int.from_bytes(data[fed:fed + wb], "little"),
                      "instruction_tlast": 0}
            for k, s in enumerate(self.drams):
                for sig, value in s.outputs().items():
                    inputs[f"m_axi_dram{k}_{sig}"] = value
            if self.options.sample_block_size:
                inputs["sample_tready"] = 1
            out = self.sim.run_cycles(1, inputs)
            if inputs["instruction_tvalid"] and out["instruction_tready"]:
                fed += wb
            for k, s in enumerate(self.drams):
                s.sample({sig: out[f"m_axi_dram{k}_{sig}"] for sig in AXI_PORT_ORDER
                          if sig not in AXI_INPUTS})
            if fed >= len(data) and self.drams[0].mem[dst:dst + vb] == pattern:
                self.error = bool(out["error"])
                self.drams[0].mem[src:src + vb] = bytes(vb)
                self.drams[0].mem[dst:dst + vb] = bytes(vb)
                return cycle + 1
        raise TcuError(f"the top did not complete the flush probe in {max_cycles} cycles "
                       f"({fed} of {len(data)} instruction bytes fed)")

    def read_dram(self, k: int, base: int, count: int) -> np.ndarray:
        vb = self.arch.vector_bytes
        blob = bytes(self.drams[k].mem[base * vb:(base + count) * vb])
        return numeric.decode_vectors(blob, self.arch.dtype, self.arch.array_size)
