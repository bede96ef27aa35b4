"""Assembly text: every instruction formats and parses back; errors name the line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings

from tcu_hw.arch import load_arch, preset
from tcu_hw.asm import assemble, format_instruction, format_program, listing, parse_instruction
from tcu_hw.errors import AssemblyError
from tcu_hw.isa import (SIMD, Configure, ConfigRegister, DataMove, DataMoveKind, Illegal,
                        LoadLUT, LoadWeights, MatMul, NoOp, SimdOp, read_program)

from .test_isa import layout_and_instruction

EXAMPLES = {
    "NoOp": NoOp(),
    "MatMul local=75 acc=33 size=30": MatMul(75, 0, 33, 0, 30),
    "MatMul[accumulate,zeroes] local=0@2 acc=5@1 size=0": MatMul(0, 2, 5, 1, 0, True, True),
    "DataMove[dram1_to_local] local=0 dram1=0@1 size=72":
        DataMove(DataMoveKind.DRAM1_TO_LOCAL, 0, 0, 0, 1, 72),
    "DataMove[local_to_acc_accumulate] local=73 acc=682 size=1":
        DataMove(DataMoveKind.LOCAL_TO_ACC_ACCUMULATE, 73, 0, 682, 0, 1),
    "DataMove[kind=5] local=1 other=2@3 size=4": DataMove(5, 1, 0, 2, 3, 4),
    "LoadWeights local=0 size=8": LoadWeights(0, 0, 8),
    "LoadWeights[zeroes] local=0 size=0": LoadWeights(0, 0, 0, True),
    "SIMD[read,write] O=Max(I,R1) rd=684 wr=1366": SIMD(SimdOp.MAX, 0, 1, 0, 684, 1366, True, True),
    "SIMD R1=Zero(I,I) rd=0 wr=0": SIMD(SimdOp.ZERO, 0, 0, 1),
    "SIMD[read,write,accumulate] O=Multiply(I,R1) rd=3 wr=4":
        SIMD(SimdOp.MULTIPLY, 0, 1, 0, 3, 4, True, True, True),
    "SIMD O=op19(R2,I) rd=0 wr=0": SIMD(19, 2, 0, 0),
    "LoadLUT local=16@1 table=2": LoadLUT(16, 1, 2),
    "Configure timeout=100": Configure(ConfigRegister.TIMEOUT, 100),
    "Configure reg7=5": Configure(7, 5),
    "Illegal opcode=0x6 flags=0x1 operands=0xff": Illegal(6, 1, 255),
}


@pytest.mark.parametrize("text", list(EXAMPLES))
def test_examples_format_and_parse(text):
    assert parse_instruction(text) == EXAMPLES[text]
    assert format_instruction(EXAMPLES[text]) == text


@settings(max_examples=300, deadline=None)
@given(layout_and_instruction())
def test_round_trip_random_instructions(case):
    layout, instr = case
    text = format_instruction(instr)
    assert parse_instruction(text) == instr
    assert "\n" not in text


def test_speech_listing_assembles_back(speech_dir):
    arch = load_arch(speech_dir / "speech_robot.tarch")
    program = read_program(speech_dir / "speech_commands_onnx_speech_robot.tprog", arch.layout)
    text = "\n".join(listing(program, arch.layout, show_bytes=True))
    assert assemble(text, layout=arch.layout) == program
    assert assemble(format_program(program)) == program


def test_comments_and_prefixes():
    text = """
    ; a comment line
    0: LoadWeights local=0 size=8      ; bias + 8 rows
    1: MatMul local=9 acc=0 size=3     # alternative comment
    SIMD[read,write] O=Max( I , R1 ) rd=0 wr=0
    """
    prog = assemble(text)
    assert [i.name for i in prog] == ["LoadWeights", "MatMul", "SIMD"]


@pytest.mark.parametrize("line, message", [
    ("Jump local=0", "unknown mnemonic 'Jump'"),
    ("MatMul acc=0 size=0", "missing operand 'local='"),
    ("MatMul[accumulat] local=0 acc=0 size=0", "unknown flag"),
    ("MatMul local=0 acc=0 size=-1", "non-negative integer"),
    ("MatMul local=0 acc=0 size=1 extra=2", "unexpected operand"),
    ("DataMove local=0 dram0=0 size=0", "needs a direction"),
    ("DataMove[dram0_to_local] local=0 acc=0 size=0", "missing operand 'dram0='"),
    ("SIMD Max(I,R1) rd=0 wr=0", "DEST=Op(LEFT,RIGHT)"),
    ("SIMD O=Maximum(I,R1)", "unknown SIMD op 'Maximum'"),
    ("Configure timeout=1 tracepoint=2", "one REGISTER=VALUE"),
    ("Configure speed=1", "unknown Configure register"),
    ("MatMul local=0 acc=0 size=99999", "does not fit"),
])
def test_errors_name_the_line(line, message):
    text = "NoOp\n" + line + "\n"
    with pytest.raises(AssemblyError) as err:
        assemble(text, source="prog.tasm", layout=preset("pynqz1").layout)
    assert str(err.value).startswith("prog.tasm:2: ")
    assert message in str(err.value)


def test_disassembler_cli(speech_dir, tmp_path):
    prog = speech_dir / "speech_commands_onnx_speech_robot.tprog"
    tarch = speech_dir / "speech_robot.tarch"
    run = subprocess.run([sys.executable, "-m", "tcu_hw.asm", "--arch", str(tarch), str(prog),
                          "--bytes"], capture_output=True, text=True, check=True)
    lines = run.stdout.splitlines()
    assert len(lines) == 80308
    assert lines[0].startswith("    0: DataMove[")
    assert lines[0].split("; ")[1] == prog.read_bytes()[:8].hex(" ")
    bad = tmp_path / "short.tprog"
    bad.write_bytes(b"\0" * 7)
    run = subprocess.run([sys.executable, "-m", "tcu_hw.asm", "-a", "pynqz1", str(bad)],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and "short.tprog" in run.stderr
    assert "Traceback" not in run.stderr
