"""Building small ONNX models, running them on onnxruntime, and compiling + emulating them."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import onnxruntime_outputs, run_emulator
from tcu_hw.arch import Architecture, preset

#: onnxruntime in the test extra reads IR versions up to 10 at least
IR_VERSION = 8


def lut_arch(base: str = "pynqz1", count: int = 2, depth: int = 64, registers: int = 3,
             **changes) -> Architecture:
    """A preset with lookup tables (and enough SIMD registers for piecewise-linear ones)."""
    return preset(base).with_changes(f"{base}+lut", lut_count=count, lut_depth=depth,
                                     simd_registers_depth=registers, **changes)


def small_arch(**changes) -> Architecture:
    """A small architecture (n = 4, small memories) that makes partitions and streaming
    happen on small models."""
    return preset("cmoda7").with_changes("small", **{
        "local_depth": 1024, "accumulator_depth": 256, "dram0_depth": 1 << 16,
        "dram1_depth": 1 << 16, **changes})


def float_arch(base="pynqz1", **changes) -> Architecture:
    """``base`` (a preset name or an Architecture) compiled for FLOAT32, the emulator's
    float type: a program must then reproduce onnxruntime to rounding error."""
    arch = base if isinstance(base, Architecture) else preset(base)
    return arch.with_changes("float", data_type="FLOAT32", **changes)


def make_model(nodes, inputs: dict, outputs, inits: dict | None = None, opset: int = 17):
    """A model from nodes; ``inputs`` = {name: shape}; ``outputs`` names (shapes inferred)."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v)) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k)
         for k, v in (inits or {}).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          ir_version=IR_VERSION)
    return m


#: run a model on onnxruntime; ``outputs`` may name intermediate tensors
ort_run = onnxruntime_outputs


def compile_and_run(model, arch, feeds: dict, **kw):
    """(compiled model, golden run) for ``feeds`` in the model's layout."""
    c = compile_model(model, arch, **kw)
    return c, run_emulator(c, feeds)


def lsb(arch) -> float:
    return 1e-6 if arch.dtype.is_float else arch.dtype.error


def rand(shape, seed=0, scale=1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
