"""Weight-stationary n×n MAC array with double-buffered weights (TCU.md §2, §4.1, §4.3).

Every processing element applies :func:`tcu_hw.blocks.fixed.mac` (round half to even,
saturate), so output i of an input vector x is the chain
``MAC(x[n-1], W[i][n-1], ... MAC(x[0], W[i][0], bias[i]))`` — bit-exact with
:func:`tcu_hw.numeric.matmul`. With an integer type (INT8, INT16; docs/integer.md) the
partial sums are the accumulator type's width (32, 48 bits) and every element adds its exact
product: the column sum ``bias[i] + Σ x[j]·W[i][j]``, exact.

Dataflow (one vector per cycle, latency n + 1)::

    x[0] ───────────────▶ ×W[1+0] ─▶ p0 ─┐          x[j] is delayed j cycles and broadcast to
    x[1] ─ d ───────────▶ ×W[1+1] ─▶ p1 ─┼─┐        the n multipliers of its row; the product
    x[2] ─ d ─ d ───────▶ ×W[1+2] ─▶ p2 ─┼─┼─┐      waits one cycle in a register (p), then
     ...                                 │ │ │      row j's adder rounds and saturates it onto
    bias[i] or pass-through ─▶ E ─▶ +p0 ─▶ S0 ─▶ +p1 ─▶ S1 ─▶ ... ─▶ S(n-1) = out

The entry stage E holds the column's start value (the bias, or the pass-through data); the
partial sums move down one stage a cycle. Each register-to-register path holds either one
multiplier or one adder with its rounding and saturation, never both, and the products'
registers are what Yosys packs into the DSP's multiplier register (``MREG``) on Xilinx.

Weights: two copies of n+1 rows ``[bias, row 0 .. row n-1]`` (row j = weights of input j,
lane i feeds output i). The staging chain S always holds the logical chain: a weight *push*
shifts one vector into it, ``bias ← pushed, row 0 ← old bias, row j ← old row j-1`` (TCU.md
§4.3), so partial loads keep their sequential meaning. The copy C holds the tile in use. A
vector that switches makes S's tile the one in use; C takes a copy of S (all rows in one
cycle) as soon as no vector in flight still has to read C's old tile, and until then the
vectors of the new tile read S (each stage carries a bit saying which). A copy points every
vector in flight at C (same tile), so S is free again at once. A push waits only while the
tile in use lives in S alone (``fresh``: its copy waits for the previous tile's last vectors
to read C), which is exactly as long as a push into a second bank would wait for that bank's
vectors; the array never drains, and each register loads one source under a clock enable
(no copy multiplexer)::

    pushed ─▶ S[0] ─▶ S[1] ─▶ ... ─▶ S[n]        shift on a push
               │        │              │
               ▼        ▼              ▼          copy (clock enable): C ← S
              C[0]     C[1]    ...    C[n]
    PE row r reads S[r] or C[r], chosen by the bit its vector carries

With ``explicit_switch`` a tile switches only on a vector that carries ``switch = 1``, so
pushes of the next tile may run while vectors of the current tile keep entering (a weight
loader beside the sequencer); the controller keeps each push to the cycles ``push_ok_next``
allows and sets ``switch`` on the first vector after a tile's last push.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..numeric import DataType
from . import fixed, lanes
from .stream import SINK, SOURCE, Stream, Struct, data_register, named


class SystolicArray:
    """An n×n weight-stationary MAC array with double-buffered weights (a staging chain and
    a copy); no back-pressure.

    Args:
        n: lanes (inputs and outputs per vector); the array has n·n PEs.
        dt: a fixed-point or integer :class:`~tcu_hw.numeric.DataType` (W = ``dt.width``
            bits per lane of weights and x; A = ``dt.accumulator.width`` bits per lane of
            sums and pass-through data: A = W but for the integer types, 32 or 48).
        tag_width: bits carried alongside each vector (at least 1 wire bit).
        name: prefix of the wires and registers.
        explicit_switch: the input carries ``switch`` and the tile switches only on a vector
            with ``switch = 1`` (else: on the first vector after a push).

    Ports:
        input: :class:`~tcu_hw.blocks.stream.Stream` sink, always ready: ``data`` (n·A:
            lanes x[0..n-1], of which an integer type's x uses the low W bits),
            ``passthrough`` (1: the columns start from ``data`` instead of
            the bias and x = 0, so ``data`` comes out unchanged after n + 1 cycles, as
            MAC(0, w, z) = z exactly), ``tag`` (tag_width); with ``explicit_switch`` also
            ``switch`` (1: this vector switches to the tile the pushes loaded).
        weights: sink, always ready: ``data`` (n·W), one vector pushed into the weight chain.
            At most one of ``input.valid`` and ``weights.valid`` per cycle; with
            ``explicit_switch`` a push may come with any vector that does not switch, and
            with one that does when ``push_ok_next_switch`` said so the cycle before (the
            copy is taken in that cycle).
        output: source, always ready (it cannot wait: connect it to an always-ready sink):
            ``data`` (n·A), ``tag``, the vector that entered n + 1 cycles ago.
        push_ok: output (1), a push this cycle is safe (unless a vector switches in it).
        push_ok_next: output (1), a push next cycle will be safe given this cycle's inputs,
            if the vector entering next cycle does not switch (for controllers whose push
            data comes from a registered read).
        push_ok_next_switch: output (1), the same if the vector entering next cycle switches
            (C must take its copy in that cycle: no vector of the current tile may still
            read it).
        stages: list of ``valid`` (1) / ``tag`` outputs, the n + 1 pipeline stages (the
            entry stage, then the partial sums after each row; for hazard checks).
        fresh: output (1), the tile in use is in the staging chain only (its copy waits
            for the previous tile's vectors to read C); a push waits unless the copy is taken
            in its cycle.
        pending: output (1), the staging chain has been pushed into since the last switch.

    Latency: n + 1 cycles from ``input`` to ``output``; a push affects the next vector that
    enters (with ``explicit_switch``: the next vector with ``switch = 1``). The pipeline
    always advances.
    """

    def __init__(self, n: int, dt: DataType, tag_width: int = 0, name: str = "array",
                 explicit_switch: bool = False) -> None:
        if dt.is_float:
            raise ValueError("the systolic array needs a fixed-point or integer data type")
        w, aw = dt.width, dt.accumulator.width        # aw = w but for the integer types
        self.n, self.dt, self.latency = n, dt, n + 1
        vec, wide = n * w, n * aw
        tw = max(tag_width, 1)
        fields = dict(data=wide, passthrough=1, tag=tw)
        if explicit_switch:
            fields["switch"] = 1
        self.input = Stream(Struct(**fields), f"{name}_input", SINK, always_ready=True)
        self.weights = Stream(vec, f"{name}_weights", SINK, always_ready=True)
        self.output = Stream(Struct(data=wide, tag=tw), f"{name}_output", SOURCE,
                             always_ready=True)
        inp = self.input.payload
        in_valid, in_pass, in_data = self.input.valid, inp.passthrough, inp.data
        load_valid, load_data = self.weights.valid, self.weights.payload.data

        # the staging chain S and the copy C, n+1 rows each: row 0 = bias, row 1 + j = weights
        # of input j; every weight and partial sum is its own W-bit register (narrow words
        # simulate much faster)
        staging = [[Register(w, f"{name}_st_r{r}_l{i}") for i in range(n)] for r in range(n + 1)]
        copy_ = [[Register(w, f"{name}_c_r{r}_l{i}") for i in range(n)] for r in range(n + 1)]
        pending = Register(1, f"{name}_pending_q")     # S pushed since the last switch
        fresh = Register(1, f"{name}_fresh_q")         # the tile in use is in S only

        def row(from_s: WireVector, r: int) -> list[WireVector]:
            return [pyrtl.select(from_s, staging[r][i], copy_[r][i]) for i in range(n)]

        # pipeline registers: the entry stage (the column's start value: bias or pass-through
        # data), then the partial sums after row j
        ev, ew = Register(1, f"{name}_e_valid"), Register(1, f"{name}_e_weights")
        eb, et = Register(1, f"{name}_e_from_s"), Register(tw, f"{name}_e_tag")
        ez = [Register(aw, f"{name}_e_start_l{i}") for i in range(n)]
        sv = [Register(1, f"{name}_s{j}_valid") for j in range(n)]
        sw = [Register(1, f"{name}_s{j}_weights") for j in range(n)]   # uses weights
        sb = [Register(1, f"{name}_s{j}_from_s") for j in range(n)]
        st = [Register(tw, f"{name}_s{j}_tag") for j in range(n)]
        sp = [[Register(aw, f"{name}_s{j}_sum_l{i}") for i in range(n)] for j in range(n)]
        # products of row 1+j, registered: computed the cycle before row j's adder takes them
        pr = [[Register(2 * w, f"{name}_p{j}_l{i}") for i in range(n)] for j in range(n)]

        x = lanes.split(pyrtl.select(in_pass, Const(0, wide), in_data), n)
        if aw != w:                                   # an integer x is a W-bit value
            x = [lane[:w] for lane in x]
        xd = [x[0]]
        for j in range(1, n):
            d = x[j]
            for k in range(j):
                r = data_register(w, f"{name}_x{j}_d{k}")
                r.next <<= d
                d = r
            xd.append(d)

        # which copy each vector reads (1: S); stage k reads row k+2 this cycle
        stage_weights, stage_s = [ew] + sw, [eb] + sb

        def readers(from_s: int, upto: int) -> WireVector:
            """A vector in stages 0..upto-1 that reads the S (1) or C (0) copy in a later
            cycle (a vector in stage k reads row k+2 this cycle and row n last)."""
            used = Const(0, 1)
            for j in range(max(upto, 0)):
                s_bit = stage_s[j] if from_s else ~stage_s[j]
                used = used | (stage_weights[j] & s_bit)
            return used

        enter = in_valid & ~in_pass                    # a vector that uses weights
        switching = inp.switch if explicit_switch else pending
        fresh_now = fresh | (enter & switching)        # the tile in use is in S only
        copying = named(fresh_now & ~readers(0, n - 2), f"{name}_copying")   # C ← S
        enter_s = fresh_now                            # rows 0 and 1 this cycle from S
        keep_s = fresh_now & ~copying                  # later rows from S too
        fresh.next <<= keep_s
        pending.next <<= (pending & ~(enter & switching)) | load_valid
        pushed = lanes.split(load_data, n)
        for r in range(n + 1):
            for i in range(n):
                src = pushed[i] if r == 0 else staging[r - 1][i]
                staging[r][i].next <<= pyrtl.select(load_valid, src, staging[r][i])
                copy_[r][i].next <<= pyrtl.select(copying, staging[r][i], copy_[r][i])
        self.fresh = named(fresh, f"{name}_fresh")
        self.pending = named(pending, f"{name}_pending")

        data_in = lanes.split(in_data, n)
        bias = row(enter_s, 0)
        if aw != w:
            bias = [b.sign_extended(aw) for b in bias]
        for i in range(n):
            ez[i].next <<= pyrtl.select(in_pass, data_in[i], bias[i])
        ev.next <<= in_valid
        ew.next <<= enter
        eb.next <<= keep_s & enter
        et.next <<= inp.tag
        # x[j] meets row 1+j j cycles after the vector entered, when the vector is one stage
        # ahead of row j's adder: at the input (j = 0), in the entry stage (j = 1) or after
        # row j-2; the product waits one cycle in its register
        s_of = [enter_s, eb] + sb[:max(n - 2, 0)]
        for j in range(n):
            weights = row(s_of[j], 1 + j)
            for i in range(n):
                pr[j][i].next <<= fixed.product(xd[j], weights[i])
        prev = ez
        for j in range(n):
            for i in range(n):
                sp[j][i].next <<= fixed.accumulate(pr[j][i], prev[i], dt) if aw == w else \
                    fixed.column_add(pr[j][i], prev[i], aw)
            sv[j].next <<= sv[j - 1] if j else ev
            sw[j].next <<= sw[j - 1] if j else ew
            sb[j].next <<= (sb[j - 1] if j else eb) & ~copying   # a copy: read C from now on
            st[j].next <<= st[j - 1] if j else et
            prev = sp[j]

        self.output.drive(sv[-1], data=lanes.join(sp[-1]), tag=st[-1])
        stage_valid, stage_tag = [ev] + sv, [et] + st
        self.stages = [SimpleNamespace(valid=named(v, f"{name}_stage{j}_valid"),
                                       tag=named(t, f"{name}_stage{j}_tag"))
                       for j, (v, t) in enumerate(zip(stage_valid, stage_tag))]

        # A push shifts S at the end of its cycle: safe unless the tile in use is in S alone
        # (then no vector in flight reads S later either: a copy points them all at C). In
        # the cycle a vector switches, a push is safe when C takes its copy then
        # (push_ok_next_switch of the cycle before).
        self.push_ok = named(~fresh | ~readers(0, n - 2), f"{name}_push_ok")
        # next cycle, if the vector entering then does not switch: S alone holds the tile
        # unless it is copied then, when no vector in stages 0..n-4 now still reads C (the
        # vector entering now reads S if the tile stays fresh)
        self.push_ok_next = named(~keep_s | ~readers(0, n - 3), f"{name}_push_ok_next")
        # next cycle, if the vector entering then switches: C must take its copy then, so
        # no vector may still read C from stage 0..n-3 next cycle (the one entering now
        # reads C unless the tile stays fresh; a copy now points the ones in flight at C)
        later_c = (enter & ~keep_s) if n >= 3 else Const(0, 1)
        for j in range(max(n - 3, 0)):
            later_c = later_c | (stage_weights[j] & (~stage_s[j] | copying))
        self.push_ok_next_switch = named(~later_c, f"{name}_push_ok_next_switch")
