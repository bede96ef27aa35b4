"""The golden emulator on Tensil's programs: the XOR goldens and the speech-commands model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.conformance import speech_case, xor_case, xor_names
from sim.emulator import Emulator
from sim.model import emulate, load_model, load_program
from tcu_hw import numeric
from tcu_hw.arch import Architecture
from tcu_hw.errors import ArtifactError
from tcu_hw.isa import Layout

from ..conftest import load_json, shared_path

XOR_NAMES = ["xor_2x2_memory256", "xor_2x2_memory256_batch4", "xor_2x2_memory256_batch16",
             "xor_4x4_memory256", "xor_2x2_memory64K", "xor4_4x4_memory256",
             "xor4_2x2_memory128_stride2", "xor4_2x2_memory128_stride2_batch4",
             "xor4_2x2_memory128_stride2_batch16"]
SPEECH = "speech_commands_onnx_speech_robot"


@pytest.mark.parametrize("name", XOR_NAMES)
def test_xor_program(name):
    case = load_json("conformance", "xor", f"{name}.json")
    arch = Architecture.from_dict(case["arch"])
    layout = arch.layout
    assert layout.instruction_bytes == case["layout"]["instruction_bytes"]
    program = layout.decode_program(bytes.fromhex(case["program_hex"]))
    assert len(program) == case["program_instructions"]
    consts = numeric.decode_vectors(bytes.fromhex(case["consts_hex"]), arch.dtype,
                                    arch.array_size)
    assert len(consts) == case["consts_vectors"]
    (inp,), (out,) = case["input_dram0"], case["output_dram0"]
    shared = Emulator(arch, strict=True)
    shared.write_dram1(case["consts_dram1_base"], consts)
    for run in case["runs"]:
        for emu in (shared, Emulator(arch, strict=True)):     # persistent and fresh machines
            if emu is not shared:
                emu.write_dram1(case["consts_dram1_base"], consts)
            emu.write_dram0(inp["base"], np.array(run["input_raw"]))
            emu.run(program)
            assert emu.read_dram0(out["base"], out["size"]).tolist() == run["output_raw"]
            assert not emu.error and emu.stats.total_saturations == case["saturations"]


@pytest.fixture(scope="module")
def speech():
    d = shared_path("conformance", "speech_robot")
    return d, load_model(d / f"{SPEECH}.tmodel"), json.loads((d / "expected.json").read_text())


def _speech_input(d, entry) -> np.ndarray:
    return np.frombuffer((d / entry["files"]["raw_le_int16"]).read_bytes(), "<i2").reshape(-1, 8)


@pytest.mark.parametrize("index", range(6))
def test_speech_program_bit_exact(speech, index):
    d, model, expected = speech
    entry = expected["inputs"][index]
    result = emulate(model, {"input_1": _speech_input(d, entry)}, raw=True, strict=True)
    out = result.outputs["dense_1"]
    assert out.tolist() == entry["expected_output_raw"]
    logits = out.ravel()[:12]
    assert int(np.argmax(logits)) == entry["expected_argmax"]
    assert result.stats.total_saturations == entry["emulator_saturations_during_run"] == 0
    assert result.events == []


def test_speech_statistics_match_the_program(speech):
    d, model, expected = speech
    entry = expected["inputs"][0]
    stats = emulate(model, {"input_1": _speech_input(d, entry)}, raw=True).stats
    want = expected["program_statistics"]
    assert stats.instructions == want["instructions"]
    assert dict(stats.count_by_kind) == want["count_by_kind"]
    assert dict(stats.vectors_by_kind) == want["vectors_by_kind"]
    assert stats.macs == want["macs_issued"]
    moves = stats.moves
    dram = sum(v for k, v in moves.items() if "dram" in k)
    assert dram == want["dram_vectors_moved"]


def test_speech_csv_input_equals_binary_input(speech):
    """The CSV converted with floor(float32(v)·256 + 0.5) equals the provided raw input."""
    from tcu_hw.artifacts import read_csv
    d, model, expected = speech
    for entry in expected["inputs"]:
        values = read_csv(d / entry["files"]["csv"], 8)
        raw, sats = numeric.to_fixed(values, model.arch.dtype)
        assert sats == 0
        assert np.array_equal(raw, _speech_input(d, entry))


def test_speech_argmax_matches_onnxruntime(speech):
    """onnxruntime on the ONNX model picks the class the emulated program picks."""
    ort = pytest.importorskip("onnxruntime", reason="install onnxruntime (pip install .[test])")
    d, model, expected = speech
    session = ort.InferenceSession(str(d / "speech_commands.onnx"),
                                   providers=["CPUExecutionProvider"])
    (inp,) = session.get_inputs()
    for entry in expected["inputs"]:
        raw = _speech_input(d, entry)
        x = (raw[:, 0].astype(np.float32) / 256).reshape(1, 1, 124, 129)
        (logits,) = session.run(None, {inp.name: x})
        # test_speech_program_bit_exact checks the emulator's argmax is expected_argmax
        assert int(np.argmax(logits)) == entry["expected_argmax"]


def test_decoded_program_is_cached(speech):
    _, model, _ = speech
    assert load_program(model) is load_program(model)
    assert isinstance(model.arch.layout, Layout)


def test_conformance_loader_matches_the_recorded_runs():
    """sim.conformance (used by the backend tests and bench/conformance_cycles.py) gives
    every XOR case's recorded outputs on the emulator, and names what is missing."""
    root = shared_path("conformance")
    names = xor_names(root)
    assert set(XOR_NAMES) <= set(names)
    for name in names:
        case = xor_case(name, root)
        for run in case.runs:
            emu = Emulator(case.arch, strict=True)
            for base, raw in run.images.dram0.items():
                emu.write_dram0(base, raw)
            for base, raw in run.images.dram1.items():
                emu.write_dram1(base, raw)
            emu.run(case.program)
            assert emu.read_dram0(run.output_base, len(run.expected)).tolist() == run.expected
    with pytest.raises(ArtifactError, match=r"xor/nope.json: cannot read conformance data"):
        xor_case("nope", root)
    with pytest.raises(ArtifactError, match=r"speech input 6 does not exist \(0..5\)"):
        speech_case([6], root)
