"""Run a compiled model's raw vectors on one simulated backend: the one place that turns
backend options into DRAM or AXI timing, picks (and keeps) the simulator, writes waveforms
and collects what the run measured. The host driver (:mod:`sim.driver`), ``python -m
sim.run`` and ``python -m sim.check`` all run models through :class:`SimulatedBackend`.

Backends:

- ``emulator``: the golden model; statistics per instruction kind, no cycles.
- ``pyrtl``: the PyRTL core with DRAM models (latency, bandwidth, random back-pressure);
  cycles, per-unit counters, waveforms of a program-counter window.
- ``verilator``: the generated Verilog top behind AXI4 slave models that check the protocol;
  cycles and burst statistics, waveforms (VCD, or FST for a ``.fst`` file) of a
  program-counter window or the whole run.

Waveforms are written as the simulation runs (:mod:`sim.waves`), each with a GTKWave save
file next to it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tcu_hw.arch import Options, beats_per_vector, board_axi_width
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
    request to first vector; verilator: AR to first R beat); ``axi_width``: the board's memory
    port in bits (default :func:`tcu_hw.arch.board_axi_width`: a preset's board width, else
    the widest of 128, 64, 32 that divides a vector): the verilator top's AXI data width, and
    for the pyrtl core's DRAM models one vector per ``vector bits / axi_width`` cycles unless
    ``cycles_per_vector`` says otherwise; ``stall_probability``: random back-pressure per
    cycle (pyrtl) or per ready/valid (verilator); ``outstanding``: bursts the AXI slaves
    accept per direction."""

    latency: int = 20
    cycles_per_vector: int | None = None
    stall_probability: float = 0.0
    axi_width: int | None = None
    outstanding: int = 16

    def __post_init__(self) -> None:
        if self.axi_width is not None:
            Options(axi_data_width=self.axi_width)          # a power of two 32..1024
        if not (0 <= self.latency <= MAX_DRAM_CYCLES and
                (self.cycles_per_vector is None or
                 1 <= self.cycles_per_vector <= MAX_DRAM_CYCLES) and
                0 <= self.stall_probability < 1 and 1 <= self.outstanding <= MAX_OUTSTANDING):
            raise ArtifactError(
                f"DRAM timing: need latency 0..{MAX_DRAM_CYCLES:,} (got {self.latency}), "
                f"cycles_per_vector 1..{MAX_DRAM_CYCLES:,} or None (got "
                f"{self.cycles_per_vector}), "
                f"0 <= stall_probability < 1 (got {self.stall_probability}), outstanding "
                f"1..{MAX_OUTSTANDING} (got {self.outstanding})")


def trace_format(vcd) -> str:
    """The waveform format a file name asks for: ``"fst"`` for ``*.fst`` (verilator only),
    else ``"vcd"``."""
    return "fst" if str(vcd).lower().endswith(".fst") else "vcd"


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

    ``vcd``: write a waveform of the program-counter ``window`` (default: the whole program)
    and a GTKWave save file next to it (pyrtl: a VCD of the core's signals; verilator: every
    signal of the top, FST when the name ends in ``.fst``, from a separate trace build).
    """

    def __init__(self, arch, backend: str, options: SimOptions | None = None) -> None:
        if backend not in SIMULATED:
            raise ArtifactError(f"backend {backend!r} is not simulated; allowed: "
                                f"{', '.join(SIMULATED)}")
        self.arch, self.backend = arch, backend
        self.options = options or SimOptions()
        self.axi_width = board_axi_width(arch, self.options.axi_width)
        self.cycles_per_vector = beats_per_vector(arch, self.axi_width) \
            if self.options.cycles_per_vector is None else self.options.cycles_per_vector
        self._tops: dict = {}           # verilator builds by trace format (None: no trace)

    def run(self, model, raw_inputs: dict, vcd=None, window=None, progress=None
            ) -> tuple[dict, dict]:
        """``progress``: called as ``progress(dispatched, instructions)`` while the pyrtl
        backend simulates (see :class:`tcu_hw.progress.Progress`)."""
        if (vcd or window) and self.backend == "emulator":
            raise ArtifactError("--vcd, --window and --around need --backend pyrtl or "
                                "verilator")
        if window and not vcd:
            raise ArtifactError("--window and --around choose the cycles of a waveform: "
                                "add --vcd")
        if vcd and trace_format(vcd) == "fst" and self.backend != "verilator":
            raise ArtifactError(f"--vcd {vcd}: FST waveforms need --backend verilator; "
                                f"name a .vcd file")
        start = time.perf_counter()
        if self.backend == "emulator":
            outs, stats = self._emulator(model, raw_inputs)
        elif self.backend == "pyrtl":
            outs, stats = self._pyrtl(model, raw_inputs, vcd, window, start, progress)
        else:
            outs, stats = self._verilator(model, raw_inputs, vcd, window, start)
        stats["seconds"] = time.perf_counter() - start
        return outs, stats

    def _emulator(self, model, raw_inputs):
        from .model import emulate
        res = emulate(model, raw_inputs, raw=True)
        stats = res.stats.to_dict()
        stats["events"] = [str(e) for e in res.events]
        return res.outputs, stats

    def _pyrtl(self, model, raw_inputs, vcd, window, start, progress=None):
        from .model import load_program
        from .pyrtl_backend import DramTiming, PyrtlCore, cached_core, program_bits_for
        o = self.options
        bits = program_bits_for(len(load_program(model)))
        core = PyrtlCore(self.arch, program_bits=bits, probes=True) if vcd else \
            cached_core(self.arch, program_bits=bits)
        built = time.perf_counter()
        timing = DramTiming(latency=o.latency, cycles_per_vector=self.cycles_per_vector,
                            stall_probability=o.stall_probability)
        stream = None
        if vcd:
            from .waves import VcdStream
            stream = VcdStream(vcd, {name: width for name, width in core.probe_names.values()},
                               error=ArtifactError)
        core.on_progress = progress
        try:
            outs, res = core.run_model(model, raw_inputs, timing,
                                       window=(window or (0, 1 << 32)) if vcd else None,
                                       on_trace=stream.write if stream else None)
        except BaseException:
            if stream:
                stream.discard()
            raise
        finally:
            core.on_progress = None
        stats = {"cycles": res.cycles, "counters": res.counters, "error": res.error,
                 "error_pc": res.error_pc, "pc": res.pc, "build_seconds": built - start,
                 "dram_latency": o.latency, "cycles_per_vector": self.cycles_per_vector,
                 "axi_data_width": self.axi_width,
                 "stall_probability": o.stall_probability}
        if stream:
            from .waves import block_groups, write_gtkw
            stream.close()
            gtkw = write_gtkw(vcd, block_groups(stream.widths), ArtifactError)
            stats["vcd"] = {"file": str(vcd), "gtkw": str(gtkw), "format": "vcd",
                            "first_cycle": stream.first_cycle, "cycles": stream.cycles,
                            "signals": len(stream.widths)}
        return outs, stats

    def _verilator(self, model, raw_inputs, vcd, window, start):
        from tcu_hw.arch import Options
        from .verilator_backend import AxiTiming, VerilatorTop
        o = self.options
        width = self.axi_width
        fmt = trace_format(vcd) if vcd else None
        if fmt not in self._tops:
            self._tops[fmt] = VerilatorTop(self.arch, Options(axi_data_width=width),
                                           arch_name="model", trace=fmt)
        top = self._tops[fmt]
        built = time.perf_counter()
        timing = AxiTiming(latency=o.latency, outstanding=o.outstanding,
                           stall_probability=o.stall_probability)
        outs, res = top.run_model(model, raw_inputs, timing, trace_path=vcd, trace_pcs=window)
        stats = {"cycles": res.cycles, "error": res.error, "axi": res.stats,
                 "axi_data_width": width, "build_seconds": built - start,
                 "simulated_cycles_per_second":
                     res.cycles / max(res.stats["sim_seconds"], 1e-9)}
        if vcd:
            from .waves import write_gtkw
            groups = top.trace_groups()
            gtkw = write_gtkw(vcd, groups, ArtifactError)
            traced = res.stats.get("trace", {})
            stats["vcd"] = {"file": str(vcd), "gtkw": str(gtkw), "format": fmt,
                            "first_cycle": traced.get("first_cycle", 0),
                            "cycles": traced.get("cycles", 0),
                            "signals": sum(len(v) for v in groups.values())}
        return outs, stats
