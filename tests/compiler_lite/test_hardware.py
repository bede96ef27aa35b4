"""Compiled programs on the PyRTL core: outputs bit-exact with the golden emulator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from tcu_hw.arch import resolve_arch

from ..conftest import requires_gcc, shared_path
from .helpers import lut_arch, make_model, rand

pytestmark = requires_gcc


def run_on_core(c, feeds, latency=20):
    from sim.pyrtl_backend import DramTiming, run_compiled
    core, res = run_compiled(c, feeds, DramTiming(latency=latency))
    assert not res.error
    return {t.name: core.read_dram0(t.base, t.vectors) for t in c.outputs}, res


def check(c, feeds):
    gold = run_emulator(c, feeds)
    got, res = run_on_core(c, feeds)
    for name, raw in gold.raw.items():
        np.testing.assert_array_equal(got[name], raw, err_msg=name)
    return res


def test_digits_batch_on_the_core():
    x = np.load(shared_path("models", "digits_test_x.npy"))[:4]
    c = compile_model(shared_path("models", "digits_cnn_opset10.onnx"), "pynqz1",
                      input_shapes={"x": (4, 1, 8, 8)})
    check(c, {"x": x})


@pytest.mark.parametrize("strategy", ["local-isolated", "local-vars-and-consts"])
def test_strategies_on_the_core(strategy):
    x = np.load(shared_path("models", "digits_test_x.npy"))[:2]
    c = compile_model(shared_path("models", "digits_cnn_opset10.onnx"), "pynqz1",
                      input_shapes={"x": (2, 1, 8, 8)}, strategy=strategy)
    check(c, {"x": x})


def test_speech_on_the_core(speech_dir):
    raw = np.fromfile(speech_dir / "input0_tensil_models_csv.bin", dtype="<i2")
    x = (raw.reshape(-1, 8)[:, 0] / 256.0).astype(np.float32).reshape(1, 1, 124, 129)
    c = compile_model(speech_dir / "speech_commands.onnx",
                      resolve_arch(speech_dir / "speech_robot.tarch"))
    res = check(c, {"input_1": x})
    assert res.cycles < 1_678_969 * 0.5            # Tensil's RTL on Tensil's program


def test_tables_on_the_core():
    m = make_model([helper.make_node("Sigmoid", ["x"], ["s"]),
                    helper.make_node("Gemm", ["s", "w"], ["g"]),
                    helper.make_node("Softmax", ["g"], ["y"], axis=1)],
                   {"x": (3, 10)}, ["y"], {"w": rand((10, 12), 1, 0.5)})
    c = compile_model(m, lut_arch())
    check(c, {"x": rand((3, 10), 2)})


@pytest.mark.slow
@pytest.mark.parametrize("board", ["pynqz1", "ultra96v2", "zcu104"])
def test_resnet_on_the_core(board):
    x = (np.random.default_rng(0).standard_normal((1, 32, 32, 3)) * 0.25).astype(np.float32)
    c = compile_model(shared_path("models", "resnet20v2_cifar.onnx"), board,
                      outputs=["dense/BiasAdd:0"])
    check(c, {"x:0": x})


@pytest.mark.parametrize("kind, arch", [("int8", "pynqz1_int8"), ("int16", "ultra96v2_int16")])
def test_quantized_blocks_on_the_core(kind, arch, tmp_path):
    """onnxruntime's QDQ models of a ResNet basic block and a YOLO-style block (zero-point
    padding, Requantize with wide parameters, rescaled Add and Concat, LeakyReLU) compiled
    for the integer types: the core's outputs equal the emulator's."""
    from .test_integer_models import quantized, resnet_block, yolo_block
    for k, build in enumerate((resnet_block, yolo_block)):
        q, shape = quantized(build(), kind, tmp_path / str(k))
        check(compile_model(str(q), arch), {"x": rand(shape, 3)})
