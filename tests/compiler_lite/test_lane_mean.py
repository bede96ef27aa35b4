"""Means over the lanes (compiler_lite/ops/mean.py, ``lane_average``): a ReduceMean whose rows
lie along the lanes (a LayerNorm's over the channels) sums each vector's part of a row in one
MatMul and adds the group sums in a second, with the exact division and the full-range
estimate of the spatial means; nothing is transposed."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler_lite.ops.mean import LaneGroups, group_bits
from compiler_lite.ir import Tensor
from tcu_hw.arch import preset
from tcu_hw.isa import SIMD

from ..conftest import requires_gcc
from .helpers import compile_and_run, float_arch, make_model, ort_run, rand
from .test_average import quantized


def channel_means(widths):
    """One ReduceMean over the channels of [1, C, L] per width C: the model's input layout
    keeps the channels in the lanes, so every row (a position) lies along them."""
    nodes = [helper.make_node("ReduceMean", [f"x{c}"], [f"y{c}"], axes=[1], keepdims=1)
             for c in widths]
    return make_model(nodes, {f"x{c}": (1, c, 5) for c in widths}, [f"y{c}" for c in widths],
                      opset=13)


def lane_layers(c) -> tuple[list[str], list[str]]:
    """Names of the layers summing groups along the lanes, and of spatial-path group layers."""
    names = [s.name for s in c.layers]
    return [m for m in names if m.endswith(":groups")], [m for m in names if ":group" in
                                                         m and not m.endswith(":groups")]


@pytest.mark.parametrize("arch_name,dtype", [("pynqz1", "FP16BP8"), ("ultra96v2", "FP16BP8"),
                                             ("cmoda7", "FP16BP8"), ("pynqz1", "FP32BP16")])
def test_every_width_within_one_lsb(arch_name, dtype):
    """Widths 2..70 on 12, 16 and 4 lanes (a row in one vector, in several, in a partial
    last one): each mean within one LSB of round(sum / C) while the sums are in range, and
    the wider rows take the lane path (a layer of group sums, no spatial groups)."""
    arch = preset(arch_name).with_changes("t", data_type=dtype, dram0_depth=1 << 16)
    dt, n = arch.dtype, arch.array_size
    rng = np.random.default_rng(arch.array_size)
    widths = list(range(2, 71))
    feeds, raws = {}, {}
    for c in widths:
        # the group sums (a vector's lanes) and their scaled total (C / 2^j) must fit
        j = 0 if c <= n else min(group_bits(c, dt), int(np.log2(n)))
        limit = min(8.0, (dt.max_raw / 2 ** dt.binary_point) / max(min(c, n), c / 2 ** j))
        feeds[f"x{c}"], raws[c] = quantized(rng, (1, c, 5), dt, limit)
    comp, run = compile_and_run(channel_means(widths), arch, feeds)
    assert run.stats.total_saturations == 0
    bad = {}
    for c in widths:
        got = np.round(run.outputs[f"y{c}"].reshape(-1) * 2 ** dt.binary_point)
        want = np.round(raws[c].sum(axis=1).reshape(-1) / c)
        if np.abs(got - want).max() > 1:
            bad[c] = int(np.abs(got - want).max())
    assert not bad, f"{dtype} on {n} lanes: widths off by more than one LSB: {bad}"
    lanes, spatial = lane_layers(comp)
    assert len(lanes) == 2 * sum(c > n and group_bits(c, dt) > 0 for c in widths)
    assert not spatial


def test_lane_groups_of_a_layout():
    """Rows along the lanes are found in any order of their elements; a vector shared by two
    rows, or rows one element per vector, are not lane rows."""
    n = 4
    idx = np.arange(2 * 10).reshape(1, 2, 10)           # two rows of 10 in 4-lane vectors
    assert LaneGroups.of(Tensor(idx), (0, 1, 2), n) is None     # vector 2 holds both
    rows = np.array([[0, 1, 2, 3, 4, 5, 6], [8, 9, 10, 11, 12, 13, 14]])
    lg = LaneGroups.of(Tensor(rows[:, ::-1].copy()[None]), (0, 1, 2), n)
    assert lg.slots.shape == (4, 2, 2) and lg.largest == 4
    np.testing.assert_array_equal(lg.slots[:, 1, 1], [12, 13, 14, -1])
    one_per_vector = (np.arange(6) * n).reshape(1, 2, 3)
    assert LaneGroups.of(Tensor(one_per_vector), (0, 1, 2), n) is None


def test_large_means_come_from_the_full_range_estimate():
    """Means far beyond the exact group sums' range over 49 channels (12 lanes): within the
    estimate's bound, and exactly rounded (one LSB) where the exact path holds them."""
    arch = preset("pynqz1")
    dt = arch.dtype
    rng = np.random.default_rng(4)
    x, _ = quantized(rng, (1, 49, 16), dt, 2.0)
    x = x + np.linspace(0, 100, 16, dtype=np.float32)[None, None, :]
    raw = np.round(x.astype(np.float64) * 256)
    model = make_model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1])],
                       {"x": x.shape}, ["y"], opset=13)
    c, run = compile_and_run(model, arch, {"x": x})
    assert lane_layers(c)[0]
    got = run.outputs["y"].reshape(-1) * 256
    exact = raw.sum(axis=1).reshape(-1) / 49
    # 12 + 12 + 12 + 12 + 1 lanes: 5 groups, j = 3, k = 3 (see WIDE_BOUND_7X7)
    assert np.abs(got - exact).max() <= 2 * (4 + 5 * 32 / 49 + 1.25) + 1.5
    small = exact < 8 * 256                         # the exact path holds these
    assert np.abs(got[small] - np.round(exact[small])).max() <= 1
    assert (~small).sum() >= 8


def test_layer_norm_after_a_matmul_matches_onnxruntime():
    """A transformer's LayerNorm on [1, T, C] tokens computed by a MatMul (channels in the
    lanes): within a few LSB of onnxruntime, through the lane path, with a handful of tiles
    (the transposing path stored 256 tiles per group layer)."""
    T, C = 20, 40
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("LayerNormalization", ["h", "g", "b"], ["y"], axis=-1)]
    inits = {"w": rand((C, C), 1, 0.3), "g": rand((C,), 2, 0.5) + 1, "b": rand((C,), 3, 0.1)}
    model = make_model(nodes, {"x": (1, T, C)}, ["y"], inits)
    x = rand((1, T, C), 4)
    arch = preset("ultra96v2").with_changes("lut", lut_count=1, lut_depth=256,
                                            simd_registers_depth=3)
    c, run = compile_and_run(model, arch, {"x": x})
    ref = ort_run(model, {"x": x}, ["y"])["y"]
    err = run.outputs["y"] - ref
    assert np.sqrt(np.mean(err ** 2)) / ref.std() < 0.01
    lanes, spatial = lane_layers(c)
    assert len(lanes) == 4 and not spatial          # mean and variance, exact and estimate
    means = [lc.tile_vectors for s, lc in zip(c.layers, c.plan.layers)
             if ":mean" in s.name or ":variance:" in s.name]
    assert max(means) <= 4 * (arch.array_size + 1)


def test_float32_and_no_register():
    """FLOAT32 sums exactly as onnxruntime does (to float rounding); without a SIMD register
    one layer sums each row with weights 1/C, as for spatial means (no SIMD instruction):
    rows of ±10 over 32 and 40 channels (2 and 3 vectors) do not saturate, as group sums of
    weight 1 would (1/32 is exact; 1/40 is 6/256, biased as Tensil's)."""
    model = channel_means([7, 32, 40])
    feeds = {"x7": rand((1, 7, 5), 5), "x32": rand((1, 32, 5), 7), "x40": rand((1, 40, 5), 6)}
    ref = ort_run(model, feeds, ["y7", "y32", "y40"])
    _, run = compile_and_run(model, float_arch("ultra96v2"), feeds)
    for k in ref:
        np.testing.assert_allclose(run.outputs[k], ref[k], rtol=1e-5, atol=1e-6)
    arch = preset("ultra96v2").with_changes("r0", simd_registers_depth=0)
    feeds["x32"][0, :, :2] = [10.0, -10.0]
    feeds["x40"][0, :, :2] = [10.0, -10.0]
    c, run = compile_and_run(model, arch, feeds)
    assert not any(isinstance(i, SIMD) for i in c.program)
    np.testing.assert_array_equal(run.outputs["y32"].reshape(-1)[:2], [10.0, -10.0])
    np.testing.assert_array_equal(run.outputs["y40"].reshape(-1)[:2], [9.375, -9.375])


@pytest.mark.parametrize("arch_name,channels", [("ultra96v2", 32), ("ultra96v2", 64),
                                                ("pynqz1", 16), ("cmoda7", 40)])
def test_means_far_beyond_the_group_sums(arch_name, channels):
    """Rows of ±100, 0, 50 and 25 (a whole vector's group sum saturates many times over):
    the full-range estimate scales the taps for the largest group, so it does not saturate
    itself; exact here (the values are multiples of the scaled LSB)."""
    values = [100, -100, 0, 50, 25]
    x = np.zeros((1, channels, 5), np.float32) + np.array(values, np.float32)
    model = channel_means([channels])
    _, run = compile_and_run(model, preset(arch_name), {f"x{channels}": x})
    np.testing.assert_array_equal(run.outputs[f"y{channels}"].ravel(), values)


@requires_gcc
def test_lane_mean_bit_exact_on_the_core():
    """Group sums, the split reciprocal and the estimate's fallback (some means saturate the
    exact path) on the PyRTL core, bit for bit with the emulator."""
    from .test_hardware import check
    rng = np.random.default_rng(8)
    x = rng.uniform(0, 1, (1, 30, 6)) * np.linspace(0.5, 60, 6)[None, None, :]
    model = make_model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1])],
                       {"x": x.shape}, ["y"], opset=13)
    feeds = {"x": x.astype(np.float32)}
    c, run = compile_and_run(model, "pynqz1", feeds)
    assert run.stats.total_saturations > 0 and lane_layers(c)[0]
    check(c, feeds)
