"""The instruction set (TCU.md §3–4): layout, opcodes, typed instructions, encode/decode, `.tprog`.

One instruction is one little-endian integer of ``8 * instruction_bytes`` bits::

    MSB [ opcode:4 | flags:4 | operand2 | operand1 | operand0 ] LSB
    operand0 = [ pad | stride0 code : S0 | address : op0_addr_bits ]
    operand1 = [ pad | stride1 code : S1 | address : op1_addr_bits ]
    operand2 = [ pad | size (count - 1) or SIMD sub-instruction ]
    SIMD sub-instruction (LSB first) = [ dest : R | right : R | left : R | op : OPB ]

:class:`Layout` derives every width and bit position from an architecture; the hardware decoder
slices instruction words with the same object, so no width is derived twice. Encoding checks
that each field fits its bit field; semantic checks (addresses beyond a memory, reserved kinds)
are the executor's (TCU.md §4.8).

Run ``python -m tcu_hw.isa --arch ARCH PROGRAM.tprog`` for a listing.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterable, Sequence, Union

from .errors import ArtifactError, EncodingError


def clog2(x: int) -> int:
    """ceil(log2(x)) for x >= 1; ``clog2(1) == 0``."""
    return (int(x) - 1).bit_length()


def up8(bits: int) -> int:
    """``bits`` rounded up to a whole number of bytes, in bits."""
    return (bits + 7) // 8 * 8


class Opcode(enum.IntEnum):
    NOOP = 0x0
    MATMUL = 0x1
    DATA_MOVE = 0x2
    LOAD_WEIGHTS = 0x3
    SIMD = 0x4
    LOAD_LUT = 0x5          # Extension (lut_count > 0)
    CONFIGURE = 0xF


class DataMoveKind(enum.IntEnum):
    """The flags of a DataMove (TCU.md §4.2). Other values are reserved (an error)."""

    DRAM0_TO_LOCAL = 0x0
    LOCAL_TO_DRAM0 = 0x1
    DRAM1_TO_LOCAL = 0x2
    LOCAL_TO_DRAM1 = 0x3
    ACC_TO_LOCAL = 0xC
    LOCAL_TO_ACC = 0xD
    LOCAL_TO_ACC_ACCUMULATE = 0xF

    @property
    def label(self) -> str:
        """``dram0_to_local`` etc., as in the conformance data and the assembly text."""
        return self.name.lower()

    @property
    def memory(self) -> str:
        """The memory on the other side of local memory: ``dram0``, ``dram1`` or ``acc``."""
        return {0: "dram0", 1: "dram0", 2: "dram1", 3: "dram1"}.get(int(self), "acc")

    @property
    def to_local(self) -> bool:
        return self in (DataMoveKind.DRAM0_TO_LOCAL, DataMoveKind.DRAM1_TO_LOCAL,
                        DataMoveKind.ACC_TO_LOCAL)


class SimdOp(enum.IntEnum):
    """SIMD ALU ops (TCU.md §4.5); LOOKUP (16) only exists when ``lut_count > 0``."""

    NOOP = 0
    ZERO = 1
    MOVE = 2
    NOT = 3
    AND = 4
    OR = 5
    INCREMENT = 6
    DECREMENT = 7
    ADD = 8
    SUBTRACT = 9
    MULTIPLY = 10
    ABS = 11
    GREATER_THAN = 12
    GREATER_THAN_EQUAL = 13
    MIN = 14
    MAX = 15
    LOOKUP = 16

    @property
    def label(self) -> str:
        """Tensil's name: ``NoOp``, ``GreaterThanEqual``, ..."""
        return _SIMD_LABELS[self]


_SIMD_LABELS = {
    SimdOp.NOOP: "NoOp", SimdOp.ZERO: "Zero", SimdOp.MOVE: "Move", SimdOp.NOT: "Not",
    SimdOp.AND: "And", SimdOp.OR: "Or", SimdOp.INCREMENT: "Increment",
    SimdOp.DECREMENT: "Decrement", SimdOp.ADD: "Add", SimdOp.SUBTRACT: "Subtract",
    SimdOp.MULTIPLY: "Multiply", SimdOp.ABS: "Abs", SimdOp.GREATER_THAN: "GreaterThan",
    SimdOp.GREATER_THAN_EQUAL: "GreaterThanEqual", SimdOp.MIN: "Min", SimdOp.MAX: "Max",
    SimdOp.LOOKUP: "Lookup",
}

#: SIMD ops whose result uses the left / right source.
SIMD_USES_LEFT = frozenset({SimdOp.MOVE, SimdOp.NOT, SimdOp.AND, SimdOp.OR, SimdOp.INCREMENT,
                            SimdOp.DECREMENT, SimdOp.ADD, SimdOp.SUBTRACT, SimdOp.MULTIPLY,
                            SimdOp.ABS, SimdOp.GREATER_THAN, SimdOp.GREATER_THAN_EQUAL,
                            SimdOp.MIN, SimdOp.MAX, SimdOp.LOOKUP})
SIMD_USES_RIGHT = frozenset({SimdOp.AND, SimdOp.OR, SimdOp.ADD, SimdOp.SUBTRACT,
                             SimdOp.MULTIPLY, SimdOp.GREATER_THAN, SimdOp.GREATER_THAN_EQUAL,
                             SimdOp.MIN, SimdOp.MAX})


class MatMulFlag(enum.IntFlag):
    ACCUMULATE = 1
    ZEROES = 2


class LoadWeightsFlag(enum.IntFlag):
    ZEROES = 1


class SimdFlag(enum.IntFlag):
    READ = 1
    WRITE = 2
    ACCUMULATE = 4


class ConfigRegister(enum.IntEnum):
    """Configure registers (TCU.md §4.7); other numbers are ignored by the hardware."""

    DRAM0_OFFSET = 0x0
    DRAM0_CACHE = 0x1
    DRAM1_OFFSET = 0x4
    DRAM1_CACHE = 0x5
    TIMEOUT = 0x8
    TRACEPOINT = 0x9
    PROGRAM_COUNTER = 0xA
    SAMPLE_INTERVAL = 0xB

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def width(self) -> int:
        return CONFIG_REGISTER_SPEC[self][0]

    @property
    def reset(self) -> int:
        return CONFIG_REGISTER_SPEC[self][1]


#: register -> (width in bits, reset value)
CONFIG_REGISTER_SPEC = {
    ConfigRegister.DRAM0_OFFSET: (32, 0),
    ConfigRegister.DRAM0_CACHE: (4, 0),
    ConfigRegister.DRAM1_OFFSET: (32, 0),
    ConfigRegister.DRAM1_CACHE: (4, 0),
    ConfigRegister.TIMEOUT: (16, 100),
    ConfigRegister.TRACEPOINT: (32, 0xFFFFFFFF),
    ConfigRegister.PROGRAM_COUNTER: (32, 0),
    ConfigRegister.SAMPLE_INTERVAL: (16, 0),
}

#: Width of the Configure value field (bits 31:4 of the operand area).
CONFIG_VALUE_BITS = 28


# --------------------------------------------------------------------------------------------
# Layout


@dataclass(frozen=True)
class Layout:
    """Field widths and positions of instructions for one architecture (TCU.md §3).

    Build it with :meth:`of` from an :class:`~tcu_hw.arch.Architecture` or with
    :meth:`from_depths` from the raw depths (any size, e.g. Tensil's 2^62 test architectures).
    Depths are kept so that executors can wrap and check addresses with the same object.
    """

    local_depth: int
    accumulator_depth: int
    dram0_depth: int
    dram1_depth: int
    stride0_depth: int
    stride1_depth: int
    simd_registers_depth: int
    lut_count: int = 0

    @classmethod
    def from_depths(cls, *, local_depth, accumulator_depth, dram0_depth, dram1_depth,
                    stride0_depth, stride1_depth, simd_registers_depth, lut_count=0,
                    **_ignored) -> "Layout":
        """A layout from depths (extra keys such as ``array_size`` are ignored, so a `.tarch`
        dict can be passed with ``**``)."""
        return cls(int(local_depth), int(accumulator_depth), int(dram0_depth), int(dram1_depth),
                   int(stride0_depth), int(stride1_depth), int(simd_registers_depth),
                   int(lut_count))

    @classmethod
    def of(cls, arch) -> "Layout":
        """The layout of an :class:`~tcu_hw.arch.Architecture`."""
        return cls(arch.local_depth, arch.accumulator_depth, arch.dram0_depth, arch.dram1_depth,
                   arch.stride0_depth, arch.stride1_depth, arch.simd_registers_depth,
                   arch.lut_count)

    # memory address widths
    @functools.cached_property
    def L(self) -> int:  # noqa: N802 - the spec's names
        return clog2(self.local_depth)

    @functools.cached_property
    def A(self) -> int:  # noqa: N802
        return clog2(self.accumulator_depth)

    @functools.cached_property
    def D0(self) -> int:  # noqa: N802
        return clog2(self.dram0_depth)

    @functools.cached_property
    def D1(self) -> int:  # noqa: N802
        return clog2(self.dram1_depth)

    @functools.cached_property
    def S0(self) -> int:  # noqa: N802
        return clog2(self.stride0_depth)

    @functools.cached_property
    def S1(self) -> int:  # noqa: N802
        return clog2(self.stride1_depth)

    @functools.cached_property
    def R(self) -> int:  # noqa: N802
        """Width of a SIMD register selector."""
        return clog2(self.simd_registers_depth + 1)

    @functools.cached_property
    def simd_op_bits(self) -> int:
        return 5 if self.lut_count > 0 else 4

    @functools.cached_property
    def simd_bits(self) -> int:
        return 3 * self.R + self.simd_op_bits

    @functools.cached_property
    def op0_addr_bits(self) -> int:
        return max(self.L, self.A)

    @functools.cached_property
    def op1_addr_bits(self) -> int:
        return max(self.L, self.D0, self.D1, self.A)

    @functools.cached_property
    def op2_addr_bits(self) -> int:
        L = self.L
        return max(min(L, self.A), min(L, self.D0), min(L, self.D1), self.simd_bits)

    @functools.cached_property
    def operand0_bits(self) -> int:
        return up8(self.op0_addr_bits + self.S0)

    @functools.cached_property
    def operand1_bits(self) -> int:
        return up8(self.op1_addr_bits + self.S1)

    @functools.cached_property
    def operand2_bits(self) -> int:
        return up8(self.op2_addr_bits)

    @functools.cached_property
    def operand_bits(self) -> int:
        """Width of the whole operand area (operand0..2)."""
        return self.operand0_bits + self.operand1_bits + self.operand2_bits

    @functools.cached_property
    def instruction_bytes(self) -> int:
        return (8 + self.operand_bits) // 8

    # bit positions, for hardware slicing and for the encoder
    @functools.cached_property
    def operand1_shift(self) -> int:
        return self.operand0_bits

    @functools.cached_property
    def operand2_shift(self) -> int:
        return self.operand0_bits + self.operand1_bits

    @functools.cached_property
    def flags_shift(self) -> int:
        return self.operand_bits

    @functools.cached_property
    def opcode_shift(self) -> int:
        return self.operand_bits + 4

    @functools.cached_property
    def config_value_bits(self) -> int:
        """Bits available to a Configure value (28, fewer when the operand area is narrow)."""
        return max(0, min(CONFIG_VALUE_BITS, self.operand_bits - 4))

    def as_dict(self) -> dict:
        """The derived widths with the names used by the conformance data."""
        return {"L": self.L, "A": self.A, "D0": self.D0, "D1": self.D1, "S0": self.S0,
                "S1": self.S1, "R": self.R, "simd_bits": self.simd_bits,
                "op0_addr_bits": self.op0_addr_bits, "op1_addr_bits": self.op1_addr_bits,
                "op2_addr_bits": self.op2_addr_bits, "operand0_bits": self.operand0_bits,
                "operand1_bits": self.operand1_bits, "operand2_bits": self.operand2_bits,
                "instruction_bytes": self.instruction_bytes}

    # ---------------------------------------------------------------- whole instructions
    def encode_word(self, instr: "Instruction") -> int:
        """The instruction as one integer (check every field fits)."""
        flags, op0, op1, op2 = instr.to_operands(self)
        return ((int(instr.opcode) << self.opcode_shift) | (flags << self.flags_shift)
                | (op2 << self.operand2_shift) | (op1 << self.operand1_shift) | op0)

    def encode(self, instr: "Instruction") -> bytes:
        """The instruction's bytes in `.tprog` order (least significant byte first)."""
        return self.encode_word(instr).to_bytes(self.instruction_bytes, "little")

    def decode_word(self, word: int) -> "Instruction":
        """Decode one instruction integer."""
        opcode = (word >> self.opcode_shift) & 0xF
        flags = (word >> self.flags_shift) & 0xF
        op0 = word & _mask(self.operand0_bits)
        op1 = (word >> self.operand1_shift) & _mask(self.operand1_bits)
        op2 = (word >> self.operand2_shift) & _mask(self.operand2_bits)
        cls = _BY_OPCODE.get(opcode)
        if cls is None:
            return Illegal(opcode, flags, word & _mask(self.operand_bits))
        return cls.from_operands(self, flags, op0, op1, op2)

    def decode(self, data: bytes) -> "Instruction":
        """Decode one instruction from its `.tprog` bytes."""
        if len(data) != self.instruction_bytes:
            raise EncodingError(f"an instruction is {self.instruction_bytes} bytes for this "
                                f"architecture, got {len(data)}")
        return self.decode_word(int.from_bytes(data, "little"))

    def encode_program(self, instrs: Iterable["Instruction"]) -> bytes:
        return b"".join(self.encode(i) for i in instrs)

    def decode_program(self, data: bytes, source: str = "program") -> list["Instruction"]:
        """Decode a whole `.tprog` image; its length must be a multiple of the instruction size."""
        ib = self.instruction_bytes
        if len(data) % ib:
            raise ArtifactError(
                f"{source}: {len(data)} bytes is not a multiple of the instruction size "
                f"({ib} bytes for this architecture); the file is truncated or was compiled "
                f"for another architecture")
        frm = int.from_bytes
        dec = self.decode_word
        memo: dict[bytes, Instruction] = {}          # instructions are immutable: share them
        out = []
        for i in range(0, len(data), ib):
            chunk = data[i:i + ib]
            instr = memo.get(chunk)
            if instr is None:
                instr = memo[chunk] = dec(frm(chunk, "little"))
            out.append(instr)
        return out


def _mask(bits: int) -> int:
    return (1 << bits) - 1


_KINDS = {int(k): k for k in DataMoveKind}
_SIMD_OPS = {int(op): op for op in SimdOp}


def _check(instr, name: str, value, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodingError(f"{type(instr).__name__}.{name} must be an integer, got {value!r}")
    if not 0 <= value < (1 << bits):
        raise EncodingError(f"{type(instr).__name__}.{name} = {value} does not fit its "
                            f"{bits}-bit field (allowed 0..{(1 << bits) - 1})")
    return int(value)


def _addr_operand(instr, layout: Layout, which: int, addr_name: str, stride_name: str) -> int:
    abits = layout.op0_addr_bits if which == 0 else layout.op1_addr_bits
    sbits = layout.S0 if which == 0 else layout.S1
    addr = _check(instr, addr_name, getattr(instr, addr_name), abits)
    stride = _check(instr, stride_name, getattr(instr, stride_name), sbits)
    return (stride << abits) | addr


def _split_addr(layout: Layout, which: int, operand: int) -> tuple[int, int]:
    abits = layout.op0_addr_bits if which == 0 else layout.op1_addr_bits
    sbits = layout.S0 if which == 0 else layout.S1
    return operand & _mask(abits), (operand >> abits) & _mask(sbits)


# --------------------------------------------------------------------------------------------
# Instructions


class Instruction:
    """Base of the typed instructions. Subclasses are frozen dataclasses."""

    opcode: ClassVar[int]

    @property
    def flags(self) -> int:
        return 0

    def to_operands(self, layout: Layout) -> tuple[int, int, int, int]:
        raise NotImplementedError

    @classmethod
    def from_operands(cls, layout: Layout, flags: int, op0: int, op1: int, op2: int):
        raise NotImplementedError

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class NoOp(Instruction):
    """Does nothing (all-zero bytes; also the padding of an instruction stream)."""

    opcode: ClassVar[int] = Opcode.NOOP

    def to_operands(self, layout):
        return 0, 0, 0, 0

    @classmethod
    def from_operands(cls, layout, flags, op0, op1, op2):
        return cls()


@dataclass(frozen=True)
class MatMul(Instruction):
    """size+1 vectors from local memory through the array into the accumulators (§4.1)."""

    local_address: int = 0
    local_stride: int = 0
    accumulator_address: int = 0
    accumulator_stride: int = 0
    size: int = 0
    accumulate: bool = False
    zeroes: bool = False
    opcode: ClassVar[int] = Opcode.MATMUL

    @property
    def flags(self) -> int:
        return (MatMulFlag.ACCUMULATE if self.accumulate else 0) | \
               (MatMulFlag.ZEROES if self.zeroes else 0)

    def to_operands(self, layout):
        return (int(self.flags),
                _addr_operand(self, layout, 0, "local_address", "local_stride"),
                _addr_operand(self, layout, 1, "accumulator_address", "accumulator_stride"),
                _check(self, "size", self.size, layout.op2_addr_bits))

    @classmethod
    def from_operands(cls, layout, flags, op0, op1, op2):
        la, ls = _split_addr(layout, 0, op0)
        aa, as_ = _split_addr(layout, 1, op1)
        return cls(la, ls, aa, as_, op2 & _mask(layout.op2_addr_bits),
                   bool(flags & 1), bool(flags & 2))


@dataclass(frozen=True)
class DataMove(Instruction):
    """size+1 vectors between local memory and DRAM0, DRAM1 or the accumulators (§4.2).

    ``kind`` is a :class:`DataMoveKind` value; reserved values decode and encode unchanged
    (executing one sets the error flag).
    """

    kind: int = DataMoveKind.DRAM0_TO_LOCAL
    local_address: int = 0
    local_stride: int = 0
    other_address: int = 0
    other_stride: int = 0
    size: int = 0
    opcode: ClassVar[int] = Opcode.DATA_MOVE

    @property
    def flags(self) -> int:
        return int(self.kind)

    @property
    def known_kind(self) -> DataMoveKind | None:
        try:
            return DataMoveKind(self.kind)
        except ValueError:
            return None

    def to_operands(self, layout):
        return (_check(self, "kind", int(self.kind), 4),
                _addr_operand(self, layout, 0, "local_address", "local_stride"),
                _addr_operand(self, layout, 1, "other_address", "other_stride"),
                _check(self, "size", self.size, layout.op2_addr_bits))

    @classmethod
    def from_operands(cls, layout, flags, op0, op1, op2):
        la, ls = _split_addr(layout, 0, op0)
        oa, os_ = _split_addr(layout, 1, op1)
        return cls(_KINDS.get(flags, flags), la, ls, oa, os_, op2 & _mask(layout.op2_addr_bits))


@dataclass(frozen=True)
class LoadWeights(Instruction):
    """Push size+1 vectors into the array's weight chain, read top-down from local (§4.3)."""

    local_address: int = 0
    local_stride: int = 0
    size: int = 0
    zeroes: bool = False
    opcode: ClassVar[int] = Opcode.LOAD_WEIGHTS

    @property
    def flags(self) -> int:
        return int(LoadWeightsFlag.ZEROES) if self.zeroes else 0

    def to_operands(self, layout):
        return (self.flags,
                _addr_operand(self, layout, 0, "local_address", "local_stride"),
                _check(self, "size", self.size, layout.op1_addr_bits),
                0)

    @classmethod
    def from_operands(cls, layout, flags, op0, op1, op2):
        la, ls = _split_addr(layout, 0, op0)
        return cls(la, ls, op1 & _mask(layout.op1_addr_bits), bool(flags & 1))


@dataclass(frozen=True)
class SIMD(Instruction):
    """One vector through the SIMD ALUs (§4.4): ``out = op(left, right)``.

    Sources: 0 = the input vector (``acc[read_address]`` when ``read``), r = register r.
    Destination: 0 = output only, r = output and register r. ``op`` is a :class:`SimdOp`
    value (unknown values decode unchanged and set the error flag when executed).
    """

    op: int = SimdOp.NOOP
    left: int = 0
    right: int = 0
    dest: int = 0
    read_address: int = 0
    write_address: int = 0
    read: bool = False
    write: bool = False
    accumulate: bool = False
    opcode: ClassVar[int] = Opcode.SIMD

    @property
    def flags(self) -> int:
        return (SimdFlag.READ if self.read else 0) | (SimdFlag.WRITE if self.write else 0) | \
               (SimdFlag.ACCUMULATE if self.accumulate else 0)

    @property
    def known_op(self) -> SimdOp | None:
        try:
            return SimdOp(self.op)
        except ValueError:
            return None

    def subinstruction(self, layout: Layout) -> int:
        """The SIMD sub-instruction (operand2) for this layout."""
        r = layout.R
        op = _check(self, "op", int(self.op), layout.simd_op_bits)
        left = _check(self, "left", self.left, r)
        right = _check(self, "right", self.right, r)
        dest = _check(self, "dest", self.dest, r)
        return (((op << r | left) << r | right) << r) | dest

    def to_operands(self, layout):
        return (int(self.flags),
                _check(self, "write_address", self.write_address, layout.op0_addr_bits),
                _check(self, "read_address", self.read_address, layout.op1_addr_bits),
                self.subinstruction(layout))

    @classmethod
    def from_operands(cls, layout, flags, op0, op1, op2):
        r = layout.R
        dest = op2 & _mask(r)
        right = (op2 >> r) & _mask(r)
        left = (op2 >> 2 * r) & _mask(r)
        op = (op2 >> 3 * r) & _mask(layout.simd_op_bits)
        return cls(_SIMD_OPS.get(op, op), left, right, dest,
                   read_address=op1 & _mask(layout.op1_addr_bits),
                   write_address=op0 & _mask(layout.op0_addr_bits),
                   read=bool(flags & 1), write=bool(flags & 2), accumulate=bool(flags & 4))


@dataclass(frozen=True)
class LoadLUT(Instruction):
    """Extension (§4.6): load lookup table ``table`` (0 = keys) from ceil(D/n) local vectors."""

    local_address: int = 0
    local_stride: int = 0
    table: int = 0
    opcode: ClassVar[int] = Opcode.LOAD_LUT

    def to_operands(self, layout):
        return (0, _addr_operand(self, layout, 0, "local_address", "local_stride"),
                _check(self, "table", self.table, layout.op1_addr_bits), 0)

    @classmethod
    def from_operands(cls, layout, flags, op0, op1, op2):
        la, ls = _split_addr(layout, 0, op0)
        return cls(la, ls, op1 & _mask(layout.op1_addr_bits))


@dataclass(frozen=True)
class Configure(Instruction):
    """Write ``value`` to configuration register ``register`` (§4.7).

    The low 32 bits of the operand area hold ``(value << 4) | register``.
    """

    register: int = 0
    value: int = 0
    opcode: ClassVar[int] = Opcode.CONFIGURE

    def to_operands(self, layout):
        reg = _check(self, "register", int(self.register), 4)
        value = _check(self, "value", self.value, layout.config_value_bits)
        area = (value << 4) | reg
        return (0, area & _mask(layout.operand0_bits),
                (area >> layout.operand0_bits) & _mask(layout.operand1_bits),
                area >> (layout.operand0_bits + layout.operand1_bits))

    @classmethod
    def from_operands(cls, layout, flags, op0, op1, op2):
        area = op0 | (op1 << layout.operand1_shift) | (op2 << layout.operand2_shift)
        reg = area & 0xF
        try:
            reg = ConfigRegister(reg)
        except ValueError:
            pass
        return cls(reg, (area >> 4) & _mask(CONFIG_VALUE_BITS))


@dataclass(frozen=True)
class Illegal(Instruction):
    """An unused opcode (0x6–0xE): kept bit for bit; executing it sets the error flag."""

    code: int = 0x6
    flag_bits: int = 0
    operands: int = 0

    @property
    def opcode(self) -> int:  # type: ignore[override]
        return self.code

    @property
    def flags(self) -> int:
        return self.flag_bits

    @property
    def name(self) -> str:
        return "Illegal"

    def to_operands(self, layout):
        code = _check(self, "code", self.code, 4)
        if code in _BY_OPCODE:
            raise EncodingError(f"Illegal.code {code:#x} is a defined opcode "
                                f"({_BY_OPCODE[code].__name__})")
        area = _check(self, "operands", self.operands, layout.operand_bits)
        return (_check(self, "flag_bits", self.flag_bits, 4),
                area & _mask(layout.operand0_bits),
                (area >> layout.operand1_shift) & _mask(layout.operand1_bits),
                area >> layout.operand2_shift)


_BY_OPCODE = {int(c.opcode): c for c in (NoOp, MatMul, DataMove, LoadWeights, SIMD, LoadLUT,
                                           Configure)}

AnyInstruction = Union[NoOp, MatMul, DataMove, LoadWeights, SIMD, LoadLUT, Configure, Illegal]


# --------------------------------------------------------------------------------------------
# Programs


@dataclass(frozen=True)
class Run:
    """The addresses of one operand of an instruction: ``base + i·2^stride`` (i = 0..size)
    taken modulo ``2^bits`` of its memory (TCU.md §4).

    ``lo``/``hi``: inclusive bounds of the addresses when they do not wrap (``wraps`` False);
    ``highest``: the largest address visited (what the depth check of §4.8 compares).
    """

    lo: int
    hi: int
    highest: int
    wraps: bool


def address_run(base: int, stride: int, size: int, bits: int) -> Run:
    """Bounds of an address run without enumerating it (the hardware decoder computes the
    same thing). All addresses are equal when ``size == 0`` or the step ``2^stride`` is a
    multiple of ``2^bits``; a run that passes ``2^bits`` wraps and then visits every address
    of its residue class, up to ``2^bits - step + base mod step``."""
    mod = 1 << bits
    b = base & (mod - 1)
    if size == 0 or stride >= bits:
        return Run(b, b, b, False)
    step = 1 << stride
    end = b + size * step
    if end < mod:
        return Run(b, end, end, False)
    return Run(0, mod - 1, mod - step + (b & (step - 1)), True)


def read_program(path, layout: Layout) -> list[Instruction]:
    """Read and decode a `.tprog` file."""
    from .files import read_bytes
    return layout.decode_program(read_bytes(path, "program (.tprog)", ArtifactError),
                                 source=str(Path(path)))


def write_program(path, instrs: Sequence[Instruction], layout: Layout) -> int:
    """Encode and write a `.tprog`; returns its size in bytes."""
    from .files import write_atomic
    data = layout.encode_program(instrs)
    write_atomic(path, data)
    return len(data)


def flush_probe(arch) -> list[Instruction]:
    """The host's completion probe (TCU.md §7).

    ``DataMove DRAM0[depth-1] → local[local_depth-1]`` then ``local → DRAM0[depth-2]``: once
    DRAM0[depth-2] equals the pattern the host put in DRAM0[depth-1], every earlier instruction
    has completed. Programs must leave those three vectors unused.
    """
    local = arch.local_depth - 1
    return [DataMove(DataMoveKind.DRAM0_TO_LOCAL, local, 0, arch.dram0_depth - 1, 0, 0),
            DataMove(DataMoveKind.LOCAL_TO_DRAM0, local, 0, arch.dram0_depth - 2, 0, 0)]


def build_parser():
    import argparse
    parser = argparse.ArgumentParser(
        prog="python -m tcu_hw.isa",
        description="Disassemble a .tprog into the tcu_hw assembly text (one instruction per "
                    "line, prefixed by its index; the text assembles back with tcu_hw.asm).")
    parser.add_argument("program", metavar="PROGRAM.tprog", help="program file")
    parser.add_argument("-a", "--arch", required=True,
                        help="architecture: a .tarch path or a preset name")
    parser.add_argument("--bytes", action="store_true",
                        help="also show each instruction's bytes in file order")
    return parser


def main(argv=None) -> int:
    """``python -m tcu_hw.isa --arch ARCH PROGRAM.tprog``: print the program's listing."""
    import sys

    from .arch import resolve_arch
    from .asm import listing
    from .errors import run_cli

    def disassemble(args) -> int:
        arch = resolve_arch(args.arch)
        program = read_program(args.program, arch.layout)
        for line in listing(program, arch.layout, show_bytes=args.bytes):
            sys.stdout.write(line + "\n")
        return 0

    return run_cli(build_parser(), disassemble, argv)


if __name__ == "__main__":
    # Run the canonical module's main: under ``python -m`` this file is also loaded as
    # ``__main__``, whose classes would differ from those the rest of the package imports.
    from tcu_hw.isa import main as _main
    raise SystemExit(_main())
