"""The ring of weight tiles and constants loaded ahead (compiler_lite.prefetch): planning
invariants on random layer lists, the pacing of the loads, and compiled programs that
compute exactly what they compute without the ring."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler_lite import emit
from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from compiler_lite.prefetch import (GUARD, LOAD_LATENCY, Block, LayerRoom, Prefetcher,
                                    plan_ring, ring_capacity)
from tcu_hw.isa import DataMove, DataMoveKind

from ..conftest import shared_path
from .helpers import lut_arch

TOP = 4000


@st.composite
def layer_rooms(draw):
    """Layers: tiles in tiles of 3..9 vectors, constants, room (or streaming)."""
    rooms = []
    for _ in range(draw(st.integers(1, 30))):
        sizes = draw(st.lists(st.integers(3, 9), max_size=12))
        starts = tuple(np.cumsum([0, *sizes[:-1]]).tolist()) if sizes else (0,)
        stream = draw(st.integers(0, 9)) == 0
        rooms.append(LayerRoom(sum(sizes), draw(st.integers(0, 40)),
                               None if stream else draw(st.integers(0, 400)), starts))
    return rooms


def live(b: Block) -> range:
    """The layers during which block ``b`` is in the ring."""
    return range(b.issue, b.layer + 1)


@settings(max_examples=300, deadline=None)
@given(layer_rooms())
def test_ring_plan_invariants(rooms):
    cap, blocks, walls = plan_ring(rooms, TOP)
    if not blocks:
        return
    assert 0 < cap <= min(r.ring_room for i, r in enumerate(rooms) if i not in walls)
    order = sorted(blocks.values(), key=lambda b: b.layer)
    assert [b.issue for b in order] == sorted(b.issue for b in order)   # DRAM1 in order
    for i, room in enumerate(rooms):        # outside the ring: nothing to load, or a wall
        assert i in blocks or i in walls or not room.size
    for b in order:
        room = rooms[b.layer]
        assert b.issue <= b.layer and b.size == room.size
        assert not any(w in live(b) for w in walls), "the ring holds a block over a barrier"
        spans = sorted(b.spans())
        assert all(TOP - cap <= lo < hi <= TOP for lo, hi in spans)
        assert all(h <= lo for (_, h), (lo, _) in zip(spans, spans[1:])), "overlaps itself"
        # cut only where a tile starts: every tile whole inside one piece
        assert all(first in room.starts for _, first, _ in b.pieces)
        ends = [*room.starts[1:], room.tiles]
        for s, e in zip(room.starts, ends) if room.tiles else ():
            assert any(first <= s and e <= first + n for _, first, n in b.pieces)
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if b.issue <= a.layer:          # both in the ring at once
                assert not any(lo < h and l2 < hi for lo, hi in a.spans()
                               for l2, h in b.spans()), (a, b)


def test_a_streaming_layer_is_a_barrier():
    rooms = [LayerRoom(20, 0, 300), LayerRoom(20, 0, None), LayerRoom(20, 0, 300),
             LayerRoom(20, 0, 300)]
    _, blocks, walls = plan_ring(rooms, TOP)
    assert 1 in walls and 1 not in blocks
    assert blocks[2].issue == 2 and blocks[3].issue == 2


def test_a_block_wraps_between_tiles():
    rooms = [LayerRoom(60, 0, 100, tuple(range(0, 60, 10))) for _ in range(3)]
    _, blocks, _ = plan_ring(rooms, TOP)
    assert [len(b.pieces) for b in blocks.values()] == [1, 2, 1]
    (_, f0, n0), (a1, f1, n1) = blocks[1].pieces
    assert (f0, n0, f1, n1) == (0, 40, 40, 20) and a1 == TOP - 100
    assert blocks[1].tile_address(45) == a1 + 5
    assert blocks[1].issue == 1         # overwrites the first layer's block


def test_loads_are_paced_by_compute_time():
    blocks = {i: Block(i, 0, 0, [(0, 0, 100)], 0) for i in range(4)}
    p = Prefetcher(blocks, beats=4)
    took = 400 + LOAD_LATENCY
    assert [b.layer for b in p.due(0)] == [0]            # DRAM1 is free: at once
    assert p.due(0) == []                                # it takes 400 cycles and more
    p.advance(took - GUARD - 1)
    assert p.due(0) == []
    p.advance(1)
    assert [b.layer for b in p.due(0)] == [1]            # one at a time
    p.advance(10 * took)
    assert [b.layer for b in p.due(0)] == [2]
    assert [b.layer for b in p.needed(3)] == [3]         # the layer starts: forced
    assert p.last_end == 12 * took - GUARD + took        # after the one before


def test_scoring_counts_only_loads_that_can_run_ahead():
    """Layer 1 is too big for any ring: it is a wall, so layer 2's block cannot load while
    it runs and a ring would buy nothing."""
    cap, ring = ring_capacity([LayerRoom(10, 0, 100), LayerRoom(200, 0, 100),
                               LayerRoom(50, 0, 100)])
    assert (cap, ring) == (0, set())


#: ResNet-20 to its logits, or through its Softmax (lookup tables on pynqz1)
TO_LOGITS, TO_SOFTMAX = ["dense/BiasAdd:0"], ["Identity:0"]


def resnet(board, outputs=TO_LOGITS):
    x = (np.random.default_rng(0).standard_normal((1, 32, 32, 3)) * 0.25).astype(np.float32)
    path = shared_path("models", "resnet20v2_cifar.onnx")
    return compile_model(path, board, outputs=outputs), {"x:0": x}, path


@pytest.fixture(scope="module")
def resnet_zcu104():
    return resnet("zcu104")


@pytest.mark.parametrize("board, outputs", [
    ("zcu104", TO_LOGITS), ("pynqz1", TO_LOGITS),
    (lut_arch("pynqz1", count=2, depth=64, registers=3), TO_SOFTMAX)])
def test_resnet_with_the_ring_computes_what_it_computes_without(board, outputs, monkeypatch):
    """zcu104 holds every layer's block in the ring; pynqz1's arenas leave room beside
    some layers only (walls between); through the Softmax, blocks also carry SIMD constants
    and lookup tables, read from the ring by LOCAL_TO_ACC and LoadLUT."""
    spy = {}
    plan = emit.Emitter._plan_ring

    def planned(self):
        plan(self)
        spy["blocks"] = dict(self.blocks)
    monkeypatch.setattr(emit.Emitter, "_plan_ring", planned)
    c, feeds, path = resnet(board, outputs)
    assert spy["blocks"]
    if outputs == TO_SOFTMAX:
        luts = {b.layer for b in spy["blocks"].values()
                if b.consts and c.plan.layers[b.layer].lut_vectors}
        assert luts, "no block carries lookup tables"
    monkeypatch.setattr(emit.Emitter, "_plan_ring", lambda self: None)
    plain = compile_model(path, board, outputs=outputs)
    assert c.program != plain.program
    got = run_emulator(c, feeds).raw
    for name, raw in run_emulator(plain, feeds).raw.items():
        np.testing.assert_array_equal(got[name], raw, err_msg=name)


def test_resnet_loads_each_layer_once_and_ahead(resnet_zcu104):
    """zcu104 keeps ResNet-20's constants in DRAM1: every layer's block of them is loaded
    once (layers with equal blocks share one copy in the image, each loads it), and the
    128-channel stage's tiles are all in before its first layer starts."""
    c, _, _ = resnet_zcu104
    loads = [(i, ins.size + 1) for i, ins in enumerate(c.program)
             if isinstance(ins, DataMove) and ins.kind == DataMoveKind.DRAM1_TO_LOCAL]
    blocks = sum(lc.simd_local + lc.lut_vectors + lc.tile_vectors for lc in c.plan.layers)
    assert sum(n for _, n in loads) == blocks
    first = np.cumsum([0] + [s.instructions for s in c.layers])
    conv40 = next(i for i, s in enumerate(c.layers) if s.name.startswith("conv_40"))
    before = sum(n for i, n in loads if i < first[conv40])
    assert before >= sum(lc.tile_vectors for lc in c.plan.layers[:conv40 + 1])
