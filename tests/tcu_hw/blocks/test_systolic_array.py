"""The systolic array block against the sequential chain semantics of TCU.md §4.1/§4.3."""

from __future__ import annotations

import numpy as np
import pyrtl
import pytest

from sim.pyrtl_sim import ArraySimulation
from tcu_hw import numeric
from tcu_hw.blocks import lanes
from tcu_hw.blocks.systolic_array import SystolicArray
from tcu_hw.numeric import FP8BP4, FP16BP8, FP18BP10, INT8, INT16

from ...conftest import requires_gcc

pytestmark = requires_gcc

IDLE, VECTOR, PASS, PUSH = 0, 1, 2, 3


def run_commands(n, dt, commands):
    """Play (op, vector) commands through the array, one per cycle, waiting while a push is
    not safe. Returns (outputs in order, cycles until the last output)."""
    w, aw = dt.width, dt.accumulator.width      # aw: sums and pass-through (integer types)
    count = len(commands)
    abits = max(1, (count - 1).bit_length())
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        arr = SystolicArray(n, dt, tag_width=abits, name="array")
        ops = pyrtl.MemBlock(2, abits, "ops")
        data = pyrtl.MemBlock(n * aw, abits, "data")
        pc = pyrtl.Register(abits + 1, "pc")
        done = pc == count
        addr = pc[:abits]
        op, vec = ops[addr], data[addr]
        wait = (op == PUSH) & ~arr.push_ok
        go = ~done & ~wait
        pc.next <<= pyrtl.select(go, pc + 1, pc)
        arr.input.drive(go & ((op == VECTOR) | (op == PASS)), passthrough=op == PASS, data=vec,
                        tag=addr)
        push = vec if aw == w else lanes.join([lane[:w] for lane in lanes.split(vec, n)])
        arr.weights.drive(go & (op == PUSH), data=push)
        outs = pyrtl.MemBlock(n * aw, abits, "outs")
        k = pyrtl.Register(abits + 1, "k")
        out = arr.output
        k.next <<= k + out.valid
        outs[k[:abits]] <<= pyrtl.MemBlock.EnabledWrite(out.payload.data, out.valid)
        cycle = pyrtl.Register(32, "cycle")
        cycle.next <<= cycle + 1
        last = pyrtl.Register(32, "last")
        last.next <<= pyrtl.select(out.valid, cycle, last)
        last_out = pyrtl.Output(32, "last_out")
        last_out <<= last
    sim = ArraySimulation(block=block)
    sim.memory("ops")[:count, 0] = [c[0] for c in commands]
    sim.memory("data")[:count] = lanes.pack(np.array([c[1] for c in commands]), aw)
    result = sim.run_cycles(2 * count + 4 * n + 10)
    produced = sum(1 for c in commands if c[0] in (VECTOR, PASS))
    got = lanes.unpack(sim.memory("outs")[:produced], n, aw)
    return got, result["last_out"] + 1


def model(n, dt, commands):
    chain = np.zeros((n + 1, n), np.int64)
    out = []
    for op, vec in commands:
        if op == PUSH:
            chain = np.concatenate([[vec], chain[:-1]])
        elif op == VECTOR:
            out.append(numeric.matmul_reference(np.array([vec]), chain[1:], chain[0], dt)[0])
        elif op == PASS:
            out.append(np.array(vec))
    return np.array(out).reshape(-1, n)


def random_commands(n, dt, count, rng, weights=(1, 4, 1, 3)):
    ops = rng.choice(4, size=count, p=np.array(weights) / sum(weights))
    lo, hi = ((dt.min_raw, dt.max_raw + 1) if rng.random() < 0.3
              else (max(dt.min_raw, -300), min(dt.max_raw + 1, 300)))
    return [(int(op), rng.integers(lo, hi, n).tolist()) for op in ops]


@pytest.mark.parametrize("n, dt", [(2, FP16BP8), (3, FP8BP4), (4, FP16BP8), (5, FP18BP10)],
                         ids=lambda v: str(v))
def test_random_command_streams(n, dt):
    rng = np.random.default_rng(n)
    for trial in range(3):
        commands = random_commands(n, dt, 300, rng)
        got, _ = run_commands(n, dt, commands)
        assert np.array_equal(got, model(n, dt, commands)), f"trial {trial}"


@pytest.mark.parametrize("n, dt", [(3, INT8), (4, INT8), (4, INT16)], ids=lambda v: str(v))
def test_integer_column_sums_are_exact(n, dt):
    """INT8/INT16: each column adds exact products into INT32/INT48 partial sums (far beyond
    the data type); pass-through carries accumulator-width values unchanged."""
    rng = np.random.default_rng(20 + n)
    at = dt.accumulator
    for trial in range(3):
        commands = random_commands(n, dt, 200, rng)
        commands = [(op, rng.integers(at.min_raw, at.max_raw, n, dtype=np.int64).tolist())
                    if op == PASS else (op, v) for op, v in commands]
        extreme = [(PUSH, [dt.min_raw] * n) for _ in range(n + 1)] + \
            [(VECTOR, [dt.min_raw] * n), (VECTOR, [dt.max_raw] * n)]
        got, _ = run_commands(n, dt, commands + extreme)
        want = model(n, dt, commands + extreme)
        assert np.array_equal(got, want), f"trial {trial}"
        assert want[-2, 0] == n * dt.min_raw ** 2 + dt.min_raw          # beyond W bits


def test_back_to_back_vectors_one_per_cycle():
    n, dt = 4, FP16BP8
    rng = np.random.default_rng(1)
    load = [(PUSH, rng.integers(-200, 200, n).tolist()) for _ in range(n + 1)]
    vectors = [(VECTOR, rng.integers(-500, 500, n).tolist()) for _ in range(200)]
    got, cycles = run_commands(n, dt, load + vectors)
    assert np.array_equal(got, model(n, dt, load + vectors))
    assert cycles == len(load) + len(vectors) + n + 1      # no bubble, latency n + 1


@pytest.mark.parametrize("n", [4, 8])
def test_tile_switch_costs_only_the_pushes(n):
    """A new tile of n+1 pushes after each vector: no drain between tiles."""
    dt = FP16BP8
    rng = np.random.default_rng(n)
    commands = []
    tiles = 30
    for _ in range(tiles):
        commands += [(PUSH, rng.integers(-200, 200, n).tolist()) for _ in range(n + 1)]
        commands += [(VECTOR, rng.integers(-500, 500, n).tolist())]
    got, cycles = run_commands(n, dt, commands)
    assert np.array_equal(got, model(n, dt, commands))
    assert cycles == tiles * (n + 2) + n + 1              # never stalls: no drain


def test_partial_and_zero_pushes():
    n, dt = 4, FP16BP8
    rng = np.random.default_rng(3)
    rows = [(PUSH, rng.integers(-200, 200, n).tolist()) for _ in range(n)]
    x = [(VECTOR, rng.integers(-300, 300, n).tolist()) for _ in range(3)]
    commands = rows + [(PUSH, [0] * n)] + x + rows[:2] + x + [(PASS, [5, -6, 7, -8])] + x
    got, _ = run_commands(n, dt, commands)
    assert np.array_equal(got, model(n, dt, commands))


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_explicit_switch_pushes_beside_vectors(n):
    """``explicit_switch``: the next tile's pushes run while this tile's vectors (and
    pass-through vectors) keep entering (a push and a vector in the same cycle), the first
    vector of the next tile switches with ``switch = 1``; a push waits for ``push_ok_next``
    (of the cycle before), or ``push_ok_next_switch`` when it comes with a switching vector."""
    dt = FP16BP8
    rng = np.random.default_rng(10 + n)
    tiles = [rng.integers(-200, 200, (n + 1, n)) for _ in range(6)]      # [bias, rows...]
    xs = [rng.integers(-300, 300, (int(m), n)) for m in rng.integers(1, 9, len(tiles))]
    with pyrtl.set_working_block(pyrtl.Block()):
        arr = SystolicArray(n, dt, tag_width=1, name="array", explicit_switch=True)
        ins = {k: pyrtl.Input(w.bitwidth, f"in_{k}") for k, w in
               [("valid", arr.input.valid), ("data", arr.input.payload.data),
                ("switch", arr.input.payload.switch), ("push", arr.weights.valid),
                ("wdata", arr.weights.payload.data)]}
        ins["pass"] = pyrtl.Input(1, "in_pass")
        arr.input.drive(ins["valid"], data=ins["data"], switch=ins["switch"],
                        passthrough=ins["pass"])
        arr.weights.drive(ins["push"], data=ins["wdata"])
        sim = pyrtl.Simulation()
    pushed = [0] * len(tiles)              # pushes done per tile (row n-1 first, bias last)
    entered = [0] * len(tiles)
    switched, ok_next, ok_switch, out, want = -1, 1, 1, [], []
    predicted = []          # (push_ok_next[_switch] of cycle t, push_ok / copying of t+1)
    beside_switch = 0       # pushes in a switching vector's cycle
    for _ in range(2000):
        step = dict(valid=0, data=0, switch=0, push=0, wdata=0)
        step["pass"] = 0
        switching = False
        v = next((t for t in range(len(tiles)) if entered[t] < len(xs[t])), None)
        if v is not None and rng.random() < 0.15:       # a pass-through vector
            value = rng.integers(-300, 300, n)
            step.update({"valid": 1, "pass": 1, "data": lanes.to_int(value, 16)})
            want.append(value)
        elif v is not None and rng.random() < 0.8 and (entered[v] or (
                pushed[v] == n + 1 and (ok_switch or rng.random() < 0.5))):
            # (a switch often waits until the next tile's first push may come beside it)
            switching = entered[v] == 0
            step.update(valid=1, switch=int(switching),
                        data=lanes.to_int(xs[v][entered[v]], 16))
            want.append(numeric.matmul_reference(xs[v][entered[v]][None], tiles[v][1:],
                                                 tiles[v][0], dt)[0])
            entered[v] += 1
            switched = v if switching else switched
        p = next((t for t in range(len(tiles)) if pushed[t] <= n), None)
        if p is not None and p <= switched + 1 and (ok_switch if switching else ok_next) \
                and rng.random() < 0.8:
            step.update(push=1, wdata=lanes.to_int(tiles[p][n - pushed[p]], 16))
            pushed[p] += 1
            beside_switch += switching
        sim.step({f"in_{k}": val for k, val in step.items()})
        predicted.append((ok_switch, sim.inspect("array_copying")) if switching else
                         (ok_next, sim.inspect(arr.push_ok.name)))
        ok_next = sim.inspect(arr.push_ok_next.name)
        ok_switch = sim.inspect(arr.push_ok_next_switch.name)
        if sim.inspect(arr.output.valid.name):
            out.append(sim.inspect(arr.output.payload.data.name))
    assert entered == [len(x) for x in xs]
    want = np.array(want)
    got = np.array([lanes.from_int(v, n, 16) for v in out])
    assert len(out) == len(want) and np.array_equal(got, want)
    # push_ok_next (push_ok_next_switch) is exact, not just safe: it is next cycle's
    # push_ok (whether C takes its copy in the switching vector's cycle)
    assert all(a == b for a, b in predicted[1:])
    assert beside_switch
    if n >= 4:                             # (smaller arrays copy at once: pushes never wait)
        assert not all(b for _, b in predicted)
