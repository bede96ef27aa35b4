"""Products of two computed tensors (MatMul of two activations, Gemm with a computed B) and
the attention built from them, ``softmax(Q·Kᵀ/√d)·V``: the right operand becomes weight
tiles that LoadWeights reads from local memory (:mod:`compiler_lite.ops.attention`).

Accuracy: on FLOAT32 (``float_arch``) a program reproduces onnxruntime to float rounding
(1e-4). On fixed point (FP16BP8, one LSB = 2^-8):

* a product alone is checked against the rigorous bound of its roundings: each input is
  rounded once (≤ ½ LSB), the relayout of B and the output copies multiply by 1.0 (exact),
  and the array rounds once per MAC along the chain of K inputs (≤ ½ LSB each), so
  ``|err[m, n]| ≤ ½·(Σ_k |A[m,k]| + Σ_k |B[k,n]|) + K·(½ + ¼·LSB)`` LSB;
* full attention is checked to :data:`ATTENTION_TOL` (26 LSB): its longest chain of
  rounding MACs (projection over C ≤ 16, scores over d ≤ 8, P·V over T ≤ 16, output
  projection over h·d ≤ 16) allows up to ½·56 = 28 LSB in the worst case; the lookup
  tables of exp and 1/x add under 1 LSB (their float error, measured: < 0.7 LSB for these
  models), and the worst error seen over 48 runs of these shapes was 11.4 LSB. Outputs
  have magnitudes around 1, so a wrong head, transpose or normalisation is far outside it.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler_lite.compile import compile_model
from tcu_hw.errors import CompileError
from tcu_hw.isa import DataMove, DataMoveKind, LoadWeights

from ..conftest import requires_gcc
from .helpers import compile_and_run, float_arch, lsb, lut_arch, make_model, ort_run, rand, \
    small_arch

#: Full attention on FP16BP8 (see the module docstring).
ATTENTION_TOL = 0.1
#: FLOAT32 programs against onnxruntime.
FLOAT_TOL = 1e-4


def _run(m, arch, feeds, out="y", **kw):
    """(compiled, program output, onnxruntime output)."""
    c, run = compile_and_run(m, arch, feeds, **kw)
    return c, run.outputs[out], ort_run(m, feeds)[out]


def product_bound(a: np.ndarray, b: np.ndarray, arch) -> np.ndarray:
    """The worst error of ``a @ b`` on a fixed-point architecture (see the module)."""
    q = lsb(arch)
    K = a.shape[-1]
    out_shape = np.matmul(a, b).shape
    a = np.abs(a if a.ndim > 1 else a[None, :])             # 1-D operands as in ONNX
    b = np.abs(b if b.ndim > 1 else b[:, None])
    bound = q / 2 * (a.sum(-1)[..., :, None] + b.sum(-2)[..., None, :]) + K * (q / 2 + q * q / 4)
    return np.broadcast_to(bound, np.matmul(a, b).shape).reshape(out_shape)


def _const_int(name: str, values) -> helper.NodeProto:
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.INT64, [len(values)], list(values)))


def attention_model(T: int, C: int, h: int, d: int, seed: int = 0):
    """``y = (softmax(Q·Kᵀ/√d)·V) Wo`` with Q, K, V = x·Wq, x·Wk, x·Wv split into h heads of
    size d, x of shape [1, T, C]: Reshape and Transpose around the products, as exported
    by PyTorch."""
    inits = {f"w{k}": rand((C, h * d), seed + j, 1 / np.sqrt(C)) for j, k in enumerate("qkv")}
    inits["wo"] = rand((h * d, C), seed + 3, 1 / np.sqrt(h * d))
    inits["sqrt_d"] = np.float32(np.sqrt(d))
    nodes = [_const_int("heads", [1, T, h, d]), _const_int("merged", [1, T, h * d])]
    for k in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{k}"], [f"{k}_proj"]),
                  helper.make_node("Reshape", [f"{k}_proj", "heads"], [f"{k}_heads"])]
    H = helper.make_node
    nodes += [H("Transpose", ["q_heads"], ["q"], perm=[0, 2, 1, 3]),
              H("Transpose", ["k_heads"], ["kt"], perm=[0, 2, 3, 1]),
              H("Transpose", ["v_heads"], ["v"], perm=[0, 2, 1, 3]),
              H("MatMul", ["q", "kt"], ["scores"]),
              H("Div", ["scores", "sqrt_d"], ["scaled"]),
              H("Softmax", ["scaled"], ["p"], axis=-1),
              H("MatMul", ["p", "v"], ["o"]),
              H("Transpose", ["o"], ["o_t"], perm=[0, 2, 1, 3]),
              H("Reshape", ["o_t", "merged"], ["o_merged"]),
              H("MatMul", ["o_merged", "wo"], ["y"])]
    return make_model(nodes, {"x": (1, T, C)}, ["y"], inits)


def check_product(m, feeds, a, b, **kw):
    """``y = a @ b`` on FLOAT32 and on fixed point (within :func:`product_bound`)."""
    _, got, ref = _run(m, float_arch(), feeds, **kw)
    np.testing.assert_allclose(got, ref, atol=FLOAT_TOL, rtol=0)
    arch = lut_arch()
    _, got, ref = _run(m, arch, feeds, **kw)
    assert np.all(np.abs(got - ref) <= product_bound(a, b, arch))


# ----------------------------------------------------------------------- products alone

@pytest.mark.parametrize("shape", [(1, 1, 4, 4), (1, 2, 8, 4), (2, 2, 16, 8), (1, 3, 5, 12)])
def test_scores(shape):
    """Q·Kᵀ per head: K transposed by a view, relaid out into tiles by the array."""
    m = make_model([helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                    helper.make_node("MatMul", ["q", "kt"], ["y"])],
                   {"q": shape, "k": shape}, ["y"])
    q, k = rand(shape, 1), rand(shape, 2)
    check_product(m, {"q": q, "k": k}, q, np.swapaxes(k, -1, -2))


@pytest.mark.parametrize("B,h,T,d", [(1, 1, 4, 4), (1, 2, 8, 4), (2, 2, 16, 8), (1, 2, 12, 5)])
def test_weighted_sum(B, h, T, d):
    """P·V per head."""
    m = make_model([helper.make_node("MatMul", ["p", "v"], ["y"])],
                   {"p": (B, h, T, T), "v": (B, h, T, d)}, ["y"])
    p, v = np.abs(rand((B, h, T, T), 3)) / T, rand((B, h, T, d), 4)
    check_product(m, {"p": p, "v": v}, p, v)


@pytest.mark.parametrize("sa,sb", [((2, 8, 4), (2, 4, 8)), ((5, 12), (12, 19)),
                                   ((3, 5, 12), (12, 7)), ((12,), (2, 12, 7)),
                                   ((2, 3, 12), (12,))])
def test_ranks_and_broadcasting(sa, sb):
    """Rank 3 and 2, a batch broadcast against a matrix, 1-D operands (ONNX MatMul)."""
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": sa, "b": sb}, ["y"])
    a, b = rand(sa, 5), rand(sb, 6)
    check_product(m, {"a": a, "b": b}, a, b)


def test_product_of_a_tensor_with_itself():
    """X·Xᵀ: both operands from one buffer."""
    m = make_model([helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
                    helper.make_node("MatMul", ["x", "xt"], ["y"])], {"x": (2, 6, 5)}, ["y"])
    x = rand((2, 6, 5), 7)
    check_product(m, {"x": x}, x, np.swapaxes(x, 1, 2))


@pytest.mark.parametrize("attrs,c_shape,const_a", [
    ({"alpha": 0.5, "beta": 2.0, "transB": 1}, (9,), False),     # C per column: bias rows
    ({"transA": 1}, (5, 9), False),                             # C per element: MatMuls
    ({}, None, True),                                           # a constant A
])
def test_gemm_with_a_computed_b(attrs, c_shape, const_a):
    sa = (6, 5) if attrs.get("transA") else (5, 6)
    sb = (9, 6) if attrs.get("transB") else (6, 9)
    inits = {"c": rand(c_shape, 8)} if c_shape else {}
    ins = {"b": sb}
    if const_a:
        inits["a"] = rand(sa, 9)
    else:
        ins["a"] = sa
    node = helper.make_node("Gemm", ["a", "b", "c"] if c_shape else ["a", "b"], ["y"], **attrs)
    m = make_model([node], ins, ["y"], inits)
    feeds = {k: rand(v, 10 + j) for j, (k, v) in enumerate(ins.items())}
    _, got, ref = _run(m, float_arch(), feeds)
    np.testing.assert_allclose(got, ref, atol=FLOAT_TOL, rtol=0)


@pytest.mark.parametrize("case", ["mask", "scale_per_element", "scale_per_column"])
def test_affine_maps_after_a_product(case):
    """A following scale/offset folds into the product's layer: into the tiles when it is the
    same for every row (1/√d, a bias per column), else as SIMD passes or bias MatMuls (a
    causal mask, an element-wise scale)."""
    H = helper.make_node
    if case == "mask":
        nodes = [H("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), H("MatMul", ["q", "kt"], ["s"]),
                 H("Div", ["s", "c0"], ["s1"]), H("Add", ["s1", "c1"], ["y"])]
        ins = {"q": (1, 2, 8, 4), "k": (1, 2, 8, 4)}
        inits = {"c0": np.float32(2.0), "c1": np.triu(np.full((8, 8), -4.0), 1)}
    else:
        nodes = [H("MatMul", ["a", "b"], ["s"]), H("Mul", ["s", "c0"], ["s1"]),
                 H("Add", ["s1", "c1"], ["y"])]
        ins = {"a": (2, 5, 6), "b": (2, 6, 7)}
        inits = {"c0": rand((5, 7) if case == "scale_per_element" else (7,), 11),
                 "c1": rand((2, 1, 7), 12)}
    m = make_model(nodes, ins, ["y"], inits)
    feeds = {k: rand(v, 13 + j) for j, (k, v) in enumerate(ins.items())}
    c, got, ref = _run(m, float_arch(), feeds)
    np.testing.assert_allclose(got, ref, atol=FLOAT_TOL, rtol=0)
    product = next(s for s in c.layers if any(n.startswith("Add") for n in s.nodes))
    assert product.nodes[0].startswith("MatMul")          # folded: no layer of its own
    assert ("SIMD" in product.by_kind) == (case == "scale_per_element")


# ---------------------------------------------------------------------------- attention

@pytest.mark.parametrize("T", [4, 8, 16])
@pytest.mark.parametrize("d", [4, 8])
@pytest.mark.parametrize("h", [1, 2])
def test_attention(T, d, h):
    C = 8 if h * d <= 8 else 16
    m = attention_model(T, C, h, d, seed=T + d + h)
    x = rand((1, T, C), T * d * h)
    # FLOAT32 with fine tables for exp and 1/x: their error is far below 1e-4
    _, got, ref = _run(m, float_arch(lut_arch(depth=1024)), {"x": x})
    np.testing.assert_allclose(got, ref, atol=FLOAT_TOL, rtol=0)
    c, got, ref = _run(m, lut_arch(), {"x": x})
    np.testing.assert_allclose(got, ref, atol=ATTENTION_TOL, rtol=0)
    assert np.abs(ref).max() > 10 * lsb(c.arch)


@pytest.mark.parametrize("strategy", ["local-vars", "local-isolated"])
def test_tiles_are_read_from_local_memory(strategy):
    """The scores' LoadWeights read the vectors the relayout layer wrote (left in local
    memory, or stored to DRAM0 and staged back), never the constants image."""
    c, got, ref = _run(attention_model(8, 8, 2, 4), float_arch(lut_arch(depth=1024)),
                       {"x": rand((1, 8, 8), 1)}, strategy=strategy)
    np.testing.assert_allclose(got, ref, atol=FLOAT_TOL, rtol=0)
    pc = np.cumsum([0] + [s.instructions for s in c.layers])
    k = next(i for i, s in enumerate(c.layers) if s.name == "scores:tiles")
    assert c.layers[k + 1].name == "scores"
    written = c.program[pc[k]:pc[k + 1]]
    used = c.program[pc[k + 1]:pc[k + 2]]
    stores = [i for i in written if isinstance(i, DataMove) and i.kind in
              (DataMoveKind.ACC_TO_LOCAL, DataMoveKind.LOCAL_TO_DRAM0)]
    loads = [i for i in used if isinstance(i, DataMove)]
    assert not any(i.kind == DataMoveKind.DRAM1_TO_LOCAL for i in loads)
    if strategy == "local-vars":
        where = {a for i in stores for a in range(i.local_address, i.local_address + i.size + 1)}
    else:                                   # stored to DRAM0, staged back by the product
        dram = {a for i in stores if i.kind == DataMoveKind.LOCAL_TO_DRAM0
                for a in range(i.other_address, i.other_address + i.size + 1)}
        staged = [i for i in loads if i.kind == DataMoveKind.DRAM0_TO_LOCAL and
                  i.other_address in dram and i.other_address + i.size in dram]
        assert staged
        where = {a for i in staged for a in range(i.local_address, i.local_address + i.size + 1)}
    weights = [i for i in used if isinstance(i, LoadWeights)]
    assert weights and all(not i.zeroes and i.local_address in where and
                           i.local_address + i.size in where for i in weights)


def test_partitions_stage_the_tiles():
    """Small local memory and accumulators: the products run in several partitions, each
    staging the tiles it needs from DRAM0."""
    arch = float_arch(small_arch(lut_count=2, lut_depth=1024, simd_registers_depth=3,
                                 local_depth=1500, accumulator_depth=48))
    c, got, ref = _run(attention_model(16, 8, 2, 8), arch, {"x": rand((1, 16, 8), 2)},
                       strategy="local-isolated")
    np.testing.assert_allclose(got, ref, atol=FLOAT_TOL, rtol=0)
    parts = {s.name: s.partitions for s in c.layers}
    assert parts["scores"] > 1 and parts["o"] > 1


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_over_the_last_axis_of_scores(op):
    """(Log)Softmax over the last axis of a [B, h, T, T] tensor whose rows lie in lanes."""
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["s"]),
                    helper.make_node(op, ["s"], ["y"], axis=-1)],
                   {"x": (2, 3, 6, 10)}, ["y"], {"w": rand((10, 10), 1, 0.5)})
    _, got, ref = _run(m, float_arch(lut_arch(depth=1024)), {"x": rand((2, 3, 6, 10), 2)})
    np.testing.assert_allclose(got, ref, atol=FLOAT_TOL, rtol=0)


def test_operands_too_large_for_local_memory():
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="big")],
                   {"a": (8, 64), "b": (64, 64)}, ["y"])
    with pytest.raises(CompileError) as e:
        compile_model(m, small_arch())
    msg = str(e.value)
    assert "node 'big' (MatMul)" in msg and "1312 vectors" in msg and "local_depth 1024" in msg
    compile_model(make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                             {"a": (8, 56), "b": (56, 56)}, ["y"]), small_arch())


@requires_gcc
@pytest.mark.parametrize("small", [False, True])
def test_attention_on_the_core(small):
    """Bit-exact with the emulator: tiles resident in local memory (pynqz1 with tables), and
    staged from DRAM0 in several partitions (n = 4, small memories)."""
    from .test_hardware import check
    if small:
        arch = small_arch(lut_count=2, lut_depth=64, simd_registers_depth=3, local_depth=300,
                          accumulator_depth=64)
        c = compile_model(attention_model(16, 8, 2, 8), arch, strategy="local-isolated")
        assert {s.name: s.partitions for s in c.layers}["scores"] > 1
        check(c, {"x": rand((1, 16, 8), 4)})
    else:
        c = compile_model(attention_model(8, 8, 2, 4), lut_arch())
        check(c, {"x": rand((1, 8, 8), 3)})
