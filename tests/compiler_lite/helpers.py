"""Building small ONNX models, running them on onnxruntime, and compiling + emulating them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from tcu_hw.arch import Architecture, preset

#: onnxruntime in the test extra reads IR versions up to 10 at least
IR_VERSION = 8


def lut_arch(base: str = "pynqz1", count: int = 2, depth: int = 64, registers: int = 3,
             **changes) -> Architecture:
    """A preset with lookup tables (and enough SIMD registers for piecewise-linear ones)."""
    d = preset(base).to_dict()
    d.update(lut_count=count, lut_depth=depth, simd_registers_depth=registers, **changes)
    return Architecture.from_dict(d, source=f"{base}+lut")


def small_arch(**changes) -> Architecture:
    """A small architecture (n = 4, small memories) that makes partitions and streaming
    happen on small models."""
    d = preset("cmoda7").to_dict()
    d.update(local_depth=1024, accumulator_depth=256, dram0_depth=1 << 16,
             dram1_depth=1 << 16)
    d.update(changes)
    return Architecture.from_dict(d, source="small")


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


def ort_run(model, feeds: dict, outputs=None) -> dict:
    """Run ``model`` on onnxruntime; ``outputs`` may name intermediate tensors."""
    import onnxruntime as ort
    m = onnx.ModelProto.FromString(model.SerializeToString())
    for vi in list(m.graph.input) + list(m.graph.output):     # any batch size
        dims = vi.type.tensor_type.shape.dim
        if dims:
            dims[0].dim_param = "N"
    del m.graph.value_info[:]
    have = {o.name for o in m.graph.output}
    for name in outputs or []:
        if name not in have:
            m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    if m.ir_version > IR_VERSION + 2:
        m.ir_version = IR_VERSION
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = outputs or [o.name for o in m.graph.output]
    return dict(zip(names, sess.run(names, {k: np.asarray(v, dtype=np.float32)
                                            for k, v in feeds.items()})))


def compile_and_run(model, arch, feeds: dict, **kw):
    """(compiled model, golden run) for ``feeds`` in the model's layout."""
    c = compile_model(model, arch, **kw)
    return c, run_emulator(c, feeds)


def lsb(arch) -> float:
    dt = arch.dtype
    return 2.0 ** -dt.binary_point if not dt.is_float else 1e-6


def rand(shape, seed=0, scale=1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
