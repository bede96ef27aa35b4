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

Connect: ``attach(port)`` with a :class:`~tcu_hw.blocks.dram_engine.DramEngine` port
namespace. Outputs: ``idle`` (nothing queued or in progress), counters ``reads`` /
``writes`` (vectors).
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from tcu_hw.blocks.dram_engine import PORT_FROM_CORE, port_wires

CONFIG_FIELDS = ("latency", "cycles_per_vector", "stall_threshold", "seed")


class RingFifo:
    """A FIFO in a memory (cheap to simulate for deep queues): enq/deq with valid/ready."""

    def __init__(self, width: int, depth_bits: int, name: str) -> None:
        self.enq_valid = WireVector(1, f"{name}_enq_valid")
        self.enq_data = WireVector(width, f"{name}_enq_data")
        self.deq_ready = WireVector(1, f"{name}_deq_ready")
        mem = pyrtl.MemBlock(width, depth_bits, f"{name}_mem", asynchronous=True)
        head = Register(depth_bits, f"{name}_head")
        tail = Register(depth_bits, f"{name}_tail")
        count = Register(depth_bits + 1, f"{name}_count")
        self.enq_ready = count != (1 << depth_bits)
        self.deq_valid = count != 0
        self.deq_data = mem[head]
        enq = self.enq_valid & self.enq_ready
        deq = self.deq_valid & self.deq_ready
        mem[tail] <<= pyrtl.MemBlock.EnabledWrite(self.enq_data, enq)
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

        vars(self).update(port_wires(name, addr_bits, len_bits, width, PORT_FROM_CORE))

        requests = RingFifo(1 + addr_bits + len_bits + 32, outstanding_bits, f"{name}_requests")
        requests.enq_valid <<= self.req_valid & ~stall[0]
        requests.enq_data <<= pyrtl.concat(clock, self.req_len, self.req_addr, self.req_write)
        self.req_ready = requests.enq_ready & ~stall[0]
        wq = RingFifo(width, 4, f"{name}_wdata_q")
        wq.enq_valid <<= self.wdata_valid & ~stall[1]
        wq.enq_data <<= self.wdata
        self.wdata_ready = wq.enq_ready & ~stall[1]

        head = requests.deq_data
        h_write = head[0]
        h_addr = head[1:1 + addr_bits]
        h_len = head[1 + addr_bits:1 + addr_bits + len_bits]
        h_time = head[1 + addr_bits + len_bits:]
        index = Register(len_bits, f"{name}_index")
        wait = Register(16, f"{name}_wait")             # cycles until the next vector may go
        ready_time = (h_time + latency)[:32]
        arrived = (clock - ready_time)[31] == 0         # clock >= ready_time (mod 2^32)
        paced = wait == 0
        addr = (h_addr + index.zero_extended(addr_bits))[:addr_bits] \
            if len_bits <= addr_bits else (h_addr.zero_extended(len_bits) + index)[:addr_bits]
        go_read = requests.deq_valid & ~h_write & arrived & paced & ~stall[2]
        self.rdata_valid = go_read
        self.rdata = self.mem[addr]
        read_fire = go_read & self.rdata_ready
        go_write = requests.deq_valid & h_write & paced & wq.deq_valid
        self.mem[addr] <<= pyrtl.MemBlock.EnabledWrite(wq.deq_data, go_write)
        wq.deq_ready <<= go_write
        moved = read_fire | go_write
        done = moved & (index == h_len)
        requests.deq_ready <<= done
        index.next <<= pyrtl.select(done, Const(0, len_bits),
                                    pyrtl.select(moved, (index + 1)[:len_bits], index))
        per = per_vector[:16]
        wait.next <<= pyrtl.select(moved & (per > 1), (per - 1)[:16],
                                   pyrtl.select(paced, wait, (wait - 1)[:16]))
        self.idle = ~requests.deq_valid & ~wq.deq_valid
        reads = Register(32, f"{name}_reads")
        writes = Register(32, f"{name}_writes")
        reads.next <<= reads + read_fire
        writes.next <<= writes + go_write
        self.reads, self.writes = reads, writes

    def attach(self, port) -> None:
        """Connect to a DramEngine port namespace (req_*, rdata*, wdata*)."""
        from tcu_hw.blocks.dram_engine import connect_port
        connect_port(port, self)
