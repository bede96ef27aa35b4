"""Weight-stationary n×n MAC array with double-buffered weights (TCU.md §2, §4.1, §4.3).

Every processing element applies :func:`tcu_hw.blocks.fixed.mac` (round half to even,
saturate), so output i of an input vector x is the chain
``MAC(x[n-1], W[i][n-1], ... MAC(x[0], W[i][0], bias[i]))`` — bit-exact with
:func:`tcu_hw.numeric.matmul`.

Dataflow (one vector per cycle, latency n)::

    x[0] ──────────────▶ PE(0,i) ─▶ P0 ─┐        stage j adds input j of the vector that
    x[1] ─ d ──────────▶ PE(1,i) ─▶ P1 ─┤        entered j cycles ago: x[j] is delayed j
    x[2] ─ d ─ d ──────▶ PE(2,i) ─▶ P2 ─┤        cycles and broadcast to the n PEs of its
     ...                                 ...      row; partial sums move down one stage a
    bias[i] (or pass-through data) ─▶ P(-1)       cycle; out = P(n-1)

Weights: two banks of n+1 rows ``[bias, row 0 .. row n-1]`` (row j = weights of input j,
lane i feeds output i) and a staging chain of the same shape. A weight *push* shifts one
vector into the chain: ``bias ← pushed, row 0 ← old bias, row j ← old row j-1`` (TCU.md
§4.3). The staging chain always holds the logical chain, and each push also loads the shadow
bank from the chain's new value, so after a push the shadow bank equals the chain (partial
loads keep their sequential meaning) without any copy multiplexer. The next vector that
enters (not pass-through) switches banks and uses the new weights; vectors already in flight
keep their bank (each stage carries a bank bit). A tile switch therefore costs only the
pushes; the array never drains.

With ``explicit_switch`` the banks switch only on a vector that carries ``switch = 1``, so
pushes of the next tile may run while vectors of the current tile keep entering (a weight
loader beside the sequencer); the controller then keeps each push off the bank in use
(``push_ok_next``) and sets ``switch`` on the first vector after a tile's last push.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..numeric import DataType
from . import fixed, lanes
from .stream import SINK, SOURCE, Stream, Struct, named


class SystolicArray:
    """An n×n weight-stationary MAC array with double-buffered weights; no back-pressure.

    Args:
        n: lanes (inputs and outputs per vector); the array has n·n PEs.
        dt: a fixed-point :class:`~tcu_hw.numeric.DataType` (W = ``dt.width`` bits per lane).
        tag_width: bits carried alongside each vector (at least 1 wire bit).
        name: prefix of the wires and registers.
        explicit_switch: the input carries ``switch`` and the banks switch only on a vector
            with ``switch = 1`` (else: on the first vector after a push).

    Ports:
        input: :class:`~tcu_hw.blocks.stream.Stream` sink, always ready: ``data`` (n·W:
            lanes x[0..n-1]), ``passthrough`` (1: the columns start from ``data`` instead of
            the bias and x = 0, so ``data`` comes out unchanged after n cycles, as
            MAC(0, w, z) = z exactly), ``tag`` (tag_width); with ``explicit_switch`` also
            ``switch`` (1: this vector switches to the bank the pushes loaded).
        weights: sink, always ready: ``data`` (n·W), one vector pushed into the weight chain.
            At most one of ``input.valid`` and ``weights.valid`` per cycle; with
            ``explicit_switch`` a push may come with any vector that does not switch.
        output: source, always ready (it cannot wait: connect it to an always-ready sink):
            ``data`` (n·W), ``tag``, the vector that entered n cycles ago.
        push_ok: output (1), a push this cycle is safe.
        push_ok_next: output (1), a push next cycle will be safe given this cycle's inputs
            (for controllers whose push data comes from a registered read).
        stages: list of ``valid`` (1) / ``tag`` outputs, the pipeline stages (for hazard
            checks).
        bank: output (1), the weight bank in use.
        pending: output (1), the shadow bank has been pushed into since the last switch.

    Latency: n cycles from ``input`` to ``output``; a push affects the next vector that
    enters (with ``explicit_switch``: the next vector with ``switch = 1``). The pipeline
    always advances.
    """

    def __init__(self, n: int, dt: DataType, tag_width: int = 0, name: str = "array",
                 explicit_switch: bool = False) -> None:
        if dt.is_float:
            raise ValueError("the systolic array needs a fixed-point data type")
        w = dt.width
        self.n, self.dt, self.latency = n, dt, n
        vec = n * w
        tw = max(tag_width, 1)
        fields = dict(data=vec, passthrough=1, tag=tw)
        if explicit_switch:
            fields["switch"] = 1
        self.input = Stream(Struct(**fields), f"{name}_input", SINK, always_ready=True)
        self.weights = Stream(vec, f"{name}_weights", SINK, always_ready=True)
        self.output = Stream(Struct(data=vec, tag=tw), f"{name}_output", SOURCE,
                             always_ready=True)
        inp = self.input.payload
        in_valid, in_pass, in_data = self.input.valid, inp.passthrough, inp.data
        load_valid, load_data = self.weights.valid, self.weights.payload.data

        # two banks of n+1 rows: row 0 = bias, row 1 + j = weights of input j; every weight
        # and partial sum is its own W-bit register (narrow words simulate much faster)
        banks = [[[Register(w, f"{name}_b{b}_r{r}_l{i}") for i in range(n)]
                  for r in range(n + 1)] for b in range(2)]
        cur = Register(1, f"{name}_bank_q")
        pending = Register(1, f"{name}_pending_q")
        self.bank, self.pending = named(cur, f"{name}_bank"), named(pending, f"{name}_pending")

        enter = in_valid & ~in_pass                    # a vector that uses weights
        switching = inp.switch if explicit_switch else pending   # flips to the loaded bank
        enter_bank = cur ^ switching
        cur.next <<= pyrtl.select(enter, enter_bank, cur)
        pending.next <<= (pending & ~(enter & switching)) | load_valid

        # The staging chain always holds the logical weight chain (it shifts on every push).
        # A push loads the shadow bank from the staging chain's next value, so after any push
        # the shadow bank equals the chain: partial loads keep their meaning and no bank needs
        # a copy multiplexer (every register loads one source under a clock enable).
        pushed = lanes.split(load_data, n)
        staging = [[Register(w, f"{name}_st_r{r}_l{i}") for i in range(n)] for r in range(n + 1)]
        for i in range(n):
            for r in range(n + 1):
                src = pushed[i] if r == 0 else staging[r - 1][i]
                staging[r][i].next <<= pyrtl.select(load_valid, src, staging[r][i])
                for b in range(2):
                    write = load_valid & (cur != b)
                    banks[b][r][i].next <<= pyrtl.select(write, src, banks[b][r][i])

        def row(bank_bit: WireVector, r: int) -> list[WireVector]:
            return [pyrtl.select(bank_bit, banks[1][r][i], banks[0][r][i]) for i in range(n)]

        # pipeline registers
        sv = [Register(1, f"{name}_s{j}_valid") for j in range(n)]
        sw = [Register(1, f"{name}_s{j}_weights") for j in range(n)]   # uses weights
        sb = [Register(1, f"{name}_s{j}_bank") for j in range(n)]
        st = [Register(max(tag_width, 1), f"{name}_s{j}_tag") for j in range(n)]
        sp = [[Register(w, f"{name}_s{j}_sum_l{i}") for i in range(n)] for j in range(n)]

        x = lanes.split(pyrtl.select(in_pass, Const(0, vec), in_data), n)
        xd = [x[0]]
        for j in range(1, n):
            d = x[j]
            for k in range(j):
                r = Register(w, f"{name}_x{j}_d{k}")
                r.next <<= d
                d = r
            xd.append(d)

        data_in = lanes.split(in_data, n)
        bias = row(enter_bank, 0)
        col_in = [pyrtl.select(in_pass, data_in[i], bias[i]) for i in range(n)]
        prev, prev_bank = col_in, enter_bank
        for j in range(n):
            weights = row(prev_bank, 1 + j)
            for i in range(n):
                sp[j][i].next <<= fixed.mac(xd[j], weights[i], prev[i], dt)
            if j == 0:
                sv[0].next <<= in_valid
                sw[0].next <<= enter
                sb[0].next <<= enter_bank
                st[0].next <<= inp.tag
            else:
                sv[j].next <<= sv[j - 1]
                sw[j].next <<= sw[j - 1]
                sb[j].next <<= sb[j - 1]
                st[j].next <<= st[j - 1]
            prev, prev_bank = sp[j], sb[j]

        self.output.drive(sv[-1], data=lanes.join(sp[-1]), tag=st[-1])
        self.stages = [SimpleNamespace(valid=named(v, f"{name}_stage{j}_valid"),
                                       tag=named(t, f"{name}_stage{j}_tag"))
                       for j, (v, t) in enumerate(zip(sv, st))]

        # A push writes the shadow bank at the end of its cycle; vectors that will still read
        # that bank in a later cycle (stages 0..n-3 at the push) must not use it.
        def users(bank_bit: WireVector, upto: int) -> WireVector:
            used = Const(0, 1)
            for j in range(max(upto, 0)):
                used = used | (sw[j] & (sb[j] == bank_bit))
            return used

        # (without explicit switching, a pending load means the shadow bank has no users)
        self.push_ok = WireVector(1, f"{name}_push_ok")
        self.push_ok_next = WireVector(1, f"{name}_push_ok_next")
        next_cur = pyrtl.select(enter, enter_bank, cur)
        if explicit_switch:
            self.push_ok <<= ~users(~cur, n - 2)
            self.push_ok_next <<= ~users(~next_cur, n - 3)
        else:
            next_pending = (pending & ~enter) | load_valid
            self.push_ok <<= pending | ~users(~cur, n - 2)
            self.push_ok_next <<= next_pending | ~users(~next_cur, n - 3)
