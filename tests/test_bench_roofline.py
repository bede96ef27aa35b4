"""sim.profile (bench/roofline.py, --plot): the per-layer split adds up to the run it
measures, and the sampler's timeline agrees with it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from compiler_lite.compile import compile_model
from sim.profile import UNITS, layer_rows, plot_profile, profile, timeline, vector_split
from tcu_hw.isa import DataMove, DataMoveKind

from .conftest import requires_gcc, shared_path

ROOT = Path(__file__).resolve().parents[1]


def _roofline():
    spec = importlib.util.spec_from_file_location("roofline", ROOT / "bench" / "roofline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@requires_gcc
def test_layers_add_up_to_the_run():
    c = compile_model(shared_path("models", "digits_cnn_opset10.onnx"), "pynqz1")
    x = np.load(shared_path("models", "digits_test_x.npy"))[:1]
    prof = profile(c, {"x": x}, latency=20, sample=False)
    res = prof.result
    rows = layer_rows(c, prof)
    assert len(rows) == len(c.layers)
    assert sum(r["cycles"] for r in rows) == res.cycles - res.marks[0]["cycles"]
    split = vector_split(c.program)
    for key in ("matmul", "weights", "moves", "simd", "dram"):
        assert sum(r[key] for r in rows) == split[key]
    assert sum(r["macs"] for r in rows) > 0
    assert all(r["idle"] >= 0 and r["cycles"] > 0 for r in rows)


@requires_gcc
def test_sampler_timeline_follows_the_run(tmp_path):
    """With the sampler the run takes the same cycles; its words cover the whole run, the
    program counter only grows, and the array is busy about as often as the counters say."""
    c = compile_model(shared_path("models", "digits_cnn_opset10.onnx"), "pynqz1")
    x = np.load(shared_path("models", "digits_test_x.npy"))[:1]
    plain = profile(c, {"x": x}, latency=20, sample=False).result
    prof = profile(c, {"x": x}, latency=20)
    res = prof.result
    assert res.cycles - plain.cycles <= 2                 # one Configure ahead of the program
    assert prof.first_sample == 0 and prof.interval >= 1
    assert abs(len(prof.samples) * prof.interval - res.cycles) <= 2 * prof.interval + 4
    pc, states = timeline(prof.samples)
    assert np.all(np.diff(pc) >= 0) and pc[-1] <= len(c.program) + 1
    busy = float(np.mean(states[:, UNITS.index("array")] == 2))
    # every accumulator write enters the array: MatMul vectors, local → accumulator moves and
    # SIMD results; accumulator → local moves do not
    to_local = sum(i.size + 1 for i in c.program
                   if isinstance(i, DataMove) and i.kind == DataMoveKind.ACC_TO_LOCAL)
    entering = res.counters["compute_issue"] - to_local
    assert abs(busy - entering / res.cycles) < 0.1
    assert len(prof.layer_starts) == len(c.layers) + 1
    path = plot_profile(tmp_path / "p.png", "digits", layer_rows(c, prof), prof.samples,
                        prof.interval, prof.layer_starts)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_script_loads():
    assert callable(_roofline().print_table)
