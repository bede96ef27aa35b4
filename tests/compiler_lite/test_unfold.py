"""Unfolded inputs (compiler_lite.unfold, tcu_hw.artifacts.Unfold): a stem convolution of few
channels reads its kernel taps from the channels of an input the host lays out unfolded;
the program computes what onnxruntime does, with fewer MatMuls, on every backend."""

from __future__ import annotations

import json
import numpy as np
import pytest
from onnx import helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from sim.driver import Driver
from tcu_hw.artifacts import TensorLayout, Unfold, io_layout_json, read_io_layout
from tcu_hw.errors import ArtifactError, CompileError

from ..conftest import requires_verilator
from .helpers import float_arch, make_model, ort_run, rand, small_arch


def direct_unfold(x, kernel, strides, dil, pads, out):
    """The stored tensor, element by element (NCHW ``x``)."""
    N, C, H, W = x.shape
    u = np.zeros((N, kernel[0] * kernel[1] * C) + tuple(out))
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            for i in range(out[0]):
                for j in range(out[1]):
                    r = i * strides[0] + kh * dil[0] - pads[0]
                    s = j * strides[1] + kw * dil[1] - pads[1]
                    if 0 <= r < H and 0 <= s < W:
                        k = (kh * kernel[1] + kw) * C
                        u[:, k:k + C, i, j] = x[:, :, r, s]
    return u


@pytest.mark.parametrize("kernel,strides,dil,pads,out", [
    ((1, 3), (1, 1), (1, 1), (0, 1), (7, 9)),
    ((1, 7), (1, 2), (1, 1), (0, 3), (7, 5)),
    ((3, 3), (2, 2), (1, 1), (1, 1), (4, 5)),
    ((3, 2), (1, 3), (2, 1), (2, 0), (5, 3)),
])
def test_unfold_places_every_tap(kernel, strides, dil, pads, out):
    x = rand((2, 3, 7, 9), 1)
    u = Unfold((0, 1, 2, 3), kernel, strides, dil, pads, out)
    np.testing.assert_array_equal(u.apply(x), direct_unfold(x, kernel, strides, dil, pads, out))
    nhwc = Unfold((0, 3, 1, 2), kernel, strides, dil, pads, out)          # channels last
    np.testing.assert_array_equal(nhwc.apply(x.transpose(0, 2, 3, 1)), u.apply(x))
    assert nhwc.shape((2, 7, 9, 3)) == u.apply(x).shape


def test_io_layout_keeps_the_unfold(tmp_path):
    u = Unfold((0, 3, 1, 2), (3, 3), (2, 2), (1, 1), (1, 1), (4, 5))
    t = TensorLayout("img", (1, 7, 9, 3), (0, 2, 3, 1), 0, 80, unfold=u)
    path = tmp_path / "m.tio.json"
    path.write_text(io_layout_json(float_arch(), [t], []))
    (back,), _ = read_io_layout(path)
    assert back == t
    x = rand((1, 7, 9, 3), 2)
    np.testing.assert_array_equal(back.to_vectors(x, 8), t.to_vectors(x, 8))
    with pytest.raises(ArtifactError, match="'img' is stored unfolded"):
        t.from_vectors(t.to_vectors(x, 8), 8)
    d = json.loads(path.read_text())
    d["inputs"][0]["unfold"]["perm"] = [5, 3, 1, 2]
    path.write_text(json.dumps(d))
    with pytest.raises(ArtifactError, match="m.tio.json: malformed I/O layout.*'img'.*perm"):
        read_io_layout(path)
    for key, value, message in [("strides", [0, 2], "at least 1"), ("pads", [-1, 0], "pads"),
                                ("perm", [0, 3, 1.5, 2], "integer"),
                                ("out", [4, 6], "takes 96 vectors .* its size says 80")]:
        d = json.loads(io_layout_json(float_arch(), [t], []))
        d["inputs"][0]["unfold"][key] = value
        path.write_text(json.dumps(d))
        with pytest.raises(ArtifactError, match=f"m.tio.json: .*{message}"):
            read_io_layout(path)
    d = json.loads(io_layout_json(float_arch(), [], [t]))
    path.write_text(json.dumps(d))
    with pytest.raises(ArtifactError, match="output 'img' has an unfold; only inputs do"):
        read_io_layout(path)


def stem(channels_last: bool, kernel=3, stride=2, pad=1, co=6, size=(9, 11)):
    """A stem convolution of 3 channels (through a Transpose when channels last), a ReLU and
    a second convolution."""
    H, W = size
    nodes, src = [], "img"
    if channels_last:
        nodes.append(helper.make_node("Transpose", ["img"], ["nchw"], perm=[0, 3, 1, 2]))
        src = "nchw"
    nodes += [helper.make_node("Conv", [src, "w", "b"], ["c"], kernel_shape=[kernel, kernel],
                               strides=[stride, stride], pads=[pad] * 4),
              helper.make_node("Relu", ["c"], ["r"]),
              helper.make_node("Conv", ["r", "w2"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)]
    shape = (1, H, W, 3) if channels_last else (1, 3, H, W)
    return make_model(nodes, {"img": shape}, ["y"],
                      {"w": rand((co, 3, kernel, kernel), 1, 0.3), "b": rand((co,), 2, 0.1),
                       "w2": rand((4, co, 3, 3), 3, 0.2)}), shape


def matmul_vectors(c) -> int:
    return sum(i.size + 1 for i in c.program if type(i).__name__ == "MatMul")


@pytest.mark.parametrize("channels_last,kernel,stride,pad,arch", [
    (True, 3, 2, 1, "pynqz1"),
    (False, 7, 2, 3, "pynqz1"),
    (False, 3, 1, 1, "ultra96v2"),
    (True, 7, 2, 3, "zcu104"),
])
def test_unfolded_stem_computes_what_onnxruntime_does(channels_last, kernel, stride, pad,
                                                      arch):
    """FLOAT32: the unfolded program reproduces onnxruntime to rounding, with fewer MatMul
    vectors and the same true MACs as the program reading pixels."""
    m, shape = stem(channels_last, kernel, stride, pad, size=(13, 16))
    x = rand(shape, 4)
    ref = ort_run(m, {"img": x})["y"]
    a = float_arch(arch)
    pixels = compile_model(m, a)
    c = compile_model(m, a, input_layout="unfolded")
    assert c.inputs[0].unfold is not None and c.inputs[0].shape == shape
    assert pixels.inputs[0].unfold is None
    assert matmul_vectors(c) < matmul_vectors(pixels)
    assert sum(s.macs for s in c.layers) == sum(s.macs for s in pixels.layers)
    assert any("stored unfolded" in note for note in c.notes)
    assert any("--input-layout unfolded" in note for note in pixels.notes)
    got = run_emulator(c, {"img": x}).outputs["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("kernel,strides,dil,pads", [
    ((1, 3), (2, 2), (1, 1), (0, 1, 0, 1)),         # one tap high, strided rows
    ((3, 1), (1, 2), (1, 1), (1, 0, 1, 0)),         # one tap wide: both axes
    ((2, 3), (2, 1), (1, 2), (0, 2, 1, 0)),         # dilated, asymmetric pads
    ((3, 3), (1, 2), (2, 1), (2, 1, 0, 1)),
    ((5, 5), (3, 3), (1, 1), (2, 2, 2, 2)),
])
@pytest.mark.parametrize("arch", ["pynqz1", "zcu104"])
def test_unfolded_geometries_match_onnxruntime(kernel, strides, dil, pads, arch):
    """Kernels, strides, dilations and pads of every shape, through the default Transpose
    perm (reversed axes: the input is W, H, C, N)."""
    nodes = [helper.make_node("Transpose", ["img"], ["nchw"]),
             helper.make_node("Conv", ["nchw", "w"], ["y"], kernel_shape=list(kernel),
                              strides=list(strides), dilations=list(dil), pads=list(pads))]
    m = make_model(nodes, {"img": (11, 9, 3, 1)}, ["y"], {"w": rand((5, 3) + kernel, 1)})
    x = rand((11, 9, 3, 1), 2)
    ref = ort_run(m, {"img": x})["y"]
    c = compile_model(m, float_arch(arch), input_layout="unfolded")
    assert c.inputs[0].unfold is not None
    got = run_emulator(c, {"img": x}).outputs["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_inputs_sharing_weights_unfold_each_their_own_way():
    """Two inputs read by convolutions of one weight tensor, unfolded differently (one of
    them strided): each convolution keeps weights of its own."""
    nodes = [helper.make_node("Conv", ["a", "w"], ["ya"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Conv", ["b", "w"], ["yb"], kernel_shape=[3, 3], pads=[1] * 4,
                              strides=[2, 2])]
    m = make_model(nodes, {"a": (1, 3, 8, 8), "b": (1, 3, 16, 16)}, ["ya", "yb"],
                   {"w": rand((4, 3, 3, 3), 1)})
    feeds = {"a": rand((1, 3, 8, 8), 2), "b": rand((1, 3, 16, 16), 3)}
    ref = ort_run(m, feeds)
    c = compile_model(m, float_arch("ultra96v2"), input_layout="unfolded")
    assert all(t.unfold is not None for t in c.inputs)
    got = run_emulator(c, feeds).outputs
    for k in ("ya", "yb"):
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-4 * np.abs(ref[k]).max())


def test_an_unfolding_dram0_cannot_hold_is_not_taken():
    """Unfolding a 7 × 7 stem along both axes would make the input 7× larger: on a small
    DRAM0 the compiler stores it in a way that fits (and the program runs)."""
    m, shape = stem(False, kernel=7, stride=2, pad=3, size=(120, 120))
    a = float_arch(small_arch())
    c = compile_model(m, a, input_layout="unfolded")
    pixels = compile_model(m, a)
    assert c.inputs[0].vectors <= pixels.inputs[0].vectors + a.dram0_depth // 8


def test_fixed_point_unfolded_is_as_close_to_float():
    m, shape = stem(True, size=(16, 16))
    x = rand(shape, 5)
    ref = ort_run(m, {"img": x})["y"]
    err = {}
    for layout in ("pixels", "unfolded"):
        got = run_emulator(compile_model(m, "pynqz1", input_layout=layout),
                           {"img": x}).outputs["y"]
        err[layout] = np.sqrt(np.mean((got - ref) ** 2)) / ref.std()
    assert err["unfolded"] < 1.25 * err["pixels"] + 1e-3, err


def test_inputs_unfolding_would_not_help_stay_pixels():
    """An input read twice, a 1 × 1 convolution, or channels that fill the lanes."""
    two = make_model([helper.make_node("Conv", ["img", "w"], ["a"], kernel_shape=[3, 3]),
                      helper.make_node("Relu", ["img"], ["b"])],
                     {"img": (1, 3, 6, 6)}, ["a", "b"], {"w": rand((4, 3, 3, 3), 1)})
    point = make_model([helper.make_node("Conv", ["img", "w"], ["a"], kernel_shape=[1, 1])],
                       {"img": (1, 3, 6, 6)}, ["a"], {"w": rand((4, 3, 1, 1), 1)})
    wide = make_model([helper.make_node("Conv", ["img", "w"], ["a"], kernel_shape=[3, 3])],
                      {"img": (1, 8, 6, 6)}, ["a"], {"w": rand((4, 8, 3, 3), 1)})
    for m in (two, point, wide):
        c = compile_model(m, "pynqz1", input_layout="unfolded")
        assert c.inputs[0].unfold is None
        assert not any("unfolded" in note for note in c.notes)


def test_bad_input_layouts_are_refused_by_name():
    m, _ = stem(False)
    with pytest.raises(CompileError, match="input layout 'rows' is unknown; allowed: pixels, "
                                           "unfolded"):
        compile_model(m, "pynqz1", input_layout="rows")
    with pytest.raises(CompileError, match="'unfolded' is for fixed-point and FLOAT32 types"):
        compile_model(m, "pynqz1_int8", input_layout="unfolded")


def _driver_runs(tmp_path, backend: str, arch="pynqz1"):
    m, shape = stem(True, size=(10, 12))
    c = compile_model(m, arch, input_layout="unfolded")
    c.write(tmp_path)
    x = rand((2,) + shape[1:], 6)                                   # two runs
    drv = Driver(arch, backend=backend)
    drv.load_model(tmp_path / f"{c.name}.tmodel")
    res = drv.run({"img": x})
    gold = [run_emulator(c, {"img": x[i:i + 1]}).raw["y"] for i in range(2)]
    return res, gold


def test_driver_unfolds_model_layout_inputs(tmp_path):
    """The driver reads the unfold from the .tio.json and lays the input out itself."""
    res, gold = _driver_runs(tmp_path, "emulator")
    assert res.runs == 2
    np.testing.assert_array_equal(res.raw["y"], np.concatenate(gold))


@pytest.mark.slow
def test_pyrtl_core_runs_the_unfolded_program_bit_exact(tmp_path):
    res, gold = _driver_runs(tmp_path, "pyrtl")
    np.testing.assert_array_equal(res.raw["y"], np.concatenate(gold))


@requires_verilator
@pytest.mark.slow
def test_generated_top_runs_the_unfolded_program_bit_exact(tmp_path):
    res, gold = _driver_runs(tmp_path, "verilator", "ultra96v2")
    np.testing.assert_array_equal(res.raw["y"], np.concatenate(gold))


def test_unfolded_input_streams_through_partitions():
    """On a small architecture the unfolded stem still partitions and stays exact."""
    m, shape = stem(False, size=(24, 24), co=8)
    x = rand(shape, 7)
    a = float_arch(small_arch())
    got = run_emulator(compile_model(m, a, input_layout="unfolded"), {"img": x}).outputs["y"]
    ref = ort_run(m, {"img": x})["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_command_lines_take_the_input_layout(tmp_path, capsys):
    """``python -m compiler_lite --input-layout unfolded`` writes the unfold into the
    .tio.json (and says so in the summary); ``python -m sim.check`` runs it."""
    from compiler_lite.__main__ import main as compile_main
    from sim.check import main as check_main

    from ..conftest import shared_path
    model = str(shared_path("models", "digits_cnn_opset10.onnx"))
    assert compile_main(["-a", "pynqz1", "-m", model, "-t", str(tmp_path / "a"), "-q",
                         "-s", "--input-layout", "unfolded"]) == 0
    assert "stored unfolded" in capsys.readouterr().out
    (tio,) = (tmp_path / "a").glob("*.tio.json")
    assert json.loads(tio.read_text())["inputs"][0]["unfold"]["kernel"][1] > 1
    x = np.load(shared_path("models", "digits_test_x.npy"))[:2]
    np.savez(tmp_path / "in.npz", x=x)
    code = check_main(["-a", "pynqz1", "-m", model, "--backend", "emulator", "--inputs",
                       str(tmp_path / "in.npz"), "--input-shapes", "x [2,1,8,8]",
                       "--input-layout", "unfolded", "--tolerance", "0.5"])
    assert code == 0 and "RESULT: PASS" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        compile_main(["-a", "pynqz1", "-m", model, "-t", str(tmp_path / "b"),
                      "--input-layout", "rows"])
    assert "invalid choice: 'rows'" in capsys.readouterr().err
