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

The disassembler (``python -m tcu_hw.asm --arch ARCH PROGRAM.tprog``) is in :mod:`tcu_hw.asm`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterable, Sequence, Union

import numpy as np

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
    ACC_TO_LOCAL_RELU = 0x4         # accumulators → local, rectified (docs/isa_extensions.md)
    ACC_TO_LOCAL = 0xC
    LOCAL_TO_ACC = 0xD
    LOCAL_TO_ACC_SHIFT = 0xE        # integer data types only (docs/integer.md)
    LOCAL_TO_ACC_ACCUMULATE = 0xF

    @staticmethod
    def defined(integer: bool) -> tuple["DataMoveKind", ...]:
        """The kinds an architecture defines: every one but ``LOCAL_TO_ACC_SHIFT`` (0xE),
        which only integer data types have (elsewhere it is reserved, as in Tensil)."""
        return tuple(k for k in DataMoveKind
                     if integer or k != DataMoveKind.LOCAL_TO_ACC_SHIFT)

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
                        DataMoveKind.ACC_TO_LOCAL, DataMoveKind.ACC_TO_LOCAL_RELU)


class SimdOp(enum.IntEnum):
    """SIMD ALU ops (TCU.md §4.5); LOOKUP (16) only exists when ``lut_count > 0``,
    REQUANTIZE (17) only for integer data types (docs/integer.md)."""

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
    REQUANTIZE = 17

    @property
    def label(self) -> str:
        """Tensil's name: ``NoOp``, ``GreaterThanEqual``, ..."""
        return _SIMD_LABELS[self]

    @staticmethod
    def defined_count(lut_count: int) -> int:
        """How many op codes are defined (0 .. count-1): 17 with lookup tables, else 16."""
        return int(SimdOp.LOOKUP) + 1 if lut_count > 0 else int(SimdOp.LOOKUP)


def simd_op_bits(lut_count: int, integer: bool = False) -> int:
    """Width of the SIMD op field: 5 bits with lookup tables (op 16 = Lookup) or an integer
    data type (op 17 = Requantize), else 4."""
    return 5 if lut_count > 0 or integer else 4


def simd_selector_bits(registers: int) -> int:
    """Width of a SIMD source/destination selector: 0 = the input/output, 1..registers."""
    return clog2(registers + 1)


def lut_table_bits(lut_count: int) -> int:
    """Width of a LoadLUT table number: 0 = the keys, 1..lut_count = the value tables."""
    return clog2(lut_count + 1)


def lut_vectors(lut_depth: int, array_size: int) -> int:
    """Local-memory vectors of one lookup table: what a LoadLUT reads (TCU.md §4.6)."""
    return -(-lut_depth // array_size)


_SIMD_LABELS = {
    SimdOp.NOOP: "NoOp", SimdOp.ZERO: "Zero", SimdOp.MOVE: "Move", SimdOp.NOT: "Not",
    SimdOp.AND: "And", SimdOp.OR: "Or", SimdOp.INCREMENT: "Increment",
    SimdOp.DECREMENT: "Decrement", SimdOp.ADD: "Add", SimdOp.SUBTRACT: "Subtract",
    SimdOp.MULTIPLY: "Multiply", SimdOp.ABS: "Abs", SimdOp.GREATER_THAN: "GreaterThan",
    SimdOp.GREATER_THAN_EQUAL: "GreaterThanEqual", SimdOp.MIN: "Min", SimdOp.MAX: "Max",
    SimdOp.LOOKUP: "Lookup", SimdOp.REQUANTIZE: "Requantize",
}

#: SIMD ops whose result uses the left / right source.
SIMD_USES_LEFT = frozenset({SimdOp.MOVE, SimdOp.NOT, SimdOp.AND, SimdOp.OR, SimdOp.INCREMENT,
                            SimdOp.DECREMENT, SimdOp.ADD, SimdOp.SUBTRACT, SimdOp.MULTIPLY,
                            SimdOp.ABS, SimdOp.GREATER_THAN, SimdOp.GREATER_THAN_EQUAL,
                            SimdOp.MIN, SimdOp.MAX, SimdOp.LOOKUP, SimdOp.REQUANTIZE})
SIMD_USES_RIGHT = frozenset({SimdOp.AND, SimdOp.OR, SimdOp.ADD, SimdOp.SUBTRACT,
                             SimdOp.MULTIPLY, SimdOp.GREATER_THAN, SimdOp.GREATER_THAN_EQUAL,
                             SimdOp.MIN, SimdOp.MAX, SimdOp.REQUANTIZE})


class _FlagBits(enum.IntFlag):
    @property
    def bit(self) -> int:
        """The position of this one-bit flag in the 4-bit flags field."""
        return int(self).bit_length() - 1


class MatMulFlag(_FlagBits):
    ACCUMULATE = 1
    ZEROES = 2


class LoadWeightsFlag(_FlagBits):
    ZEROES = 1


class SimdFlag(_FlagBits):
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

#: A DRAM offset register holds the upper bits of a byte address: base = offset << 16.
DRAM_OFFSET_SHIFT = 16


# --------------------------------------------------------------------------------------------
# Layout


@dataclass(frozen=True)
class Field:
    """One bit field of an instruction word: ``width`` bits from bit ``shift`` (bit 0 = LSB).

    :meth:`get` reads it from an integer word; hardware slices the same bits of its word wire
    (``word[field.shift:field.end]``, see :func:`tcu_hw.blocks.decoder.field`).
    """

    name: str
    shift: int
    width: int

    @property
    def end(self) -> int:
        return self.shift + self.width

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    def get(self, word: int) -> int:
        return (word >> self.shift) & self.mask


@dataclass(frozen=True)
class Fields:
    """Every field of an instruction word for one layout (positions within the whole word).

    ``address0``/``stride0`` (operand 0): the local address and stride code of MatMul,
    DataMove, LoadWeights and LoadLUT, the SIMD write address. ``address1``/``stride1``
    (operand 1): the accumulator or DRAM address and stride code; also the LoadWeights count
    (vectors − 1), the LoadLUT table and the SIMD read address. ``size`` (operand 2): vectors −
    1 of MatMul and DataMove. ``simd_*``: the SIMD sub-instruction in operand 2. ``config_*``:
    the low 32 bits of the operand area of a Configure. ``operands``: the whole operand area.
    """

    opcode: Field
    flags: Field
    operands: Field
    operand0: Field
    operand1: Field
    operand2: Field
    address0: Field
    stride0: Field
    address1: Field
    stride1: Field
    size: Field
    simd_dest: Field
    simd_right: Field
    simd_left: Field
    simd_op: Field
    config_register: Field
    config_value: Field

    def all(self) -> list[Field]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]


@dataclass(frozen=True)
class HardwareWidths:
    """Widths the hardware carries for the fields of a layout: each at least 1 bit (PyRTL has
    no zero-width wires). ``L``/``A``: local and accumulator addresses; ``D``: the wider DRAM
    address; ``S0``/``S1``: stride codes; ``size``: a vector count − 1 of any instruction
    (operand 2, the LoadWeights count in operand 1, a lookup table's vectors); ``R``: a SIMD
    register selector; ``op``: a SIMD op; ``table``: a LoadLUT table number."""

    L: int  # noqa: N815 - the spec's names
    A: int  # noqa: N815
    D: int  # noqa: N815
    S0: int  # noqa: N815
    S1: int  # noqa: N815
    size: int
    R: int  # noqa: N815
    op: int
    table: int


@dataclass(frozen=True)
class Layout:
    """Field widths and positions of instructions for one architecture (TCU.md §3).

    Build it with :meth:`of` from an :class:`~tcu_hw.arch.Architecture` or with
    :meth:`from_depths` from the raw depths (any size, e.g. Tensil's 2^62 test architectures).
    Depths are kept so that executors can wrap and check addresses with the same object;
    ``array_size`` and ``lut_depth`` give the vectors a LoadLUT reads (:attr:`lut_vectors`).
    Every field's position is in :attr:`fields`; the hardware's widths in :attr:`hardware`.
    """

    local_depth: int
    accumulator_depth: int
    dram0_depth: int
    dram1_depth: int
    stride0_depth: int
    stride1_depth: int
    simd_registers_depth: int
    lut_count: int = 0
    lut_depth: int = 0
    array_size: int = 1
    integer: bool = False            # an integer data type: Requantize, local→acc shift-in

    @classmethod
    def from_depths(cls, *, local_depth, accumulator_depth, dram0_depth, dram1_depth,
                    stride0_depth, stride1_depth, simd_registers_depth, lut_count=0,
                    lut_depth=0, array_size=1, data_type=None, **_ignored) -> "Layout":
        """A layout from depths (other keys are ignored, so a `.tarch` dict can be passed
        with ``**``; its ``data_type`` says whether the type is an integer one)."""
        from .numeric import DATA_TYPES
        integer = data_type in DATA_TYPES and DATA_TYPES[data_type].is_integer
        return cls(int(local_depth), int(accumulator_depth), int(dram0_depth), int(dram1_depth),
                   int(stride0_depth), int(stride1_depth), int(simd_registers_depth),
                   int(lut_count), int(lut_depth), int(array_size), integer)

    @classmethod
    def of(cls, arch) -> "Layout":
        """The layout of an :class:`~tcu_hw.arch.Architecture`."""
        return cls(arch.local_depth, arch.accumulator_depth, arch.dram0_depth, arch.dram1_depth,
                   arch.stride0_depth, arch.stride1_depth, arch.simd_registers_depth,
                   arch.lut_count, arch.lut_depth, arch.array_size, arch.dtype.is_integer)

    @functools.cached_property
    def memory_depths(self) -> dict[str, int]:
        """Vectors of each memory an instruction addresses, by the names
        :attr:`DataMoveKind.memory` uses ("local", "acc", "dram0", "dram1")."""
        return {"local": self.local_depth, "acc": self.accumulator_depth,
                "dram0": self.dram0_depth, "dram1": self.dram1_depth}

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
        return simd_selector_bits(self.simd_registers_depth)

    @functools.cached_property
    def simd_op_bits(self) -> int:
        return simd_op_bits(self.lut_count, self.integer)

    @functools.cached_property
    def simd_op_count(self) -> int:
        """SIMD ops 0 .. simd_op_count - 1 are defined (:meth:`SimdOp.defined_count`), for a
        type that is not an integer one (those also define Requantize: :attr:`simd_ops`)."""
        return SimdOp.defined_count(self.lut_count)

    @functools.cached_property
    def simd_ops(self) -> frozenset:
        """The SIMD op codes this architecture defines: 0..15, Lookup (16) with lookup
        tables, Requantize (17) with an integer data type."""
        extra = {int(SimdOp.REQUANTIZE)} if self.integer else set()
        return frozenset(range(self.simd_op_count)) | extra

    @functools.cached_property
    def data_move_kinds(self) -> tuple:
        """The DataMove kinds this architecture defines (:meth:`DataMoveKind.defined`)."""
        return DataMoveKind.defined(self.integer)

    @functools.cached_property
    def lut_vectors(self) -> int:
        """Vectors a LoadLUT reads from local memory (0 without lookup tables)."""
        return lut_vectors(self.lut_depth, self.array_size) if self.lut_count else 0

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

    @functools.cached_property
    def fields(self) -> Fields:
        """Every field's position in the instruction word."""
        o1, o2, r = self.operand1_shift, self.operand2_shift, self.R
        a0, a1 = self.op0_addr_bits, self.op1_addr_bits
        return Fields(
            opcode=Field("opcode", self.opcode_shift, 4),
            flags=Field("flags", self.flags_shift, 4),
            operands=Field("operands", 0, self.operand_bits),
            operand0=Field("operand0", 0, self.operand0_bits),
            operand1=Field("operand1", o1, self.operand1_bits),
            operand2=Field("operand2", o2, self.operand2_bits),
            address0=Field("address0", 0, a0),
            stride0=Field("stride0", a0, self.S0),
            address1=Field("address1", o1, a1),
            stride1=Field("stride1", o1 + a1, self.S1),
            size=Field("size", o2, self.op2_addr_bits),
            simd_dest=Field("simd_dest", o2, r),
            simd_right=Field("simd_right", o2 + r, r),
            simd_left=Field("simd_left", o2 + 2 * r, r),
            simd_op=Field("simd_op", o2 + 3 * r, self.simd_op_bits),
            config_register=Field("config_register", 0, 4),
            config_value=Field("config_value", 4, self.config_value_bits))

    @functools.cached_property
    def hardware(self) -> HardwareWidths:
        """The widths the hardware's records carry (each at least one bit)."""
        return HardwareWidths(
            L=max(self.L, 1), A=max(self.A, 1), D=max(self.D0, self.D1, 1),
            S0=max(self.S0, 1), S1=max(self.S1, 1),
            size=max(self.op2_addr_bits, self.op1_addr_bits, clog2(max(self.lut_vectors, 1)), 1),
            R=max(self.R, 1), op=self.simd_op_bits, table=max(lut_table_bits(self.lut_count), 1))

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
        f = self.fields
        instr._check_header()
        word = (_check(instr, instr._opcode_name, instr.opcode, 4) << f.opcode.shift) | \
            (_check(instr, instr._flags_name, instr.flags, 4) << f.flags.shift)
        slots = self._encoders.get(type(instr))
        if slots is None:
            slots = [(attr, getattr(f, name).shift, getattr(f, name).width,
                      1 << getattr(f, name).width) for name, attr in instr.FIELDS]
        for attr, shift, width, limit in slots:
            value = getattr(instr, attr)
            if type(value) is not int or not 0 <= value < limit:
                value = _check(instr, attr, value, width)       # raises, or an int subclass
            word |= value << shift
        return word

    @functools.cached_property
    def _encoders(self) -> dict:
        """class → [(attribute, shift, width, 2^width)] of its fields: :meth:`encode_word`
        without lookups."""
        f = self.fields
        return {cls: [(attr, getattr(f, name).shift, getattr(f, name).width,
                       1 << getattr(f, name).width) for name, attr in cls.FIELDS]
                for cls in _BY_OPCODE.values()}

    def encode(self, instr: "Instruction") -> bytes:
        """The instruction's bytes in `.tprog` order (least significant byte first)."""
        return self.encode_word(instr).to_bytes(self.instruction_bytes, "little")

    def decode_word(self, word: int) -> "Instruction":
        """Decode one instruction integer."""
        f = self.fields
        opcode, flags = f.opcode.get(word), f.flags.get(word)
        cls, slots = self._decoders.get(opcode, (Illegal, ()))
        if cls is Illegal:
            return Illegal(opcode, flags, f.operands.get(word))
        return cls._from_fields(flags, {attr: (word >> shift) & mask
                                        for attr, shift, mask in slots})

    @functools.cached_property
    def _decoders(self) -> dict:
        """opcode → (class, [(attribute, shift, mask)]): :meth:`decode_word` without lookups."""
        return {code: (cls, [(attr, getattr(self.fields, name).shift,
                              getattr(self.fields, name).mask) for name, attr in cls.FIELDS])
                for code, cls in _BY_OPCODE.items()}

    def decode(self, data: bytes) -> "Instruction":
        """Decode one instruction from its `.tprog` bytes."""
        if len(data) != self.instruction_bytes:
            raise EncodingError(f"an instruction is {self.instruction_bytes} bytes for this "
                                f"architecture, got {len(data)}")
        return self.decode_word(int.from_bytes(data, "little"))

    def encode_program(self, instrs: Iterable["Instruction"]) -> bytes:
        instrs = list(instrs)
        data = self._encode_columns(instrs)
        return data if data is not None else b"".join(self.encode(i) for i in instrs)

    def _encode_columns(self, instrs: list) -> bytes | None:
        """:meth:`encode_program` a field at a time over all instructions of a class (numpy,
        words of up to 128 bits as two 64-bit halves); None unless every value is an integer
        in range and every word fits the instruction size (then instruction by instruction
        encoding raises the error of the first bad instruction)."""
        ib = self.instruction_bytes
        if not instrs or ib > 16:
            return None
        f = self.fields
        classes: dict[type, list[int]] = {}
        for k, instr in enumerate(instrs):
            classes.setdefault(type(instr), []).append(k)
        lo = np.zeros(len(instrs), dtype=np.uint64)
        hi = np.zeros(len(instrs), dtype=np.uint64)
        for cls, idx in classes.items():
            slots = self._encoders.get(cls)
            if slots is None or cls._check_header is not Instruction._check_header:
                return None
            group = [instrs[k] for k in idx]
            lo_g = np.zeros(len(group), dtype=np.uint64)
            hi_g = np.zeros(len(group), dtype=np.uint64)
            for attr, shift, width, _ in [("opcode", f.opcode.shift, 4, 0),
                                          ("flags", f.flags.shift, 4, 0), *slots]:
                values = list(map(operator.attrgetter(attr), group))
                if shift + width > 128 or not all(issubclass(t, int) and t is not bool
                                                  for t in set(map(type, values))):
                    return None
                try:
                    v = np.fromiter(values, dtype=np.int64, count=len(values))
                except OverflowError:
                    return None
                if v.min() < 0 or v.max() >= 1 << width:
                    return None
                v = v.astype(np.uint64)
                if shift >= 64:
                    hi_g |= v << np.uint64(shift - 64)
                else:
                    lo_g |= v << np.uint64(shift)
                    if shift + width > 64:
                        hi_g |= v >> np.uint64(64 - shift)
            lo[idx] = lo_g
            hi[idx] = hi_g
        bits = 8 * ib                                   # every word must fit the bytes
        over = hi if bits <= 64 else hi >> np.uint64(bits - 64) if bits < 128 else None
        if (over is not None and over.any()) or (bits < 64 and (lo >> np.uint64(bits)).any()):
            return None
        out = np.empty((len(instrs), 16), dtype=np.uint8)
        out[:, :8] = lo.astype("<u8").view(np.uint8).reshape(-1, 8)
        out[:, 8:] = hi.astype("<u8").view(np.uint8).reshape(-1, 8)
        return out[:, :ib].tobytes()

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


_KINDS = {int(k): k for k in DataMoveKind}
_SIMD_OPS = {int(op): op for op in SimdOp}
_CONFIG_REGISTERS = {int(r): r for r in ConfigRegister}
# plain ints: decoding tests flags without enum arithmetic (a program has 10^5 instructions)
_MM_ACCUMULATE, _MM_ZEROES = int(MatMulFlag.ACCUMULATE), int(MatMulFlag.ZEROES)
_LW_ZEROES = int(LoadWeightsFlag.ZEROES)
_SIMD_READ, _SIMD_WRITE, _SIMD_ACCUMULATE = (int(SimdFlag.READ), int(SimdFlag.WRITE),
                                             int(SimdFlag.ACCUMULATE))
# the flags of every combination of the boolean attributes (enum arithmetic is slow)
_MM_FLAGS = {(a, z): (MatMulFlag.ACCUMULATE if a else 0) | (MatMulFlag.ZEROES if z else 0)
             for a in (False, True) for z in (False, True)}
_SIMD_FLAGS = {(r, w, a): (SimdFlag.READ if r else 0) | (SimdFlag.WRITE if w else 0) |
               (SimdFlag.ACCUMULATE if a else 0)
               for r in (False, True) for w in (False, True) for a in (False, True)}


def _check(instr, name: str, value, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodingError(f"{type(instr).__name__}.{name} must be an integer, got {value!r}")
    if not 0 <= value < (1 << bits):
        raise EncodingError(f"{type(instr).__name__}.{name} = {value} does not fit its "
                            f"{bits}-bit field (allowed 0..{(1 << bits) - 1})")
    return int(value)


# --------------------------------------------------------------------------------------------
# Instructions

_LOCAL = (("address0", "local_address"), ("stride0", "local_stride"))


class Instruction:
    """Base of the typed instructions. Subclasses are frozen dataclasses.

    ``FIELDS`` maps :class:`Fields` names to attributes: :meth:`Layout.encode_word` checks
    and places them, :meth:`Layout.decode_word` reads them back (``_from_fields`` adds what
    the flags say)."""

    opcode: ClassVar[int]
    FIELDS: ClassVar[tuple[tuple[str, str], ...]] = ()
    _opcode_name: ClassVar[str] = "opcode"
    _flags_name: ClassVar[str] = "flags"

    @property
    def flags(self) -> int:
        return 0

    def _check_header(self) -> None:
        """Refuse what the opcode and flags fields cannot say (before encoding)."""

    @classmethod
    def _from_fields(cls, flags: int, values: dict) -> "Instruction":
        return cls(**values)

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class NoOp(Instruction):
    """Does nothing (all-zero bytes; also the padding of an instruction stream)."""

    opcode: ClassVar[int] = Opcode.NOOP

    @classmethod
    def _from_fields(cls, flags, values):
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
    FIELDS: ClassVar = _LOCAL + (("address1", "accumulator_address"),
                                 ("stride1", "accumulator_stride"), ("size", "size"))

    @property
    def flags(self) -> int:
        return _MM_FLAGS[not not self.accumulate, not not self.zeroes]

    @classmethod
    def _from_fields(cls, flags, values):
        return cls(**values, accumulate=bool(flags & _MM_ACCUMULATE),
                   zeroes=bool(flags & _MM_ZEROES))


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
    FIELDS: ClassVar = _LOCAL + (("address1", "other_address"), ("stride1", "other_stride"),
                                 ("size", "size"))
    _flags_name: ClassVar[str] = "kind"

    @property
    def flags(self) -> int:
        return self.kind

    @property
    def known_kind(self) -> DataMoveKind | None:
        try:
            return DataMoveKind(self.kind)
        except ValueError:
            return None

    @classmethod
    def _from_fields(cls, flags, values):
        return cls(_KINDS.get(flags, flags), **values)


@dataclass(frozen=True)
class LoadWeights(Instruction):
    """Push size+1 vectors into the array's weight chain, read top-down from local (§4.3).

    The count sits in operand 1 (``Fields.address1``)."""

    local_address: int = 0
    local_stride: int = 0
    size: int = 0
    zeroes: bool = False
    opcode: ClassVar[int] = Opcode.LOAD_WEIGHTS
    FIELDS: ClassVar = _LOCAL + (("address1", "size"),)

    @property
    def flags(self) -> int:
        return int(LoadWeightsFlag.ZEROES) if self.zeroes else 0

    @classmethod
    def _from_fields(cls, flags, values):
        return cls(**values, zeroes=bool(flags & _LW_ZEROES))


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
    FIELDS: ClassVar = (("address0", "write_address"), ("address1", "read_address"),
                        ("simd_op", "op"), ("simd_left", "left"), ("simd_right", "right"),
                        ("simd_dest", "dest"))

    @property
    def flags(self) -> int:
        return _SIMD_FLAGS[not not self.read, not not self.write, not not self.accumulate]

    @property
    def known_op(self) -> SimdOp | None:
        try:
            return SimdOp(self.op)
        except ValueError:
            return None

    def subinstruction(self, layout: Layout) -> int:
        """The SIMD sub-instruction (operand 2) for this layout."""
        return layout.fields.operand2.get(layout.encode_word(self))

    @classmethod
    def _from_fields(cls, flags, values):
        values["op"] = _SIMD_OPS.get(values["op"], values["op"])
        return cls(**values, read=bool(flags & _SIMD_READ), write=bool(flags & _SIMD_WRITE),
                   accumulate=bool(flags & _SIMD_ACCUMULATE))


@dataclass(frozen=True)
class LoadLUT(Instruction):
    """Extension (§4.6): load lookup table ``table`` (0 = keys) from ceil(D/n) local vectors.

    The table number sits in operand 1 (``Fields.address1``)."""

    local_address: int = 0
    local_stride: int = 0
    table: int = 0
    opcode: ClassVar[int] = Opcode.LOAD_LUT
    FIELDS: ClassVar = _LOCAL + (("address1", "table"),)


@dataclass(frozen=True)
class Configure(Instruction):
    """Write ``value`` to configuration register ``register`` (§4.7).

    The low 32 bits of the operand area hold ``(value << 4) | register``.
    """

    register: int = 0
    value: int = 0
    opcode: ClassVar[int] = Opcode.CONFIGURE
    FIELDS: ClassVar = (("config_register", "register"), ("config_value", "value"))

    @classmethod
    def _from_fields(cls, flags, values):
        return cls(_CONFIG_REGISTERS.get(values["register"], values["register"]),
                   values["value"])


@dataclass(frozen=True)
class Illegal(Instruction):
    """An unused opcode (0x6–0xE): kept bit for bit; executing it sets the error flag."""

    code: int = 0x6
    flag_bits: int = 0
    operands: int = 0
    FIELDS: ClassVar = (("operands", "operands"),)
    _opcode_name: ClassVar[str] = "code"
    _flags_name: ClassVar[str] = "flag_bits"

    @property
    def opcode(self) -> int:  # type: ignore[override]
        return self.code

    def _check_header(self) -> None:
        if _check(self, "code", self.code, 4) in _BY_OPCODE:
            raise EncodingError(f"Illegal.code {self.code:#x} is a defined opcode "
                                f"({_BY_OPCODE[self.code].__name__})")

    @property
    def flags(self) -> int:
        return self.flag_bits

    @property
    def name(self) -> str:
        return "Illegal"


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
