"""Random small CNNs (hypothesis): convolutions of random geometry, pools, residual adds,
batch norms and dense heads on random input shapes and batch sizes.

Compiled for FLOAT32 the program must reproduce onnxruntime; compiled for fixed point it must
run bit-exact on the PyRTL core (with random DRAM latency and back-pressure) against the
golden emulator, on a normal and on a small architecture where layers partition and stream.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from tcu_hw import numeric
from tcu_hw.arch import preset

from ..conftest import requires_gcc
from .helpers import compile_and_run, float_arch, make_model, ort_run, small_arch


@st.composite
def cnns(draw):
    """(model, feeds) of a random small CNN."""
    N = draw(st.integers(1, 2))
    C = draw(st.integers(1, 12))
    H = draw(st.integers(3, 9))
    W = draw(st.integers(3, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    nodes, inits = [], {}
    cur, shape = "x", (N, C, H, W)
    k = 0

    def name(prefix):
        nonlocal k
        k += 1
        return f"{prefix}{k}"

    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["conv", "conv", "relu", "maxpool", "avgpool", "residual",
                                     "bn", "leaky"]))
        n_, c, h, w = shape
        if kind in ("conv", "residual"):
            kh = draw(st.integers(1, min(3, h)))
            kw = draw(st.integers(1, min(3, w)))
            co = c if kind == "residual" else draw(st.integers(1, 20))
            groups = draw(st.sampled_from([g for g in (1, 2, c) if c % g == 0 and co % g == 0]))
            if kind == "residual":
                stride, dil, pads = (1, 1), (1, 1), [(kh - 1) // 2, (kw - 1) // 2,
                                                     kh // 2, kw // 2]
            else:
                stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
                dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
                pads = [draw(st.integers(0, 2)) for _ in range(4)]
            ho = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
            wo = (w + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
            if ho < 1 or wo < 1:
                continue
            wn, bn = name("w"), name("b")
            inits[wn] = rng.standard_normal((co, c // groups, kh, kw)) * 0.3
            inits[bn] = rng.standard_normal(co) * 0.2
            out = name("conv")
            nodes.append(helper.make_node("Conv", [cur, wn, bn], [out], kernel_shape=[kh, kw],
                                          strides=list(stride), dilations=list(dil),
                                          pads=pads, group=groups))
            if kind == "residual":
                res = name("add")
                nodes.append(helper.make_node("Add", [out, cur], [res]))
                out = res
            cur, shape = out, (n_, co, ho, wo)
        elif kind in ("relu", "leaky"):
            out = name(kind)
            nodes.append(helper.make_node("Relu", [cur], [out]) if kind == "relu" else
                         helper.make_node("LeakyRelu", [cur], [out], alpha=0.1))
            cur = out
        elif kind == "bn":
            out = name("bn")
            ins = [cur] + [name("p") for _ in range(4)]
            inits[ins[1]] = rng.uniform(0.5, 1.5, c)
            inits[ins[2]] = rng.standard_normal(c) * 0.2
            inits[ins[3]] = rng.standard_normal(c) * 0.2
            inits[ins[4]] = rng.uniform(0.5, 2.0, c)
            nodes.append(helper.make_node("BatchNormalization", ins, [out]))
            cur = out
        else:
            if h < 2 or w < 2:
                continue
            out = name(kind)
            op_ = "MaxPool" if kind == "maxpool" else "AveragePool"
            nodes.append(helper.make_node(op_, [cur], [out], kernel_shape=[2, 2],
                                          strides=[2, 2]))
            cur, shape = out, (n_, c, h // 2, w // 2)
    if draw(st.booleans()):
        n_, c, h, w = shape
        flat, wn, bn, out = name("flat"), name("w"), name("b"), name("dense")
        units = draw(st.integers(1, 12))
        inits[wn] = rng.standard_normal((c * h * w, units)) * (0.5 / np.sqrt(c * h * w))
        inits[bn] = rng.standard_normal(units) * 0.2
        nodes += [helper.make_node("Flatten", [cur], [flat]),
                  helper.make_node("Gemm", [flat, wn, bn], [out])]
        cur = out
    if not nodes:
        out = name("relu")
        nodes.append(helper.make_node("Relu", [cur], [out]))
        cur = out
    m = make_model(nodes, {"x": (N, C, H, W)}, [cur], inits)
    feeds = {"x": (rng.standard_normal((N, C, H, W)) * 0.7).astype(np.float32)}
    return m, feeds


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(cnns())
def test_random_cnn_float_matches_onnxruntime(case):
    m, feeds = case
    out = m.graph.output[0].name
    ref = ort_run(m, feeds)[out]
    for arch in (preset("pynqz1"), small_arch()):
        _, run = compile_and_run(m, float_arch(arch), feeds)
        np.testing.assert_allclose(run.outputs[out], ref, rtol=1e-4,
                                   atol=1e-4 * max(1.0, float(np.abs(ref).max())))


@requires_gcc
@settings(max_examples=16, deadline=None, suppress_health_check=list(HealthCheck))
@given(cnns(), st.sampled_from(["pynqz1", "small"]), st.integers(0, 2 ** 16),
       st.sampled_from(["local-vars", "local-isolated"]))
def test_random_cnn_bit_exact_on_the_core(case, arch_name, seed, strategy):
    from sim.pyrtl_backend import DramTiming, cached_core, program_bits_for
    m, feeds = case
    arch = small_arch() if arch_name == "small" else preset(arch_name)
    c, run = compile_and_run(m, arch, feeds, strategy=strategy)
    core = cached_core(arch, program_bits=max(17, program_bits_for(len(c.program))))
    n = arch.array_size
    dram0 = {t.base: numeric.to_fixed(t.to_vectors(feeds[t.name], n), arch.dtype)[0]
             for t in c.inputs}
    rng = np.random.default_rng(seed)
    timing = DramTiming(latency=int(rng.integers(1, 40)), stall_probability=0.2,
                        seed=int(rng.integers(1, 65535)))
    res = core.run(c.program, dram0=dram0, dram1={0: c.consts} if len(c.consts) else {},
                   timing=timing)
    assert not res.error
    for t in c.outputs:
        got = core.read_dram0(t.base, t.vectors)
        np.testing.assert_array_equal(got, run.raw[t.name])
