"""A cycle-by-cycle AXI4 slave memory in Python, for block tests of AXI masters in PyRTL.

Drive it once per cycle: :meth:`AxiSlaveModel.outputs` gives the values the slave presents
this cycle (ready/valid/data), and :meth:`AxiSlaveModel.sample` takes the master's outputs
of the same cycle and performs the handshakes. It enforces the same rules as the Verilator
testbench (INCR, size, 256 beats, 4 KiB, WLAST, WSTRB, VALID/payload held until READY,
bounds) and raises :class:`AxiViolation` on the first violation. Slow (Python per cycle):
meant for small programs. An :class:`AxiFault` makes it misbehave (error responses, or a
slave that stops answering) for the fault tests; the Verilator testbench takes the same.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

#: AXI response codes a faulty slave answers with
RESPONSES = {"slverr": 2, "decerr": 3}
#: what an :class:`AxiFault` can do
FAULT_KINDS = ("slverr", "decerr", "no_read_data", "no_write_response")


class AxiViolation(AssertionError):
    pass


@dataclass(frozen=True)
class AxiFault:
    """A DRAM slave that misbehaves after answering ``after`` bursts (of the direction the
    fault is about; ``slverr``/``decerr`` count reads and writes separately) normally.

    ``kind``: ``slverr``/``decerr``: every later R beat and B response carries that RRESP /
    BRESP; ``no_read_data``: later read bursts are accepted and never answered;
    ``no_write_response``: later write bursts are accepted, their data taken, and no B ever
    comes. ``port``: 0 (DRAM0) or 1 (DRAM1)."""

    port: int
    kind: str
    after: int = 0

    def __post_init__(self) -> None:
        if self.port not in (0, 1) or self.kind not in FAULT_KINDS or self.after < 0:
            raise ValueError(f"fault {self}: port must be 0 or 1, kind one of "
                             f"{', '.join(FAULT_KINDS)}, after >= 0")

    def response(self, bursts_before: int) -> int:
        """RRESP/BRESP for the burst after ``bursts_before`` bursts of its direction."""
        return RESPONSES.get(self.kind, 0) if bursts_before >= self.after else 0

    def silent(self, direction: str, bursts_before: int) -> bool:
        """Whether the burst after ``bursts_before`` bursts of ``direction`` ("read" or
        "write") is never answered."""
        kind = {"read": "no_read_data", "write": "no_write_response"}[direction]
        return self.kind == kind and bursts_before >= self.after


class AxiSlaveModel:
    def __init__(self, size: int, data_width: int, latency: int = 4, write_latency: int = 2,
                 outstanding: int = 8, stall: float = 0.0, seed: int = 1, name: str = "dram",
                 fault: AxiFault | None = None):
        self.mem = bytearray(size)
        self.beat = data_width // 8
        self.latency, self.write_latency, self.outstanding = latency, write_latency, outstanding
        self.stall, self.rng, self.name = stall, random.Random(seed), name
        self.reads: deque = deque()
        self.writes: deque = deque()
        self.bresps: deque = deque()
        self.cycle = 0
        self.pending = {}
        self.out = {}
        self.bursts = {"read": 0, "write": 0, "written": 0}
        self.fault = fault

    def _fail(self, what: str):
        raise AxiViolation(f"{self.name} at cycle {self.cycle}: {what}")

    def _stalled(self) -> bool:
        return self.stall > 0 and self.rng.random() < self.stall

    def outputs(self) -> dict:
        hold = self.out.get("rvalid", 0)
        o = {"arready": int(len(self.reads) < self.outstanding and not self._stalled()),
             "awready": int(len(self.writes) < self.outstanding and not self._stalled()),
             "wready": int(bool(self.writes) and not self._stalled()),
             "rvalid": 0, "rlast": 0, "rdata": 0, "rresp": 0, "rid": 0,
             "bvalid": int(bool(self.bresps) and self.bresps[0][0] <= self.cycle),
             "bresp": self.bresps[0][1] if self.bresps else 0, "bid": 0}
        if self.reads and self.reads[0][2] <= self.cycle and (hold or not self._stalled()):
            addr, beats, _, done, resp = self.reads[0]
            a = addr + done * self.beat
            o.update(rvalid=1, rlast=int(done + 1 == beats), rresp=resp,
                     rdata=int.from_bytes(self.mem[a:a + self.beat], "little"))
        self.out = o
        return o

    def _check(self, ch: str, addr: int, length: int, size: int, burst: int) -> None:
        if burst != 1:
            self._fail(f"{ch} burst type {burst} is not INCR")
        if 1 << size != self.beat:
            self._fail(f"{ch} size {size} does not match {self.beat}-byte beats")
        nbytes = (length + 1) * self.beat
        if addr % self.beat or addr % 4096 + nbytes > 4096:
            self._fail(f"{ch} burst at {addr:#x} of {length + 1} beats is unaligned or "
                       f"crosses 4 KiB")
        if addr + nbytes > len(self.mem):
            self._fail(f"{ch} burst at {addr:#x} is outside the {len(self.mem)}-byte memory")

    def _stable(self, ch: str, valid: int, payload, ready: int) -> None:
        if ch in self.pending and (not valid or payload != self.pending[ch]):
            self._fail(f"{ch.upper()}VALID dropped or payload changed before {ch.upper()}READY")
        if valid and not ready:
            self.pending[ch] = payload
        else:
            self.pending.pop(ch, None)

    def sample(self, m: dict) -> None:
        """``m``: the master's outputs this cycle (arvalid, araddr, arlen, ..., bready)."""
        o = self.out
        self._stable("ar", m["arvalid"], (m["araddr"], m["arlen"]), o["arready"])
        self._stable("aw", m["awvalid"], (m["awaddr"], m["awlen"]), o["awready"])
        self._stable("w", m["wvalid"], (m["wdata"], m["wlast"]), o["wready"])
        if m["arvalid"] and o["arready"]:
            self._check("AR", m["araddr"], m["arlen"], m["arsize"], m["arburst"])
            self.reads.append([m["araddr"], m["arlen"] + 1, self._due("read"), 0,
                               self._response("read")])
            self.bursts["read"] += 1
        if m["awvalid"] and o["awready"]:
            self._check("AW", m["awaddr"], m["awlen"], m["awsize"], m["awburst"])
            self.writes.append([m["awaddr"], m["awlen"] + 1, 0, 0])
            self.bursts["write"] += 1
        if m["wvalid"] and o["wready"]:
            if m["wstrb"] != (1 << self.beat) - 1:
                self._fail("WSTRB is not all ones")
            w = self.writes[0]
            last = w[3] + 1 == w[1]
            if bool(m["wlast"]) != last:
                self._fail("WLAST before the last beat" if m["wlast"] else
                           "no WLAST on the last beat")
            a = w[0] + w[3] * self.beat
            self.mem[a:a + self.beat] = m["wdata"].to_bytes(self.beat, "little")
            w[3] += 1
            if last:
                self.writes.popleft()
                self.bresps.append((self._due("write"), self._response("write")))
                self.bursts["written"] += 1
        if o["rvalid"] and m["rready"]:
            r = self.reads[0]
            r[3] += 1
            if r[3] == r[1]:
                self.reads.popleft()
            self.out["rvalid"] = 0
        if o["bvalid"] and m["bready"]:
            self.bresps.popleft()
        self.cycle += 1

    def _due(self, direction: str) -> float:
        """The cycle the next burst of ``direction`` is answered (never for a silent one)."""
        done = self.bursts["read" if direction == "read" else "written"]
        if self.fault is not None and self.fault.silent(direction, done):
            return float("inf")
        return self.cycle + (self.latency if direction == "read" else self.write_latency)

    def _response(self, direction: str) -> int:
        done = self.bursts["read" if direction == "read" else "written"]
        return self.fault.response(done) if self.fault is not None else 0

    def idle(self) -> bool:
        return not (self.reads or self.writes or self.bresps)
