"""Channel-group partitions (:mod:`compiler_lite.groups`): a layer whose tiles stream and
whose pixels hold many channel blocks computes its output group by group; every sum is the
one it was, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import compiler_lite.emit as emit
from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from compiler_lite.groups import grouped, positions, regroup_tiles
from compiler_lite.kernels import Linear

from .helpers import float_arch, make_model, ort_run, rand, small_arch


def wide_conv(shape, cout: int, stride: int = 1, batch_norm: bool = True, act: str = "Relu"):
    """A padded 3×3 convolution to ``cout`` channels, batch norm and ``act`` (one layer),
    then a 1×1 convolution back to few channels that reads it."""
    cin = shape[1]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4, strides=[stride] * 2)]
    inits = {"w": rand((cout, cin, 3, 3), 1, 0.2), "w2": rand((8, cout, 1, 1), 2, 0.1)}
    last = "c"
    if batch_norm:
        nodes.append(helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]))
        inits.update(s=rand((cout,), 3, 0.2) + 1, b=rand((cout,), 4, 0.1),
                     m=rand((cout,), 5, 0.1), v=np.abs(rand((cout,), 6, 0.2)) + 0.5)
        last = "n"
    extra = {"alpha": 0.1} if act == "LeakyRelu" else {}
    nodes += [helper.make_node(act, [last], ["r"], **extra),
              helper.make_node("Conv", ["r", "w2"], ["y"])]
    return make_model(nodes, {"x": shape}, ["y", "r"], inits), {"x": rand(shape, 7)}


def compiled(model, arch, groups: bool):
    if groups:
        return compile_model(model, arch, outputs=["y", "r"])
    saved = emit.choose_groups
    emit.choose_groups = lambda *a, **k: None
    try:
        return compile_model(model, arch, outputs=["y", "r"])
    finally:
        emit.choose_groups = saved


CASES = {"8x8_to_256": ((1, 32, 8, 8), 256, 1, "Relu"),
         "batch2_stride2": ((2, 16, 9, 7), 256, 2, "Relu"),
         "row_of_9": ((1, 24, 1, 9), 256, 1, "Relu"),
         "leaky": ((1, 32, 8, 8), 256, 1, "LeakyRelu")}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ["fixed", "float"])
def test_channel_groups_give_the_same_bits(case, dtype):
    """On the small architecture (4 lanes, 256 accumulators, 1,024 local vectors) the wide
    convolution's tiles stream and a pixel holds 64 blocks: its output goes in channel
    groups, the tiles are laid out group by group, and the outputs (the grouped layer's, and
    the next layer's that reads it) are bit for bit those of the program without groups;
    with FLOAT32 they are onnxruntime's."""
    shape, cout, stride, act = CASES[case]
    m, feeds = wide_conv(shape, cout, stride, act=act)
    arch = small_arch() if dtype == "fixed" else float_arch(small_arch())
    c = compiled(m, arch, True)
    assert max(st.groups for st in c.layers) > 1, [(st.name, st.groups) for st in c.layers]
    plain = compiled(m, arch, False)
    assert max(st.groups for st in plain.layers) == 1
    got, want = run_emulator(c, feeds), run_emulator(plain, feeds)
    for name in ("y", "r"):
        np.testing.assert_array_equal(got.raw[name], want.raw[name], err_msg=name)
    if dtype == "float":
        ref = ort_run(m, feeds)
        for name in ("y", "r"):
            np.testing.assert_allclose(got.outputs[name], ref[name], rtol=1e-4, atol=1e-4)


def test_grouping_pays_on_the_model():
    """The grouped program's compiler estimate of the wide layer is below the plain one's
    (the model that chose it agrees with the estimate's direction)."""
    m, _ = wide_conv((1, 32, 8, 8), 256)
    arch = small_arch()
    c = compiled(m, arch, True)
    got = {st.name: st.cycles for st in c.layers if st.groups > 1}
    plain = {st.name: st.cycles for st in compiled(m, arch, False).layers}
    assert got and all(got[k] < plain[k] for k in got), (got, plain)
    from compiler_lite.summary import layers_summary       # the table says so: partitions/groups
    st = next(st for st in c.layers if st.groups > 1)
    assert f" {st.partitions}/{st.groups} " in layers_summary(c)


def test_positions_order_pixels_within_groups():
    """Four blocks a pixel in two groups: pixel p's blocks 0, 1 at 2p, 2p+1 of the first
    half, blocks 2, 3 at the same places of the second half."""
    from compiler_lite.ir import Frame, Space
    space = Space(4)
    F = space.new("f", 12, row=12, frame=Frame(1, 1, 3, 4, 3))
    assert positions(F, 2).tolist() == [0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11]
    assert sorted(positions(F, 4).tolist()) == list(range(12))


def test_regrouped_tiles_keep_every_term_its_weights():
    """After the tiles are laid out group by group, every term still reads the same tile
    values from the constants image, each output vector's terms keep their order, and
    (random weights: no tile repeats) the terms stay in tile order."""
    from compiler_lite.frontend import load_graph
    from compiler_lite.lower import Lowering
    from compiler_lite.plan import Planner
    m, _ = wide_conv((1, 32, 8, 8), 256, batch_norm=False)
    arch = small_arch()
    low = Lowering(load_graph(m, None, None, source="model.onnx"), arch)
    low.run()
    plan = Planner(arch, low.space, low.layers, "local-vars", source="m").place()
    li = next(i for i, lay in enumerate(low.layers) if lay.out.frame is not None
              and lay.out.frame.Cb == 64)
    layer, lc = low.layers[li], plan.layers[li]
    s = layer.steps[0]
    assert isinstance(s, Linear)

    def seen():
        tiles = [plan.image[r.offset:r.offset + r.rows + 1] for r in lc.tiles[0]]
        per = {}
        for o, t in zip(s.o.tolist(), s.t.tolist()):
            per.setdefault(o, []).append(tiles[t].tobytes())
        return per

    before = seen()
    regroup_tiles(plan.image, lc, layer, 4)
    per = lc.tiles[0][0].rows + 1
    assert np.all(np.diff(s.t) >= 0) and all(r.rows + 1 == per for r in lc.tiles[0])
    assert seen() == before
    g = grouped(layer, 4)
    offsets = [r.offset for r in lc.tiles[0]]
    assert offsets == sorted(offsets) and g is not None


def test_channel_groups_of_an_int8_layer_give_the_same_bits(tmp_path):
    """The same with INT8 (the requantize steps per channel go with their vectors): the
    grouped program gives the plain one's bits, in about a third of the estimated cycles."""
    from tcu_hw.arch import preset

    from .test_integer_models import quantized
    m, feeds = wide_conv((1, 32, 8, 8), 256)
    q, _ = quantized(m, "int8", tmp_path, samples=2)
    arch = preset("cmoda7").with_changes(
        "smallint", data_type="INT8", local_depth=1024, accumulator_depth=256,
        simd_registers_depth=4, dram0_depth=1 << 16, dram1_depth=1 << 16)
    c, plain = compiled(str(q), arch, True), compiled(str(q), arch, False)
    assert [st.groups for st in c.layers] == [4, 1]
    got, want = run_emulator(c, feeds), run_emulator(plain, feeds)
    for name in want.raw:
        np.testing.assert_array_equal(got.raw[name], want.raw[name], err_msg=name)
    assert c.layers[0].cycles < plain.layers[0].cycles / 2


def test_a_vector_reusing_its_first_tile_keeps_its_overwrite_first():
    """Two taps with the same weights share a tile, and the batch norm's offset folded into
    each vector's first term gives that term a tile of its own, numbered after the shared
    one: the terms are not in tile order, and putting them in tile order would run a
    vector's accumulating term before its overwriting one (up to 2.8 off). Grouped, the
    bits are the plain program's."""
    shape, cout = (1, 32, 8, 8), 256
    w = rand((cout, 32, 3, 3), 1, 0.2)
    w[:, :, 0, 1] = w[:, :, 0, 0]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    inits = {"w": w, "w2": rand((8, cout, 1, 1), 2, 0.1), "s": rand((cout,), 3, 0.2) + 1,
             "b": rand((cout,), 4, 0.1), "m": rand((cout,), 5, 0.1),
             "v": np.abs(rand((cout,), 6, 0.2)) + 0.5}
    m = make_model(nodes, {"x": shape}, ["y", "r"], inits)
    feeds = {"x": rand(shape, 7)}
    arch = float_arch(small_arch())
    c, plain = compiled(m, arch, True), compiled(m, arch, False)
    assert max(st.groups for st in c.layers) > 1
    got, want = run_emulator(c, feeds), run_emulator(plain, feeds)
    for name in ("y", "r"):
        np.testing.assert_array_equal(got.raw[name], want.raw[name], err_msg=name)
