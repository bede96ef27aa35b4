"""Run TCU programs on the PyRTL core, natively and bit-exactly, fast enough for whole models.

The testbench lives inside the simulated design so that no Python runs per cycle::

    tb_program (memory) ─▶ fetch ─▶ Core ─▶ dram0 port ─▶ DramModel tb_dram0
                                      └───▶ dram1 port ─▶ DramModel tb_dram1
    counters (cycles, issue/stall per unit, ...) ─▶ Outputs

It is compiled once per (architecture, options, program size class) with
:class:`sim.pyrtl_sim.ArraySimulation` and reset between runs; programs, DRAM images, DRAM
timing (latency, bandwidth, random back-pressure) are written into memories at run time.

    core = PyrtlCore(arch)
    result = core.run(program, dram1={0: consts}, dram0={0: inputs},
                      timing=DramTiming(latency=20))
    out = core.read_dram0(0, 2)

:meth:`PyrtlCore.run_model` runs a `.tmodel` with the same placement as the emulator. A run
is hung only when nothing moves for :data:`STALL_CYCLES` cycles (a ``tb_quiet`` counter in
the testbench), however long it takes otherwise; ``max_cycles`` caps a run on request.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import pyrtl

from tcu_hw.arch import Architecture, Options, beats_per_vector, board_axi_width
from tcu_hw.blocks import lanes
from tcu_hw.blocks.stream import connect
from tcu_hw.core import Core
from tcu_hw.errors import TcuError
from tcu_hw.isa import Instruction, Layout, clog2

from .dram_model import DramModel
from .pyrtl_sim import ArraySimulation

#: Counters the testbench keeps (32-bit), in output order.
COUNTERS = ("cycles", "dispatched", "compute_issue", "compute_stall", "matmul_vectors",
            "dram_busy", "dram_stall", "decoder_stall", "hazard_stall", "chain_stall",
            "weight_pushes", "weight_wait", "tracepoint_cycles", "timeout_cycles")


#: A run is hung when nothing moves for this many cycles: no instruction taken or
#: dispatched, no compute micro-op or weight push, no DRAM request or data beat, nothing in
#: the array. Slow but legal DRAM timing never comes near it (a DRAM answers or takes a
#: beat within a few hundred cycles); a run can also be capped with ``max_cycles``.
STALL_CYCLES = 20_000


class SimulationHang(TcuError):
    """The program stopped making progress (or did not finish within ``max_cycles``)."""


@dataclass(frozen=True)
class DramTiming:
    """DRAM model timing: ``latency`` cycles to the first vector of a read, one vector per
    ``cycles_per_vector`` cycles, random back-pressure with probability ``stall_probability``
    per cycle and interface (seeded)."""

    latency: int = 20
    cycles_per_vector: int = 1
    stall_probability: float = 0.0
    seed: int = 1

    def words(self) -> list[int]:
        threshold = min(65535, int(round(self.stall_probability * 65536)))
        return [self.latency, max(1, self.cycles_per_vector), threshold, self.seed & 0xFFFF]


def board_timing(arch, latency: int = 20, axi_width: int | None = None) -> DramTiming:
    """DRAM timing at the board's memory port (``axi_width``, default
    :func:`tcu_hw.arch.board_axi_width`): a vector every ``vector bits / width`` cycles, as
    the generated top's AXI masters move it."""
    width = board_axi_width(arch, axi_width)
    return DramTiming(latency=latency, cycles_per_vector=beats_per_vector(arch, width))


@dataclass
class RunResult:
    """Cycle count and per-unit counters of one run; ``error``/``error_pc`` as the core's
    sticky error output; ``pc`` the final program counter; ``marks`` the counters at each
    mark of :meth:`PyrtlCore.run` (None for one never reached)."""

    cycles: int
    counters: dict
    error: bool
    error_pc: int
    pc: int
    stats: dict = field(default_factory=dict)
    marks: list = field(default_factory=list)


class PyrtlCore:
    """The core and its testbench, compiled once; see the module docstring.

    ``program_bits``: the program memory holds 2^program_bits instructions (default 17, enough
    for Tensil's 80k-instruction speech model). ``outstanding_bits``: each DRAM model queues
    up to 2^outstanding_bits requests. ``opt``: gcc flag for the simulator. ``probes``: also
    expose every named signal of the core (``array_*``, ``acc_*``, ``simd_*``, ``cu_*``,
    ``dec_*``, ``local_*``, ``dram_*``, ``cfg_*`` ...) for waveforms (:meth:`run` with a
    ``window``); this builds a separate, slower simulator.
    """

    def __init__(self, arch: Architecture, options: Options | None = None,
                 program_bits: int = 17, outstanding_bits: int = 4, opt: str = "-O1",
                 probes: bool = False) -> None:
        arch.require_hardware()
        self.arch, self.options = arch, options or Options()
        self.layout = Layout.of(arch)
        self.program_bits = program_bits
        n, w = arch.array_size, arch.dtype.width
        self.block = pyrtl.Block()
        with pyrtl.set_working_block(self.block):
            self.core = core = Core(arch, self.options)
            ibits = 8 * self.layout.instruction_bytes
            prog = pyrtl.MemBlock(ibits, program_bits, "tb_program", asynchronous=True)
            config = pyrtl.MemBlock(32, 1, "tb_config", asynchronous=True)
            length = config[pyrtl.Const(0, 1)]
            fetch = pyrtl.Register(program_bits + 1, "tb_fetch")
            more = fetch < length
            core.instructions.drive(more, data=prog[fetch[:program_bits]])
            fetch.next <<= fetch + core.instructions.fire
            clock = pyrtl.Register(32, "tb_clock")
            clock.next <<= clock + 1
            size_bits = core.dram0.req.payload.len.bitwidth
            self.drams = []
            for k, port in enumerate((core.dram0, core.dram1)):
                bits = port.req.payload.addr.bitwidth
                model = DramModel(bits, n * w, size_bits, f"tb_dram{k}", outstanding_bits,
                                  clock=clock)
                connect(port, model.port)
                self.drams.append(model)
            done = ~more & core.idle & self.drams[0].idle & self.drams[1].idle
            # cycles since anything moved (see STALL_CYCLES)
            st = core.status
            moved = core.instructions.fire | st.dispatch | st.compute_issue | \
                st.weight_push | st.dram_busy | core.compute.array_busy
            for port in (core.dram0, core.dram1):
                moved = moved | port.req.fire | port.rdata.fire | port.wdata.fire
            quiet = pyrtl.Register(32, "tb_quiet")
            quiet.next <<= pyrtl.select(moved | done, pyrtl.Const(0, 32),
                                        pyrtl.select(quiet == 0xFFFFFFFF, quiet, quiet + 1))
            if core.samples is not None:
                # keep every sample (the consumer is always ready) in a ring of 4096 words
                out = core.samples
                out.ready <<= 1
                samples = pyrtl.MemBlock(65, 12, "tb_samples")
                taken = pyrtl.Register(32, "tb_sample_count")
                taken.next <<= taken + (out.valid & ~done)
                samples[taken[:12]] <<= pyrtl.MemBlock.EnabledWrite(
                    pyrtl.concat(out.payload.last, out.payload.data), out.valid & ~done)
                count_out = pyrtl.Output(32, "samples")
                count_out <<= taken
            st = core.status
            events = {"cycles": ~done, "dispatched": st.dispatch,
                      "compute_issue": st.compute_issue, "compute_stall": st.compute_stall,
                      "matmul_vectors": st.matmul, "dram_busy": st.dram_busy,
                      "dram_stall": st.dram_stall, "decoder_stall": st.decoder_stall,
                      "hazard_stall": st.hazard_stall, "chain_stall": st.chain_stall,
                      "weight_pushes": st.weight_push, "weight_wait": st.weight_wait,
                      "tracepoint_cycles": core.tracepoint & ~done,
                      "timeout_cycles": core.timeout}
            for name in COUNTERS:
                reg = pyrtl.Register(32, f"tb_count_{name}")
                reg.next <<= reg + events[name]
                out = pyrtl.Output(32, f"count_{name}")
                out <<= reg
            self.probe_names = {}
            if probes:
                core_wires = [w for w in self.block.wirevector_set
                              if not w.name.startswith(("tmp", "const", "tb_"))
                              and not isinstance(w, (pyrtl.Const, pyrtl.Output))]
                for k, wire in enumerate(sorted(core_wires, key=lambda w: w.name)):
                    out = pyrtl.Output(wire.bitwidth, f"probe{k}")
                    out <<= wire
                    self.probe_names[f"probe{k}"] = (wire.name, wire.bitwidth)
            for name, wire in (("done", done), ("quiet", quiet), ("error", core.error),
                               ("error_pc", core.error_pc),
                               ("pc", core.pc), ("dram0_reads", self.drams[0].reads),
                               ("dram0_writes", self.drams[0].writes),
                               ("dram1_reads", self.drams[1].reads),
                               ("dram1_writes", self.drams[1].writes)):
                out = pyrtl.Output(wire.bitwidth, name)
                out <<= wire
        self.sim = ArraySimulation(block=self.block, opt=opt)
        self._fresh = True
        #: called as ``on_progress(dispatched, instructions)`` between chunks of a run
        self.on_progress = None

    # ----------------------------------------------------------------------- memories
    def _write_vectors(self, mem: str, base: int, raw) -> None:
        raw = np.asarray(raw, dtype=np.int64).reshape(-1, self.arch.array_size)
        view = self.sim.memory(mem)
        if base < 0 or base + len(raw) > view.shape[0]:
            raise IndexError(f"{mem}: vectors {base}..{base + len(raw) - 1} outside "
                             f"0..{view.shape[0] - 1}")
        view[base:base + len(raw)] = lanes.pack(raw, self.arch.dtype.width)

    def _read_vectors(self, mem: str, base: int, count: int, width: int | None = None
                      ) -> np.ndarray:
        view = self.sim.memory(mem)
        return lanes.unpack(view[base:base + count], self.arch.array_size,
                            width or self.arch.dtype.width)

    def samples(self, count: int) -> list[tuple[int, int]]:
        """The last min(count, 4096) sampler words as (tlast, word), oldest first."""
        view = self.sim.memory("tb_samples")
        count = min(count, 4096)
        return [(int(v[1]) & 1, int(v[0])) for v in view[:count]]     # 65-bit entries

    def read_dram0(self, base: int, count: int) -> np.ndarray:
        return self._read_vectors("tb_dram0_mem", base, count)

    def read_dram1(self, base: int, count: int) -> np.ndarray:
        return self._read_vectors("tb_dram1_mem", base, count)

    def read_local(self, base: int = 0, count: int | None = None) -> np.ndarray:
        return self._read_vectors("local_ram_mem", base, self.arch.local_depth - base
                                  if count is None else count)

    def read_acc(self, base: int = 0, count: int | None = None) -> np.ndarray:
        return self._read_vectors("acc_ram_mem", base, self.arch.accumulator_depth - base
                                  if count is None else count,
                                  self.arch.dtype.accumulator.width)

    # --------------------------------------------------------------------------- runs
    def load_program(self, program: Sequence[Instruction] | bytes) -> int:
        data = program if isinstance(program, (bytes, bytearray)) else \
            self.layout.encode_program(program)
        ib = self.layout.instruction_bytes
        count = len(data) // ib
        if count > 1 << self.program_bits:
            raise ValueError(f"program of {count} instructions does not fit the testbench's "
                             f"2^{self.program_bits}; build PyrtlCore(program_bits=...)")
        view = self.sim.memory("tb_program")
        limbs = view.shape[1]
        buf = np.zeros((count, limbs * 8), np.uint8)
        buf[:, :ib] = np.frombuffer(bytes(data), np.uint8).reshape(count, ib)
        view[:count] = buf.view("<u8").reshape(count, limbs)
        self.sim.memory("tb_config")[0, 0] = count
        return count

    def run(self, program: Sequence[Instruction] | bytes,
            dram0: Mapping[int, np.ndarray] = (), dram1: Mapping[int, np.ndarray] = (),
            local: Mapping[int, np.ndarray] = (), timing: DramTiming = DramTiming(),
            max_cycles: int | None = None, window: tuple[int, int] | None = None,
            marks: Sequence[int] | None = None, stall_cycles: int = STALL_CYCLES,
            on_trace: Callable[[int, dict], None] | None = None) -> RunResult:
        """Reset, load, run until the program has completed, and return the counters.

        The run is hung (:class:`SimulationHang`) when nothing moves for ``stall_cycles``
        cycles (see :data:`STALL_CYCLES`), or, with ``max_cycles``, when it has not finished
        after that many cycles. Either is noticed at the end of a simulated chunk of cycles
        (at most ``stall_cycles`` or 65,536 more).

        With ``window = (pc_from, pc_to)`` (and ``probes``), :attr:`trace` holds
        ``(first cycle, {signal: (width, values)})`` for that program-counter window, or,
        with ``on_trace``, the window goes to ``on_trace(cycle, {signal: values})`` chunk by
        chunk as it is simulated (``cycle``: the chunk's first; e.g. a
        :class:`sim.waves.VcdStream`'s ``write``) and :attr:`trace` stays None. With
        ``marks`` (increasing instruction counts, e.g. where each layer starts),
        :attr:`RunResult.marks` holds the counters (:data:`COUNTERS`) at the first cycle
        the core had dispatched that many instructions (None for a mark never reached):
        differences between marks say where the cycles of each part of the program went."""
        def setup() -> int:
            count = self.load_program(program)
            for k, images in enumerate((dram0, dram1)):
                for base, raw in dict(images).items():
                    self._write_vectors(f"tb_dram{k}_mem", base, raw)
                self.sim.memory(f"tb_dram{k}_config")[:4, 0] = timing.words()
            for base, raw in dict(local).items():
                self._write_vectors("local_ram_mem", base, raw)
            return count

        if not self._fresh:
            self.sim.reset()
        self._fresh = False
        count = setup()
        self._setup = setup
        self._limits = (max_cycles, stall_cycles, count)
        budget = max_cycles
        self.trace = None
        found: list = []
        if window:
            out = self._trace_run(budget, count, window, on_trace)
        elif marks is not None:
            out, found = self._marked_run(budget, count, list(marks))
        else:
            out = self._run(budget, count)
        counters = {name: out[f"count_{name}"] for name in COUNTERS}
        if self.on_progress is not None:
            self.on_progress(int(counters["dispatched"]), count)
        counters.update({k: out[k] for k in ("dram0_reads", "dram0_writes", "dram1_reads",
                                             "dram1_writes", "samples") if k in out})
        return RunResult(counters["cycles"], counters, bool(out["error"]), out["error_pc"],
                         out["pc"], marks=found)

    def _marked_run(self, budget: int, count: int, marks: list[int]) -> tuple[dict, list]:
        """:meth:`_run` watching the counters every cycle (see ``marks`` in :meth:`run`)."""
        if any(b < a for a, b in zip(marks, marks[1:])):
            raise ValueError("marks must be in increasing order")
        names = [f"count_{c}" for c in COUNTERS] + ["done", "quiet", "pc"]
        found: list = [None] * len(marks)
        chunk, ran, nxt = 4096, 0, 0
        while True:
            tr = self.sim.run_trace(chunk, names=names)
            disp = tr["count_dispatched"].astype(np.int64)
            while nxt < len(marks) and disp[-1] >= marks[nxt]:
                k = int(np.searchsorted(disp, marks[nxt], side="left"))
                found[nxt] = {c: int(tr[f"count_{c}"][k]) for c in COUNTERS}
                nxt += 1
            ran += chunk
            if tr["done"][-1]:
                return self.sim.run_cycles(1), found
            self._check(ran, {k: int(v[-1]) for k, v in tr.items()})
            chunk = min(chunk * 2, 1 << 16)

    def _check(self, ran: int, out: dict) -> None:
        """Raise :class:`SimulationHang` when the run is hung (see :meth:`run`); tell
        :attr:`on_progress` how many instructions have been dispatched."""
        max_cycles, stall, count = self._limits
        if self.on_progress is not None:
            self.on_progress(int(out["count_dispatched"]), count)
        where = (f"pc {out['pc']}, {out['count_dispatched']:,} of {count:,} instructions "
                 f"dispatched")
        if out["quiet"] >= stall:
            raise SimulationHang(
                f"the program stopped making progress: nothing moved for {out['quiet']:,} "
                f"cycles (the limit is {stall:,}) at cycle {ran:,} ({where})")
        if max_cycles is not None and ran >= max_cycles:
            raise SimulationHang(f"the program did not finish in {ran:,} cycles (max_cycles "
                                 f"{max_cycles:,}; {where})")

    def _run(self, budget: int | None, count: int) -> dict:
        chunk, ran = 256, 0
        while True:
            if budget is not None:
                chunk = max(1, min(chunk, budget - ran))
            out = self.sim.run_cycles(chunk)
            ran += chunk
            if out["done"]:
                return out
            self._check(ran, out)
            chunk = min(chunk * 2, 1 << 16, max(256, self._limits[1]))

    def _advance(self, cycles: int) -> None:
        while cycles > 0:
            step = min(cycles, 1 << 16)
            self.sim.run_cycles(step)
            cycles -= step

    def _trace_run(self, budget: int, count: int, window: tuple[int, int],
                   on_trace: Callable[[int, dict], None] | None = None) -> dict:
        """Keep (or hand to ``on_trace``) every probe from the first cycle with ``pc >=
        window[0]`` to ``2n + 16`` cycles after the first with ``pc > window[1]`` (so the
        last instruction's effects show). Pass 1 finds the first cycle watching only the PC;
        pass 2 replays the run up to it untraced and then traces."""
        if not self.probe_names:
            raise ValueError("waveforms need PyrtlCore(..., probes=True)")
        first, last = window
        drain = 2 * self.arch.array_size + 16
        control = ("pc", "done", "count_dispatched", "quiet")
        chunk, ran, start = 4096, 0, None
        while start is None:
            tr = self.sim.run_trace(chunk, names=control)
            pcs = tr["pc"].astype(np.int64)
            if (pcs >= first).any():
                start = ran + int(np.argmax(pcs >= first))
            elif tr["done"][-1]:
                start = ran + chunk                     # the window is never reached
            ran += chunk
            if start is None:
                self._check(ran, {k: int(v[-1]) for k, v in tr.items()})
        self.sim.reset()
        self._setup()
        self._advance(start)
        ran, stop, kept = start, None, []
        while stop is None or ran < stop:
            tr = self.sim.run_trace(chunk)
            pcs = tr["pc"].astype(np.int64)
            cycles = np.arange(ran, ran + chunk)
            if stop is None and (pcs > last).any():
                stop = ran + int(np.argmax(pcs > last)) + drain
            if stop is None and tr["done"][-1]:
                stop = ran + int(np.argmax(tr["done"].astype(bool))) + 1
            keep = cycles < (stop if stop is not None else 1 << 62)
            part = {self.probe_names[k][0]: v[keep] for k, v in tr.items()
                    if k.startswith("probe")}
            if on_trace is None:
                kept.append(part)
            else:
                on_trace(ran, part)
            ran += chunk
            if stop is None:
                self._check(ran, {k: int(v[-1]) for k, v in tr.items()})
        out = {k: int(v[-1]) for k, v in tr.items() if not k.startswith("probe")}
        if not out["done"]:
            out = self._run(budget, count)
        if on_trace is None:
            self.trace = (start, {name: (width, np.concatenate([c[name] for c in kept]))
                                  for name, width in self.probe_names.values()})
        return out

    def run_model(self, model, inputs: Mapping[str, np.ndarray], timing: DramTiming = DramTiming(),
                  consts_to_local: bool | None = None, window: tuple[int, int] | None = None,
                  head: Sequence[Instruction] = (),
                  on_trace: Callable[[int, dict], None] | None = None
                  ) -> tuple[dict, RunResult]:
        """Run a `.tmodel` with raw inputs ({name: (vectors, n)}), ``head`` before its
        program; returns (outputs, result). ``window``, ``on_trace``: see :meth:`run`."""
        from .model import gather, host_images, load_model, load_program
        model = load_model(model)
        dram0, dram1, local = host_images(model, inputs, consts_to_local)
        result = self.run(list(head) + list(load_program(model)), dram0=dram0, dram1=dram1,
                          local=local, timing=timing, window=window, on_trace=on_trace)
        outputs = {name: gather(model, name, self.read_dram0) for name in model.output_names}
        return outputs, result


@functools.lru_cache(maxsize=4)
def cached_core(arch: Architecture, options: Options | None = None, program_bits: int = 17,
                outstanding_bits: int = 4) -> PyrtlCore:
    """One compiled :class:`PyrtlCore` per configuration and process."""
    return PyrtlCore(arch, options, program_bits, outstanding_bits)


def program_bits_for(count: int) -> int:
    return max(17, clog2(max(count, 2)))


def run_compiled(compiled, feeds: Mapping[str, np.ndarray], timing: DramTiming = DramTiming(),
                 marks: Sequence[int] | None = None, head: Sequence[Instruction] = (),
                 options: Options | None = None) -> tuple[PyrtlCore, RunResult]:
    """Run a compiled model (``compiler_lite.compile_model``'s result: its program, input
    layouts, constants image) on the cached core for its architecture (built with
    ``options``), with ``feeds`` (by input name, in the model's layout) converted to fixed
    point and ``head`` run before the program: (core, result). Outputs are then
    ``core.read_dram0(t.base, t.vectors)`` for ``t`` in ``compiled.outputs``."""
    arch = compiled.arch
    program = list(head) + list(compiled.program)
    core = cached_core(arch, options, program_bits=max(17, program_bits_for(len(program))))
    n = arch.array_size
    dram0, dram1, local = compiled.host_images(
        {t.name: t.encode(feeds[t.name], arch.dtype, n)[0] for t in compiled.inputs})
    res = core.run(program, dram0=dram0, dram1=dram1, local=local, timing=timing, marks=marks)
    return core, res
