"""Intermediate buffers homed in DRAM1 above the constants (compiler_lite.ports): the planner's
choice, its fallback, the estimate of two ports, and the same results as a DRAM0-only program
on the emulator and the core."""

from __future__ import annotations

import numpy as np
from onnx import helper

from compiler_lite import ports
from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from compiler_lite.ir import Buffer
from compiler_lite.summary import estimate
from sim.model import dram1_extent, load_model
from tcu_hw.arch import preset
from tcu_hw.isa import DataMove, DataMoveKind as K, MatMul

from ..conftest import requires_gcc
from .helpers import make_model, ort_run, rand

C, H = 16, 12


def residual_model():
    """x → conv → ReLU → conv + x = s; ReLU(s) → conv + s = y: the middle layer stores a
    rectified output for the next convolution and the raw sum for the next addition."""
    conv = {"pads": [1, 1, 1, 1]}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], **conv),
             helper.make_node("Relu", ["c1"], ["h1"]),
             helper.make_node("Conv", ["h1", "w2"], ["c2"], **conv),
             helper.make_node("Add", ["c2", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Conv", ["r", "w3"], ["c3"], **conv),
             helper.make_node("Add", ["c3", "s"], ["y"])]
    inits = {f"w{k}": rand((C, C, 3, 3), k, 0.1) for k in (1, 2, 3)}
    return make_model(nodes, {"x": (1, C, H, H)}, ["y"], inits)


def compile_isolated(arch="pynqz1", dram0_only=False, monkeypatch=None):
    if dram0_only:
        monkeypatch.setattr(ports.PortBalance, "choose", lambda self, b: "dram0")
    return compile_model(residual_model(), arch, strategy="local-isolated")


def dram1_stores(c):
    return [i for i in c.program if isinstance(i, DataMove) and i.kind == K.LOCAL_TO_DRAM1]


def test_a_residual_block_stores_to_both_ports_with_the_same_results(monkeypatch):
    feeds = {"x": rand((1, C, H, H), 7)}
    c = compile_isolated()
    stores = dram1_stores(c)
    assert stores, "no intermediate buffer went to DRAM1"
    assert min(i.other_address for i in stores) >= len(c.consts)     # above the constants
    assert c.plan.dram1_scratch[0] >= len(c.consts)
    got = run_emulator(c, feeds)
    ref = run_emulator(compile_isolated(dram0_only=True, monkeypatch=monkeypatch), feeds)
    np.testing.assert_array_equal(got.raw["y"], ref.raw["y"])
    want = ort_run(residual_model(), feeds)["y"]
    assert np.sqrt(np.mean((got.outputs["y"] - want) ** 2)) < 0.02 * np.std(want)


def test_dram1_too_small_for_the_scratch_keeps_buffers_in_dram0():
    consts = len(compile_isolated().consts)
    arch = preset("pynqz1").with_changes("tight", dram1_depth=consts)
    c = compile_model(residual_model(), arch, strategy="local-isolated")
    assert not dram1_stores(c)
    feeds = {"x": rand((1, C, H, H), 8)}
    ref = run_emulator(compile_isolated(), feeds)
    np.testing.assert_array_equal(run_emulator(c, feeds).raw["y"], ref.raw["y"])


def test_the_host_gives_dram1_the_scratch_too(tmp_path):
    """``dram1_extent`` (what the PYNQ backend allocates) covers every DRAM1 move."""
    c = compile_isolated()
    c.write(tmp_path)
    extent = dram1_extent(load_model(tmp_path / f"{c.name}.tmodel"))
    top = max(i.other_address + i.size + 1 for i in dram1_stores(c))
    assert extent == max(top, len(c.consts)) > len(c.consts)


def test_the_balance_picks_the_less_busy_port_and_dram0_on_a_tie():
    a, b = Buffer("a", 100, 0), Buffer("b", 100, 100)
    bal = ports.PortBalance(3, {id(a): {0: 100, 1: 100}, id(b): {1: 100, 2: 100}})
    assert bal.choose(a) == "dram0"                     # both idle: a tie
    bal.add("dram0", a)
    assert bal.choose(b) == "dram1"                     # layer 1 has a's 100 on DRAM0
    bal.add_consts(2, 500, split=False)                 # layer 2's weights
    assert bal.choose(b) == "dram0"


def test_split_constants_count_half_on_each_port():
    """With a copy of the constants in DRAM0 (consts ports "both") the balance counts half
    of a layer's constants on each port, so a buffer goes where that leaves less."""
    b = Buffer("b", 100, 0)
    bal = ports.PortBalance(2, {id(b): {1: 100}})
    bal.add_consts(1, 501, split=True)
    assert (bal.load["dram0"][1], bal.load["dram1"][1]) == (250, 251)
    assert bal.choose(b) == "dram0"
    bal.add("dram0", b)
    assert bal.load["dram0"][1] == 350


def test_the_heap_reuses_freed_runs_and_refuses_past_its_limit():
    heap = ports.Heap(10, 40)
    assert (heap.alloc(20), heap.alloc(10), heap.alloc(1)) == (10, 30, None)
    heap.release(10, 20)
    assert (heap.alloc(5), heap.alloc(15), heap.alloc(1)) == (10, 15, None)


def test_the_estimate_counts_each_port_and_port_b():
    arch = preset("pynqz1")
    both = [DataMove(K.DRAM0_TO_LOCAL, 0, 0, 0, 0, 99),
            DataMove(K.DRAM1_TO_LOCAL, 200, 0, 0, 0, 99)]
    assert estimate(both, arch, beats=2)[1] == 200      # the ports at once, 2 beats a vector
    assert estimate(both, arch, beats=1)[1] == 200      # local port B: a vector a cycle
    assert estimate(both[:1] * 2, arch, beats=2)[1] == 400


@requires_gcc
def test_a_residual_block_over_both_ports_on_the_core():
    from .test_hardware import check
    c = compile_isolated()
    assert dram1_stores(c)
    check(c, {"x": rand((1, C, H, H), 9)})


def test_constants_in_local_memory_keep_dram1_for_the_host(tmp_path):
    """With the constants copied to local memory at each run's start, the host still
    stages them in DRAM1 from vector 0: the scratch stays above them, and a second run
    (which copies them again) computes what the first did."""
    from sim.driver import Driver
    arch = preset("pynqz1").with_changes("small local", local_depth=1024)
    c = compile_model(residual_model(), arch, strategy="local-vars-and-consts")
    stores = dram1_stores(c)
    assert stores and min(i.other_address for i in stores) >= len(c.consts)
    c.write(tmp_path)
    drv = Driver(arch, "emulator")
    drv.load_model(tmp_path / f"{c.name}.tmodel")
    x = rand((1, C, H, H), 10)
    twice = drv.run({"x": np.concatenate([x, x])}).raw["y"]
    once = run_emulator(c, {"x": x}).raw["y"]
    np.testing.assert_array_equal(twice, np.concatenate([once, once]))


def test_a_partition_stores_to_dram0_before_dram1():
    """A DRAM0 store waits for DRAM1's earlier stores to land (the flush probe) and a DRAM1
    store does not wait for DRAM0's: so within a partition the DRAM0 stores come first and
    both ports store at once."""
    c = compile_model(residual_model(), preset("pynqz1").with_changes(
        "small local", local_depth=1024), strategy="local-isolated")
    ports_seen, last, matmul_since = set(), None, False
    for i in c.program:
        if isinstance(i, MatMul):
            matmul_since = True
        elif isinstance(i, DataMove) and i.kind in (K.LOCAL_TO_DRAM0, K.LOCAL_TO_DRAM1):
            assert not (last == K.LOCAL_TO_DRAM1 and i.kind == K.LOCAL_TO_DRAM0
                        and not matmul_since), "a DRAM0 store right behind a DRAM1 store"
            ports_seen.add(i.kind)
            last, matmul_since = i.kind, False
    assert ports_seen == {K.LOCAL_TO_DRAM0, K.LOCAL_TO_DRAM1}
