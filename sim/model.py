"""Running compiled models: loading a `.tmodel`, placing constants and inputs, gathering outputs.

Shared by every backend (emulator, PyRTL, Verilator, driver) so that they all place data the
same way. Inputs and outputs are in vector layout (TCU.md §5): an input with several DRAM0
runs takes its vectors in order of base address.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from tcu_hw import numeric
from tcu_hw.artifacts import TModel, format_csv, read_csv, read_tdata, read_tmodel, write_csv
from tcu_hw.errors import ArtifactError
from tcu_hw.files import check_writable
from tcu_hw.isa import (DataMove, DataMoveKind, Instruction, MatMul, address_run, clog2,
                        flush_probe, read_program)

from .emulator import Emulator, Event, Stats


def load_model(model) -> TModel:
    """A TModel from a path (checked) or a TModel (returned)."""
    return model if isinstance(model, TModel) else read_tmodel(model)


@functools.lru_cache(maxsize=8)
def _program(path: str, size: int, mtime: int, layout) -> tuple:
    return tuple(read_program(path, layout))


def load_program(model: TModel) -> tuple[Instruction, ...]:
    """The model's decoded program (cached while the file is unchanged)."""
    path = model.path(model.prog.file_name)
    try:
        st = os.stat(path)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read program: {e.strerror}") from None
    return _program(str(path), st.st_size, st.st_mtime_ns, model.arch.layout)


def array_macs(model: TModel) -> int:
    """Multiply-accumulates the systolic array does in one run of the program: n² for every
    MatMul vector read from local memory (MatMuls of zeroes excluded), as the emulator's
    ``Stats.macs`` counts them."""
    n = model.arch.array_size
    return n * n * sum(ins.size + 1 for ins in load_program(model)
                       if isinstance(ins, MatMul) and not ins.zeroes)


def consts_images(model: TModel, key: str = "consts") -> list[tuple[int, np.ndarray]]:
    """(base, raw vectors) of every entry of ``model.<key>``: ``consts`` (DRAM1, or local
    memory for ``load_consts_to_local``) or ``dram0_consts`` (their copies in DRAM0)."""
    out = []
    for c in getattr(model, key):
        raw = read_tdata(model.path(c.file_name), model.arch)
        if len(raw) != c.size:
            raise ArtifactError(f"{model.path(c.file_name)}: {len(raw)} vectors, the model "
                                f"says {c.size}")
        out.append((c.base, raw))
    return out


def host_images(model: TModel, raw_inputs: Mapping[str, np.ndarray] | None = None,
                consts_to_local: bool | None = None) -> tuple[dict, dict, dict]:
    """(DRAM0, DRAM1, local) images a host writes before a run of ``model`` (see
    :func:`memory_images`); the inputs' runs (and copies) when ``raw_inputs`` are given."""
    if consts_to_local and model.dram0_consts:
        raise ArtifactError(f"model {model.name!r} loads its constants from DRAM0 and DRAM1 "
                            f"(dram0_consts: compiled with --consts-ports both); it cannot "
                            f"run with them in local memory (--local-consts)")
    inputs, copies = {}, {}
    for name in (model.input_names if raw_inputs is not None else ()):
        runs, copy = place_input(model, name, raw_inputs[name])
        inputs.update(runs)
        copies.update(copy)
    return memory_images(consts_images(model), consts_images(model, "dram0_consts"), inputs,
                         model.consts_to_local if consts_to_local is None else consts_to_local,
                         copies)


def memory_images(consts, dram0_consts, inputs, to_local: bool, input_copies=()
                  ) -> tuple[dict, dict, dict]:
    """(DRAM0, DRAM1, local) images, {vector base: raw vectors}: the ``inputs`` and the
    constants' copies ``dram0_consts`` in DRAM0; the constants ``consts`` ((base, raw)
    pairs) in DRAM1, or in local memory when ``to_local``; the inputs' copies
    ``input_copies`` in DRAM1."""
    dram0 = dict(dram0_consts)
    dram0.update(inputs)
    consts = {base: raw for base, raw in consts if len(raw)}
    dram1 = {} if to_local else dict(consts)
    dram1.update(input_copies)
    return dram0, dram1, consts if to_local else {}


def dram1_extent(model: TModel) -> int:
    """Vectors of DRAM1 a run of ``model`` uses: its constants, its inputs' copies
    (``dram1_inputs``) and every vector its program moves to or from DRAM1 (the compiler
    homes some intermediate buffers above the constants, :mod:`compiler_lite.ports`). A
    host that gives the TCU less DRAM1 than this would have the program write past it."""
    top = max([c.base + c.size for c in model.consts + model.dram1_inputs] + [0])
    bits = clog2(model.arch.dram1_depth)
    for ins in load_program(model):
        if isinstance(ins, DataMove) and ins.kind.memory == "dram1":
            top = max(top, address_run(ins.other_address, ins.other_stride, ins.size,
                                       bits).highest + 1)
    return top


def input_raw(model: TModel, name: str, values, raw: bool = False, runs: int = 1
              ) -> tuple[np.ndarray, int]:
    """Check and convert one input: returns ``(raw (runs·vectors, n), saturations)``.

    ``values`` is (vectors, n) or anything of that many elements; floats are converted with
    :func:`tcu_hw.numeric.to_fixed` unless ``raw``.
    """
    n = model.arch.array_size
    want = model.vectors(name) * runs
    a = np.asarray(values)
    if a.size != want * n:
        shape = f"({want}, {n})"
        raise ArtifactError(f"input {name!r}: got {a.shape[0] if a.ndim == 2 else a.size} "
                            f"{'vectors' if a.ndim == 2 else 'values'}, expected {shape}"
                            + (f" ({runs} runs)" if runs > 1 else "")
                            + " in vector layout (NHWC, channels padded to array_size)")
    a = a.reshape(want, n)
    dt = model.arch.dtype
    if raw:
        if not dt.is_float and not np.issubdtype(a.dtype, np.integer):
            raise ArtifactError(f"input {name!r}: raw values must be integers")
        if not dt.is_float and a.size and (a.min() < dt.min_raw or a.max() > dt.max_raw):
            raise ArtifactError(f"input {name!r}: raw values outside {dt.name} range "
                                f"{dt.min_raw}..{dt.max_raw}")
        return a.astype(dt.numpy_dtype), 0
    bad = numeric.nonfinite(a)
    if bad:
        raise ArtifactError(f"input {name!r}: {bad}; the TCU computes on finite numbers")
    try:
        return numeric.to_fixed(a, dt)
    except ValueError as e:
        raise ArtifactError(f"input {name!r}: {e}") from None


def place(model: TModel, name: str, raw: np.ndarray, outputs: bool = False
          ) -> list[tuple[int, np.ndarray]]:
    """Split one tensor's vectors over its DRAM0 runs: [(base, chunk), ...]."""
    out, at = [], 0
    for e in model.entries(name, outputs):
        out.append((e.base, raw[at:at + e.size]))
        at += e.size
    return out


def place_input(model: TModel, name: str, raw) -> tuple[list, list]:
    """Where a host writes one input's raw vectors: its DRAM0 runs (:func:`place`) and, for a
    model compiled with ``--input-ports both``, its copy in DRAM1 (``dram1_inputs``):
    ``([(base, chunk)], [(base, raw)])``."""
    raw = np.asarray(raw)
    return place(model, name, raw), [(e.base, raw) for e in model.dram1_inputs
                                     if e.name == name]


def gather(model: TModel, name: str, read) -> np.ndarray:
    """One output's raw vectors from its DRAM0 runs; ``read(base, count)`` reads DRAM0."""
    parts = [read(e.base, e.size) for e in model.entries(name, outputs=True)]
    return np.concatenate(parts) if parts else np.zeros((0, model.arch.array_size))


def dram_image(arch, depth: int, images: Mapping[int, np.ndarray]) -> bytearray:
    """The bytes of a ``depth``-vector DRAM holding ``images`` ({vector base: raw vectors}),
    zero elsewhere: what a host copies into DRAM0 or DRAM1 before a run."""
    data = bytearray(depth * arch.vector_bytes)
    for base, raw in dict(images).items():
        blob = numeric.encode_vectors(np.asarray(raw).reshape(-1, arch.array_size), arch.dtype)
        start = base * arch.vector_bytes
        if start + len(blob) > len(data):
            raise ArtifactError(f"{len(blob) // arch.vector_bytes} vectors at {base} do not fit "
                                f"a DRAM of {depth} vectors")
        data[start:start + len(blob)] = blob
    return data


def host_program(model: TModel, head=(), probe: bool = True) -> list[Instruction]:
    """The instructions a host streams for one run of ``model`` (TCU.md §7): ``head`` (e.g.
    Configure of the DRAM offsets), for ``load_consts_to_local`` models the DataMoves that copy
    every constants entry from DRAM1 to the same addresses in local memory (split to the
    size field's range), the program, and with ``probe`` the flush probe."""
    program = list(head)
    if model.consts_to_local:
        limit = 1 << model.arch.layout.op2_addr_bits
        for c in model.consts:
            for start in range(0, c.size, limit):
                count = min(limit, c.size - start)
                program.append(DataMove(DataMoveKind.DRAM1_TO_LOCAL, c.base + start, 0,
                                        c.base + start, 0, count - 1))
    program += load_program(model)
    return program + (flush_probe(model.arch) if probe else [])


@dataclass
class ModelResult:
    """Outputs (raw vectors per name) of one run, with the emulator's statistics and events."""

    model: TModel
    outputs: dict[str, np.ndarray]
    stats: Stats
    events: list[Event] = field(default_factory=list)
    input_saturations: int = 0


def prepare(emu: Emulator, model: TModel, consts_to_local: bool | None = None) -> None:
    """Load the model's constants into DRAM1 (or local memory), and their copies in DRAM0."""
    write_images(emu, host_images(model, None, consts_to_local))


def write_images(emu: Emulator, images: tuple[dict, dict, dict]) -> None:
    """Write (DRAM0, DRAM1, local) images ({vector base: raw vectors}) into ``emu``."""
    for write, image in zip((emu.write_dram0, emu.write_dram1, emu.write_local), images):
        for base, raw in image.items():
            write(base, raw)


def emulate(model, inputs: Mapping[str, object], raw: bool = False,
            emulator: Emulator | None = None, consts_to_local: bool | None = None,
            strict: bool = False) -> ModelResult:
    """Run a compiled model on the golden emulator.

    ``inputs`` maps every input name to its values in vector layout (floats, or raw integers
    with ``raw=True``). A fresh emulator is used unless one is given (then its state, e.g.
    constants already loaded, is kept and the constants are not reloaded).
    """
    model = load_model(model)
    missing = [n for n in model.input_names if n not in inputs]
    extra = [n for n in inputs if n not in model.input_names]
    if missing or extra:
        raise ArtifactError(f"model {model.name!r} inputs are {', '.join(model.input_names)}; "
                            + (f"missing {', '.join(missing)}" if missing else "")
                            + ("; " if missing and extra else "")
                            + (f"unknown {', '.join(extra)}" if extra else ""))
    program = load_program(model)
    if emulator is None:
        emulator = Emulator(model.arch, strict=strict)
        prepare(emulator, model, consts_to_local)
    sats = 0
    for name in model.input_names:
        r, s = input_raw(model, name, inputs[name], raw)
        sats += s
        placed, copies = place_input(model, name, r)
        write_images(emulator, (dict(placed), dict(copies), {}))
    first_event = len(emulator.events)
    emulator.run(program)
    outputs = {name: gather(model, name, emulator.read_dram0) for name in model.output_names}
    return ModelResult(model, outputs, emulator.stats, emulator.events[first_event:], sats)


# ------------------------------------------------------------------- CSV files (CLIs)

def split_paths(text: str | None) -> list:
    """``a.csv,b.csv`` → [Path('a.csv'), Path('b.csv')] (Tensil's comma-separated lists)."""
    from pathlib import Path
    return [Path(p) for p in text.split(",") if p] if text else []


def read_input_csvs(model: TModel, paths, runs: int = 1) -> tuple[dict, int]:
    """One CSV per model input (manifest order) → ({name: raw (runs·vectors, n)}, saturations).
    Each CSV holds ``runs`` inputs one after another, one vector per line."""
    names = model.input_names
    if len(paths) != len(names):
        raise ArtifactError(f"model {model.name!r} has {len(names)} input(s) "
                            f"({', '.join(names)}), got {len(paths)} CSV file(s)")
    raw, sats = {}, 0
    for name, path in zip(names, paths):
        values = read_csv(path, model.arch.array_size)
        want = model.vectors(name) * runs
        if len(values) != want:
            raise ArtifactError(f"{path}: {len(values)} vectors (lines), expected {want} for "
                                f"input {name!r}" + (f" ({runs} runs)" if runs > 1 else ""))
        try:
            raw[name], s = input_raw(model, name, values, runs=runs)
        except ArtifactError as e:
            raise ArtifactError(f"{path}: {e}") from None
        sats += s
    return raw, sats


def check_output_paths(model: TModel, paths, flag: str, writes: bool = True) -> None:
    """One path per output; with ``writes``, each one writable (checked before any run)."""
    if paths and len(paths) != len(model.output_names):
        raise ArtifactError(f"model {model.name!r} has {len(model.output_names)} output(s) "
                            f"({', '.join(model.output_names)}), got {len(paths)} {flag} file(s)")
    for path in (paths or []) if writes else []:
        check_writable(path, flag, ArtifactError)


def write_output_csvs(model: TModel, outputs: dict, paths, raw: bool = False) -> None:
    """One CSV per output name (floats, or raw integers with ``raw``)."""
    dt = model.arch.dtype
    for name, path in zip(model.output_names, paths):
        write_csv(path, outputs[name] if raw else numeric.to_float(outputs[name], dt), raw)


def format_outputs(model: TModel, outputs: dict, runs: int = 1, raw: bool = False) -> str:
    """Outputs as text: ``OUTPUT name, RUN r`` then one vector per line."""
    dt = model.arch.dtype
    text = []
    for name in model.output_names:
        size = model.vectors(name, outputs=True)
        for r in range(runs):
            block = outputs[name][r * size:(r + 1) * size]
            text.append(f"OUTPUT {name}, RUN {r}\n")
            text.append(format_csv(block if raw else numeric.to_float(block, dt), raw))
    return "".join(text)


def probe_pattern(arch) -> bytes:
    """A DRAM image of one vector for the flush probe: valid raw values of the data type
    (they survive the round trip through local memory) that a program is unlikely to leave
    at DRAM0[depth-2] by itself."""
    dt = arch.dtype
    n = arch.array_size
    raw = np.array([[(37 * i + 11) % 120 - 61 for i in range(n)]])
    if dt.is_float:
        raw = raw.astype(np.float32) + np.float32(0.5)
    return numeric.encode_vectors(raw, dt)

