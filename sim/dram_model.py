"""A DRAM model in PyRTL for the core's vector-level DRAM ports (testbench, not hardware).

Serves requests in order from a queue of ``outstanding`` entries. A read request's first
vector is available ``latency`` cycles after the request was accepted (so several queued
requests overlap their latencies); vectors then flow at one per ``cycles_per_vector`` cycles.
A write request takes its vectors from a write-data queue that may fill before the request
arrives. Optional random back-pressure (an LFSR compared with ``stall_threshold`` out of
65536) withholds read data, write-data acceptance and request acceptance at random cycles;
it changes timing, never results.

Latency, bandwidth and back-pressure are read from a small configuration memory at run time
(``<name>_config``: [latency, cycles_per_vector, stall_threshold, seed]), so one compiled
simulator serves every setting. The contents live in ``<name>_mem`` (one vector per entry,
lane i at bits [i·W, (i+1)·W)).

Connect: ``connect(core.dram0, model.port)``: ``port`` is a
:class:`~tcu_hw.blocks.stream.DramPort` (memory side). Outputs: ``idle`` (nothing queued or
in progress), counters ``reads`` / ``writes`` (vectors).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from tcu_hw.blocks.stream import SINK, SOURCE, DramPort, Stream, Struct, named

CONFIG_FIELDS = ("latency", "cycles_per_vector", "stall_threshold", "seed")


class MemFifo:
    """A FIFO in a memory (cheap to simulate for deep queues) of 2^depth_bits entries of
    ``payload`` (a Struct or a width): ``enq`` (sink) and ``deq`` (source) streams."""

    def __init__(self, payload, depth_bits: int, name: str) -> None:
        self.enq = Stream(payload, f"{name}_enq", SINK)
        self.deq = Stream(payload, f"{name}_deq", SOURCE)
        width = self.enq.fields.width
        mem = pyrtl.MemBlock(width, depth_bits, f"{name}_mem", asynchronous=True)
        head = Register(depth_bits, f"{name}_head")
        tail = Register(depth_bits, f"{name}_tail")
        count = Register(depth_bits + 1, f"{name}_count")
        self.enq.ready <<= count != (1 << depth_bits)
        self.deq.drive(count != 0, mem[head])
        enq, deq = self.enq.fire, self.deq.fire
        mem[tail] <<= pyrtl.MemBlock.EnabledWrite(self.enq.data, enq)
        tail.next <<= pyrtl.select(enq, (tail + 1)[:depth_bits], tail)
        head.next <<= pyrtl.select(deq, (head + 1)[:depth_bits], head)
        count.next <<= (count + enq - deq)[:depth_bits + 1]


class DramModel:
    def __init__(self, addr_bits: int, width: int, len_bits: int, name: str,
                 outstanding_bits: int = 4, clock: WireVector | None = None) -> None:
        self.name = name
        self.mem = pyrtl.MemBlock(width, addr_bits, f"{name}_mem", asynchronous=True)
        config = pyrtl.MemBlock(32, 2, f"{name}_config", asynchronous=True, max_read_ports=4)
        latency, per_vector, threshold, seed = (config[Const(i, 2)] for i in range(4))
        if clock is None:
            clock = Register(32, f"{name}_clock")
            clock.next <<= clock + 1
        # random back-pressure: a 16-bit Galois LFSR seeded from the config memory
        lfsr = Register(16, f"{name}_lfsr")
        started = Register(1, f"{name}_started")
        started.next <<= 1
        shifted = lfsr[1:].zero_extended(16)
        step = pyrtl.select(lfsr[0], shifted ^ Const(0xB400, 16), shifted)
        lfsr.next <<= pyrtl.select(started, step[:16], seed[:16] | Const(1, 16))
        # three rotations of the LFSR: requests, write data and read data stall independently
        rnd = [lfsr] + [pyrtl.concat(lfsr[:k], lfsr[k:]) for k in (5, 10)]
        stall = [(r < threshold[:16]) for r in rnd]

        self.port = p = DramPort(addr_bits, len_bits, width, name, side="memory")
        req = p.req
        requests = MemFifo(Struct(write=1, addr=addr_bits, len=len_bits, time=32),
                            outstanding_bits, f"{name}_requests")
        requests.enq.drive(req.valid & ~stall[0], write=req.payload.write,
                           addr=req.payload.addr, len=req.payload.len, time=clock)
        req.ready <<= requests.enq.ready & ~stall[0]
        wq = MemFifo(width, 4, f"{name}_wdata_q")
        wq.enq.drive(p.wdata.valid & ~stall[1], data=p.wdata.payload.data)
        p.wdata.ready <<= wq.enq.ready & ~stall[1]

        head = requests.deq.payload
        h_write, h_addr, h_len, h_time = head.write, head.addr, head.len, head.time
        index = Register(len_bits, f"{name}_index")
        wait = Register(16, f"{name}_wait")             # cycles until the next vector may go
        ready_time = (h_time + latency)[:32]
        arrived = (clock - ready_time)[31] == 0         # clock >= ready_time (mod 2^32)
        paced = wait == 0
        addr = (h_addr + index.zero_extended(addr_bits))[:addr_bits] \
            if len_bits <= addr_bits else (h_addr.zero_extended(len_bits) + index)[:addr_bits]
        go_read = requests.deq.valid & ~h_write & arrived & paced & ~stall[2]
        p.rdata.drive(go_read, data=self.mem[addr])
        read_fire = p.rdata.fire
        go_write = requests.deq.valid & h_write & paced & wq.deq.valid
        self.mem[addr] <<= pyrtl.MemBlock.EnabledWrite(wq.deq.payload.data, go_write)
        wq.deq.ready <<= go_write
        moved = read_fire | go_write
        done = moved & (index == h_len)
        requests.deq.ready <<= done
        index.next <<= pyrtl.select(done, Const(0, len_bits),
                                    pyrtl.select(moved, (index + 1)[:len_bits], index))
        per = per_vector[:16]
        wait.next <<= pyrtl.select(moved & (per > 1), (per - 1)[:16],
                                   pyrtl.select(paced, wait, (wait - 1)[:16]))
        self.idle = named(~requests.deq.valid & ~wq.deq.valid, f"{name}_idle")
        p.writes_done <<= self.idle                     # (conservative: reads count too)
        reads = Register(32, f"{name}_reads")
        writes = Register(32, f"{name}_writes")
        reads.next <<= reads + read_fire
        writes.next <<= writes + go_write
        self.reads = named(reads, f"{name}_read_count")
        self.writes = named(writes, f"{name}_write_count")
