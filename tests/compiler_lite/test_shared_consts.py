"""Constants a transformer carries: equal blocks of the constants image are stored once
(compiler_lite.plan.ConstImage), a LayerNorm's affine map moves into the MatMuls that read it
(compiler_lite.prescale), a tensor the projections read in rows is moved once, and a
LayerNorm of the model's input moves that input once for all its readers."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import compiler_lite.emit as emit
from compiler_lite.compile import compile_model
from compiler_lite.frontend import load_graph
from compiler_lite.golden import run_emulator
from compiler_lite.plan import ConstImage
from compiler_lite.prescale import prescale
from tcu_hw import numeric
from tcu_hw.arch import preset

from .helpers import float_arch, make_model, ort_run, rand, small_arch


def test_const_image_stores_equal_blocks_once():
    """Equal blocks of two tiles or more are stored once, within a kind (only tiles are
    ever laid out again); shorter ones each time (a layer's small blocks then follow the
    previous layer's in DRAM1: one load)."""
    image = ConstImage(4)
    big = 2 * (4 + 1)
    a, b = np.arange(big * 4.0).reshape(big, 4), np.ones((big + 1, 4))
    assert image.add(a, "tiles") == 0 and image.add(b, "tiles") == big
    assert image.add(a.copy(), "tiles") == 0
    assert image.add(np.zeros((0, 4)), "tiles") == 2 * big + 1     # nothing stored
    assert image.add(a[:-1], "tiles") == 2 * big + 1                # a part is its own block
    assert image.add(a, "data") == 3 * big                          # another kind
    small = np.full((3, 4), 2.0)
    at = image.add(small, "tiles")
    assert image.add(small, "tiles") == at + 3                      # short: stored again
    np.testing.assert_array_equal(image.block(big, big + 1), b)
    assert image.array().shape == (4 * big + 6, 4)


def lut(base="ultra96v2"):
    return preset(base).with_changes("lut", lut_count=3, lut_depth=256, simd_registers_depth=12)


def encoder(depth: int, tokens: int = 17, dim: int = 64):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import networks
    return networks.build("deit_tiny", tokens, depth=depth, dim=dim, heads=2, classes=10)


def parameter_vectors(model, n: int) -> float:
    return sum(int(np.prod(i.dims)) for i in model.graph.initializer) / n


def test_encoder_blocks_cost_their_parameters():
    """Each encoder block past the first adds at most 1.1× its parameters to the constants
    (its LayerNorms, relayouts and tables are those of the first block, stored once), and
    the encoder still matches onnxruntime as closely."""
    arch = lut()
    one, three = encoder(1), encoder(3)
    c1, c3 = compile_model(one, arch), compile_model(three, arch)
    added = len(c3.consts) - len(c1.consts)
    params = parameter_vectors(three, 16) - parameter_vectors(one, 16)
    assert added <= 1.1 * params, (added, params)
    assert any(lc.shared_tiles for lc in c3.plan.layers)
    x = {"x": rand((1, 17, 64), 3)}
    ref = ort_run(three, x)
    name = c3.outputs[0].name
    got = run_emulator(c3, x).outputs[name]
    assert np.sqrt(np.mean((got - ref[name]) ** 2)) / ref[name].std() < 0.1


def twin_wide_convs():
    """Two convolutions with the same weights on the same input (equal tile blocks), one of
    which goes in channel groups on the small architecture (its tiles stream)."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], pads=[1] * 4),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["x", "w"], ["c2"], pads=[1] * 4),
             helper.make_node("LeakyRelu", ["c2"], ["r2"], alpha=0.1),
             helper.make_node("Conv", ["r1", "w2"], ["y1"]),
             helper.make_node("Conv", ["r2", "w2"], ["y2"])]
    inits = {"w": rand((128, 16, 3, 3), 1, 0.2), "w2": rand((8, 128, 1, 1), 2, 0.1)}
    return make_model(nodes, {"x": (1, 16, 4, 4)}, ["y1", "y2"], inits)


@pytest.mark.parametrize("dtype", ["fixed", "float"])
def test_shared_tiles_are_copied_before_regrouping(dtype):
    """The twins share one tile block; the one that goes in channel groups gets a copy of
    its own (groups lay its tiles out again), the other keeps the first: both give the bits
    of the program without groups."""
    m = twin_wide_convs()
    arch = small_arch() if dtype == "fixed" else float_arch(small_arch())
    c = compile_model(m, arch)
    st = {s.name: (s, lc) for s, lc in zip(c.layers, c.plan.layers)}
    (s1, lc1), (s2, lc2) = st["c1"], st["c2"]
    assert s1.groups == 1 and s2.groups > 1
    assert lc2.tile_base + lc2.tile_vectors == len(c.consts) != lc1.tile_base + lc1.tile_vectors
    saved = emit.choose_groups
    emit.choose_groups = lambda *a, **k: None
    try:
        plain = compile_model(m, arch)
    finally:
        emit.choose_groups = saved
    c1, c2 = (lc for s, lc in zip(plain.layers, plain.plan.layers) if s.name in ("c1", "c2"))
    assert c1.shared_tiles and c1.tile_base == c2.tile_base
    assert len(plain.consts) + lc2.tile_vectors == len(c.consts)
    feeds = {"x": rand((1, 16, 4, 4), 7)}
    got, want = run_emulator(c, feeds), run_emulator(plain, feeds)
    for name in ("y1", "y2"):
        np.testing.assert_array_equal(got.raw[name], want.raw[name], err_msg=name)


def test_no_room_for_a_copy_keeps_the_shared_tiles():
    """With DRAM1 just as large as the shared image, the twin cannot take a copy of its own:
    it stays out of channel groups (and out of DRAM1's bounds), with the same bits."""
    m = twin_wide_convs()
    roomy = compile_model(m, small_arch())
    image = len(roomy.consts) - next(lc.tile_vectors for s, lc in
                                     zip(roomy.layers, roomy.plan.layers) if s.groups > 1)
    c = compile_model(m, small_arch(dram1_depth=image))
    assert len(c.consts) == image and all(s.groups == 1 for s in c.layers)
    assert {s.name for s, lc in zip(c.layers, c.plan.layers) if lc.shared_tiles} >= {"c1", "c2"}
    feeds = {"x": rand((1, 16, 4, 4), 7)}
    got, want = run_emulator(c, feeds), run_emulator(roomy, feeds)
    for name in ("y1", "y2"):
        np.testing.assert_array_equal(got.raw[name], want.raw[name], err_msg=name)


def layer_norm_then_projections(bias: bool = True, extra_reader: bool = False):
    """x [1, T, C] (the model's input: tokens in the lanes) → LayerNorm → three projections
    (with bias Adds, or without), their sum."""
    T, C = 20, 24
    ln = ["x", "g", "b"] if bias else ["x", "g"]
    nodes = [helper.make_node("LayerNormalization", ln, ["y"], axis=-1, epsilon=1e-5)]
    inits = {"g": rand((C,), 1, 0.2) + 1, "b": rand((C,), 2, 0.1)}
    for k in range(3):
        inits[f"w{k}"] = rand((C, C), 3 + k, 0.3)
        inits[f"c{k}"] = rand((C,), 6 + k, 0.1)
        nodes.append(helper.make_node("MatMul", ["y", f"w{k}"], [f"m{k}"]))
        nodes.append(helper.make_node("Add", [f"m{k}", f"c{k}"], [f"p{k}"]) if k
                     else helper.make_node("Identity", ["m0"], ["p0"]))
    nodes += [helper.make_node("Add", ["p0", "p1"], ["q"]), helper.make_node("Add", ["q", "p2"],
                                                                             ["z"])]
    outputs = ["z"]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["y"], ["ry"]))
        outputs.append("ry")
    return make_model(nodes, {"x": (1, T, C)}, outputs, inits), inits


def rms_error(got, ref) -> float:
    return float(np.sqrt(np.mean((got - ref) ** 2)) / ref.std())


def compile_and_run_model(model, arch, feeds):
    c = compile_model(model, arch)
    return c, run_emulator(c, feeds)


def test_affine_map_moves_into_the_projections():
    """γ scales the projections' weight rows and β·W joins their bias Adds (one is added
    where a MatMul has none): no Mul or Add of the LayerNorm's is left, and in FLOAT32 the
    program is onnxruntime's but for the inverse square root's table."""
    m, inits = layer_norm_then_projections()
    g = prescale(load_graph(m, None, None, source="m.onnx"), numeric.FLOAT32)
    assert [n.op for n in g.nodes].count("Mul") == 1     # the normalization's xc·rstd only
    mm = {n.outputs[0]: n for n in g.nodes if n.op == "MatMul"}
    np.testing.assert_allclose(g.consts[mm["m1"].inputs[1]],
                               inits["g"][:, None] * inits["w1"], rtol=1e-6)
    add = g.consumers("m1")[0]
    np.testing.assert_allclose(g.consts[add.inputs[1]],
                               inits["c1"] + inits["b"] @ inits["w1"], rtol=1e-5)
    assert "m0" not in mm and g.producer("m0").op == "Add"  # a bias Add where none was
    feeds = {"x": rand((1, 20, 24), 9)}
    ref = ort_run(m, feeds)
    _, run = compile_and_run_model(m, float_arch(lut()), feeds)
    assert rms_error(run.outputs["z"], ref["z"]) < 1e-3


@pytest.mark.parametrize("case", ["another reader", "gamma out of range"])
def test_affine_map_stays_when_it_must(case):
    """Not moved when another op reads the normalized tensor, nor in fixed point when a γ
    lies outside [¼, 4] (the weights would lose precision); FLOAT32 moves the latter."""
    m, _ = layer_norm_then_projections(extra_reader=case == "another reader")
    g = load_graph(m, None, None, source="m.onnx")
    if case == "gamma out of range":
        g.consts["g"] = np.asarray(g.consts["g"]).copy()
        g.consts["g"][3] = 0.1
        assert sum(n.op == "Mul" for n in prescale(g, numeric.FLOAT32).nodes) == 1
    assert sum(n.op == "Mul" for n in prescale(g, numeric.FP16BP8).nodes) == 2


def test_layer_norm_of_the_input_moves_it_once():
    """The LayerNorm of a [1, T, C] input (tokens in the lanes) moves the input into rows
    once: the normalization works along the lanes and the three projections read its
    output where it is (one relayout in all, no spatial group sums); the residual-free
    result matches onnxruntime (FLOAT32: but for the inverse square root's table)."""
    m, _ = layer_norm_then_projections()
    feeds = {"x": rand((1, 20, 24), 9)}
    ref = ort_run(m, feeds)["z"]
    for arch in (lut(), float_arch(lut())):
        c, run = compile_and_run_model(m, arch, feeds)
        names = [s.name for s in c.layers]
        assert sum(nm.endswith(":relayout") for nm in names) == 1, names
        assert not any(":group" in nm and not nm.endswith(":groups") for nm in names), names
        err = rms_error(run.outputs["z"], ref)
        assert err < (1e-3 if arch.dtype.is_float else 0.03), err


def test_layer_norm_of_a_transposed_matrix():
    """A LayerNorm over the last axis of [N, C] whose rows are not along the lanes (a
    Transpose of the input): the rows move once (rank 2 stays rank 2 for every reader)."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("LayerNormalization", ["t", "g", "b"], ["y"], axis=-1,
                              epsilon=1e-5),
             helper.make_node("Add", ["t", "y"], ["z"])]
    m = make_model(nodes, {"x": (6, 5)}, ["z"], {"g": rand((6,), 2, 0.3) + 1,
                                                  "b": rand((6,), 3, 0.2)})
    feeds = {"x": rand((6, 5), 1)}
    ref = ort_run(m, feeds)["z"]
    for arch in (float_arch(lut("pynqz1")), lut("pynqz1")):
        _, run = compile_and_run_model(m, arch, feeds)
        assert rms_error(run.outputs["z"], ref) < (1e-3 if arch.dtype.is_float else 0.02)


def test_only_a_layer_norms_affine_map_moves():
    """A Mul and Add of constant vectors that is not a LayerNorm's (here its offset cancels
    the input's, x ≈ 20) stays where it is: moved, the MatMul would read the uncentred
    input and saturate."""
    rng = np.random.default_rng(0)
    x = (20 + rng.normal(0, 1, (1, 4, 16))).astype(np.float32)
    inits = {"g": np.full(16, 1.0), "b": np.full(16, -20.0),
             "w": np.abs(rand((16, 8), 1, 0.3)) + 0.3, "c": rand((8,), 2, 0.1)}
    nodes = [helper.make_node("Mul", ["x", "g"], ["s"]),
             helper.make_node("Add", ["s", "b"], ["y"]),
             helper.make_node("MatMul", ["y", "w"], ["m"]),
             helper.make_node("Add", ["m", "c"], ["z"])]
    m = make_model(nodes, {"x": (1, 4, 16)}, ["z"], inits)
    g = prescale(load_graph(m, None, None, source="m.onnx"), numeric.FP16BP8)
    assert [n.op for n in g.nodes].count("Mul") == 1
    ref = ort_run(m, {"x": x})["z"]
    _, run = compile_and_run_model(m, preset("pynqz1"), {"x": x})
    assert run.stats.total_saturations == 0
    assert np.abs(run.outputs["z"] - ref).max() < 0.05
