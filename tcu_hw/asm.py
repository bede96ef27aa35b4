"""Assembly text for TCU programs: one instruction per line, and back.

The form is ``Mnemonic[flags] key=value ...``; addresses are ``ADDRESS[@STRIDE_CODE]`` (the
stride code is the exponent: step 2^code), ``size`` is the encoded field (count − 1)::

    NoOp
    MatMul[accumulate] local=75 acc=32 size=649
    MatMul[zeroes] local=0 acc=0@1 size=31
    DataMove[dram1_to_local] local=0 dram1=0@1 size=72
    DataMove[local_to_acc_accumulate] local=73 acc=682 size=1
    DataMove[kind=5] local=0 other=0 size=0          ; a reserved kind, kept as is
    LoadWeights local=0 size=8
    LoadWeights[zeroes] local=0 size=0
    SIMD[read,write] O=Max(I,R1) rd=684 wr=1366       ; O = output only, I = input vector
    SIMD R1=Zero(I,I) rd=0 wr=0
    LoadLUT local=16 table=1
    Configure timeout=100
    Illegal opcode=0x6 flags=0x0 operands=0x0

Listings (:func:`listing`) prefix each line with its index (``12:``) and may end it with a
``;`` comment; :func:`assemble` accepts both, so a listing assembles back to the program.

Run ``python -m tcu_hw.asm --arch ARCH PROGRAM.tprog`` for the listing of a program.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

from .errors import AssemblyError
from .isa import (SIMD, Configure, ConfigRegister, DataMove, DataMoveKind, Illegal, Instruction,
                  Layout, LoadLUT, LoadWeights, MatMul, NoOp, SimdOp)

_SIMD_BY_LABEL = {op.label: op for op in SimdOp}
_KIND_BY_LABEL = {k.label: k for k in DataMoveKind}
_REG_BY_LABEL = {r.label: r for r in ConfigRegister}


# ------------------------------------------------------------------------------- formatting

def _addr(address: int, stride: int) -> str:
    return f"{address}@{stride}" if stride else f"{address}"


def _head(name: str, flags: Sequence[str]) -> str:
    return f"{name}[{','.join(flags)}]" if flags else name


def _src(r: int) -> str:
    return "I" if r == 0 else f"R{r}"


def _simd_op_label(op: int) -> str:
    try:
        return SimdOp(op).label
    except ValueError:
        return f"op{int(op)}"


def format_instruction(instr: Instruction) -> str:
    """The assembly text of one instruction."""
    if isinstance(instr, NoOp):
        return "NoOp"
    if isinstance(instr, MatMul):
        flags = [f for f, on in (("accumulate", instr.accumulate), ("zeroes", instr.zeroes)) if on]
        return (f"{_head('MatMul', flags)} local={_addr(instr.local_address, instr.local_stride)}"
                f" acc={_addr(instr.accumulator_address, instr.accumulator_stride)}"
                f" size={instr.size}")
    if isinstance(instr, DataMove):
        kind = instr.known_kind
        head = f"DataMove[{kind.label}]" if kind is not None else f"DataMove[kind={int(instr.kind)}]"
        other = kind.memory if kind is not None else "other"
        return (f"{head} local={_addr(instr.local_address, instr.local_stride)}"
                f" {other}={_addr(instr.other_address, instr.other_stride)} size={instr.size}")
    if isinstance(instr, LoadWeights):
        return (f"{_head('LoadWeights', ['zeroes'] if instr.zeroes else [])}"
                f" local={_addr(instr.local_address, instr.local_stride)} size={instr.size}")
    if isinstance(instr, SIMD):
        flags = [f for f, on in (("read", instr.read), ("write", instr.write),
                                 ("accumulate", instr.accumulate)) if on]
        dest = "O" if instr.dest == 0 else f"R{instr.dest}"
        return (f"{_head('SIMD', flags)} {dest}={_simd_op_label(instr.op)}"
                f"({_src(instr.left)},{_src(instr.right)})"
                f" rd={instr.read_address} wr={instr.write_address}")
    if isinstance(instr, LoadLUT):
        return (f"LoadLUT local={_addr(instr.local_address, instr.local_stride)}"
                f" table={instr.table}")
    if isinstance(instr, Configure):
        try:
            name = ConfigRegister(instr.register).label
        except ValueError:
            name = f"reg{int(instr.register)}"
        return f"Configure {name}={instr.value}"
    if isinstance(instr, Illegal):
        return (f"Illegal opcode={instr.code:#x} flags={instr.flag_bits:#x}"
                f" operands={instr.operands:#x}")
    raise TypeError(f"not an instruction: {instr!r}")


def format_program(program: Iterable[Instruction]) -> str:
    """Assembly text of a program, one instruction per line."""
    return "".join(format_instruction(i) + "\n" for i in program)


def listing(program: Sequence[Instruction], layout: Layout | None = None,
            show_bytes: bool = False) -> Iterator[str]:
    """Lines ``index: text`` (with ``; bytes`` in file order when ``show_bytes``)."""
    width = len(str(max(len(program) - 1, 0)))
    for pc, instr in enumerate(program):
        line = f"{pc:>{width}}: {format_instruction(instr)}"
        if show_bytes:
            if layout is None:
                raise ValueError("show_bytes needs the layout")
            line = f"{line:<64} ; {layout.encode(instr).hex(' ')}"
        yield line


# ---------------------------------------------------------------------------------- parsing

_HEAD = re.compile(r"^([A-Za-z]\w*)(?:\[([^\]]*)\])?$")
_INT = re.compile(r"^(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)$")
_SIMD_EXPR = re.compile(r"^(O|R\d+)=(\w+)\((I|R\d+),(I|R\d+)\)$")


class _Line:
    """Parsed key=value operands of one line; reports unknown, missing and bad values."""

    def __init__(self, tokens: list[str]):
        self.values: dict[str, str] = {}
        self.bare: list[str] = []
        for tok in tokens:
            if "=" in tok and not _SIMD_EXPR.match(tok):
                key, _, value = tok.partition("=")
                if key in self.values:
                    raise AssemblyError(f"operand '{key}' given twice")
                self.values[key] = value
            else:
                self.bare.append(tok)

    def int(self, key: str, default=None) -> int:
        if key not in self.values:
            if default is None:
                raise AssemblyError(f"missing operand '{key}='")
            return default
        return _parse_int(self.values.pop(key), key)

    def addr(self, key: str) -> tuple[int, int]:
        if key not in self.values:
            raise AssemblyError(f"missing operand '{key}='")
        text = self.values.pop(key)
        address, _, stride = text.partition("@")
        return _parse_int(address, key), (_parse_int(stride, key + " stride") if stride else 0)

    def done(self, mnemonic: str) -> None:
        extra = list(self.values) + self.bare
        if extra:
            raise AssemblyError(f"unexpected operand(s) for {mnemonic}: {', '.join(extra)}")


def _parse_int(text: str, what: str) -> int:
    if not _INT.match(text):
        raise AssemblyError(f"'{what}' needs a non-negative integer, got {text!r}")
    return int(text, 0)


def _flags(text: str | None, allowed: Sequence[str], mnemonic: str) -> set[str]:
    got = {f.strip() for f in (text or "").split(",") if f.strip()}
    bad = got - set(allowed)
    if bad:
        raise AssemblyError(f"unknown flag(s) {', '.join(sorted(bad))} for {mnemonic}; "
                            f"allowed: {', '.join(allowed) or 'none'}")
    return got


def _reg(text: str) -> int:
    return 0 if text in ("I", "O") else int(text[1:])


def parse_instruction(text: str) -> Instruction:
    """Parse one instruction (no index prefix, no comment)."""
    text = re.sub(r"\(\s*([^)]*?)\s*\)", lambda m: "(" + re.sub(r"\s+", "", m.group(1)) + ")",
                  text.strip())
    tokens = text.split()
    if not tokens:
        raise AssemblyError("empty instruction")
    m = _HEAD.match(tokens[0])
    if not m:
        raise AssemblyError(f"expected a mnemonic, got {tokens[0]!r}")
    name, flag_text = m.group(1), m.group(2)
    ops = _Line(tokens[1:])
    if name == "NoOp":
        _flags(flag_text, (), name)
        ops.done(name)
        return NoOp()
    if name == "MatMul":
        f = _flags(flag_text, ("accumulate", "zeroes"), name)
        la, ls = ops.addr("local")
        aa, as_ = ops.addr("acc")
        instr = MatMul(la, ls, aa, as_, ops.int("size"), "accumulate" in f, "zeroes" in f)
    elif name == "DataMove":
        if flag_text and flag_text.startswith("kind="):
            kind = _parse_int(flag_text[5:], "kind")
            other = "other"
        else:
            if flag_text not in _KIND_BY_LABEL:
                raise AssemblyError(f"DataMove needs a direction: DataMove[{'|'.join(_KIND_BY_LABEL)}]"
                                    f" or DataMove[kind=N]")
            kind = _KIND_BY_LABEL[flag_text]
            other = kind.memory
        la, ls = ops.addr("local")
        oa, os_ = ops.addr(other)
        instr = DataMove(kind, la, ls, oa, os_, ops.int("size"))
    elif name == "LoadWeights":
        f = _flags(flag_text, ("zeroes",), name)
        la, ls = ops.addr("local")
        instr = LoadWeights(la, ls, ops.int("size"), "zeroes" in f)
    elif name == "SIMD":
        f = _flags(flag_text, ("read", "write", "accumulate"), name)
        if len(ops.bare) != 1 or not _SIMD_EXPR.match(ops.bare[0]):
            raise AssemblyError("SIMD needs one expression DEST=Op(LEFT,RIGHT), e.g. "
                                "O=Max(I,R1) (O = output only, I = input vector, Rk = register)")
        dest, op_text, left, right = _SIMD_EXPR.match(ops.bare.pop()).groups()
        if op_text in _SIMD_BY_LABEL:
            op = _SIMD_BY_LABEL[op_text]
        elif re.fullmatch(r"op\d+", op_text):
            op = int(op_text[2:])
        else:
            raise AssemblyError(f"unknown SIMD op {op_text!r}; ops: {', '.join(_SIMD_BY_LABEL)}")
        instr = SIMD(op, _reg(left), _reg(right), _reg(dest), read_address=ops.int("rd", 0),
                     write_address=ops.int("wr", 0), read="read" in f, write="write" in f,
                     accumulate="accumulate" in f)
    elif name == "LoadLUT":
        _flags(flag_text, (), name)
        la, ls = ops.addr("local")
        instr = LoadLUT(la, ls, ops.int("table"))
    elif name == "Configure":
        _flags(flag_text, (), name)
        if len(ops.values) != 1:
            raise AssemblyError("Configure needs one REGISTER=VALUE, registers: "
                                + ", ".join(_REG_BY_LABEL) + " or regN")
        (key,) = ops.values
        if key in _REG_BY_LABEL:
            reg = _REG_BY_LABEL[key]
        elif re.fullmatch(r"reg\d+", key):
            reg = int(key[3:])
        else:
            raise AssemblyError(f"unknown Configure register {key!r}; registers: "
                                + ", ".join(_REG_BY_LABEL) + " or regN")
        instr = Configure(reg, ops.int(key))
    elif name == "Illegal":
        _flags(flag_text, (), name)
        instr = Illegal(ops.int("opcode"), ops.int("flags", 0), ops.int("operands", 0))
    else:
        raise AssemblyError(f"unknown mnemonic {name!r}; mnemonics: NoOp, MatMul, DataMove, "
                            f"LoadWeights, SIMD, LoadLUT, Configure, Illegal")
    ops.done(name)
    return instr


_PREFIX = re.compile(r"^\s*\d+\s*:")


def assemble(text: str, source: str = "<assembly>", layout: Layout | None = None
             ) -> list[Instruction]:
    """Parse assembly text (or a listing). With ``layout``, also check every instruction
    encodes. Errors name ``source`` and the line number."""
    program = []
    for lineno, line in enumerate(text.splitlines(), 1):
        body = re.split(r"[;#]", line, maxsplit=1)[0]
        body = _PREFIX.sub("", body, count=1).strip()
        if not body:
            continue
        try:
            instr = parse_instruction(body)
            if layout is not None:
                layout.encode(instr)
        except (AssemblyError, ValueError) as e:
            raise AssemblyError(f"{source}:{lineno}: {e}: {line.strip()!r}") from None
        program.append(instr)
    return program


# ------------------------------------------------------------------------------ disassembler

def build_parser():
    import argparse

    from .cli import add_arch
    parser = argparse.ArgumentParser(
        prog="python -m tcu_hw.asm",
        description="Disassemble a .tprog into the tcu_hw assembly text (one instruction per "
                    "line, prefixed by its index; the text assembles back with tcu_hw.asm).")
    parser.add_argument("program", metavar="PROGRAM.tprog", help="program file")
    add_arch(parser)
    parser.add_argument("--bytes", action="store_true",
                        help="also show each instruction's bytes in file order")
    return parser


def main(argv=None) -> int:
    """``python -m tcu_hw.asm --arch ARCH PROGRAM.tprog``: print the program's listing."""
    import sys

    from .arch import resolve_arch
    from .errors import run_cli
    from .isa import read_program

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
    from tcu_hw.asm import main as _main
    raise SystemExit(_main())
