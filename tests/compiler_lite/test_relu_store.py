"""A layer ending in a ReLU stores its output rectified (acc → local moves of kind 0x4) instead
of a SIMD instruction per vector, also when its frame pads the channel blocks up to a power
of two (64 channels on 12 lanes: 6 vectors a pixel stored as 8) and the ReLU covers only the
vectors that hold channels (compiler_lite.emit.folded_relu)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from compiler_lite import emit
from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from tcu_hw.arch import preset
from tcu_hw.isa import SIMD, DataMove, DataMoveKind as K

from ..conftest import requires_gcc
from .helpers import make_model, ort_run, rand

C, H = 64, 8
ARCH = preset("pynqz1").with_changes("12 lanes", array_size=12)


def residual_model():
    """s = conv(x) + x; r = ReLU(s); y = conv(r) + s: the first layer stores the raw sum
    for the second addition and its rectified copy for the second convolution."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"]),
             helper.make_node("Add", ["c1", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c2"]),
             helper.make_node("Add", ["c2", "s"], ["y"])]
    inits = {f"w{k}": rand((C, C, 1, 1), k, 0.1) for k in (1, 2)}
    return make_model(nodes, {"x": (1, C, H, H)}, ["y"], inits)


def compiled(monkeypatch=None):
    """The model on 12 lanes, or (``monkeypatch``) with the ReLU left to SIMD instructions."""
    if monkeypatch is not None:
        monkeypatch.setattr(emit, "folded_relu", lambda layer, order=None: None)
    return compile_model(residual_model(), ARCH, strategy="local-isolated")


def test_the_store_rectifies_a_padded_frame():
    c = compiled()
    first = c.program[:c.layers[0].instructions]
    assert not any(isinstance(i, SIMD) for i in first)
    assert any(isinstance(i, DataMove) and i.kind == K.ACC_TO_LOCAL_RELU for i in first)


def test_the_same_outputs_as_simd_relus(monkeypatch):
    feeds = {"x": rand((1, C, H, H), 3)}
    folded = compiled()
    simd = compiled(monkeypatch)
    assert sum(isinstance(i, SIMD) for i in simd.program) >= H * H * 6
    assert len(folded.program) < len(simd.program)
    got = run_emulator(folded, feeds)
    np.testing.assert_array_equal(got.raw["y"], run_emulator(simd, feeds).raw["y"])
    want = ort_run(residual_model(), feeds)["y"]
    assert np.sqrt(np.mean((got.outputs["y"] - want) ** 2)) < 0.02 * np.std(want)


@requires_gcc
def test_the_rectifying_store_on_the_core():
    from .test_hardware import check
    check(compiled(), {"x": rand((1, C, H, H), 4)})


def test_a_layer_in_channel_groups_stores_rectified_too():
    """256 channels on 12 lanes (22 blocks a pixel, framed as 32) in channel groups: the
    ReLU's vectors are the groups' accumulator positions of the blocks that hold channels;
    the store still rectifies, with the outputs of the program without groups."""
    from .test_groups import compiled as with_groups, wide_conv
    from .helpers import small_arch
    m, feeds = wide_conv((1, 32, 8, 8), 256)
    arch = small_arch(array_size=12, local_depth=4096, accumulator_depth=512)
    c, plain = with_groups(m, arch, True), with_groups(m, arch, False)
    wide = next(st for st in c.layers if st.groups > 1)
    assert "SIMD" not in wide.by_kind
    got, want = run_emulator(c, feeds), run_emulator(plain, feeds)
    for name in ("y", "r"):
        np.testing.assert_array_equal(got.raw[name], want.raw[name], err_msg=name)
