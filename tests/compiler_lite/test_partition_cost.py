"""The partition search counts what a partition without double buffering waits for: its
staged loads at the board's AXI beats, and with one accumulator area the drain of the
partition before (compiler_lite.partition.PartitionSearch.cost)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from compiler_lite.partition import PartitionSearch
from tcu_hw.arch import preset
from tcu_hw.isa import DataMove, DataMoveKind, MatMul

from ..conftest import requires_gcc
from .helpers import make_model, rand


def staging_bases(c) -> list[int]:
    """Where each partition of the first layer loads its input rows."""
    return [i.local_address for i in c.program[:c.layers[0].instructions]
            if isinstance(i, DataMove) and i.kind == DataMoveKind.DRAM0_TO_LOCAL]


def test_narrow_memory_port_double_buffers_the_staged_input():
    """A 3 × 3 stride-2 convolution of a 96 × 96 × 32 input on a 12 × 12 array: at one beat
    per vector (AXI 256) its partitions stage their input rows in one area and wait for each
    load; at three (AXI 64, Pynq Z1's port) waiting costs more than loading the tiles again,
    so the partitions alternate between two areas, each loaded while the other is read.
    Both programs compute the same outputs, bit for bit."""
    m = make_model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3],
                                     strides=[2, 2], pads=[1] * 4)],
                   {"x": (1, 32, 96, 96)}, ["y"], {"w": rand((64, 32, 3, 3), 1, 0.1)})
    arch = preset("pynqz1").with_changes("12 lanes", array_size=12)
    wide, narrow = (compile_model(m, arch, axi_width=w) for w in (256, 64))
    assert len(set(staging_bases(wide))) == 1
    bases = staging_bases(narrow)
    assert len(set(bases)) == 2 and all(a != b for a, b in zip(bases, bases[1:]))
    x = {"x": rand((1, 32, 96, 96), 2)}
    np.testing.assert_array_equal(run_emulator(wide, x).raw["y"],
                                  run_emulator(narrow, x).raw["y"])


def _acc_bases(c) -> list[int]:
    """The lowest accumulator address each partition's MatMuls write (the first layer)."""
    out, low = [], None
    for i in c.program[:c.layers[0].instructions]:
        if isinstance(i, MatMul):
            low = i.accumulator_address if low is None else min(low, i.accumulator_address)
        elif isinstance(i, DataMove) and i.kind in (DataMoveKind.ACC_TO_LOCAL,
                                                    DataMoveKind.ACC_TO_LOCAL_RELU):
            if low is not None:
                out.append(low)
            low = None
    return out


def _one_acc_area(monkeypatch):
    orig = PartitionSearch.candidates
    monkeypatch.setattr(PartitionSearch, "candidates",
                        lambda self, units: [f for f in orig(self, units) if not f[4]])


def _one_and_two_areas(monkeypatch):
    """A 1 × 1 convolution (16 → 64 channels, 32 × 32) stored to DRAM in several partitions,
    compiled as it is (two accumulator areas) and with one area only."""
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"]),
                    helper.make_node("Relu", ["c"], ["y"])],
                   {"x": (1, 16, 32, 32)}, ["y"], {"w": rand((64, 16, 1, 1), 1, 0.3)})
    two = compile_model(m, "pynqz1", strategy="local-isolated")
    _one_acc_area(monkeypatch)
    return compile_model(m, "pynqz1", strategy="local-isolated"), two


def test_partitions_alternate_accumulator_areas(monkeypatch):
    """With two accumulator areas the partitions alternate between them, so a partition's
    MatMuls run while the drain moves the previous partition's outputs to local memory;
    with one, every partition's first MatMul waits for that drain. Same outputs, bit for
    bit."""
    one, two = _one_and_two_areas(monkeypatch)
    bases = _acc_bases(two)
    assert len(bases) > 2 and len(set(bases)) == 2
    assert all(a != b for a, b in zip(bases, bases[1:]))
    assert len(set(_acc_bases(one))) == 1
    x = {"x": rand((1, 16, 32, 32), 2)}
    np.testing.assert_array_equal(run_emulator(two, x).raw["y"], run_emulator(one, x).raw["y"])


@requires_gcc
def test_alternating_accumulator_areas_save_the_drains_on_the_core(monkeypatch):
    """On the PyRTL core: 18,900 cycles against 24,900 with one area (bit-exact both)."""
    from .test_hardware import check
    one, two = _one_and_two_areas(monkeypatch)
    x = {"x": rand((1, 16, 32, 32), 2)}
    assert check(two, x).cycles < 0.85 * check(one, x).cycles
