"""Exact averages: AveragePool, GlobalAveragePool and ReduceMean with any divisor give the
mean within one LSB of the exactly rounded result (exactly rounded for powers of two up to 4)
when the group sums fit the data type (see compiler_lite/ops/mean.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler_lite.ops.mean import group_bits, reciprocal_parts
from tcu_hw import numeric
from tcu_hw.arch import preset
from tcu_hw.isa import SIMD

from ..conftest import requires_gcc
from .helpers import compile_and_run, make_model, ort_run

DIVISORS = range(2, 65)


def quantized(rng, shape, dt, limit):
    """Random values on the data type's grid with |x| < limit."""
    one = 2 ** dt.binary_point
    raw = rng.integers(-int(limit * one), int(limit * one), size=shape)
    return (raw / one).astype(np.float32), raw


def exactly_rounded_mean(raw_sum: np.ndarray, d) -> np.ndarray:
    """round(S/d) to nearest, ties to even, in raw units (what an exact divider gives)."""
    return np.round(np.asarray(raw_sum, dtype=np.float64) / d)


@pytest.mark.parametrize("arch_name,dtype", [("pynqz1", "FP16BP8"), ("pynqz1", "FP32BP16"),
                                             ("cmoda7", "FP16BP8"), ("pynqz1", "FP8BP4")])
def test_every_divisor_from_2_to_64(arch_name, dtype):
    """One model with a GlobalAveragePool per divisor d over [1, C, 1, d] (random data,
    sums in range): each mean is within one LSB of round(sum / d)."""
    arch = preset(arch_name).with_changes("t", data_type=dtype, dram0_depth=1 << 16)
    dt = arch.dtype
    rng = np.random.default_rng(len(dtype))
    C = 11
    divisors = [d for d in DIVISORS if dt.width > 8 or d < 32]
    nodes, inputs, feeds, raws = [], {}, {}, {}
    for d in divisors:
        nodes.append(helper.make_node("GlobalAveragePool", [f"x{d}"], [f"y{d}"]))
        inputs[f"x{d}"] = (1, C, 1, d)
        # the group sums (2^j taps) and their scaled total (d / 2^j) must fit
        g = 2 ** group_bits(d, dt)
        limit = min(8.0, (dt.max_raw / 2 ** dt.binary_point) / max(g, d / g))
        feeds[f"x{d}"], raws[d] = quantized(rng, inputs[f"x{d}"], dt, limit)
    model = make_model(nodes, inputs, [f"y{d}" for d in divisors])
    _, run = compile_and_run(model, arch, feeds)
    assert run.stats.total_saturations == 0
    worst = {}
    for d in divisors:
        got = np.round(run.outputs[f"y{d}"].reshape(-1) * 2 ** dt.binary_point)
        want = exactly_rounded_mean(raws[d].sum(axis=(2, 3)).reshape(-1), d)
        worst[d] = int(np.abs(got - want).max())
        if d & (d - 1) == 0 and d < 8:
            assert worst[d] == 0, f"d = {d}: a small power of two is exactly rounded"
    bad = {d: w for d, w in worst.items() if w > 1}
    assert not bad, f"{dtype}: divisors whose mean is off by more than one LSB: {bad}"


def test_no_bias_over_many_values():
    """The mean error of 7×7 averages is unbiased (the old 5/256 reciprocal was 4.3% low)."""
    dt = numeric.FP16BP8
    rng = np.random.default_rng(7)
    x, raw = quantized(rng, (2, 64, 7, 7), dt, 2.5)
    model = make_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])],
                       {"x": x.shape}, ["y"])
    _, run = compile_and_run(model, "pynqz1", {"x": x})
    got = run.outputs["y"].reshape(-1) * 256
    exact = raw.sum(axis=(2, 3)).reshape(-1) / 49
    assert np.abs(got - np.round(exact)).max() <= 1
    assert abs(np.mean(got - exact)) < 0.1


def test_real_7x7_global_average_matches_onnxruntime():
    """A CNN ending in Conv → ReLU → GlobalAveragePool over 7×7 → Flatten → Gemm: the pooled
    features are within one LSB (plus the convolution's own rounding) of onnxruntime."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(16) * 0.1).astype(np.float32)
    g = (rng.standard_normal((10, 16)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "g"], ["y"], transB=1)]
    model = make_model(nodes, {"x": (2, 3, 7, 7)}, ["p", "y"], {"w": w, "b": b, "g": g})
    x = (rng.uniform(-1, 1, (2, 3, 7, 7))).astype(np.float32)
    ref = ort_run(model, {"x": x}, ["p", "r", "y"])
    _, run = compile_and_run(model, "pynqz1", {"x": x}, outputs=["p", "r", "y"])
    assert run.stats.total_saturations == 0
    # the pooled mean of the hardware's own ReLU outputs, exactly rounded
    own = np.round(run.outputs["r"].astype(np.float64) * 256).sum(axis=(2, 3)) / 49
    got = run.outputs["p"].reshape(own.shape) * 256
    assert np.abs(got - np.round(own)).max() <= 1
    # against onnxruntime: the convolution's rounding (a few LSB) dominates
    err = np.abs(run.outputs["p"] - ref["p"]).max()
    assert err < 4 / 256, err
    old_bias = np.abs(ref["p"]).max() * (1 - 5 / 256 * 49)
    assert err < old_bias / 2, "the 4.3% low reciprocal is back"


@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool_border_divisors(include_pad):
    """AveragePool 3×3 stride 1 with padding: border windows divide by 4, 6 or 9 (or always
    by 9 with count_include_pad); each within one LSB of the exactly rounded mean."""
    dt = numeric.FP16BP8
    rng = np.random.default_rng(11)
    x, raw = quantized(rng, (1, 10, 6, 5), dt, 12.0)
    model = make_model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3],
                                         pads=[1, 1, 1, 1], count_include_pad=include_pad)],
                       {"x": x.shape}, ["y"])
    _, run = compile_and_run(model, "pynqz1", {"x": x})
    padded = np.pad(raw, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ones = np.pad(np.ones(raw.shape[2:]), 1)
    sums = np.zeros(raw.shape)
    counts = np.zeros(raw.shape[2:])
    for i in range(3):
        for j in range(3):
            sums += padded[:, :, i:i + 6, j:j + 5]
            counts += ones[i:i + 6, j:j + 5]
    if include_pad:
        counts[:] = 9
    want = np.round(sums / counts)
    got = np.round(run.outputs["y"] * 256)
    assert np.abs(got - want).max() <= 1


def test_reduce_mean_spatial():
    dt = numeric.FP16BP8
    x, raw = quantized(np.random.default_rng(5), (1, 9, 5, 3), dt, 8.0)
    model = make_model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3],
                                         keepdims=0)], {"x": x.shape}, ["y"], opset=13)
    _, run = compile_and_run(model, "pynqz1", {"x": x})
    want = np.round(raw.sum(axis=(2, 3)) / 15)
    assert np.abs(np.round(run.outputs["y"] * 256) - want).max() <= 1


@pytest.mark.parametrize("bp", [4, 8, 10, 16])
def test_reciprocal_parts_error_bound(bp):
    """The constants' own error: S·(a + b/2^bp)/2^bp differs from S·2^m/d by at most ¼ raw
    over the whole raw range of S."""
    d = np.arange(1, 300)
    a, b, m = reciprocal_parts(d, bp)
    assert np.all(a <= 2 ** bp) and np.all(np.abs(b) <= 2 ** (bp - 1))
    q = np.ldexp(1.0, m) / d
    err = np.abs(a / 2.0 ** bp + b / 2.0 ** (2 * bp) - q) * 2.0 ** (2 * bp)
    assert err.max() <= 0.5
    with pytest.raises(ValueError, match="positive"):
        reciprocal_parts([0.0], bp)


@requires_gcc
def test_exact_average_bit_exact_on_the_core():
    """7×7 global average (groups, split reciprocal and the full-range fallback, with some
    means large enough to saturate the exact path) and a padded 3×3 average pool."""
    from .test_hardware import check
    rng = np.random.default_rng(2)
    x = (rng.uniform(0, 1, (1, 12, 7, 7)) * np.linspace(0.5, 40, 12)[None, :, None, None])
    model = make_model([helper.make_node("GlobalAveragePool", ["x"], ["g"]),
                        helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3],
                                         pads=[1, 1, 1, 1])], {"x": x.shape}, ["g", "a"])
    feeds = {"x": x.astype(np.float32)}
    c, run = compile_and_run(model, "pynqz1", feeds)
    assert run.stats.total_saturations > 0          # the fallback is exercised
    check(c, feeds)


def test_large_means_use_the_full_range_estimate():
    """Means far above what the exact group sums hold (up to 100 over 7×7 in FP16BP8) come
    from the full-range estimate: within its bound (2^(k-1) + 1.25 raw, k = ⌈log2 49⌉)."""
    dt = numeric.FP16BP8
    rng = np.random.default_rng(9)
    x, raw = quantized(rng, (1, 16, 7, 7), dt, 2.0)
    x = x + np.linspace(0, 100, 16, dtype=np.float32)[None, :, None, None]
    raw = np.round(x.astype(np.float64) * 256)
    model = make_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])],
                       {"x": x.shape}, ["y"])
    _, run = compile_and_run(model, "pynqz1", {"x": x})
    got = run.outputs["y"].reshape(-1) * 256
    exact = raw.sum(axis=(2, 3)).reshape(-1) / 49
    assert np.abs(got - exact).max() <= WIDE_BOUND_7X7
    small = exact < 16 * 256                       # the exact path holds these
    assert np.abs(got[small] - np.round(exact[small])).max() <= 1
    # the estimate's roundings are unbiased: a few LSB, not its worst case
    assert np.abs(got[~small] - exact[~small]).mean() < 4


#: The worst error (raw) of a 7×7 mean whose exact group sums saturate: the estimate's
#: 2^(j-1) + groups·2^(j+k-1)/49 + 1.25 (j = 3, 7 groups, k = 3), twice (the exact result
#: may be kept when it is within that of the estimate) plus the exact path's 1.5.
WIDE_BOUND_7X7 = 2 * (4 + 7 * 32 / 49 + 1.25) + 1.5


def test_mixed_signs_that_saturate_a_group_sum():
    """Large values of both signs: a group sum saturates though the mean is moderate."""
    raw = np.array([[21364, 2872, -32649, 11592, 14229, -24281, 23305],
                    [7103, -1296, -23395, -22842, -12846, -3020, -8829],
                    [27697, 7837, 6479, -24241, -14565, -20656, 31795],
                    [18432, -7325, 14147, 6122, -3002, 14676, -14287],
                    [3753, 12596, 24897, -2108, 32387, -12353, 21589],
                    [24555, 16043, -19541, -1834, 19941, 15300, 7721],
                    [-30183, 9566, -28837, 11937, 17819, 16270, 21011]])
    model = make_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])],
                       {"x": (1, 1, 7, 7)}, ["y"])
    _, run = compile_and_run(model, "pynqz1", {"x": (raw / 256).astype(np.float32)[None, None]})
    assert abs(run.outputs["y"].item() * 256 - raw.sum() / 49) <= WIDE_BOUND_7X7


@pytest.mark.parametrize("arch_name,dtype,shape,values", [
    ("pynqz1", "FP16BP8", (1, 4, 56, 56), [6, 11, 20, 40]),      # 3136 taps > 2^bp
    ("pynqz1", "FP16BP8", (1, 2, 32, 32), [10.5, -3.25]),
    ("pynqz1", "FP8BP4", (1, 2, 7, 7), [4.5, -2.25])])
def test_constant_windows_beyond_the_exact_range(arch_name, dtype, shape, values):
    """Means of constant windows far beyond the exact sums' range (a 56×56 window has more
    taps than 2^bp) come from the estimate: exact when the values are multiples of 2^j LSB
    (its per-tap scaling then does not round), else within its bound (FP8BP4: 9.8 raw)."""
    arch = preset(arch_name).with_changes("t", data_type=dtype)
    x = np.zeros(shape, np.float32) + np.array(values, np.float32)[None, :, None, None]
    model = make_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])],
                       {"x": shape}, ["y"])
    _, run = compile_and_run(model, arch, {"x": x})
    err = np.abs(run.outputs["y"].ravel() - np.array(values)) * 2 ** arch.dtype.binary_point
    assert err.max() <= (0 if dtype == "FP16BP8" else 4 + 7 * 32 / 49 + 1.25), err


def test_average_without_simd_registers():
    """With no SIMD register the division is folded into the weights (as Tensil does, and
    as biased: 0.5 · round(256/49)/256 rounds to 2/256 per tap, 0.383 in all)."""
    arch = preset("pynqz1").with_changes("r0", simd_registers_depth=0)
    x = np.full((1, 3, 7, 7), 0.5, np.float32)
    model = make_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])],
                       {"x": x.shape}, ["y"])
    c, run = compile_and_run(model, arch, {"x": x})
    assert not any(isinstance(i, SIMD) for i in c.program)
    np.testing.assert_array_equal(run.outputs["y"].ravel(), np.full(3, 98 / 256))
