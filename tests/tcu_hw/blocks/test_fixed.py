"""The PyRTL fixed-point helper against tcu_hw.numeric (exhaustive for FP8BP4)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tcu_hw import numeric
from tcu_hw.blocks import fixed
from tcu_hw.numeric import FP8BP4, FP16BP8, FP18BP10, FP32BP16

from .harness import run_vectors

from ...conftest import requires_gcc

pytestmark = requires_gcc


def _check_mac(dt, x, y, z):
    got = run_vectors(lambda x, y, z: fixed.mac(x, y, z, dt),
                      {"x": (dt.width, x), "y": (dt.width, y), "z": (dt.width, z)}, dt.width)
    want = numeric.mac(x, y, z, dt)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, (f"{dt.name}: MAC({x[bad[0]]}, {y[bad[0]]}, {z[bad[0]]}) = "
                           f"{got[bad[0]]}, expected {want[bad[0]]}")


def test_mac_fp8bp4_exhaustive_products():
    """Every (x, y) pair of FP8BP4 with z over edge values: 65,536 × 8 cases."""
    dt = FP8BP4
    xs, ys = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    zs = [-128, -127, -1, 0, 1, 2, 126, 127]
    x = np.tile(xs.ravel(), len(zs))
    y = np.tile(ys.ravel(), len(zs))
    z = np.repeat(zs, xs.size)
    _check_mac(dt, x, y, z)


@pytest.mark.parametrize("dt", [FP16BP8, FP18BP10, FP32BP16], ids=lambda d: d.name)
def test_mac_wide_types_edges_and_random(dt):
    lo, hi, half = dt.min_raw, dt.max_raw, 1 << (dt.binary_point - 1)
    edges = [lo, lo + 1, -half * 3, -half, -1, 0, 1, half, half * 3, hi - 1, hi,
             1 << dt.binary_point, -(1 << dt.binary_point)]
    combos = np.array(list(itertools.product(edges, repeat=3)))
    rng = np.random.default_rng(dt.width)
    rand = rng.integers(lo, hi + 1, (60000, 3))
    small = rng.integers(-4 * half, 4 * half, (20000, 3))      # ties are frequent here
    v = np.concatenate([combos, rand, small])
    _check_mac(dt, v[:, 0], v[:, 1], v[:, 2])


@pytest.mark.parametrize("dt", [FP8BP4, FP16BP8, FP18BP10, FP32BP16], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_add_sub_mul(dt, op):
    rng = np.random.default_rng(7)
    edges = np.array([dt.min_raw, dt.min_raw + 1, -1, 0, 1, dt.max_raw - 1, dt.max_raw])
    pairs = np.array(list(itertools.product(edges, repeat=2)))
    pairs = np.concatenate([pairs, rng.integers(dt.min_raw, dt.max_raw + 1, (20000, 2))])
    hw = getattr(fixed, op)
    got = run_vectors(lambda a, b: hw(a, b, dt),
                      {"a": (dt.width, pairs[:, 0]), "b": (dt.width, pairs[:, 1])}, dt.width)
    want = getattr(numeric, op)(pairs[:, 0], pairs[:, 1], dt)
    assert np.array_equal(got, want)
