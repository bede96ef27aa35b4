"""``python -m compiler_lite``: artifacts, summaries, golden vectors, and errors that leave no
partial artifacts."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

from compiler_lite.__main__ import main
from tcu_hw.artifacts import read_tdata, read_tmodel
from tcu_hw.asm import assemble
from tcu_hw.isa import read_program

from ..conftest import shared_path
from .helpers import make_model

DIGITS = "digits_cnn_opset10.onnx"


def test_artifacts_summary_and_listing(tmp_path, capsys):
    model = shared_path("models", DIGITS)
    assert main(["-a", "pynqz1", "-m", str(model), "-t", str(tmp_path), "-s", "true",
                 "--layers-summary", "--tasm", "-q"]) == 0
    out = capsys.readouterr().out
    for field in ("COMPILER SUMMARY", "Model: digits_cnn_opset10_onnx_pynqz1",
                  "Total number of instructions", "True MACs (M): 0.017",
                  "Execution time (cycles, estimated)", "MAC efficiency (%)",
                  "Consts utilization (%)", "Number of layers: 3", "LAYERS SUMMARY",
                  "ARTIFACTS"):
        assert field in out, field
    name = "digits_cnn_opset10_onnx_pynqz1"
    tm = read_tmodel(tmp_path / f"{name}.tmodel")
    assert tm.name == name and tm.input_names == ["x"] and tm.output_names == ["logits"]
    assert not tm.consts_to_local
    program = read_program(tmp_path / f"{name}.tprog", tm.arch.layout)
    assert tm.prog.size == len(program) * tm.arch.layout.instruction_bytes
    assert assemble((tmp_path / f"{name}.tasm").read_text(), layout=tm.arch.layout) == program
    assert len(read_tdata(tmp_path / f"{name}.tdata", tm.arch)) == tm.consts[0].size
    io = json.loads((tmp_path / f"{name}.tio.json").read_text())
    assert io["inputs"][0] == {"name": "x", "shape": [1, 1, 8, 8], "order": [0, 2, 3, 1],
                               "base": 0, "size": 64}
    # the tmodel's keys are Tensil's, in Tensil's order
    keys = list(json.loads((tmp_path / f"{name}.tmodel").read_text()))
    assert keys == ["name", "prog", "consts", "inputs", "outputs", "arch",
                    "load_consts_to_local"]


def test_golden_outputs_match_emulator_run_of_the_files(tmp_path):
    """--golden: the .npz holds what sim.emulate computes from the written artifacts."""
    from sim.model import emulate
    model = shared_path("models", DIGITS)
    x = np.load(shared_path("models", "digits_test_x.npy"))[:1]
    np.savez(tmp_path / "in.npz", x=x)
    assert main(["-a", "pynqz1", "-m", str(model), "-t", str(tmp_path), "-q",
                 "--golden", str(tmp_path / "in.npz")]) == 0
    name = "digits_cnn_opset10_onnx_pynqz1"
    gold = np.load(tmp_path / f"{name}.golden.npz")
    assert gold["logits"].shape == (1, 10)
    vec = np.zeros((64, 8))
    vec[:, 0] = x.reshape(-1)                          # NHWC with one channel
    result = emulate(tmp_path / f"{name}.tmodel", {"x": vec})
    np.testing.assert_array_equal(result.outputs["logits"], gold["logits.raw"])


def test_strategy_local_consts_sets_the_manifest_flag(tmp_path):
    model = shared_path("models", DIGITS)
    assert main(["-a", "pynqz1", "-m", str(model), "-t", str(tmp_path), "-q",
                 "--strategy", "local-vars-and-consts"]) == 0
    tm = read_tmodel(tmp_path / "digits_cnn_opset10_onnx_pynqz1.tmodel")
    assert tm.consts_to_local


def _run(args, tmp_path):
    return subprocess.run([sys.executable, "-m", "compiler_lite", *args, "-t", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args,message", [
    (["-m", "missing.onnx"], "no such ONNX model file"),
    (["-o", "nope"], "output 'nope' is not a tensor computed by the model; valid names: x, "),
    (["--input-shapes", "y [1,2]"], "not a model input; inputs: x"),
    (["--input-shapes", "x [1,1,8]"], "gives input 'x' 3 dimensions, the model has 4"),
    (["--input-shapes", "x 1,1,8,8"], "expected 'NAME \\[d0,d1,...\\]'"),
    (["-i", "x [1,1,8,8]"], "looks like an input shape: give shapes with --input-shapes"),
    (["--golden", "missing.npz"], "cannot read the inputs"),
    (["-i", "missing.npz"], "cannot read the inputs"),
])
def test_errors_are_one_line_and_leave_no_files(tmp_path, args, message):
    model = str(shared_path("models", DIGITS))
    base = ["-a", "pynqz1", "-m", model]
    if args[0] == "-m":
        base = ["-a", "pynqz1"]
    r = _run(base + args, tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    import re
    assert re.search(message, r.stderr), r.stderr
    assert not list(tmp_path.iterdir())


def test_unsupported_nodes_listed_together(tmp_path):
    m = make_model([helper.make_node("Relu", ["x"], ["a"]),
                    helper.make_node("TopK", ["a", "k"], ["v", "i"], name="top"),
                    helper.make_node("Cos", ["v"], ["y"], name="cosine")],
                   {"x": (2, 5)}, ["y"], {"k": np.array([2], np.float32)})
    m.graph.initializer[0].data_type = 7                        # k must be int64
    m.graph.initializer[0].ClearField("float_data")
    m.graph.initializer[0].raw_data = np.array([2], np.int64).tobytes()
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    out = tmp_path / "out"
    r = _run(["-a", "pynqz1", "-m", str(path)], out)
    assert r.returncode == 2
    assert "2 node(s) cannot be compiled" in r.stderr
    assert "node 'top' (TopK): operator not supported" in r.stderr
    assert "node 'cosine' (Cos): operator not supported" in r.stderr
    assert not out.exists() or not list(out.iterdir())


def test_resnet_to_logits_from_the_command_line(tmp_path, capsys):
    model = shared_path("models", "resnet20v2_cifar.onnx")
    assert main(["-a", "ultra96v2", "-m", str(model), "-o", "dense/BiasAdd:0",
                 "-t", str(tmp_path), "-s", "-q"]) == 0
    out = capsys.readouterr().out
    count = int(out.split("Total number of instructions: ")[1].split()[0].replace(",", ""))
    assert count < 102_741                                       # Tensil's figure


def test_saturated_constants_are_reported(tmp_path, capsys):
    m = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], name="big")], {"x": (1, 4)},
                   ["y"], {"w": np.full((4, 3), 300.0, np.float32)})
    path = tmp_path / "sat.onnx"
    path.write_bytes(m.SerializeToString())
    np.savez(tmp_path / "in.npz", x=np.ones((1, 4), np.float32))
    assert main(["-a", "pynqz1", "-m", str(path), "-t", str(tmp_path / "o"), "-s", "-q",
                 "--golden", str(tmp_path / "in.npz")]) == 0
    cap = capsys.readouterr()
    assert "Saturated consts (scalars): 12" in cap.out
    assert "in layer y (nodes big): 12" in cap.out
    assert "warning: 12 constant value(s) saturated in FP16BP8" in cap.err
    assert "warning: the golden run saturated 9 result(s)" in cap.err


def test_unwritable_target_is_an_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = _run(["-a", "pynqz1", "-m", str(shared_path("models", DIGITS))], blocker / "sub")
    assert r.returncode == 2 and "cannot create the target directory" in r.stderr


def test_directory_in_the_way_of_an_artifact_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "digits_cnn_opset10_onnx_pynqz1.tmodel").mkdir(parents=True)
    assert main(["-a", "pynqz1", "-m", str(shared_path("models", DIGITS)), "-t", str(out),
                 "-q"]) == 2
    assert "a directory of that name is in the way" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["digits_cnn_opset10_onnx_pynqz1.tmodel"]


def test_unsupported_and_empty_models_say_so(tmp_path, capsys):
    m = make_model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], {"x": (2, 3)},
                   ["y"])
    m.graph.output[0].type.tensor_type.elem_type = 7
    custom = make_model([helper.make_node("Foo", ["x"], ["y"], name="foo",
                                          domain="com.acme")], {"x": (2, 3)}, ["y"])
    custom.opset_import.append(helper.make_opsetid("com.acme", 1))
    for model, message in ((m, "node 'nz' (NonZero): operator not supported"),
                           (custom, "node 'foo' (Foo): operator from domain 'com.acme' not "
                                    "supported")):
        path = tmp_path / "m.onnx"
        path.write_bytes(model.SerializeToString())
        assert main(["-a", "pynqz1", "-m", str(path), "-t", str(tmp_path / "o")]) == 2
        assert message in capsys.readouterr().err
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert main(["-a", "pynqz1", "-m", str(tmp_path / "empty.onnx")]) == 2
    assert "empty.onnx: empty or not an ONNX model" in capsys.readouterr().err


def test_a_dynamic_batch_set_to_one_is_said(tmp_path, capsys):
    """A model input ``["N", 8]`` compiled without ``-i``: N becomes 1, and the compiler
    says so (a note on standard error and in the summary); with ``-i`` nothing is said."""
    m = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], name="fc")], {"x": ("N", 8)},
                   ["y"], {"w": np.ones((8, 3), np.float32)})
    path = tmp_path / "dyn.onnx"
    path.write_bytes(m.SerializeToString())
    assert main(["-a", "pynqz1", "-m", str(path), "-t", str(tmp_path / "o"), "-s"]) == 0
    cap = capsys.readouterr()
    note = "input 'x' dimension 0 ('N') set to 1; give another with --input-shapes 'x [d0,d1,...]'"
    assert f"note: {note}" in cap.err
    assert note in cap.out                                   # the summary's notes
    assert main(["-a", "pynqz1", "-m", str(path), "-t", str(tmp_path / "p"),
                 "--input-shapes", "x [2,8]"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_calibration_samples_show_the_precision_of_the_data_type(tmp_path, capsys):
    """--calibrate: the PRECISION table over every sample; a wider type is closer to float
    (FP32BP16's rms/std below FP16BP8's on the same digits)."""
    model = shared_path("models", DIGITS)
    x = np.load(shared_path("models", "digits_test_x.npy"))[:40]
    np.savez(tmp_path / "cal.npz", x=x)
    figures = {}
    for arch in ("pynqz1", str(tmp_path / "wide.tarch")):
        if arch != "pynqz1":
            from tcu_hw.arch import preset
            doc = json.loads(preset("pynqz1").to_json())
            doc["data_type"] = "FP32BP16"
            (tmp_path / "wide.tarch").write_text(json.dumps(doc))
        assert main(["-a", arch, "-m", str(model), "-t", str(tmp_path / "out"), "-q",
                     "--calibrate", str(tmp_path / "cal.npz")]) == 0
        out = capsys.readouterr().out
        assert "PRECISION on 40 calibration sample(s)" in out
        row = next(line for line in out.splitlines() if line.startswith("logits"))
        assert row.split()[1:3] == ["[40,", "10]"]
        figures[arch] = float(row.split()[5].rstrip("%"))
        assert row.split()[6] == "100.0%"                   # top-1: every digit agrees
    narrow, wide = figures.values()
    assert 0 < wide < narrow < 2


def test_calibration_samples_of_the_wrong_shape_are_refused(tmp_path, capsys):
    model = shared_path("models", DIGITS)
    np.savez(tmp_path / "cal.npz", x=np.zeros((3, 1, 8, 7), np.float32))
    assert main(["-a", "pynqz1", "-m", str(model), "-t", str(tmp_path), "-q",
                 "--calibrate", str(tmp_path / "cal.npz")]) == 2
    assert "input 'x': shape [3, 1, 8, 7]" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [tmp_path / "cal.npz"]           # no artifact written
