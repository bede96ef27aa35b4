"""The single-operator models of ONNX's backend test data (``pytorch-converted``), compiled and
run on the golden emulator, against the outputs recorded with them.

Tolerance, in units of the data type's last place (FP16BP8: 1/256): a MatMul chain rounds in
every processing element and the inputs are rounded once, so a few LSB; table-based
functions add the table's approximation error.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tcu_hw.arch import preset
from tcu_hw.errors import CompileError

from .helpers import compile_and_run, lsb, lut_arch

BASE = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data",
                    "pytorch-converted")

PLAIN = """AvgPool1d AvgPool1d_stride AvgPool2d AvgPool2d_stride BatchNorm1d_3d_input_eval
BatchNorm2d_eval BatchNorm2d_momentum_eval BatchNorm3d_eval BatchNorm3d_momentum_eval
ConstantPad2d Conv1d Conv1d_dilated Conv1d_groups Conv1d_pad1 Conv1d_pad1size1 Conv1d_pad2
Conv1d_pad2size1 Conv1d_stride Conv2d Conv2d_depthwise Conv2d_depthwise_padded
Conv2d_depthwise_strided Conv2d_depthwise_with_multiplier Conv2d_dilated Conv2d_groups
Conv2d_groups_thnn Conv2d_no_bias Conv2d_padding Conv2d_strided LeakyReLU
LeakyReLU_with_negval Linear Linear_no_bias MaxPool1d MaxPool1d_stride MaxPool2d PReLU_1d
PReLU_1d_multiparam PReLU_2d PReLU_2d_multiparam PReLU_3d PReLU_3d_multiparam PixelShuffle ReLU
ReflectionPad2d ReplicationPad2d ZeroPad2d""".split()

TABLES = """ELU GLU GLU_dim LogSoftmax PoissonNLLLLoss_no_reduce SELU Sigmoid Softmax Softmin
Softplus Softsign Tanh log_softmax_dim3 log_softmax_lastdim softmax_functional_dim3
softmax_lastdim""".split()

#: Not compiled, with the reason the error must give.
REFUSED = {"AvgPool3d": "only 1-D and 2-D", "Conv3d": "only 1-D and 2-D",
           "MaxPool3d_stride": "only 1-D and 2-D", "ConvTranspose2d": "not supported",
           "Embedding": "float inputs only"}


def _load(name: str):
    d = os.path.join(BASE, f"test_{name}")
    if not os.path.isdir(d):
        pytest.skip(f"{d} is not in this onnx package")
    m = onnx.load(os.path.join(d, "model.onnx"))
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    feeds = {}
    for k, nm in enumerate(names):
        feeds[nm] = numpy_helper.to_array(
            onnx.load_tensor(os.path.join(d, "test_data_set_0", f"input_{k}.pb")))
    ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0",
                                                              "output_0.pb")))
    return os.path.join(d, "model.onnx"), feeds, ref


def _check(name: str, arch, tol_lsb: float):
    path, feeds, ref = _load(name)
    c, run = compile_and_run(path, arch, feeds)
    got = next(iter(run.outputs.values()))
    assert got.shape == ref.shape
    err = float(np.abs(got - ref).max())
    assert err <= tol_lsb * lsb(arch), f"{name}: max error {err:.5f} > {tol_lsb} LSB"
    assert not run.events, run.events


@pytest.mark.parametrize("name", PLAIN)
def test_plain_ops(name):
    _check(name, preset("pynqz1"), 8)


@pytest.mark.parametrize("name", TABLES)
def test_table_ops(name):
    _check(name, lut_arch(), 16)


@pytest.mark.parametrize("name", ["Sigmoid", "Tanh"])
def test_piecewise_constant_tables(name):
    """One value table (or two registers): each segment's mid value."""
    _check(name, lut_arch(count=1, depth=256, registers=2), 8)


@pytest.mark.parametrize("name", ["Sigmoid", "Softmax"])
def test_tables_needed(name):
    path, _, _ = _load(name)
    with pytest.raises(CompileError, match="needs lookup tables.*lut_count"):
        compile_and_run(path, preset("pynqz1"), {})


@pytest.mark.parametrize("name,reason", sorted(REFUSED.items()))
def test_refused_with_reason(name, reason):
    path, _, _ = _load(name)
    with pytest.raises(CompileError, match=reason):
        compile_and_run(path, preset("pynqz1"), {})
