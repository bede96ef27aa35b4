"""Instruction layout and encoding against Tensil's golden bytes, plus round-trip properties."""

from __future__ import annotations


import pytest
from hypothesis import given, settings, strategies as st

from tcu_hw.arch import preset
from tcu_hw.errors import ArtifactError, EncodingError
from tcu_hw.isa import (SIMD, Configure, ConfigRegister, DataMove, DataMoveKind, Illegal,
                        Layout, LoadLUT, LoadWeights, MatMul, NoOp, SimdOp, clog2, flush_probe,
                        read_program, write_program)


def test_clog2():
    assert [clog2(x) for x in (1, 2, 3, 4, 5, 8192, 8193, 20480)] == [0, 1, 2, 2, 3, 13, 14, 15]


def test_conformance_arch_layouts(encodings):
    for name, entry in encodings["archs"].items():
        assert Layout.from_depths(**entry["tarch"]).as_dict() == entry["layout"], name


def test_shipped_board_layouts(encodings):
    for name, entry in encodings["shipped_boards"].items():
        assert preset(name).layout.as_dict() == entry["layout"], name
        assert Layout.from_depths(**entry["tarch"]) == preset(name).layout


def _fields(instr) -> dict:
    """The conformance data's field names for one of our instructions."""
    if isinstance(instr, NoOp):
        return {}
    if isinstance(instr, MatMul):
        return dict(accumulate=instr.accumulate, zeroes=instr.zeroes,
                    local_address=instr.local_address, local_stride=instr.local_stride,
                    accumulator_address=instr.accumulator_address,
                    accumulator_stride=instr.accumulator_stride, size=instr.size)
    if isinstance(instr, DataMove):
        return dict(kind=int(instr.kind), direction=DataMoveKind(instr.kind).label,
                    local_address=instr.local_address, local_stride=instr.local_stride,
                    other_address=instr.other_address, other_stride=instr.other_stride,
                    size=instr.size)
    if isinstance(instr, LoadWeights):
        return dict(zeroes=instr.zeroes, local_address=instr.local_address,
                    local_stride=instr.local_stride, size=instr.size)
    if isinstance(instr, SIMD):
        return dict(read=instr.read, write=instr.write, accumulate=instr.accumulate,
                    write_accumulator_address=instr.write_address,
                    read_accumulator_address=instr.read_address, simd_op=int(instr.op),
                    simd_op_name=SimdOp(instr.op).label, source_left=instr.left,
                    source_right=instr.right, destination=instr.dest)
    raise AssertionError(instr)


def test_compiler_backend_spec_bytes(encodings):
    """All 27 single-instruction goldens of Tensil's CompilerBackendSpec decode and encode."""
    archs = {k: Layout.from_depths(**v["tarch"]) for k, v in encodings["archs"].items()}
    assert len(encodings["compiler_backend_spec"]) == 27
    for case in encodings["compiler_backend_spec"]:
        layout = archs[case["arch"]]
        data = bytes(case["bytes"])
        assert bytes.fromhex(case["bytes_hex"]) == data
        assert len(data) == layout.instruction_bytes
        instr = layout.decode(data)
        assert instr.name == case["instruction"]
        assert int(instr.opcode) == case["opcode"] and instr.flags == case["flags"]
        assert data[-1] == case["header_byte"]
        fields = dict(case["fields"])
        sub = fields.pop("simd_subinstruction", None)
        assert _fields(instr) == fields
        if sub is not None:
            assert instr.subinstruction(layout) == sub
        assert layout.encode(instr) == data
        word = layout.encode_word(instr)
        assert word & ((1 << layout.operand0_bits) - 1) == case["operand0"]
        assert (word >> layout.operand1_shift) & ((1 << layout.operand1_bits) - 1) == \
            case["operand1"]
        assert (word >> layout.operand2_shift) & ((1 << layout.operand2_bits) - 1) == \
            case["operand2"]


def test_spec_golden_matmul():
    """TCU.md §3: all depths 2^30, stride depths 4 (13 bytes)."""
    layout = Layout.from_depths(local_depth=1 << 30, accumulator_depth=1 << 30,
                                dram0_depth=1 << 30, dram1_depth=1 << 30, stride0_depth=4,
                                stride1_depth=4, simd_registers_depth=1)
    instr = MatMul(0x12345, 0, 0x89ABCD, 1, 0x543210)
    assert layout.encode(instr).hex(" ") == "45 23 01 00 cd ab 89 40 10 32 54 00 10"


def test_pynqz1_program_samples(encodings):
    layout = preset("pynqz1").layout
    for case in encodings["pynqz1_program_samples"]["instructions"]:
        data = bytes.fromhex(case["bytes_hex"])
        assert data[::-1].hex() == case["word_msb_first_hex"]
        instr = layout.decode(data)
        assert instr.name == case["instruction"] and instr.flags == case["flags"]
        got = _fields(instr)
        want = case["fields"]
        if isinstance(instr, MatMul):      # the samples name the accumulator side "other"
            got["other_address"] = got.pop("accumulator_address")
            got["other_stride"] = got.pop("accumulator_stride")
        assert {k: got[k] for k in want} == want
        assert layout.encode(instr) == data


# ------------------------------------------------------------------------- properties

@st.composite
def layouts(draw):
    depth = st.integers(2, 1 << 20)
    return Layout.from_depths(local_depth=draw(st.integers(2, 1 << 16)),
                              accumulator_depth=draw(st.integers(2, 1 << 16)),
                              dram0_depth=draw(depth), dram1_depth=draw(depth),
                              stride0_depth=draw(st.integers(1, 256)),
                              stride1_depth=draw(st.integers(1, 256)),
                              simd_registers_depth=draw(st.integers(0, 16)),
                              lut_count=draw(st.sampled_from([0, 0, 1, 3])))


def _u(draw, bits):
    return draw(st.integers(0, (1 << bits) - 1))


@st.composite
def layout_and_instruction(draw, layout=None):
    lay = layout if layout is not None else draw(layouts())
    kind = draw(st.sampled_from(["noop", "matmul", "datamove", "loadweights", "simd",
                                 "loadlut", "configure", "illegal"]))
    a0, a1, s0, s1, sz = (lay.op0_addr_bits, lay.op1_addr_bits, lay.S0, lay.S1,
                          lay.op2_addr_bits)
    if kind == "noop":
        return lay, NoOp()
    if kind == "matmul":
        return lay, MatMul(_u(draw, a0), _u(draw, s0), _u(draw, a1), _u(draw, s1), _u(draw, sz),
                           draw(st.booleans()), draw(st.booleans()))
    if kind == "datamove":
        k = draw(st.integers(0, 15))
        return lay, DataMove(DataMoveKind(k) if k in set(DataMoveKind) else k, _u(draw, a0),
                             _u(draw, s0), _u(draw, a1), _u(draw, s1), _u(draw, sz))
    if kind == "loadweights":
        return lay, LoadWeights(_u(draw, a0), _u(draw, s0), _u(draw, a1), draw(st.booleans()))
    if kind == "simd":
        op = _u(draw, lay.simd_op_bits)
        return lay, SIMD(SimdOp(op) if op in set(SimdOp) else op, _u(draw, lay.R),
                         _u(draw, lay.R), _u(draw, lay.R), _u(draw, a1), _u(draw, a0),
                         draw(st.booleans()), draw(st.booleans()), draw(st.booleans()))
    if kind == "loadlut":
        return lay, LoadLUT(_u(draw, a0), _u(draw, s0), _u(draw, a1))
    if kind == "configure":
        reg = _u(draw, 4)
        return lay, Configure(ConfigRegister(reg) if reg in set(ConfigRegister) else reg,
                              _u(draw, lay.config_value_bits))
    code = draw(st.sampled_from(range(6, 15)))
    return lay, Illegal(code, _u(draw, 4), _u(draw, lay.operand_bits))


@settings(max_examples=400, deadline=None)
@given(layout_and_instruction())
def test_encode_decode_round_trip(case):
    layout, instr = case
    data = layout.encode(instr)
    assert len(data) == layout.instruction_bytes
    assert data[-1] >> 4 == int(instr.opcode)
    back = layout.decode(data)
    assert back == instr
    assert layout.encode(back) == data


@settings(max_examples=100, deadline=None)
@given(layouts(), st.data())
def test_program_round_trip(layout, data):
    words = data.draw(st.lists(st.integers(0, (1 << (8 * layout.instruction_bytes)) - 1),
                               max_size=20))
    # keep only words whose opcode is defined, then decode/encode them canonically
    program = [layout.decode_word(w) for w in words]
    blob = layout.encode_program(program)
    assert layout.decode_program(blob) == program


@settings(max_examples=150, deadline=None)
@given(layouts(), st.data())
def test_program_encoding_by_columns_equals_one_by_one(layout, data):
    """``encode_program`` (a field at a time over the whole program) gives the bytes of
    encoding instruction by instruction, and the same error for a value that does not fit."""
    program = [i for _, i in data.draw(st.lists(layout_and_instruction(layout), min_size=1,
                                                max_size=30))]
    # an Illegal instruction sends the whole program to the one-by-one encoder: leave them
    # out, so that the columns are what is compared
    program = [i for i in program if not isinstance(i, Illegal)] or [NoOp()]
    assert layout.encode_program(program) == b"".join(layout.encode(i) for i in program)
    bad = data.draw(st.sampled_from([MatMul(size=1 << 40), SIMD(SimdOp.MOVE, dest=99)]))
    with pytest.raises(EncodingError) as one:
        layout.encode(bad)
    with pytest.raises(EncodingError) as whole:
        layout.encode_program([*program, bad])
    assert str(whole.value) == str(one.value)


def test_fields_that_do_not_fit_are_refused():
    layout = preset("pynqz1").layout          # local 13 bits in a 13-bit field, size 13 bits
    with pytest.raises(EncodingError, match=r"MatMul.size = 8192 does not fit its 13-bit field"):
        layout.encode(MatMul(size=8192))
    with pytest.raises(EncodingError, match="local_stride"):
        layout.encode(DataMove(DataMoveKind.DRAM0_TO_LOCAL, local_stride=8))
    with pytest.raises(EncodingError, match="dest"):
        layout.encode(SIMD(SimdOp.MOVE, dest=2))
    with pytest.raises(EncodingError, match="op"):
        layout.encode(SIMD(SimdOp.LOOKUP))        # needs lut_count > 0 (5-bit op field)
    with pytest.raises(EncodingError, match="defined opcode"):
        layout.encode(Illegal(0x3))
    with pytest.raises(EncodingError, match="must be an integer"):
        layout.encode(MatMul(size=1.5))


def test_configure_operand_area():
    """The low 32 bits of the operand area hold (value << 4) | register, across operands."""
    layout = preset("pynqz1").layout          # operand0 is 16 bits: the value spans two operands
    instr = Configure(ConfigRegister.DRAM1_OFFSET, 0x1234567)
    word = layout.encode_word(instr)
    assert word & 0xFFFFFFFF == (0x1234567 << 4) | 4
    assert word >> layout.opcode_shift == 0xF
    assert layout.decode_word(word) == instr
    narrow = Layout.from_depths(local_depth=128, accumulator_depth=128, dram0_depth=128,
                                dram1_depth=128, stride0_depth=2, stride1_depth=2,
                                simd_registers_depth=1)
    assert narrow.operand_bits == 24 and narrow.config_value_bits == 20
    with pytest.raises(EncodingError):
        narrow.encode(Configure(ConfigRegister.TIMEOUT, 1 << 20))


def test_simd_subinstruction_positions():
    lay = Layout.from_depths(local_depth=8192, accumulator_depth=2048, dram0_depth=1 << 20,
                             dram1_depth=1 << 20, stride0_depth=8, stride1_depth=8,
                             simd_registers_depth=4, lut_count=2)
    assert (lay.R, lay.simd_op_bits, lay.simd_bits) == (3, 5, 14)
    sub = SIMD(SimdOp.LOOKUP, left=3, right=2, dest=1).subinstruction(lay)
    assert sub == (16 << 9) | (3 << 6) | (2 << 3) | 1


def test_flush_probe():
    arch = preset("pynqz1")
    first, second = flush_probe(arch)
    assert first == DataMove(DataMoveKind.DRAM0_TO_LOCAL, 8191, 0, (1 << 20) - 1, 0, 0)
    assert second == DataMove(DataMoveKind.LOCAL_TO_DRAM0, 8191, 0, (1 << 20) - 2, 0, 0)


def test_read_program_errors(tmp_path):
    layout = preset("pynqz1").layout
    bad = tmp_path / "bad.tprog"
    bad.write_bytes(bytes(8 * 3 + 5))
    with pytest.raises(ArtifactError, match=r"bad.tprog: 29 bytes is not a multiple of the "
                                            r"instruction size \(8 bytes"):
        read_program(bad, layout)
    with pytest.raises(ArtifactError, match="missing.tprog: cannot read program"):
        read_program(tmp_path / "missing.tprog", layout)
    good = tmp_path / "good.tprog"
    prog = [MatMul(1, 0, 2, 1, 3, accumulate=True), NoOp(), *flush_probe(preset("pynqz1"))]
    assert write_program(good, prog, layout) == 32
    assert read_program(good, layout) == prog


def test_speech_program_decodes_completely(speech_dir):
    """Every one of the 80,308 instructions decodes to a known opcode and a legal kind."""
    from tcu_hw.arch import load_arch
    arch = load_arch(speech_dir / "speech_robot.tarch")
    program = read_program(speech_dir / "speech_commands_onnx_speech_robot.tprog", arch.layout)
    assert len(program) == 80308
    assert not any(isinstance(i, (Illegal, NoOp, Configure)) for i in program)
    assert all(i.known_kind is not None for i in program if isinstance(i, DataMove))
    data = (speech_dir / "speech_commands_onnx_speech_robot.tprog").read_bytes()
    assert arch.layout.encode_program(program) == data


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 9), st.integers(0, 600), st.integers(0, 12), st.integers(0, 40))
def test_address_run_matches_enumeration(bits, base, stride, size):
    from tcu_hw.isa import address_run
    addrs = [(base + i * (1 << stride)) % (1 << bits) for i in range(size + 1)]
    run = address_run(base, stride, size, bits)
    assert run.highest == max(addrs)
    if not run.wraps:
        assert (run.lo, run.hi) == (min(addrs), max(addrs))
        assert addrs == sorted(addrs)
