"""Tensors with several consumers: a max pooling's input that also feeds a skip connection
(UNet-style: Concat or Add with an upsampled branch), a second convolution or a graph output;
an operand a node reads twice; random DAGs with fan-out and skip connections.

Compiled for FLOAT32 (the emulator's float type) a program must reproduce onnxruntime to float
rounding, on pynqz1 and on a small architecture where layers partition and weights stream.
Compiled for the fixed-point pynqz1 preset (FP16BP8: one LSB is 2^-8) the outputs must stay
within :data:`TOL_LSB` LSB of onnxruntime: every processing element rounds its partial sum
(half an LSB each, growing like the square root of the fan-in), inputs and weights are
rounded to the LSB, and these models chain up to four such layers whose weights are scaled to
keep values (and so errors) of order one. A program must also give the same raw outputs
when memory holds random values before it runs (it reads only what it wrote), and one model
runs bit-exact on the PyRTL core.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from compiler_lite.emit import zero_phases
from compiler_lite.kernels import ACCUMULATE, OVERWRITE
from tcu_hw import numeric
from tcu_hw.arch import preset

from ..conftest import requires_gcc
from .helpers import compile_and_run, float_arch, lsb, make_model, ort_run, rand, small_arch

#: fixed point (pynqz1): the largest error allowed, in LSB (see the module docstring)
TOL_LSB = 24


class Net:
    """A model being built: nodes, initializers and seeded weights; each helper returns the
    name of the tensor it makes."""

    def __init__(self, shape, seed: int = 0) -> None:
        self.shape = tuple(shape)
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: dict = {}
        self.k = 0

    def name(self, prefix: str) -> str:
        self.k += 1
        return f"{prefix}{self.k}"

    def node(self, op: str, ins, prefix: str | None = None, **attrs) -> str:
        out = self.name(prefix or op.lower())
        self.nodes.append(helper.make_node(op, list(ins), [out], **attrs))
        return out

    def conv(self, x: str, ci: int, co: int, k: int = 3, stride: int = 1, pads=None) -> str:
        w, b = self.name("w"), self.name("b")
        self.inits[w] = self.rng.standard_normal((co, ci, k, k)) * (0.8 / np.sqrt(ci * k * k))
        self.inits[b] = self.rng.standard_normal(co) * 0.2
        pads = [k // 2] * 4 if pads is None else list(pads)
        return self.node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
                         pads=pads)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def bn_relu(self, x: str, c: int, positive: bool) -> str:
        """BatchNormalization (scales all positive, or of either sign) then Relu."""
        names = [self.name(k) for k in ("gamma", "beta", "mean", "var")]
        lo = 0.5 if positive else -1.0
        for k, v in zip(names, (self.rng.uniform(lo, 1.5, c), self.rng.normal(0, 0.3, c),
                                self.rng.normal(0, 0.3, c), self.rng.uniform(0.5, 1.5, c))):
            self.inits[k] = v
        return self.relu(self.node("BatchNormalization", [x, *names], prefix="bn"))

    def maxpool(self, x: str) -> str:
        return self.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])

    def upsample(self, x: str) -> str:
        scales = self.name("scales")
        self.inits[scales] = np.array([1.0, 1.0, 2.0, 2.0])
        return self.node("Resize", [x, "", scales], prefix="up", mode="nearest")

    def model(self, outputs):
        m = make_model(self.nodes, {"x": self.shape}, list(outputs), self.inits)
        return m, {"x": rand(self.shape, 7)}


# ------------------------------------------------------------------------- directed models

def unet_concat(shape):
    """Encoder → pool → conv → nearest upsampling, concatenated with the pool's input."""
    N, C, H, W = shape
    g = Net(shape, 1)
    e = g.relu(g.conv("x", C, 6))
    d = g.relu(g.conv(g.maxpool(e), 6, 5))
    y = g.conv(g.node("Concat", [g.upsample(d), e], axis=1), 11, 3)
    return g.model([y])


def unet_add(shape):
    """The same with an additive skip (the upsampled branch + the pool's input)."""
    N, C, H, W = shape
    g = Net(shape, 2)
    e = g.relu(g.conv("x", C, 6))
    d = g.relu(g.conv(g.maxpool(e), 6, 6))
    y = g.conv(g.relu(g.node("Add", [g.upsample(d), e])), 6, 4)
    return g.model([y])


def unet_two_levels(shape):
    """Two pooling levels, a skip concatenation at each (H and W multiples of 4)."""
    N, C, H, W = shape
    g = Net(shape, 3)
    e1 = g.relu(g.conv("x", C, 4))
    e2 = g.relu(g.conv(g.maxpool(e1), 4, 8))
    b = g.relu(g.conv(g.maxpool(e2), 8, 8))
    d2 = g.relu(g.conv(g.node("Concat", [g.upsample(b), e2], axis=1), 16, 6))
    d1 = g.conv(g.node("Concat", [e1, g.upsample(d2)], axis=1), 10, 2)
    return g.model([d1])


def pool_input_is_output(shape):
    """The pool's input (a ReLU in place after a convolution) is also a graph output."""
    N, C, H, W = shape
    g = Net(shape, 4)
    e = g.relu(g.conv("x", C, 5))
    y = g.conv(g.maxpool(e), 5, 3)
    return g.model([y, e])


def pool_input_feeds_conv(shape):
    """The pool's input also feeds a second (padded, strided) convolution."""
    N, C, H, W = shape
    g = Net(shape, 5)
    e = g.conv("x", C, 7)
    a = g.conv(g.maxpool(e), 7, 4)
    b = g.conv(e, 7, 4, stride=2, pads=[1, 1, 0, 0])
    return g.model([a, b])


def every_consumer(shape):
    """One tensor read by a pool, a convolution, a concatenation with itself, an add, a ReLU
    and the host, and a second such point further on."""
    N, C, H, W = shape
    g = Net(shape, 6)
    e = g.conv("x", C, 4)
    p = g.maxpool(e)
    c = g.conv(g.node("Concat", [e, e], axis=1), 8, 4)
    s = g.node("Add", [c, g.relu(e)])
    q = g.node("AveragePool", [s], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    t = g.maxpool(q)
    u = g.node("Add", [t, g.conv(p, 4, 4)])
    return g.model([u, e, q])


def operand_twice(shape):
    """Nodes that read one tensor twice: an add of a tensor to itself (which must not change
    it in place while it reads it from memory), a pool of the sum, and a concatenation of
    the pool with itself."""
    N, C, H, W = shape
    g = Net(shape, 7)
    e = g.conv("x", C, 5)
    p = g.maxpool(g.node("Add", [e, e]))
    y = g.conv(g.node("Concat", [p, p], axis=1), 10, 3)
    return g.model([y])


def padded_after_pointwise(shape):
    """A 1×1 convolution with padding then a padded 3×3 one: the first reads past its input
    into the frame margin of its own output, which is not in memory yet."""
    N, C, H, W = shape
    g = Net(shape, 8)
    e = g.conv("x", C, 6, k=1, pads=[0, 0, 0, 1])
    y = g.conv(g.relu(e), 6, 3)
    return g.model([y, g.maxpool(e)])


CASES = {f.__name__: f for f in (unet_concat, unet_add, unet_two_levels, pool_input_is_output,
                                 pool_input_feeds_conv, every_consumer, operand_twice,
                                 padded_after_pointwise)}

#: (N, C, H, W): H and W multiples of 4 (two pooling levels), channels below, at and above
#: a vector of the small architecture (n = 4) and pynqz1 (n = 8)
SHAPES = [(1, 3, 8, 8), (2, 4, 4, 12), (1, 11, 12, 8)]


def outputs_of(m) -> list[str]:
    return [o.name for o in m.graph.output]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", sorted(CASES))
def test_float_matches_onnxruntime(name, shape):
    m, feeds = CASES[name](shape)
    ref = ort_run(m, feeds)
    for label, arch in (("pynqz1", preset("pynqz1")), ("small", small_arch())):
        _, run = compile_and_run(m, float_arch(arch), feeds)
        for o in outputs_of(m):
            np.testing.assert_allclose(run.outputs[o], ref[o], rtol=1e-5, atol=1e-5,
                                       err_msg=f"{o} on {label}")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_point_within_tolerance(name, shape):
    m, feeds = CASES[name](shape)
    arch = preset("pynqz1")
    ref = ort_run(m, feeds)
    _, run = compile_and_run(m, arch, feeds)
    for o in outputs_of(m):
        err = float(np.abs(run.outputs[o] - ref[o]).max())
        assert err <= TOL_LSB * lsb(arch), f"{o}: {err:.5f} = {err / lsb(arch):.1f} LSB"
    assert not run.events


def run_on_stale_memory(c, feeds, seed: int = 0) -> dict[str, np.ndarray]:
    """Raw outputs of ``c`` on the emulator started with random values in local memory, the
    accumulators and the DRAM0 it uses (all but the inputs): a program must read only what
    it wrote, e.g. no frame margin of a buffer that is not stored yet."""
    from sim.emulator import Emulator
    arch, n, dt = c.arch, c.arch.array_size, c.arch.dtype
    rng = np.random.default_rng(seed)

    def junk(count):
        return rng.integers(dt.min_raw, dt.max_raw + 1, (count, n))

    emu = Emulator(arch)
    emu.local[:] = junk(arch.local_depth)
    emu.acc[:] = junk(arch.accumulator_depth)
    emu.write_dram0(0, junk(c.plan.dram0_used))
    if len(c.consts):
        (emu.write_local if c.consts_to_local else emu.write_dram1)(0, c.consts)
    for t in c.inputs:
        emu.write_dram0(t.base, numeric.to_fixed(t.to_vectors(feeds[t.name], n), dt)[0])
    emu.run(c.program)
    return {t.name: emu.read_dram0(t.base, t.vectors) for t in c.outputs}


@pytest.mark.parametrize("strategy", ["local-vars", "local-isolated"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_do_not_depend_on_stale_memory(name, strategy):
    m, feeds = CASES[name](SHAPES[0])
    for arch in (preset("pynqz1"), small_arch()):
        c, run = compile_and_run(m, arch, feeds, strategy=strategy)
        stale = run_on_stale_memory(c, feeds)
        for o in outputs_of(m):
            np.testing.assert_array_equal(stale[o], run.raw[o], err_msg=o)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=12))
def test_zero_flag_matmuls_keep_the_overwrite_first(terms):
    """One tile's MatMuls are emitted apart by zeroes flag (each kind rolls up into runs of
    its own); a vector's first term overwrites the accumulator, so it must still run before
    the vector's other terms, whichever kind it is (a read of a known-zero vector that is
    not in memory becomes a zero-flag MatMul, see ``Planner.settle_reads``)."""
    o = np.array([t[0] for t in terms])
    zero = np.array([t[1] for t in terms])
    first = np.full(len(o), ACCUMULATE)
    first[np.unique(o, return_index=True)[1]] = OVERWRITE
    value = 10.0 ** np.arange(len(o))           # which terms a vector sums, and in which order

    def run(order):
        acc = np.full(6, np.nan)
        for k in order:
            acc[o[k]] = value[k] if first[k] == OVERWRITE else acc[o[k]] + value[k]
        return acc

    emitted = np.concatenate([np.nonzero(m)[0] for m, _ in zero_phases(o, zero, first)])
    assert sorted(emitted) == list(range(len(o)))
    np.testing.assert_array_equal(run(emitted), run(range(len(o))))


# ------------------------------------------------------------------------------ random DAGs

@st.composite
def dags(draw):
    """(model, feeds) of a random DAG: every node reads any earlier tensor of a shape it
    accepts (so tensors fan out and skip ahead), graph outputs at random points."""
    N = draw(st.integers(1, 2))
    C = draw(st.integers(1, 10))
    H = draw(st.integers(2, 9))
    W = draw(st.integers(2, 9))
    g = Net((N, C, H, W), draw(st.integers(0, 2 ** 31)))
    shapes = {"x": (N, C, H, W)}

    def pick(ok=lambda s: True):
        names = [t for t, s in shapes.items() if ok(s)]
        return draw(st.sampled_from(names))

    for _ in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["conv", "conv", "relu", "maxpool", "avgpool", "add",
                                     "concat", "upsample", "bnrelu"]))
        if kind in ("maxpool", "avgpool"):
            x = pick(lambda s: min(s[2:]) >= 2)
            n_, c, h, w = shapes[x]
            op = "MaxPool" if kind == "maxpool" else "AveragePool"
            if draw(st.booleans()):
                out = g.node(op, [x], kernel_shape=[2, 2], strides=[2, 2])
                shapes[out] = (n_, c, h // 2, w // 2)
            else:
                extra = {} if op == "MaxPool" else {"count_include_pad": draw(st.integers(0, 1))}
                out = g.node(op, [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1] * 4, **extra)
                shapes[out] = shapes[x]
            continue
        x = pick()
        n_, c, h, w = shapes[x]
        if kind == "conv":
            k = draw(st.integers(1, min(3, h, w)))
            stride = draw(st.sampled_from([1, 1, 2]))
            pads = draw(st.sampled_from([[k // 2] * 4, [(k - 1) // 2, (k - 1) // 2, k // 2,
                                                        k // 2], [0, 1, 1, 0], [0] * 4]))
            ho = (h + pads[0] + pads[2] - k) // stride + 1
            wo = (w + pads[1] + pads[3] - k) // stride + 1
            co = draw(st.integers(1, 12))
            out = g.conv(x, c, co, k, stride, pads)
            shapes[out] = (n_, co, ho, wo)
        elif kind == "relu":
            out = g.relu(x)
            shapes[out] = shapes[x]
        elif kind == "bnrelu":
            out = g.bn_relu(x, c, draw(st.booleans()))
            shapes[out] = shapes[x]
        elif kind == "add":
            y = pick(lambda s: s == shapes[x])
            out = g.node("Add", [x, y])
            shapes[out] = shapes[x]
        elif kind == "concat":
            more = draw(st.lists(st.sampled_from(
                [t for t, s in shapes.items() if s[0] == n_ and s[2:] == (h, w)]),
                min_size=1, max_size=2))
            out = g.node("Concat", [x, *more], axis=1)
            shapes[out] = (n_, sum(shapes[t][1] for t in [x, *more]), h, w)
        elif max(h, w) <= 9:                                # upsample
            out = g.upsample(x)
            shapes[out] = (n_, c, 2 * h, 2 * w)
    made = [t for t in shapes if t != "x"]
    if not made:
        made = [g.relu("x")]
    outputs = [made[-1]] + [t for t in made[:-1] if draw(st.integers(0, 3)) == 0]
    return g.model(outputs)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(dags())
def test_random_dags_float_match_onnxruntime(case):
    m, feeds = case
    ref = ort_run(m, feeds)
    for arch in (preset("pynqz1"), small_arch()):
        _, run = compile_and_run(m, float_arch(arch), feeds)
        for o in outputs_of(m):
            np.testing.assert_allclose(run.outputs[o], ref[o], rtol=1e-4,
                                       atol=1e-4 * max(1.0, float(np.abs(ref[o]).max())),
                                       err_msg=o)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(dags(), st.sampled_from(["local-vars", "local-isolated"]))
def test_random_dags_do_not_read_stale_memory(case, strategy):
    m, feeds = case
    for arch in (preset("pynqz1"), small_arch()):
        c, run = compile_and_run(m, arch, feeds, strategy=strategy)
        stale = run_on_stale_memory(c, feeds)
        for o in outputs_of(m):
            np.testing.assert_array_equal(stale[o], run.raw[o], err_msg=o)


# -------------------------------------------------------------------------------- hardware

@requires_gcc
@pytest.mark.parametrize("strategy", ["local-vars", "local-isolated"])
def test_fanout_bit_exact_on_the_core(strategy):
    """A two-level UNet on the small architecture (layers partition, weights stream): the
    PyRTL core writes the emulator's outputs bit for bit."""
    from .test_hardware import check
    m, feeds = unet_two_levels((2, 3, 8, 8))
    c, _ = compile_and_run(m, small_arch(), feeds, strategy=strategy)
    check(c, feeds)
