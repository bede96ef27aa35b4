"""``python -m sim.check`` on the digits CNN and the speech-commands model."""

from __future__ import annotations

import numpy as np
import pytest

from sim.check import main

from ..conftest import requires_gcc, requires_verilator, shared_path


@pytest.mark.parametrize("backend", ["emulator", pytest.param("pyrtl", marks=requires_gcc)])
def test_digits(backend, capsys, tmp_path):
    x = np.load(shared_path("models", "digits_test_x.npy"))[:4]
    np.savez(tmp_path / "in.npz", x=x)
    code = main(["-a", "pynqz1", "-m", str(shared_path("models", "digits_cnn_opset10.onnx")),
                 "--backend", backend, "--inputs", str(tmp_path / "in.npz"),
                 "--input-shapes", "x [4,1,8,8]", "--tolerance", "0.5", "-t", str(tmp_path / "art")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "RESULT: PASS" in out and "logits" in out and "[4, 10]" in out
    if backend == "pyrtl":
        assert "bit-exact" in out and " yes" in out and "MAC utilization" in out
    assert (tmp_path / "art" / "digits_cnn_opset10_onnx_pynqz1.tmodel").exists()


@pytest.mark.parametrize("backend", ["emulator", pytest.param("pyrtl", marks=requires_gcc)])
def test_speech(backend, capsys, speech_dir):
    code = main(["-a", str(speech_dir / "speech_robot.tarch"),
                 "-m", str(speech_dir / "speech_commands.onnx"), "--backend", backend])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "dense_1" in out and "RESULT: PASS" in out


def test_tolerance_failure_and_errors(capsys, tmp_path):
    code = main(["-a", "pynqz1", "-m", str(shared_path("models", "digits_cnn_opset10.onnx")),
                 "--backend", "emulator", "--tolerance", "1e-9"])
    assert code == 1 and "RESULT: FAIL" in capsys.readouterr().out
    assert main(["-a", "pynqz1", "-m", str(tmp_path / "none.onnx")]) == 2
    assert "no such ONNX model file" in capsys.readouterr().err


@requires_gcc
def test_waveform_around_an_instruction(capsys, tmp_path):
    vcd = tmp_path / "w.vcd"
    code = main(["-a", "pynqz1", "-m", str(shared_path("models", "digits_cnn_opset10.onnx")),
                 "--backend", "pyrtl", "--vcd", str(vcd), "--around", "150:3"])
    out = capsys.readouterr().out
    assert code == 0 and "waveform:" in out
    text = vcd.read_text()
    assert "$scope module array $end" in text and "$scope module simd $end" in text
    assert (tmp_path / "w.gtkw").read_text().startswith('[dumpfile] "w.vcd"')
    assert main(["-a", "pynqz1", "-m", str(shared_path("models", "digits_cnn_opset10.onnx")),
                 "--backend", "emulator", "--vcd", str(vcd)]) == 2
    assert "need --backend pyrtl" in capsys.readouterr().err


def test_bad_inputs_and_options_are_refused_before_any_run(capsys, tmp_path):
    model = str(shared_path("models", "digits_cnn_opset10.onnx"))
    np.savez(tmp_path / "wrong.npz", y=np.zeros((1, 1, 8, 8), np.float32))
    (tmp_path / "garbage.npz").write_bytes(b"not a zip")
    np.save(tmp_path / "one.npy", np.zeros(3))
    cases = [
        (["--inputs", str(tmp_path / "wrong.npz")], "takes inputs ['x']; missing ['x']; "
                                                     "unknown ['y']"),
        (["--inputs", str(tmp_path / "garbage.npz")], "garbage.npz: cannot read the inputs"),
        (["--inputs", str(tmp_path / "one.npy")], "it holds one array"),
        (["--backend", "pyrtl", "--around", "10"], "add --vcd"),
        (["--backend", "pyrtl", "--vcd", str(tmp_path / "no" / "w.vcd")],
         "--vcd " + str(tmp_path / "no" / "w.vcd") + ": directory"),
    ]
    for extra, message in cases:
        assert main(["-a", "pynqz1", "-m", model] + extra) == 2, extra
        assert message in capsys.readouterr().err, extra
    with pytest.raises(SystemExit):
        main(["-a", "pynqz1", "-m", model, "--tolerance", "nan"])
    assert "expected a finite number >= 0" in capsys.readouterr().err


def test_nan_weights_are_one_error_naming_the_tensor(tmp_path, capsys):
    """Issue 15: sim.check and compiler_lite on a model whose weights hold a NaN."""
    import onnx
    from onnx import helper, numpy_helper
    from compiler_lite.__main__ import main as compile_main
    w = np.ones((4, 3), np.float32)
    w[1, 2] = np.nan
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "nan",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    path = tmp_path / "nan.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    for run in (lambda: main(["-a", "pynqz1", "-m", str(path), "-t", str(tmp_path / "a")]),
                lambda: compile_main(["-a", "pynqz1", "-m", str(path), "-t", str(tmp_path / "b")])):
        assert run() == 2
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
        assert "'w'" in err and "NaN" in err and "Traceback" not in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@requires_gcc
def test_plot_of_the_digits_model(tmp_path, capsys):
    """--plot writes a PNG with the per-layer cycles and the sampler's timeline."""
    plot = tmp_path / "digits.png"
    assert main(["-a", "pynqz1", "-m", str(shared_path("models", "digits_cnn_opset10.onnx")),
                 "--plot", str(plot), "-q"]) == 0
    out = capsys.readouterr().out
    assert f"plot: {plot} (" in out and "samples every" in out
    data = plot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert main(["-a", "pynqz1", "-m", str(shared_path("models", "digits_cnn_opset10.onnx")),
                 "--plot", str(tmp_path / "p.txt")]) == 2
    assert "give a .png, .svg or .pdf file" in capsys.readouterr().err


def test_precision_columns_are_the_figures_over_every_sample(capsys, tmp_path):
    """--samples draws N random inputs; the row's rms/std and top-1 are those of
    compiler_lite.accuracy on the emulator's outputs against onnxruntime's, over all N."""
    from compiler_lite.accuracy import output_accuracy
    from compiler_lite.compile import compile_model
    from compiler_lite.golden import onnxruntime_outputs
    from sim.driver import Driver
    model = str(shared_path("models", "digits_cnn_opset10.onnx"))
    assert main(["-a", "pynqz1", "-m", model, "--backend", "emulator", "--samples", "6",
                 "--seed", "3", "-q"]) == 0
    out = capsys.readouterr().out
    assert "6 sample(s)" in out and "rms/std" in out and "top-5" in out
    row = next(line for line in out.splitlines() if line.startswith("logits"))
    x = np.random.default_rng(3).standard_normal((6, 1, 8, 8)).astype(np.float32)
    c = compile_model(model, "pynqz1")
    c.write(tmp_path)
    drv = Driver("pynqz1", "emulator")
    drv.load_model(tmp_path / f"{c.name}.tmodel")
    want = output_accuracy("logits", drv.run({"x": x}).outputs["logits"],
                           onnxruntime_outputs(model, {"x": x}, ["logits"])["logits"],
                           1 / 256)
    assert row.split()[1:3] == ["[6,", "10]"]
    assert row.split()[5:8] == [f"{100 * want.rms_rel:.3g}%", f"{100 * want.top1:.1f}%",
                                f"{100 * want.top5:.1f}%"]
    assert float(row.split()[3]) == pytest.approx(want.max_abs, abs=1e-5)


def test_samples_needs_random_inputs(capsys, tmp_path):
    model = str(shared_path("models", "digits_cnn_opset10.onnx"))
    np.savez(tmp_path / "in.npz", x=np.zeros((1, 1, 8, 8), np.float32))
    assert main(["-a", "pynqz1", "-m", model, "-i", str(tmp_path / "in.npz"),
                 "--samples", "2"]) == 2
    assert "--samples draws random inputs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["-a", "pynqz1", "-m", model, "--samples", "0"])
    assert "expected a whole number >= 1, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize("backend", [
    "emulator", pytest.param("pyrtl", marks=requires_gcc),
    pytest.param("verilator", marks=requires_verilator)])
def test_quantized_block_on_every_backend(backend, capsys, tmp_path):
    """onnxruntime's INT8 QDQ model of a ResNet basic block: sim.check quantizes the inputs
    with the model's scale, compares with onnxruntime on the QDQ model, and the hardware
    backends match the emulator bit for bit."""
    from tests.compiler_lite.test_integer_models import quantized, resnet_block
    q, _ = quantized(resnet_block(), "int8", tmp_path / "q")
    code = main(["-a", "pynqz1_int8", "-m", str(q), "--backend", backend, "--samples", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    row = next(line for line in out.splitlines() if line.startswith("y ")).split("]")[1]
    assert float(row.split()[1]) <= 1.0                 # within 1 LSB of onnxruntime
    if backend != "emulator":
        assert row.split()[-1] == "yes"                 # bit-exact with the emulator


def test_a_verilator_that_cannot_run_is_named(capsys, monkeypatch):
    """$VERILATOR pointing at nothing: one error line saying what to fix (it was an
    OSError traceback from inside subprocess)."""
    monkeypatch.setenv("VERILATOR", "/nonexistent/verilator")
    assert main(["-a", "pynqz1", "-m", str(shared_path("models", "digits_cnn_opset10.onnx")),
                 "--backend", "verilator"]) == 2
    err = capsys.readouterr().err
    assert "Verilator '/nonexistent/verilator' cannot run" in err and "$VERILATOR" in err
    assert "Traceback" not in err
