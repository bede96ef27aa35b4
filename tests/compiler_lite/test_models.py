"""Real models: the trained digits CNN, the speech-commands model Tensil compiled, and
ResNet-20 v2 (random weights) on two boards.

Two kinds of check. Compiled for FLOAT32 (the emulator's float data type) the program must
reproduce onnxruntime to float rounding: that checks the lowering itself. Compiled for the
board's fixed point, results must agree with onnxruntime within what the data type allows
(accuracy for the trained models, relative error for the random one).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tcu_hw.arch import resolve_arch

from ..conftest import shared_path
from .helpers import compile_and_run, float_arch, ort_run


# ------------------------------------------------------------------------------- digits

@pytest.fixture(scope="module")
def digits():
    x = np.load(shared_path("models", "digits_test_x.npy"))
    y = np.load(shared_path("models", "digits_test_y.npy"))
    return x, y


def test_digits_fixed_point_accuracy_within_one_point_of_float(digits):
    """All 360 test images in one batch-360 program (-i "x [360,1,8,8]")."""
    x, y = digits
    path = shared_path("models", "digits_cnn_opset10.onnx")
    ref = ort_run(onnx.load(path), {"x": x})["logits"]
    float_acc = float((ref.argmax(1) == y).mean())
    c, run = compile_and_run(path, "pynqz1", {"x": x}, input_shapes={"x": (360, 1, 8, 8)})
    fixed_acc = float((run.outputs["logits"].argmax(1) == y).mean())
    assert abs(fixed_acc - float_acc) <= 0.01, (fixed_acc, float_acc)
    assert np.abs(run.outputs["logits"] - ref).max() < 0.5


@pytest.mark.parametrize("model", ["digits_cnn_opset10.onnx", "digits_cnn_dynamo.onnx"])
def test_digits_float_matches_onnxruntime(digits, model):
    x, _ = digits
    path = shared_path("models", model)
    ref = ort_run(onnx.load(path), {"x": x[:1]})["logits"]
    _, run = compile_and_run(path, float_arch("pynqz1"), {"x": x[:1]})
    np.testing.assert_allclose(run.outputs["logits"], ref, rtol=1e-4, atol=1e-4)


def test_digits_dynamo_opset20_fixed_point(digits):
    x, y = digits
    path = shared_path("models", "digits_cnn_dynamo.onnx")
    c, _ = compile_and_run(path, "pynqz1", {"x": x[:1]})
    hits = 0
    from compiler_lite.golden import run_emulator
    for k in range(60):
        hits += int(run_emulator(c, {"x": x[k:k + 1]}).outputs["logits"].argmax() == y[k])
    assert hits >= 57


# ------------------------------------------------------------------------------- speech

SPEECH_INPUTS = ["input0_tensil_models_csv", "input1_csv_time_reversed",
                 "input2_synthetic_vowel_s105", "input3_synthetic_vowel_s106",
                 "input4_synthetic_chirp_s11", "input5_synthetic_noise_burst_s23"]


def _speech_input(speech_dir, name):
    raw = np.fromfile(speech_dir / f"{name}.bin", dtype="<i2").reshape(-1, 8)[:, 0]
    return (raw / 256.0).astype(np.float32).reshape(1, 1, 124, 129)


@pytest.fixture(scope="module")
def speech(speech_dir):
    path = speech_dir / "speech_commands.onnx"
    arch = resolve_arch(speech_dir / "speech_robot.tarch")
    from compiler_lite.compile import compile_model
    return path, arch, compile_model(path, arch)


def test_speech_same_argmax_as_onnxruntime(speech, speech_dir):
    from compiler_lite.golden import run_emulator
    path, arch, c = speech
    model = onnx.load(path)
    for name in SPEECH_INPUTS:
        x = _speech_input(speech_dir, name)
        ref = ort_run(model, {"input_1": x})["dense_1"]
        got = run_emulator(c, {"input_1": x}).outputs["dense_1"]
        assert got.argmax() == ref.argmax(), name
        assert np.abs(got - ref).max() < 0.15 * np.abs(ref).max(), name   # rounding only


def test_speech_beats_tensil_instruction_count(speech):
    assert len(speech[2].program) < 80_308


def test_speech_float_matches_onnxruntime(speech, speech_dir):
    path, arch, _ = speech
    x = _speech_input(speech_dir, SPEECH_INPUTS[0])
    ref = ort_run(onnx.load(path), {"input_1": x})["dense_1"]
    _, run = compile_and_run(path, float_arch(arch), {"input_1": x})
    np.testing.assert_allclose(run.outputs["dense_1"], ref, rtol=1e-4, atol=1e-3)


def test_speech_tensil_resize_mode_matches_half_pixel_model(speech, speech_dir):
    """--resize-mode tensil: Resize with half-pixel centres, as in Tensil's own program."""
    path, arch, _ = speech
    model = onnx.load(path)
    from onnx import version_converter
    hp = version_converter.convert_version(model, 13)       # the adapter keeps half-pixel
    x = _speech_input(speech_dir, SPEECH_INPUTS[0])
    ref = ort_run(hp, {"input_1": x})["dense_1"]
    c, run = compile_and_run(path, float_arch(arch), {"input_1": x}, resize_mode="tensil")
    np.testing.assert_allclose(run.outputs["dense_1"], ref, rtol=1e-4, atol=1e-3)
    assert any("half-pixel" in note for note in c.notes)


# ------------------------------------------------------------------------------- resnet

RESNET_OUTS = ["add_26:0", "relu_53:0", "dense/BiasAdd:0"]


@pytest.mark.parametrize("board", ["pynqz1", "ultra96v2"])
def test_resnet_float_matches_onnxruntime(board):
    path = shared_path("models", "resnet20v2_cifar.onnx")
    x = np.random.default_rng(0).standard_normal((1, 32, 32, 3)).astype(np.float32)
    ref = ort_run(onnx.load(path), {"x:0": x}, RESNET_OUTS + ["Identity:0"])
    arch = float_arch(board, lut_count=2, lut_depth=64, simd_registers_depth=3)
    _, run = compile_and_run(path, arch, {"x:0": x}, outputs=RESNET_OUTS + ["Identity:0"])
    for name in RESNET_OUTS:
        np.testing.assert_allclose(run.outputs[name], ref[name], rtol=1e-5,
                                   atol=1e-5 * np.abs(ref[name]).max())
    # softmax through 64-entry tables: a few thousandths
    assert np.abs(run.outputs["Identity:0"] - ref["Identity:0"]).max() < 0.01


@pytest.mark.parametrize("board", ["pynqz1", "ultra96v2"])
def test_resnet_fixed_point_logits(board):
    """Random weights: inputs scaled so that no activation saturates FP16BP8 (±128); the
    error then grows with depth only through rounding (each layer adds a few LSB, amplified
    by the random weights), a few percent of the logits' range."""
    path = shared_path("models", "resnet20v2_cifar.onnx")
    x = (np.random.default_rng(0).standard_normal((1, 32, 32, 3)) * 0.25).astype(np.float32)
    ref = ort_run(onnx.load(path), {"x:0": x}, RESNET_OUTS)
    c, run = compile_and_run(path, board, {"x:0": x}, outputs=RESNET_OUTS)
    # random weights make the pooled means large (up to 59): the average pool's exact group
    # sums saturate there (and are counted) and its full-range estimate is used instead, so
    # only the activations before the pool are checked for saturation
    up_to_pool = compile_and_run(path, board, {"x:0": x}, outputs=["relu_53:0"])[1]
    assert up_to_pool.stats.total_saturations == 0
    for name in RESNET_OUTS:
        scale = np.abs(ref[name]).max()
        assert np.abs(run.outputs[name] - ref[name]).max() < 0.06 * scale, name
    assert run.outputs["dense/BiasAdd:0"].argmax() == ref["dense/BiasAdd:0"].argmax()
    tensil = {"pynqz1": 258_037, "ultra96v2": 102_741}[board]
    assert len(c.program) < tensil
