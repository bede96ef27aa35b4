"""Weight loader: LoadWeights pushed from local memory beside the compute sequencer.

The systolic array double-buffers its weights: MatMuls use the tile in use while pushes
shift the next one into the staging chain. Pushing through the compute sequencer's one-vector-per-cycle slot still costs
n + 1 cycles per tile; this loader runs the LoadWeights of the *next* tile while the
current tile's MatMuls stream through the sequencer, so a tile switch costs nothing when
the tile's MatMuls take at least as long as the next tile's pushes::

    compute unit input ─┬─ LoadWeights ─▶ [queue] ─▶ loader ── read: port A if free,
                        │                  epoch ≟ switched       else port B (shared)
                        │                       └──────── push (t1) ─▶ array.weights
                        └─ MatMul, SIMD, moves ─▶ sequencer ── switch (1st vector) ─▶ array
                                   token ≟ done ◀──────────────────┘

Each read takes local port A when the sequencer does not want it or waits for this tile (a
MatMul of one vector after a tile of n + 1 pushes, as in a batch-1 dense layer), else port
B, which it shares with the DRAM engine (while MatMuls stream through port A, or wait for a
DRAM load).

Two counters keep program order between the two paths (``TOKEN_BITS`` wide, wrapping):

- ``done``: LoadWeights whose last vector has been pushed. The first MatMul after a group
  of LoadWeights carries ``switch`` and ``token`` (LoadWeights enqueued before it); it may
  enter the array (and switch tiles) only once ``done`` reaches ``token``.
- ``switched``: tile switches so far (driven by the compute unit). A LoadWeights carries
  ``epoch`` (switching MatMuls enqueued before it) and may push only once ``switched``
  reaches it: the tile it loads is then no longer waiting to be switched to.

A push also waits for ``push_ok_next`` (the tile in use still only in the staging chain
it shifts) and for ``local_wait`` (an earlier instruction has still to write the word it
reads). A LoadWeights with the ``zeroes`` flag pushes zero vectors without reading.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import Layout
from .decoder import TOKEN_BITS, ActiveInstruction
from .stream import SINK, SOURCE, RegFifo, SharedRead, Stream, Struct, connect, named


def loader_struct(layout: Layout) -> Struct:
    """Packed record of one LoadWeights for the loader (widths: ``layout.hardware``):
    ``laddr`` is the run's last address (weights are read top-down), ``epoch`` the
    bank switches that must happen before it pushes; ``uses``/``writes``/``lo``/``hi`` its
    local range for hazard checks."""
    h = layout.hardware
    return Struct(zeroes=1, laddr=h.L, ls=h.S0, size=h.size, epoch=TOKEN_BITS,
                  uses=1, writes=1, lo=h.L, hi=h.L)


class WeightLoader:
    """Runs LoadWeights in order, one pushed vector per cycle, from local memory port A or B.

    Args:
        layout: the instruction :class:`~tcu_hw.isa.Layout` (record and address widths).
        vector_bits: bits of one vector (n·W).
        queue_depth: LoadWeights queued ahead of the active one.
        name: prefix of the wires and registers.

    Ports:
        loads: :class:`~tcu_hw.blocks.stream.Stream` sink of :func:`loader_struct` records.
        local_a, local_b: :class:`~tcu_hw.blocks.stream.SharedRead` (client side) to local
            memory ports A and B; a read goes to port A when granted, else asks port B.
        push: stream source, always ready (connect it to the array's ``weights``): ``data``
            (n·W), one vector pushed into the weight chain.
        push_ok_next: input (1), a push next cycle is safe (the array's ``push_ok_next``:
            no push comes beside a switching vector, see ``switched_next``).
        switched_next: input (``TOKEN_BITS``), bank switches counted up to and including
            this cycle's (the switching vector's entry into the array), so the next tile's
            first read comes in the cycle its switching vector enters and its push after.
        done_next: output (``TOKEN_BITS``), LoadWeights fully pushed, up to and including
            this cycle's push.
        read_addr: output (L), the local address of the next read.
        wants_local: output (1), that read would issue but for ``local_wait``.
        local_wait: input (1), that read must wait (an earlier instruction has still to
            write the address).
        entries: list of ``valid`` (1) / ``record`` outputs (with their ``struct``): the
            LoadWeights still to read local memory, for range checks.
        idle: output (1), nothing queued or in flight.
        stall: output (1), a LoadWeights is waiting.

    Latency: a read issues at t0 (when granted) and its vector is pushed at t1; an accepted
    LoadWeights issues its first read two cycles later (queue, then active), and the next
    follows without a bubble. Overlap is limited by what reaches the loader: the next tile's
    LoadWeights arrive once the current tile's MatMuls have been accepted by the compute
    unit (its queue is two deep), so a tile of many short MatMuls still shows its pushes.
    """

    def __init__(self, layout: Layout, vector_bits: int, queue_depth: int = 1,
                 name: str = "wl") -> None:
        f = layout.hardware
        if not 1 <= queue_depth < (1 << TOKEN_BITS) - 2:
            raise ValueError(f"weight loader {name!r}: queue depth {queue_depth} is not "
                             f"allowed; use 1 to {(1 << TOKEN_BITS) - 3} (the {TOKEN_BITS}-bit "
                             f"counters must tell the LoadWeights in flight apart)")
        rec = loader_struct(layout)
        self.record = rec
        self.loads = Stream(rec, f"{name}_loads", SINK)
        q = RegFifo(rec, queue_depth, f"{name}_queue", pipe=False)     # ready from registers
        connect(self.loads.flipped(), q.enq)
        deq = q.deq
        self.local_a = pa = SharedRead(f.L, vector_bits, f"{name}_local_a", side="client")
        self.local_b = pb = SharedRead(f.L, vector_bits, f"{name}_local_b", side="client")
        self.push = Stream(vector_bits, f"{name}_push", SOURCE, always_ready=True)
        self.push_ok_next = WireVector(1, f"{name}_push_ok_next")
        self.switched_next = WireVector(TOKEN_BITS, f"{name}_switched_next")
        self.local_wait = WireVector(1, f"{name}_local_wait")

        active = ActiveInstruction(rec, deq, f, name)
        act_valid, act_bits, act, laddr = active.valid, active.bits, active.fields, active.laddr

        ready = named(act_valid & (self.switched_next == act.epoch) & self.push_ok_next,
                      f"{name}_ready")
        reads = ~act.zeroes
        go = ready & ~(reads & self.local_wait)
        pa.want <<= go & reads
        pb.want <<= go & reads & ~pa.grant
        pa.addr <<= laddr
        pb.addr <<= laddr
        issue = named(go & (act.zeroes | pa.grant | pb.grant), f"{name}_issue")
        _, finishing = active.advance(issue, down=1)             # top-down, as the ISA reads

        # t1: the vector read at t0 is pushed
        t1_valid = Register(1, f"{name}_t1_valid")
        t1_zero = Register(1, f"{name}_t1_zero")
        t1_last = Register(1, f"{name}_t1_last")
        t1_port_a = Register(1, f"{name}_t1_port_a")
        t1_valid.next <<= issue
        t1_zero.next <<= act.zeroes
        t1_last.next <<= finishing
        t1_port_a.next <<= pa.grant
        data = pyrtl.select(t1_port_a, pa.rdata, pb.rdata)
        self.push.drive(t1_valid, data=pyrtl.select(t1_zero, Const(0, vector_bits), data))
        done = Register(TOKEN_BITS, f"{name}_done")
        done_next = (done + (t1_valid & t1_last))[:TOKEN_BITS]
        done.next <<= done_next
        self.done_next = named(done_next, f"{name}_done_next")

        self.read_addr = named(laddr, f"{name}_read_addr")
        self.wants_local = named(ready & reads, f"{name}_wants_local")
        self.entries = [SimpleNamespace(valid=e.valid, record=e.record, struct=rec)
                        for e in q.entries]
        self.entries.append(SimpleNamespace(valid=named(act_valid, f"{name}_act_entry_valid"),
                                            record=named(act_bits, f"{name}_act_entry_record"),
                                            struct=rec))
        self.idle = named(~act_valid & ~deq.valid & ~t1_valid, f"{name}_idle")
        self.stall = named(act_valid & ~issue, f"{name}_stall")
