"""The golden emulator: TCU programs executed with the sequential semantics of TCU.md §4.

Bit-accurate (all arithmetic is :mod:`tcu_hw.numeric` and :mod:`tcu_hw.alu`) and fast: each
instruction is executed as numpy operations over its ``size + 1`` vectors. Every hardware
backend is checked against it, bit for bit, on all memories.

State: DRAM0, DRAM1 (sparse, up to 2^32 vectors), local memory, accumulators, the weight chain
(bias + n rows), SIMD registers, lookup tables, configuration registers and the program
counter, and the sticky error flag. Error conditions (§4.8) do nothing, set the flag and are
recorded with the program counter in :attr:`Emulator.events`.

Typical use::

    emu = Emulator(arch)
    emu.write_dram1(0, consts_raw)
    emu.write_dram0(0, input_raw)
    emu.run(program)                    # list of tcu_hw.isa instructions
    out = emu.read_dram0(0, 2)

or, for a compiled model, :func:`sim.model.emulate`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tcu_hw import alu, numeric
from tcu_hw.arch import Architecture
from tcu_hw.errors import TcuError
from tcu_hw.isa import (SIMD, ConfigRegister, Configure, DataMove, DataMoveKind, Illegal,
                        Instruction, LoadLUT, LoadWeights, MatMul, NoOp, SimdOp, address_run,
                        clog2, flush_probe)

from .memory import PagedMemory

_MASK32 = 0xFFFFFFFF


@dataclass(frozen=True)
class Event:
    """An error condition (TCU.md §4.8): instruction ``index`` in the stream, ``pc`` register."""

    index: int
    pc: int
    message: str

    def __str__(self) -> str:
        return f"pc {self.pc}" + (f" (instruction {self.index})" if self.index != self.pc
                                  else "") + f": {self.message}"


class EmulatorError(TcuError):
    """Raised in strict mode at the first error condition."""


class Stats:
    """What a run did.

    - ``count_by_kind`` / ``vectors_by_kind``: instructions and vectors per kind, keyed like
      ``MatMul+accumulate``, ``DataMove.dram0_to_local``, ``SIMD.Max``, ``LoadWeights+zeroes``
      (vectors: size+1 per instruction, 1 per SIMD, pushed vectors for LoadWeights);
    - ``moves``: vectors moved per memory pair (``dram0->local``, ``local->array``,
      ``array->acc``, ``acc->simd``, ``simd->acc``, ...);
    - ``saturations``: clipped results per place (``matmul`` = processing elements,
      ``accumulate`` = accumulator adds, ``simd``, ``simd_accumulate``; with an integer data
      type also ``acc_to_local``: accumulator values narrowed to the data type);
    - ``macs``: multiply-accumulates issued (n² per MatMul vector that reads local memory);
    - ``errors``: error conditions.
    """

    def __init__(self, integer: bool = False) -> None:
        self.count_by_kind: Counter = Counter()
        self.vectors_by_kind: Counter = Counter()
        self.moves: Counter = Counter()
        places = ("matmul", "accumulate", "simd", "simd_accumulate") + \
            (("acc_to_local",) if integer else ())
        self.sat = {k: numeric.Saturations() for k in places}
        self.macs = 0
        self.errors = 0

    @property
    def instructions(self) -> int:
        return sum(self.count_by_kind.values())

    @property
    def by_opcode(self) -> Counter:
        """Instructions per opcode name (``MatMul``, ``DataMove``, ...)."""
        out: Counter = Counter()
        for k, v in self.count_by_kind.items():
            out[k.split(".")[0].split("+")[0]] += v
        return out

    @property
    def saturations(self) -> dict:
        return {k: s.count for k, s in self.sat.items()}

    @property
    def total_saturations(self) -> int:
        return sum(s.count for s in self.sat.values())

    def to_dict(self) -> dict:
        return {"instructions": self.instructions,
                "by_opcode": dict(sorted(self.by_opcode.items())),
                "count_by_kind": dict(sorted(self.count_by_kind.items())),
                "vectors_by_kind": dict(sorted(self.vectors_by_kind.items())),
                "moves": dict(sorted(self.moves.items())),
                "saturations": self.saturations,
                "macs": self.macs,
                "errors": self.errors}


class Emulator:
    """Executes TCU instructions on an architecture's state (see the module docstring).

    ``strict``: raise :class:`EmulatorError` at the first error condition instead of
    recording it and going on.
    """

    def __init__(self, arch: Architecture, strict: bool = False) -> None:
        self.arch = arch
        self.layout = arch.layout
        self.dt = arch.dtype
        self.at = self.dt.accumulator         # accumulators and SIMD registers (INT32, INT48)
        self.n = arch.array_size
        self.strict = strict
        self._dispatch = {NoOp: self._noop, MatMul: self._matmul, DataMove: self._data_move,
                          LoadWeights: self._load_weights, SIMD: self._simd,
                          LoadLUT: self._load_lut, Configure: self._configure,
                          Illegal: self._illegal}
        self._depth = arch.layout.memory_depths
        self._bits = {name: clog2(depth) for name, depth in self._depth.items()}
        self.reset()

    # ------------------------------------------------------------------------------- state
    def reset(self) -> None:
        """Power-on state: everything zero, registers at their reset values, stats cleared."""
        a, n, dtype = self.arch, self.n, self.dt.numpy_dtype
        self.dram0 = PagedMemory(a.dram0_depth, n, dtype)
        self.dram1 = PagedMemory(a.dram1_depth, n, dtype)
        self.local = np.zeros((a.local_depth, n), dtype)
        self.acc = np.zeros((a.accumulator_depth, n), dtype)
        self.chain = np.zeros((n + 1, n), dtype)      # chain[0] = bias, chain[1 + j] = row j
        self._rows_bound = None                      # cached for numeric.matmul
        self.registers = np.zeros((a.simd_registers_depth + 1, n), dtype)   # row 0 unused
        self.luts = np.zeros((a.lut_count + 1, max(a.lut_depth, 1)), dtype)
        self.config = {r: r.reset for r in ConfigRegister if r != ConfigRegister.PROGRAM_COUNTER}
        self.pc = 0
        self.index = 0
        self.error = False
        self.events: list[Event] = []
        self.tracepoint_hits: list[int] = []
        self.stats = Stats(self.dt.is_integer)

    @property
    def bias(self) -> np.ndarray:
        return self.chain[0]

    @property
    def weights(self) -> np.ndarray:
        """(n, n) rows: ``weights[j, i]`` multiplies input j into output i."""
        return self.chain[1:]

    def _check_host(self, name: str, base: int, count: int) -> None:
        depth = self._depth[name]
        if base < 0 or count < 0 or base + count > depth:
            raise IndexError(f"{name} vectors {base}..{base + count - 1} are outside "
                             f"0..{depth - 1}")

    def _raw_vectors(self, values) -> np.ndarray:
        v = np.asarray(values)
        if v.ndim == 1:
            v = v.reshape(1, -1)
        if v.ndim != 2 or v.shape[1] != self.n:
            raise ValueError(f"expected (vectors, {self.n}) raw values, got shape {v.shape}")
        if not self.dt.is_float:
            if not np.issubdtype(v.dtype, np.integer):
                raise ValueError("raw fixed-point values must be integers; convert floats "
                                 "with tcu_hw.numeric.to_fixed")
            if v.size and (v.min() < self.dt.min_raw or v.max() > self.dt.max_raw):
                raise ValueError(f"raw values out of range for {self.dt.name}")
        return v.astype(self.dt.numpy_dtype)

    # host access to memories (raw vectors)
    def write_dram0(self, base: int, raw) -> None:
        v = self._raw_vectors(raw)
        self._check_host("dram0", base, len(v))
        self.dram0.write_range(base, v)

    def write_dram1(self, base: int, raw) -> None:
        v = self._raw_vectors(raw)
        self._check_host("dram1", base, len(v))
        self.dram1.write_range(base, v)

    def read_dram0(self, base: int, count: int) -> np.ndarray:
        self._check_host("dram0", base, count)
        return self.dram0.read_range(base, count)

    def read_dram1(self, base: int, count: int) -> np.ndarray:
        self._check_host("dram1", base, count)
        return self.dram1.read_range(base, count)

    def write_local(self, base: int, raw) -> None:
        v = self._raw_vectors(raw)
        self._check_host("local", base, len(v))
        self.local[base:base + len(v)] = v

    # --------------------------------------------------------------------------- execution
    def run(self, program: Sequence[Instruction], start: int = 0, stop: int | None = None
            ) -> None:
        """Execute ``program[start:stop]`` in order."""
        dispatch = self._dispatch
        config = self.config
        hits = self.tracepoint_hits
        for instr in program[start:stop]:
            if self.pc == config[ConfigRegister.TRACEPOINT]:
                hits.append(self.index)
            dispatch[type(instr)](instr)
            self.index += 1

    def execute(self, instr: Instruction) -> None:
        """Execute one instruction."""
        self.run((instr,))

    def probe(self, pattern=None) -> bool:
        """The host's flush probe (TCU.md §7): put a pattern in DRAM0[depth-1], run the probe
        program, and report whether DRAM0[depth-2] now holds it (it must)."""
        d = self.arch.dram0_depth
        if pattern is None:
            pattern = (np.arange(self.n) * 37 + 11) % 127 + 1
        pattern = self._raw_vectors(np.asarray(pattern, dtype=self.dt.numpy_dtype))
        self.dram0.write_range(d - 1, pattern)
        self.run(flush_probe(self.arch))
        return bool(np.array_equal(self.dram0.read_range(d - 2, 1), pattern))

    # ------------------------------------------------------------------------ helpers
    def _fail(self, message: str) -> None:
        event = Event(self.index, self.pc, message)
        self.error = True
        self.events.append(event)
        self.stats.errors += 1
        self._advance()
        if self.strict:
            raise EmulatorError(str(event))

    def _advance(self) -> None:
        self.pc = (self.pc + 1) & _MASK32

    def _span(self, mem: str, base: int, stride: int, count: int):
        """Addresses of ``count`` vectors from ``base`` with step 2^stride, wrapped to the
        memory's address width: a slice when they do not wrap, else an index array.
        Returns ``(index, period)`` (period = distinct addresses before a repeat, or None when
        nothing repeats) or None after reporting an address beyond the memory's depth."""
        bits = self._bits[mem]
        depth = self._depth[mem]
        run = address_run(base, stride, count - 1, bits)
        if run.highest >= depth:
            self._fail(f"{mem} address {run.highest} is beyond the memory's depth "
                       f"({depth} vectors)")
            return None
        mod = 1 << bits
        base &= mod - 1
        step = (1 << stride) & (mod - 1) if stride < bits else 0
        if count == 1 or (step and not run.wraps):
            return slice(base, run.hi + 1, step or 1), None
        idx = (base + np.arange(count, dtype=np.int64) * step) & (mod - 1)
        period = mod // step if step else 1
        return idx, (period if count > period else None)

    @staticmethod
    def _chunks(index, period, count):
        """Split a repeating address run into chunks of distinct addresses, in order."""
        if period is None:
            yield index, slice(0, count)
            return
        for s in range(0, count, period):
            yield index[s:s + period], slice(s, min(s + period, count))

    def _store(self, array: np.ndarray, span, values, accumulate: bool = False,
               sat: numeric.Saturations | None = None) -> None:
        """Write (or accumulate-add) vectors into local memory or the accumulators, with
        the sequential semantics of repeated addresses."""
        index, period = span
        for idx, part in self._chunks(index, period, len(values)):
            v = values[part]
            if accumulate:
                array[idx] = numeric.add(array[idx], v, self.at, sat)
            else:
                array[idx] = v

    def _shift_in(self, span, values) -> None:
        """local → accumulators, shift in (0xE, integer types): ``acc = acc * 2**W +
        (local mod 2**W)``, wrapped to the accumulator width; repeated addresses in order."""
        w, aw = self.dt.width, self.at.width
        index, period = span
        for idx, part in self._chunks(index, period, len(values)):
            v = (self.acc[idx] << w) + (values[part] & ((1 << w) - 1))
            v &= (1 << aw) - 1
            self.acc[idx] = v - ((v >> (aw - 1)) << aw)

    @staticmethod
    def _dram_index(span, count) -> np.ndarray:
        index, _ = span
        if isinstance(index, slice):
            return np.arange(index.start, index.start + count * index.step, index.step,
                             dtype=np.int64)
        return index

    # ---------------------------------------------------------------------- instructions
    def _noop(self, ins: NoOp) -> None:
        self.stats.count_by_kind["NoOp"] += 1
        self._advance()

    def _illegal(self, ins: Illegal) -> None:
        self.stats.count_by_kind["Illegal"] += 1
        self._fail(f"opcode {ins.code:#x} is not an instruction")

    def _matmul(self, ins: MatMul) -> None:
        kind = "MatMul" + ("+accumulate" if ins.accumulate else "") + \
               ("+zeroes" if ins.zeroes else "")
        stats = self.stats
        stats.count_by_kind[kind] += 1
        count = ins.size + 1
        acc_span = self._span("acc", ins.accumulator_address, ins.accumulator_stride, count)
        if acc_span is None:
            return
        if ins.zeroes:
            y = np.broadcast_to(self.chain[0], (count, self.n))
        else:
            local_span = self._span("local", ins.local_address, ins.local_stride, count)
            if local_span is None:
                return
            x = self.local[local_span[0]]
            if self._rows_bound is None and not self.dt.is_float:
                self._rows_bound = int(np.abs(self.chain[1:]).max(axis=1).sum())
            y = numeric.matmul(x, self.chain[1:], self.chain[0], self.dt, stats.sat["matmul"],
                               self._rows_bound)
            stats.moves["local->array"] += count
            stats.macs += count * self.n * self.n
        self._store(self.acc, acc_span, y, ins.accumulate, stats.sat["accumulate"])
        stats.moves["array->acc"] += count
        stats.vectors_by_kind[kind] += count
        self._advance()

    def _data_move(self, ins: DataMove) -> None:
        kind = ins.known_kind
        stats = self.stats
        if kind is None or kind not in self.layout.data_move_kinds:
            stats.count_by_kind[f"DataMove.kind{int(ins.kind)}"] += 1
            self._fail(f"DataMove kind {int(ins.kind):#x} is reserved (allowed: "
                       + ", ".join(f"{k.value:#x} {k.label}" for k in self.layout.data_move_kinds)
                       + ")")
            return
        key = "DataMove." + kind.label
        stats.count_by_kind[key] += 1
        count = ins.size + 1
        other = kind.memory
        local_span = self._span("local", ins.local_address, ins.local_stride, count)
        if local_span is None:
            return
        other_span = self._span(other, ins.other_address, ins.other_stride, count)
        if other_span is None:
            return
        if kind.to_local:
            if other == "acc":
                values = self.acc[other_span[0]]
                if kind == DataMoveKind.ACC_TO_LOCAL_RELU:
                    values = np.maximum(values, 0)
                if self.dt.is_integer:          # accumulator values narrow to the data type
                    values = numeric.saturate(values, self.dt, stats.sat["acc_to_local"])
            else:
                mem = self.dram0 if other == "dram0" else self.dram1
                values = mem.read(self._dram_index(other_span, count))
            self._store(self.local, local_span, values)
            stats.moves[f"{other}->local"] += count
        else:
            values = self.local[local_span[0]]
            if kind == DataMoveKind.LOCAL_TO_ACC_SHIFT:
                self._shift_in(other_span, values)
            elif other == "acc":
                acc = kind == DataMoveKind.LOCAL_TO_ACC_ACCUMULATE
                self._store(self.acc, other_span, values, acc, stats.sat["accumulate"])
            else:
                mem = self.dram0 if other == "dram0" else self.dram1
                index = self._dram_index(other_span, count)
                for idx, part in self._chunks(index, other_span[1], count):
                    mem.write(idx, values[part])
            stats.moves[f"local->{other}"] += count
        stats.vectors_by_kind[key] += count
        self._advance()

    def _load_weights(self, ins: LoadWeights) -> None:
        kind = "LoadWeights+zeroes" if ins.zeroes else "LoadWeights"
        stats = self.stats
        stats.count_by_kind[kind] += 1
        count = ins.size + 1
        keep = self.n + 1
        if ins.zeroes:
            pushed = np.zeros((min(count, keep), self.n), self.dt.numpy_dtype)
        else:
            span = self._span("local", ins.local_address, ins.local_stride, count)
            if span is None:
                return
            # pushed top-down, so the last pushed (local[la]) ends up as the bias
            pushed = self.local[span[0]][:keep]
            stats.moves["local->array"] += count
        self.chain = np.concatenate((pushed, self.chain))[:keep]
        self._rows_bound = None
        stats.vectors_by_kind[kind] += count
        self._advance()

    def _simd(self, ins: SIMD) -> None:
        stats = self.stats
        op = ins.known_op
        label = op.label if op is not None else f"op{int(ins.op)}"
        key = "SIMD." + label
        stats.count_by_kind[key] += 1
        arch = self.arch
        if op == SimdOp.NOOP:
            if ins.flags:
                self._fail("SIMD NoOp with read/write/accumulate flags")
            else:
                stats.vectors_by_kind[key] += 1
                self._advance()
            return
        if int(ins.op) not in arch.layout.simd_ops:
            self._fail(f"SIMD op {int(ins.op)} is not defined"
                       + (" (Lookup needs lut_count >= 1)" if op == SimdOp.LOOKUP else "")
                       + (" (Requantize needs an integer data type)"
                          if op == SimdOp.REQUANTIZE else ""))
            return
        depth = arch.simd_registers_depth
        for what, r in (("left source", ins.left), ("right source", ins.right),
                        ("destination", ins.dest)):
            if r > depth:
                self._fail(f"SIMD {what} R{r} does not exist (simd_registers_depth = {depth})")
                return
        if op == SimdOp.LOOKUP and ins.dest + arch.lut_count > depth:
            self._fail(f"SIMD Lookup into R{ins.dest} needs registers up to "
                       f"R{ins.dest + arch.lut_count} (simd_registers_depth = {depth})")
            return
        if op == SimdOp.REQUANTIZE and not 1 <= ins.right < depth:
            self._fail(f"SIMD Requantize reads its parameters from R{ins.right} and its bias "
                       f"from R{ins.right + 1}: it needs 1 <= right < {depth} "
                       f"(simd_registers_depth = {depth})")
            return
        bits, adepth = self._bits["acc"], self.arch.accumulator_depth
        rd = ins.read_address & ((1 << bits) - 1)
        wr = ins.write_address & ((1 << bits) - 1)
        for flag, addr in ((ins.read, rd), (ins.write, wr)):
            if flag and addr >= adepth:
                self._fail(f"acc address {addr} is beyond the memory's depth ({adepth} vectors)")
                return
        if ins.read:
            inp = self.acc[rd]
            stats.moves["acc->simd"] += 1
        else:
            inp = np.zeros(self.n, self.dt.numpy_dtype)
        out = self._simd_value(op, ins, inp)
        if ins.write:
            if ins.accumulate:
                self.acc[wr] = numeric.add(self.acc[wr], out, self.at,
                                           stats.sat["simd_accumulate"])
            else:
                self.acc[wr] = out
            stats.moves["simd->acc"] += 1
        stats.vectors_by_kind[key] += 1
        self._advance()

    def _simd_value(self, op: SimdOp, ins: SIMD, inp: np.ndarray) -> np.ndarray:
        """The op's output for input ``inp``; sets the destination register (and, for
        Lookup, the registers after it)."""
        regs, sat = self.registers, self.stats.sat["simd"]
        left = inp if ins.left == 0 else regs[ins.left]
        if op == SimdOp.REQUANTIZE:
            out = numeric.requantize(left, regs[ins.right], regs[ins.right + 1], self.dt, sat)
        elif op == SimdOp.LOOKUP:
            out, values = alu.lookup(left, self.luts, self.at, sat)
            regs[ins.dest + 1:ins.dest + 1 + self.arch.lut_count] = values
        else:
            right = inp if ins.right == 0 else regs[ins.right]
            out = alu.simd_result(op, left, right, self.at, sat)
        if ins.dest:
            regs[ins.dest] = out
        return out

    def _load_lut(self, ins: LoadLUT) -> None:
        stats = self.stats
        stats.count_by_kind["LoadLUT"] += 1
        arch = self.arch
        if arch.lut_count == 0:
            self._fail("LoadLUT needs an architecture with lookup tables (lut_count >= 1)")
            return
        if ins.table > arch.lut_count:
            self._fail(f"LoadLUT table {ins.table} does not exist (0 = keys, 1..{arch.lut_count} "
                       f"= values)")
            return
        count = arch.layout.lut_vectors
        span = self._span("local", ins.local_address, ins.local_stride, count)
        if span is None:
            return
        self.luts[ins.table] = self.local[span[0]].reshape(-1)[:arch.lut_depth]
        stats.moves["local->lut"] += count
        stats.vectors_by_kind["LoadLUT"] += count
        self._advance()

    def _configure(self, ins: Configure) -> None:
        self.stats.count_by_kind["Configure"] += 1
        try:
            reg = ConfigRegister(ins.register)
        except ValueError:
            self._advance()                       # unknown registers are ignored
            return
        if reg == ConfigRegister.PROGRAM_COUNTER:
            self.pc = ins.value & _MASK32         # does not also increment
            return
        self.config[reg] = ins.value & ((1 << reg.width) - 1)
        self._advance()
