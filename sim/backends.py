"""Run a compiled model's raw vectors on one simulated backend: the one place that turns
backend options into DRAM or AXI timing, picks (and keeps) the simulator, writes waveforms
and collects what the run measured. The host driver (:mod:`sim.driver`), ``python -m
sim.run`` and ``python -m sim.check`` all run models through :class:`SimulatedBackend`.

Backends:

- ``emulator``: the golden model; statistics per instruction kind, no cycles.
- ``pyrtl``: the PyRTL core with DRAM models (latency, bandwidth, random back-pressure);
  cycles, per-unit counters, waveforms of a program-counter window.
- ``verilator``: the generated Verilog top behind AXI4 slave models that check the protocol;
  cycles and burst statistics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tcu_hw.errors import ArtifactError

SIMULATED = ("emulator", "pyrtl", "verilator")
#: the longest DRAM latency and vector time the models take: well inside the simulators'
#: hang rule (sim.pyrtl_backend.STALL_CYCLES quiet cycles)
MAX_DRAM_CYCLES = 5_000
#: bursts an AXI slave model accepts per direction, at most
MAX_OUTSTANDING = 256


@dataclass(frozen=True)
class SimOptions:
    """How the simulated memories behave. ``latency``: DRAM read latency in cycles (pyrtl:
    request to first vector; verilator: AR to first R beat); ``cycles_per_vector``: DRAM
    bandwidth of the pyrtl models; ``stall_probability``: random back-pressure per cycle (pyrtl)
    or per ready/valid (verilator); ``axi_width``: the verilator top's AXI data width (default:
    128, 64 or 32, the widest that divides a vector); ``outstanding``: bursts the AXI slaves
    accept per direction."""

    latency: int = 20
    cycles_per_vector: int = 1
    stall_probability: float = 0.0
    axi_width: int | None = None
    outstanding: int = 16

    def __post_init__(self) -> None:
        if not (0 <= self.latency <= MAX_DRAM_CYCLES and
                1 <= self.cycles_per_vector <= MAX_DRAM_CYCLES and
                0 <= self.stall_probability < 1 and 1 <= self.outstanding <= MAX_OUTSTANDING):
            raise ArtifactError(
                f"DRAM timing: need latency 0..{MAX_DRAM_CYCLES:,} (got {self.latency}), "
                f"cycles_per_vector 1..{MAX_DRAM_CYCLES:,} (got {self.cycles_per_vector}), "
                f"0 <= stall_probability < 1 (got {self.stall_probability}), outstanding "
                f"1..{MAX_OUTSTANDING} (got {self.outstanding})")


def waveform_window(window=None, around=None) -> tuple[int, int] | None:
    """The program-counter window of a waveform from ``--window`` or ``--around`` (one of
    them at most)."""
    if window and around:
        raise ArtifactError("give --window or --around, not both")
    return window or around


class SimulatedBackend:
    """One backend for one architecture; keeps its compiled simulator between runs.

    :meth:`run` takes raw input vectors ({name: (vectors, n)} fixed-point integers, as
    :func:`sim.model.input_raw` makes them) and returns ``(outputs, stats)``: raw output
    vectors by name and a JSON-able dict (``cycles``, ``error``, counters or AXI statistics,
    ``build_seconds``; the emulator's instruction statistics and events; ``vcd`` with the
    waveform's files when one was asked for).
    """

    def __init__(self, arch, backend: str, options: SimOptions | None = None) -> None:
        if backend not in SIMULATED:
            raise ArtifactError(f"backend {backend!r} is not simulated; allowed: "
                                f"{', '.join(SIMULATED)}")
        self.arch, self.backend = arch, backend
        self.options = options or SimOptions()
        self._top = None

    def run(self, model, raw_inputs: dict, vcd=None, window=None) -> tuple[dict, dict]:
        if (vcd or window) and self.backend != "pyrtl":
            raise ArtifactError("--vcd, --window and --around need --backend pyrtl")
        start = time.perf_counter()
        if self.backend == "emulator":
            outs, stats = self._emulator(model, raw_inputs)
        elif self.backend == "pyrtl":
            outs, stats = self._pyrtl(model, raw_inputs, vcd, window, start)
        else:
            outs, stats = self._verilator(model, raw_inputs, start)
        stats["seconds"] = time.perf_counter() - start
        return outs, stats

    def _emulator(self, model, raw_inputs):
        from .model import emulate
        res = emulate(model, raw_inputs, raw=True)
        stats = res.stats.to_dict()
        stats["events"] = [str(e) for e in res.events]
        return res.outputs, stats

    def _pyrtl(self, model, raw_inputs, vcd, window, start):
        from .model import load_program
        from .pyrtl_backend import DramTiming, PyrtlCore, cached_core, program_bits_for
        o = self.options
        bits = program_bits_for(len(load_program(model)))
        core = PyrtlCore(self.arch, program_bits=bits, probes=True) if vcd else \
            cached_core(self.arch, program_bits=bits)
        built = time.perf_counter()
        timing = DramTiming(latency=o.latency, cycles_per_vector=o.cycles_per_vector,
                            stall_probability=o.stall_probability)
        outs, res = core.run_model(model, raw_inputs, timing,
                                   window=(window or (0, 1 << 32)) if vcd else None)
        stats = {"cycles": res.cycles, "counters": res.counters, "error": res.error,
                 "error_pc": res.error_pc, "pc": res.pc, "build_seconds": built - start,
                 "dram_latency": o.latency, "cycles_per_vector": o.cycles_per_vector,
                 "stall_probability": o.stall_probability}
        if vcd:
            from .waves import write_waves
            first, signals = core.trace
            gtkw = write_waves(vcd, first, signals)
            stats["vcd"] = {"file": str(vcd), "gtkw": str(gtkw), "first_cycle": first,
                            "cycles": max((len(v) for _, v in signals.values()), default=0),
                            "signals": len(signals)}
        return outs, stats

    def _verilator(self, model, raw_inputs, start):
        from tcu_hw.arch import Options
        from .verilator_backend import AxiTiming, VerilatorTop, default_axi_width
        o = self.options
        width = o.axi_width or default_axi_width(self.arch)
        if self._top is None:
            self._top = VerilatorTop(self.arch, Options(axi_data_width=width), arch_name="model")
        built = time.perf_counter()
        timing = AxiTiming(latency=o.latency, outstanding=o.outstanding,
                           stall_probability=o.stall_probability)
        outs, res = self._top.run_model(model, raw_inputs, timing)
        return outs, {"cycles": res.cycles, "error": res.error, "axi": res.stats,
                      "axi_data_width": width, "build_seconds": built - start,
                      "simulated_cycles_per_second":
                          res.cycles / max(res.stats["sim_seconds"], 1e-9)}
