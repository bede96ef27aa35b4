"""bench/networks.py builds the networks users bring (valid ONNX, batch norms calibrated so
activations keep their scale), each compiles and runs exactly in FLOAT32 at a reduced size;
bench/precision.py prints its table for a small one."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler_lite.golden import onnxruntime_outputs

from .compiler_lite.helpers import compile_and_run, float_arch

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "bench"))
import networks  # noqa: E402  (bench/ is a folder of scripts)
import precision  # noqa: E402

#: reduced sizes; ResNet-50 v2 at 128 keeps a 4×4 map in its last stage (at 32 its batch
#: norms there see one pixel per sample, and an input unlike those four blows up; so does
#: EfficientNet-B0 below 96)
SMALL = [("resnet20v2", 16), ("yolov4_tiny", 64), ("mobilenetv2", 32), ("efficientnet_b0", 96),
         pytest.param("resnet50v2", 128, marks=pytest.mark.slow)]


#: architecture keys a network needs besides FLOAT32 (EfficientNet's SiLU and gates: tables)
TABLES = {"efficientnet_b0": {"lut_count": 2, "lut_depth": 256, "simd_registers_depth": 3}}


@pytest.mark.parametrize("name,size", SMALL)
def test_network_compiles_and_runs_exactly_in_float(name, size):
    model = networks.build(name, size)
    onnx.checker.check_model(model)
    x = np.random.default_rng(7).standard_normal((1, 3, size, size)).astype(np.float32)
    ref = onnxruntime_outputs(model, {"x": x})
    for out in ref.values():                     # calibrated: the outputs keep their scale
        assert 0.1 < out.std() < 10
    tables = TABLES.get(name)
    _, run = compile_and_run(model, float_arch("ultra96v2", dram1_depth=1 << 22,
                                               **(tables or {})), {"x": x})
    for k, want in ref.items():
        err = run.outputs[k] - want
        if tables:                  # SiLU and the gates through linear-segment tables
            assert np.sqrt(np.mean(err ** 2)) < 0.01 * want.std(), k
            assert run.outputs[k].argmax() == want.argmax(), k
        else:
            assert np.abs(err).max() <= 1e-3 * max(1.0, np.abs(want).max()), k


def test_batch_norm_statistics_are_those_of_their_inputs():
    net, model = networks.resnet20v2(16)
    networks.calibrate_bn(net, model, samples=2)
    source, name, c = net.bns[3]
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    a = onnxruntime_outputs(model, {"x": x}, [source])[source]
    assert np.allclose(inits[f"{name}.mean"], a.mean(axis=(0, 2, 3)), rtol=1e-4, atol=1e-5)
    assert np.allclose(inits[f"{name}.var"], a.var(axis=(0, 2, 3)) + 1e-3, rtol=1e-4)


def test_yolo_matches_the_published_network():
    """YOLOv4-tiny at 192: Tensil's benchmark counts 670.35 M MACs; two heads of 255 channels
    at 6×6 and 12×12."""
    _, model = networks.yolov4_tiny(192)
    heads = [[d.dim_value for d in o.type.tensor_type.shape.dim] for o in model.graph.output]
    assert heads == [[1, 255, 6, 6], [1, 255, 12, 12]]
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == 21


def test_precision_table_for_a_small_network(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert precision.main(["--models", "resnet20v2", "--size", "16", "--samples", "2",
                           "--calibration", "2", "--types", "FP16BP8,FP32BP16,INT8,INT16"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0] + (" " + line.split()[1] if line.startswith("  ort") else ""):
            line for line in out.splitlines() if line.startswith("  ")}
    assert set(rows) >= {"ort INT8", "ort INT16", "FP16BP8", "FP32BP16", "INT8", "INT16"}
    rel = {k: float(v.split()[2 if k.startswith("ort") else 1].rstrip("%"))
           for k, v in rows.items() if k != "type"}
    assert rel["FP32BP16"] < rel["FP16BP8"] and rel["ort INT16"] < rel["ort INT8"]
    # ours: the same QDQ models on the emulator land where onnxruntime's do
    assert rel["INT16"] < rel["INT8"] and rel["INT16"] < 2 * rel["ort INT16"] + 0.05
    assert rel["INT8"] < 1.2 * rel["ort INT8"] + 0.5
    assert (tmp_path / "tcu_hw" / "networks" / "resnet20v2_16_seed0.onnx").is_file()


def test_deit_tiny_reduced_runs_in_int8(tmp_path):
    """DeiT-tiny's encoder at a reduced size (9 tokens of 32, one block, 2 heads): valid
    ONNX; onnxruntime's INT8 QDQ model of it compiles (LayerNorm, attention, Softmax, GELU)
    and lands within 2 LSB of onnxruntime's outputs and as close to float."""
    from compiler_lite.compile import compile_model
    from compiler_lite.golden import run_emulator
    from compiler_lite.quantize import quantize_model

    from .compiler_lite.helpers import lut_arch
    model = networks.build("deit_tiny", 9, depth=1, dim=32, heads=2, classes=10)
    onnx.checker.check_model(model)
    path = tmp_path / "deit.onnx"
    onnx.save(model, str(path))
    rng = np.random.default_rng(3)
    q = quantize_model(path, "int8", {"x": rng.standard_normal((6, 9, 32))}, tmp_path)
    c = compile_model(str(q), lut_arch("ultra96v2_int8", count=3, depth=256, registers=9))
    x = {"x": rng.standard_normal((1, 9, 32)).astype(np.float32)}
    got = run_emulator(c, x).outputs
    name = c.outputs[0].name
    ref, fl = onnxruntime_outputs(q, x)[name], onnxruntime_outputs(model, x)[name]
    assert np.abs(got[name] - ref).max() / c.outputs[0].scale < 2.01
    rms = (lambda a: float(np.sqrt(np.mean((a - fl) ** 2)) / fl.std()))
    assert rms(got[name]) < 1.2 * rms(ref) + 0.005


def test_precision_row_of_a_refused_type(tmp_path, capsys):
    """A type the architecture cannot compile the network for (no lookup tables for its
    Softmax) prints as a refused row; the table still prints."""
    from tcu_hw.arch import preset
    model = networks.build("deit_tiny", 5, depth=1, dim=16, heads=2, classes=4)
    path = tmp_path / "deit.onnx"
    onnx.save(model, str(path))
    x = {"x": np.random.default_rng(0).standard_normal((1, 5, 16)).astype(np.float32)}
    ref = onnxruntime_outputs(model, x)
    row = precision._our_row("FP16BP8", path, preset("pynqz1"), x, tmp_path, ref)
    assert row == ("FP16BP8", "refused", None)
    assert "FP16BP8: refused:" in capsys.readouterr().err
    precision.print_table("deit", [("FP32BP16", "1 s", {k: (0.01, None) for k in ref}), row])
    assert "FP16BP8" in capsys.readouterr().out
