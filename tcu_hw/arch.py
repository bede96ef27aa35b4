"""Architectures (`.tarch`, TCU.md §1) and implementation options.

An :class:`Architecture` is immutable and always valid: every constructor path checks every
key and reports all problems at once, naming the file and the key and saying what is allowed.
Presets for Tensil's six boards, and integer variants of two of them (INT8, INT16;
docs/integer.md), ship as `.tarch` files in ``tcu_hw/archs/`` and are accepted by name
wherever a `.tarch` path is (:func:`resolve_arch`).

:class:`Options` holds what is implementation, not architecture: AXI data width, memory
implementation, reset polarity, sampler block size and decoder timeout.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from . import numeric
from .errors import ArchitectureError, OptionsError
from .files import read_json

#: The 11 keys of a Tensil `.tarch`, in Tensil's order; all are required.
TARCH_KEYS = ("data_type", "array_size", "dram0_depth", "dram1_depth", "local_depth",
              "accumulator_depth", "simd_registers_depth", "stride0_depth", "stride1_depth",
              "number_of_threads", "thread_queue_depth")
#: Optional extension keys (TCU.md §4.6) and their defaults.
EXTENSION_KEYS = {"lut_count": 0, "lut_depth": 0}

#: Inclusive ranges of the integer keys.
RANGES = {
    "array_size": (2, 256),
    "dram0_depth": (2, 1 << 32),
    "dram1_depth": (2, 1 << 32),
    "local_depth": (2, 1 << 16),
    "accumulator_depth": (2, 1 << 16),
    "simd_registers_depth": (0, 16),
    "stride0_depth": (1, 256),
    "stride1_depth": (1, 256),
    "number_of_threads": (1, 1),
    "thread_queue_depth": (1, 1 << 16),
    "lut_count": (0, 15),
    "lut_depth": (0, 1024),
}

PRESET_DIR = Path(__file__).with_name("archs")
#: Built-in architectures, usable by name wherever a `.tarch` path is accepted: Tensil's six
#: boards, then integer variants (docs/integer.md: the board's memories, INT8 or INT16, and
#: four SIMD registers: Requantize's parameters and bias, and two for clamps or tables).
PRESETS = ("pynqz1", "ultra96v2", "zcu104", "zcu104_uram", "artya7100t", "cmoda7",
           "pynqz1_int8", "ultra96v2_int8", "ultra96v2_int16")


def _problems(values: dict) -> list[str]:
    """Every problem with a dict of architecture values (empty when valid)."""
    out = []
    for key in TARCH_KEYS:
        if key not in values:
            out.append(f"missing key '{key}' (a .tarch needs all of: {', '.join(TARCH_KEYS)})")
    allowed = set(TARCH_KEYS) | set(EXTENSION_KEYS)
    for key in values:
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            out.append(f"unknown key '{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else "")
                       + f"; allowed keys: {', '.join(TARCH_KEYS)}, and the extensions "
                       + ", ".join(EXTENSION_KEYS))
    if "data_type" in values:
        dt = values["data_type"]
        if not isinstance(dt, str) or dt not in numeric.DATA_TYPES:
            out.append(f"key 'data_type' = {dt!r} is not a data type; allowed: "
                       + ", ".join(numeric.DATA_TYPES))
    valid = {}
    for key, (lo, hi) in RANGES.items():
        if key not in values:
            continue
        v = values[key]
        if isinstance(v, bool) or not isinstance(v, int):
            out.append(f"key '{key}' must be an integer, got {json.dumps(v, default=str)}")
        elif not lo <= v <= hi:
            out.append(f"key '{key}' = {v} is out of range; allowed {lo}..{hi}"
                       + (" (hardware has one thread)" if key == "number_of_threads" else ""))
        else:
            valid[key] = v
    # rules between keys, checked when the keys involved are valid (absent = default 0)
    usable = {k: k in valid or k not in values for k in ("lut_count", "lut_depth")}
    n, depth = valid.get("lut_count", 0), valid.get("lut_depth", 0)
    if usable["lut_count"] and usable["lut_depth"]:
        if n == 0 and depth != 0:
            out.append(f"key 'lut_depth' = {depth} needs 'lut_count' >= 1 (or set it to 0)")
        if n > 0 and depth < 2:
            out.append(f"key 'lut_depth' = {depth} is out of range for lut_count = {n}; "
                       f"allowed 2..{RANGES['lut_depth'][1]}")
    if n > 0 and "simd_registers_depth" in valid and n > valid["simd_registers_depth"]:
        out.append(f"key 'lut_count' = {n} exceeds 'simd_registers_depth' = "
                   f"{valid['simd_registers_depth']}: a Lookup writes one register per "
                   f"value table")
    return out


@dataclass(frozen=True)
class Architecture:
    """The 11 `.tarch` parameters plus the lookup-table extension (TCU.md §1).

    Construction validates; an invalid combination raises :class:`ArchitectureError`.
    ``extension_keys`` records which extension keys a loaded file spelled out, so that saving
    writes the same keys back (it does not take part in equality).
    """

    data_type: str
    array_size: int
    dram0_depth: int
    dram1_depth: int
    local_depth: int
    accumulator_depth: int
    simd_registers_depth: int
    stride0_depth: int
    stride1_depth: int
    number_of_threads: int = 1
    thread_queue_depth: int = 8
    lut_count: int = 0
    lut_depth: int = 0
    extension_keys: tuple = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        problems = _problems(self._values())
        if problems:
            raise ArchitectureError("invalid architecture: " + "; ".join(problems))

    def _values(self) -> dict:
        return {k: getattr(self, k) for k in (*TARCH_KEYS, *EXTENSION_KEYS)}

    # ------------------------------------------------------------------ construction / files
    @classmethod
    def from_dict(cls, values: dict, source: str = "architecture") -> "Architecture":
        """Validate a `.tarch` dict; errors name ``source`` and every offending key."""
        if not isinstance(values, dict):
            raise ArchitectureError(f"{source}: a .tarch must be a JSON object, "
                                    f"got {type(values).__name__}")
        problems = _problems(values)
        if problems:
            if len(problems) == 1:
                raise ArchitectureError(f"{source}: {problems[0]}")
            raise ArchitectureError(f"{source}: {len(problems)} problems:\n  - "
                                    + "\n  - ".join(problems))
        ext = tuple(k for k in EXTENSION_KEYS if k in values)
        return cls(**{k: values[k] for k in values}, extension_keys=ext)

    def with_changes(self, source: str = "architecture", **changes) -> "Architecture":
        """A copy with some `.tarch` keys changed, validated like a file: an error names
        ``source`` and every bad or unknown key (``arch.with_changes(data_type="FLOAT32")``)."""
        return Architecture.from_dict({**self.to_dict(), **changes}, source=source)

    def to_dict(self) -> dict:
        """The `.tarch` dict: the 11 keys in Tensil's order, then the extension keys that were
        given or are non-zero."""
        d = {k: getattr(self, k) for k in TARCH_KEYS}
        for k, default in EXTENSION_KEYS.items():
            if k in self.extension_keys or getattr(self, k) != default:
                d[k] = getattr(self, k)
        return d

    def differences(self, other: "Architecture") -> list[str]:
        """``"key mine vs theirs"`` for every `.tarch` key whose value differs from
        ``other``'s (empty when they describe the same architecture)."""
        a, b = self.to_dict(), other.to_dict()
        return [f"{k} {a.get(k)} vs {b.get(k)}" for k in sorted(set(a) | set(b))
                if a.get(k) != b.get(k)]

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=4) + "\n"

    def save(self, path) -> None:
        """Write a `.tarch` file."""
        Path(path).write_text(self.to_json())

    # ------------------------------------------------------------------ derived facts
    @property
    def dtype(self) -> numeric.DataType:
        """The :class:`~tcu_hw.numeric.DataType` object."""
        return numeric.data_type(self.data_type)

    @property
    def layout(self):
        """The instruction :class:`~tcu_hw.isa.Layout` of this architecture."""
        from .isa import Layout
        return Layout.of(self)

    @property
    def vector_bytes(self) -> int:
        """Bytes of one vector in DRAM and in files."""
        return self.array_size * self.dtype.bytes_per_scalar

    def require_hardware(self, source: str = "architecture") -> None:
        """Refuse what only the compiler and emulator support (FLOAT32)."""
        if self.dtype.is_float:
            raise ArchitectureError(
                f"{source}: data_type FLOAT32 is for the compiler and emulator only; hardware "
                f"needs one of {', '.join(n for n, t in numeric.DATA_TYPES.items() if not t.is_float)}")


def load_arch(path) -> Architecture:
    """Load and validate a `.tarch` file."""
    values = read_json(path, "architecture file (.tarch JSON)", ArchitectureError)
    return Architecture.from_dict(values, source=str(path))


def preset(name: str) -> Architecture:
    """A built-in architecture by board name (see :data:`PRESETS`)."""
    if name not in PRESETS:
        raise ArchitectureError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return _preset(name)


@functools.lru_cache(maxsize=None)
def _preset(name: str) -> Architecture:
    """A preset's file, read once (an Architecture is immutable)."""
    return load_arch(PRESET_DIR / f"{name}.tarch")


ArchSpec = Union[str, Path, Architecture]


def resolve_arch(spec: ArchSpec) -> Architecture:
    """An architecture from a preset name, a `.tarch` path, or an Architecture (returned).

    A bare preset name (``pynqz1``) always means the preset; use ``./pynqz1`` for a file of
    that name."""
    if isinstance(spec, Architecture):
        return spec
    if str(spec) in PRESETS:              # a bare preset name wins over a same-named file
        return preset(str(spec))
    p = Path(spec)
    if p.is_file():
        return load_arch(p)
    if p.suffix or "/" in str(spec) or "\\" in str(spec):
        raise ArchitectureError(f"{spec}: architecture file not found (presets: "
                                f"{', '.join(PRESETS)})")
    hint = difflib.get_close_matches(str(spec), PRESETS, n=1)
    raise ArchitectureError(f"unknown architecture {str(spec)!r}: not a .tarch file and not a "
                            f"preset" + (f" (did you mean '{hint[0]}'?)" if hint else "")
                            + f"; presets: {', '.join(PRESETS)}")


def arch_stem(spec: ArchSpec) -> str:
    """The name used in model names: the preset name or the `.tarch` file's stem."""
    if isinstance(spec, Architecture):
        raise TypeError("an Architecture object has no file name; pass the path or preset")
    p = Path(spec)
    return p.stem if p.suffix == ".tarch" or p.is_file() else str(spec)


# ------------------------------------------------------------------------------------------
# Implementation options

MEM_IMPLS = ("bram", "uram", "regs")

#: Decoded compute instructions the compute unit queues ahead of the one it runs (the
#: dispatcher can run this far ahead; the compiler's cycle estimate models it).
COMPUTE_QUEUE_DEPTH = 2


@dataclass(frozen=True)
class Options:
    """How an architecture is implemented (not part of the `.tarch`).

    - ``axi_data_width``: AXI4/AXI-Stream data width in bits, a power of two 32..1024.
    - ``mem_impl``: ``bram`` (block RAM), ``uram`` (UltraRAM hints) or ``regs`` (flip-flops).
    - ``reset_active_low``: the top's ``reset`` is active low (Tensil's convention).
    - ``sample_block_size``: sampler words per ``tlast``; 0 builds no sampler.
    - ``decoder_timeout``: reset value of the timeout register, cycles (1..65535).
    - ``chained_hazards``: an instruction that reads local memory waits per vector for an
      earlier move in the other unit that writes it, instead of for the whole move at
      dispatch (see :mod:`tcu_hw.core`).
    - ``weight_loader``: LoadWeights run in a weight loader beside the compute sequencer,
      reading local memory port A when the sequencer does not want it, else port B, so the
      next tile's pushes overlap this tile's MatMuls (see :mod:`tcu_hw.blocks.weight_loader`);
      False pushes them through the sequencer's one-vector-per-cycle slot.
    """

    axi_data_width: int = 64
    mem_impl: str = "bram"
    reset_active_low: bool = True
    sample_block_size: int = 0
    decoder_timeout: int = 100
    chained_hazards: bool = True
    weight_loader: bool = True

    def __post_init__(self) -> None:
        w = self.axi_data_width
        if isinstance(w, bool) or not isinstance(w, int) or w < 32 or w > 1024 or w & (w - 1):
            raise OptionsError(f"AXI data width {w!r} is not allowed; use a power of two "
                               f"from 32 to 1024")
        if self.mem_impl not in MEM_IMPLS:
            raise OptionsError(f"memory implementation {self.mem_impl!r} is not allowed; "
                               f"use one of {', '.join(MEM_IMPLS)}")
        b = self.sample_block_size
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= 1 << 16:
            raise OptionsError(f"sample block size {b!r} is not allowed; use 0 (no sampler) "
                               f"to 65536")
        for key in ("chained_hazards", "weight_loader"):
            if not isinstance(getattr(self, key), bool):
                raise OptionsError(f"{key} {getattr(self, key)!r} is not allowed; "
                                   f"use True or False")
        t = self.decoder_timeout
        if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= 0xFFFF:
            raise OptionsError(f"decoder timeout {t!r} is not allowed; use 1 to 65535 cycles")

    def check_for(self, arch: Architecture) -> None:
        """Refuse combinations the hardware cannot build (a vector must fill whole beats)."""
        arch.require_hardware()
        bits = arch.vector_bytes * 8
        if bits % self.axi_data_width:
            widths = [w for w in (32, 64, 128, 256, 512, 1024) if bits % w == 0]
            raise OptionsError(
                f"AXI data width {self.axi_data_width} cannot carry a {bits}-bit vector "
                f"({arch.array_size} x {arch.dtype.bytes_per_scalar * 8}-bit scalars) in whole "
                f"beats; allowed widths for this architecture: "
                + ", ".join(map(str, widths)))


#: each preset's board memory port, AXI data width in bits: Zynq-7000 HP ports are 64 bits
#: wide, Zynq UltraScale+ HP ports 128 (Tensil's table of widths), the Arty A7's memory
#: interface 128 (Tensil's Arty tutorial generates with -d 128); the Cmod A7's 4-lane vector
#: is 64 bits
BOARD_AXI_WIDTH = {"pynqz1": 64, "ultra96v2": 128, "zcu104": 128, "zcu104_uram": 128,
                   "artya7100t": 128, "cmoda7": 64, "pynqz1_int8": 64, "ultra96v2_int8": 128,
                   "ultra96v2_int16": 128}


def board_axi_width(spec: ArchSpec, given: int | None = None) -> int:
    """The AXI data width to build or simulate an architecture at: ``given`` when not None,
    else the board's (the default of ``gen``, the compiler's estimate, the simulators and the
    bench): a preset's port width (:data:`BOARD_AXI_WIDTH`) for a preset's name, or for an
    architecture equal to a preset (the first in :data:`PRESETS` order: pynqz1's and
    artya7100t's files are the same architecture, so an equal Architecture gets pynqz1's 64
    and the name ``artya7100t`` its 128); else the widest of 128, 64 and 32 that carries a
    vector in whole beats (32 when none does: such a vector has no hardware, and the
    simulators' and the estimate's beats round up)."""
    if given is not None:
        return given
    if isinstance(spec, str) and spec in BOARD_AXI_WIDTH:
        return BOARD_AXI_WIDTH[spec]
    arch = resolve_arch(spec)
    match = next((name for name in PRESETS if preset(name) == arch), None)
    if match is not None:
        return BOARD_AXI_WIDTH[match]
    bits = arch.vector_bytes * 8
    return next((w for w in (128, 64, 32) if bits % w == 0), 32)


def beats_per_vector(arch: Architecture, axi_width: int) -> int:
    """AXI beats (cycles at one beat per cycle) that move one vector of ``arch``."""
    return max(1, -(-arch.vector_bytes * 8 // axi_width))
