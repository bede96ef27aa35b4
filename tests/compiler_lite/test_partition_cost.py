"""The partition search counts what a partition without double buffering waits for: its
staged loads at the board's AXI beats (compiler_lite.partition.PartitionSearch.cost)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from tcu_hw.arch import preset
from tcu_hw.isa import DataMove, DataMoveKind

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
