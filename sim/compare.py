"""Bit-exact comparison of a hardware backend with the golden emulator.

``compare(program, images, backend)`` runs one program from the same initial memories on
the emulator and on a backend and compares, at the end: DRAM0 and DRAM1 (every vector) and
the sticky error flag; for backends that expose them (:class:`sim.pyrtl_backend.PyrtlCore`)
also local memory, accumulators, the program counter and the PC of the first error
(:class:`sim.verilator_backend.VerilatorTop` sees only what a host sees: the DRAMs and the
error output). It returns the list of differences (empty when the two agree) with the
backend's run result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from tcu_hw.isa import Instruction

from .emulator import Emulator

#: DRAMs larger than this many vectors are compared on the regions either side touched.
DENSE_LIMIT = 1 << 22


@dataclass
class Images:
    """Initial memory contents: {base vector: (k, n) raw} per memory."""

    dram0: Mapping[int, np.ndarray] = field(default_factory=dict)
    dram1: Mapping[int, np.ndarray] = field(default_factory=dict)
    local: Mapping[int, np.ndarray] = field(default_factory=dict)


def run_emulator(arch, program: Sequence[Instruction], images: Images) -> Emulator:
    emu = Emulator(arch)
    for base, raw in images.dram0.items():
        emu.write_dram0(base, raw)
    for base, raw in images.dram1.items():
        emu.write_dram1(base, raw)
    for base, raw in images.local.items():
        emu.write_local(base, raw)
    emu.run(program)
    return emu


def _diff(name: str, want: np.ndarray, got: np.ndarray, limit: int = 3) -> list[str]:
    if np.array_equal(want, got):
        return []
    rows = np.nonzero((want != got).any(axis=1))[0]
    out = [f"{name}: {len(rows)} vector(s) differ"]
    for r in rows[:limit]:
        out.append(f"  {name}[{r}]: emulator {want[r].tolist()}, hardware {got[r].tolist()}")
    return out


def _dram_dense(memory, depth: int) -> np.ndarray:
    out = np.zeros((depth, memory.lanes), np.int64)
    for first, page in memory.used().items():
        out[first:first + len(page)] = page[:max(0, min(len(page), depth - first))]
    return out


def compare(program: Sequence[Instruction], images: Images, backend, timing=None,
            emulator: Emulator | None = None) -> tuple[list[str], object]:
    """Run on both and return (differences, backend result)."""
    arch = backend.arch
    emu = emulator or run_emulator(arch, program, images)
    kwargs = {} if timing is None else {"timing": timing}
    if images.local and not hasattr(backend, "read_local"):
        raise ValueError("this backend cannot preload local memory")
    extra = {"local": images.local} if hasattr(backend, "read_local") else {}
    result = backend.run(program, dram0=images.dram0, dram1=images.dram1, **extra, **kwargs)
    diffs = []
    if hasattr(backend, "read_local"):          # backends that expose the on-chip memories
        diffs += _diff("local", emu.local, backend.read_local())
        diffs += _diff("acc", emu.acc, backend.read_acc())
    for k, depth in ((0, arch.dram0_depth), (1, arch.dram1_depth)):
        mem = emu.dram0 if k == 0 else emu.dram1
        read = backend.read_dram0 if k == 0 else backend.read_dram1
        if depth <= DENSE_LIMIT:
            diffs += _diff(f"dram{k}", _dram_dense(mem, depth), read(0, depth))
        else:
            for first, page in mem.used().items():
                count = min(len(page), depth - first)
                diffs += _diff(f"dram{k}@{first}", page[:count], read(first, count))
    if hasattr(result, "pc") and emu.pc != result.pc:
        diffs.append(f"pc: emulator {emu.pc}, hardware {result.pc}")
    if emu.error != result.error:
        diffs.append(f"error flag: emulator {emu.error} ({emu.events[:1]}), hardware "
                     f"{result.error}")
    elif emu.error and hasattr(result, "error_pc") and emu.events[0].pc != result.error_pc:
        diffs.append(f"first error pc: emulator {emu.events[0].pc}, hardware {result.error_pc}")
    return diffs, result
