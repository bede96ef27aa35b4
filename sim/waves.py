"""Waveforms: VCD files streamed to disk with pyvcd as the simulation produces them, and a
GTKWave save file grouped by block.

Signals are grouped into scopes by the prefix of their name (``array_``, ``acc_``, ``simd_``,
``cu_``, ``dec_``, ``local_``, ``dram_``, ``cfg_`` ...), so GTKWave or Surfer shows one folder
per block. :class:`VcdStream` takes the values chunk by chunk (``PyrtlCore.run(...,
on_trace=stream.write)``) and writes only their changes: neither the file's text nor the
whole window's values are held in memory.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from tcu_hw.errors import TcuError
from tcu_hw.files import write_atomic

#: cycles per chunk when :func:`write_waves` streams a trace held in memory
CHUNK = 4096


def scope_of(name: str) -> str:
    return name.split("_", 1)[0] if "_" in name else "top"


def by_scope(names: Iterable[str]) -> list[str]:
    """Signal names in the order the VCD declares them: by scope, then by name."""
    return sorted(names, key=lambda s: (scope_of(s), s))


class VcdStream:
    """A VCD file written with pyvcd while a simulation runs (1 ns per cycle).

    ``widths``: {signal: bits}; each signal goes into the scope ``top.<scope_of(signal)>``.
    :meth:`write` takes the next cycles' values ({signal: values per cycle}, every signal, as
    many cycles each) and writes their value changes; :meth:`close` ends the file. The file
    goes to a temporary name next to ``path`` and gets its name at :meth:`close`, so a
    failed run leaves no half-written waveform.

        with VcdStream("w.vcd", {"cu_issue": 1, "cfg_pc": 32}) as vcd:
            vcd.write(first_cycle, chunk)          # as often as the simulation has chunks
    """

    def __init__(self, path, widths: Mapping[str, int], top: str = "tcu",
                 error: type[TcuError] = TcuError) -> None:
        self.path, self.top, self.error = Path(path), top, error
        self.widths = {name: int(widths[name]) for name in by_scope(widths)}
        self.first_cycle: int | None = None
        self.cycles = 0
        self._tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}")
        self._file = None
        self._writer = None
        self._vars: list = []
        self._last: list = [None] * len(self.widths)

    def __enter__(self) -> "VcdStream":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()

    def _open(self, first_cycle: int) -> None:
        from vcd import VCDWriter
        try:
            self._file = open(self._tmp, "w", buffering=1 << 20)
        except OSError as e:
            raise self.error(f"{self.path}: cannot write it: {e.strerror or e}") from None
        self.first_cycle = first_cycle
        self._writer = w = VCDWriter(self._file, timescale="1 ns", date="",
                                     init_timestamp=first_cycle, check_values=False)
        self._vars = [w.register_var(f"{self.top}.{scope_of(name)}", name, "wire", size=width,
                                     bit_index=(width - 1, 0) if width > 1 else None)
                      for name, width in self.widths.items()]

    def write(self, first_cycle: int, values: Mapping[str, np.ndarray]) -> None:
        """The values of cycles ``first_cycle``, ``first_cycle + 1``, ... (after the cycles
        already written) for every signal."""
        if self._writer is None:
            self._open(first_cycle)
        elif first_cycle != self.first_cycle + self.cycles:
            raise ValueError(f"cycle {first_cycle}: the waveform has cycles up to "
                             f"{self.first_cycle + self.cycles - 1}")
        length = len(next(iter(values.values()))) if values else 0
        if not length:
            return
        # every change of the chunk: (cycle offset, signal index) in time order, signals in
        # declaration order within a cycle
        offsets, index, changed = [], [], []
        for k, name in enumerate(self.widths):
            v = np.asarray(values[name])
            if len(v) != length:
                raise ValueError(f"{name}: {len(v)} cycles, others {length}")
            diff = np.empty(length, bool)
            diff[1:] = v[1:] != v[:-1]
            diff[0] = self._last[k] is None or v[0] != self._last[k]
            at = np.flatnonzero(diff)
            if len(at):
                offsets.append(at)
                index.append(np.full(len(at), k, np.int32))
                changed.extend(v[at].tolist())
            self._last[k] = v[-1]
        if changed:
            offsets, index = np.concatenate(offsets), np.concatenate(index)
            order = np.argsort(offsets, kind="stable")
            change, variables = self._writer.change, self._vars
            base = self.first_cycle + self.cycles
            for t, k, i in zip((offsets[order] + base).tolist(), index[order].tolist(),
                               order.tolist()):
                change(variables[k], t, changed[i])
        self.cycles += length

    def close(self) -> Path:
        """End the file (a last timestamp one cycle after the last cycle) and give it its
        name; returns the path."""
        if self._writer is None:
            self._open(0)
        try:
            self._writer.close(self.first_cycle + self.cycles)
            self._file.close()
            os.replace(self._tmp, self.path)
        except OSError as e:
            self.discard()
            raise self.error(f"{self.path}: cannot write it: {e.strerror or e}") from None
        return self.path

    def discard(self) -> None:
        """Drop the unfinished file."""
        if self._file is not None:
            self._file.close()
        self._tmp.unlink(missing_ok=True)


def gtkw_text(dump: str, groups: Mapping[str, Iterable[tuple[str, int]]]) -> str:
    """A GTKWave save file that loads ``dump`` (a path, kept as given: relative to where
    GTKWave starts) and shows ``groups``: {group: [(full signal name, width)]}, each a
    collapsible group of traces (1-bit ones in binary, vectors in hex)."""
    from vcd.gtkw import GTKWSave
    out = io.StringIO()
    save = GTKWSave(out)
    save.dumpfile(dump, abspath=False)
    save.timestart(0)
    for group, signals in groups.items():
        with save.group(group):
            for name, width in signals:
                if width == 1:
                    save.trace(name, datafmt="bin")
                else:
                    save.trace(f"{name}[{width - 1}:0]", datafmt="hex")
    return out.getvalue()


def block_groups(widths: Mapping[str, int], signal: str = "tcu.{scope}.{name}") -> dict:
    """The core's signals ({name: width}) in one group per block; ``signal`` spells a
    signal's full name in the waveform (default: as :class:`VcdStream` scopes it)."""
    groups: dict[str, list] = {}
    for name in sorted(widths):
        scope = scope_of(name)
        groups.setdefault(scope, []).append((signal.format(scope=scope, name=name),
                                             widths[name]))
    return groups


def write_gtkw(dump_path, groups: Mapping[str, Iterable[tuple[str, int]]],
               error: type[TcuError] = TcuError) -> Path:
    """Write ``<dump_path>.gtkw`` next to the waveform (see :func:`gtkw_text`)."""
    dump_path = Path(dump_path)
    gtkw = dump_path.with_suffix(".gtkw")
    write_atomic(gtkw, gtkw_text(dump_path.name, groups), error)
    return gtkw


def write_waves(vcd_path, first_cycle: int, signals: dict, chunk: int = CHUNK) -> Path:
    """Write a trace held in memory ({name: (width, values per cycle)}, as
    ``PyrtlCore.trace`` has it) as a VCD, chunk by chunk, and next to it a ``.gtkw`` save
    file; returns the save file's path."""
    widths = {name: width for name, (width, _) in signals.items()}
    length = max((len(v) for _, v in signals.values()), default=0)
    with VcdStream(vcd_path, widths) as vcd:
        for at in range(0, length, chunk):
            vcd.write(first_cycle + at, {name: v[at:at + chunk]
                                         for name, (_, v) in signals.items()})
        if vcd.first_cycle is None:
            vcd.write(first_cycle, {})
    return write_gtkw(vcd_path, block_groups(widths))


def simulate_until(block, done: str = "done", limit: int = 10_000, inputs=None, observe=None,
                   vcd=None):
    """Simulate a small PyRTL design (``pyrtl.Simulation`` with a trace of every named wire)
    until its 1-bit wire ``done`` is high; returns ``(simulation, cycles)``.

    ``inputs()``: the input values for the next cycle ({input name: value}); ``observe(sim)``:
    called after every cycle (e.g. a Python bus model sampling outputs); ``vcd``: write the
    whole run as a VCD file. Raises RuntimeError when ``done`` stays low for ``limit`` cycles.
    """
    import pyrtl
    with pyrtl.set_working_block(block):
        trace = pyrtl.SimulationTrace()
        sim = pyrtl.Simulation(tracer=trace, block=block)
        for cycles in range(1, limit + 1):
            sim.step(inputs() if inputs else {})
            if observe:
                observe(sim)
            if sim.inspect(done):
                break
        else:
            raise RuntimeError(f"'{done}' did not rise within {limit} cycles")
        if vcd:
            with open(vcd, "w") as f:
                trace.print_vcd(f)
    return sim, cycles


def memory_vectors(sim, block, memory: str, count: int, lanes: int, width: int):
    """The first ``count`` entries of the MemBlock named ``memory`` as signed lanes
    (``count`` × ``lanes`` numpy array of ``width``-bit values)."""
    import numpy as np

    from tcu_hw.blocks.lanes import from_int
    mem = sim.inspect_mem(block.get_memblock_by_name(memory))
    return np.array([from_int(mem.get(k, 0), lanes, width) for k in range(count)])
