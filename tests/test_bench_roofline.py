"""bench/roofline.py: the per-layer split adds up to the run it measures."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from compiler_lite.compile import compile_model

from .conftest import requires_gcc, shared_path

ROOT = Path(__file__).resolve().parents[1]


def _roofline():
    spec = importlib.util.spec_from_file_location("roofline", ROOT / "bench" / "roofline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@requires_gcc
def test_layers_add_up_to_the_run():
    rl = _roofline()
    c = compile_model(shared_path("models", "digits_cnn_opset10.onnx"), "pynqz1")
    x = np.load(shared_path("models", "digits_test_x.npy"))[:1]
    res, bounds = rl.run_marked(c, {"x": x}, latency=20)
    rows = rl.report(c, res, bounds)
    assert len(rows) == len(c.layers)
    assert sum(r["cycles"] for r in rows) == res.cycles - res.marks[0]["cycles"]
    split = rl.vector_split(c.program)
    for key in ("matmul", "weights", "moves", "simd", "dram"):
        assert sum(r[key] for r in rows) == split[key]
    assert sum(r["macs"] for r in rows) > 0
    assert all(r["idle"] >= 0 and r["cycles"] > 0 for r in rows)
