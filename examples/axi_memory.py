"""The AXI4 master converter against a memory, simulated with a waveform.

Imports one block, :class:`tcu_hw.blocks.axi.AxiMaster`: a 4-lane FP16BP8 vector (8 bytes)
on a 32-bit AXI bus is two beats. A small PyRTL controller asks the master to write 40
vectors from a ROM to DRAM vector 500 and to read them back into a RAM; the master turns each
request into INCR bursts (at most 256 beats, never across 4 KiB: vector 500 × 8 bytes starts
at byte 4000, so the first burst stops at 4096) and keeps the read behind the write. The
memory is :class:`sim.axi_model.AxiSlaveModel`, a Python AXI slave with read latency and
random stalls that fails on any protocol violation.

::

    ROM ─wdata─▶ ┌───────────┐ ─AW/W──▶ ┌──────────────┐
                 │ AxiMaster │          │ AXI slave    │  (Python, checks the protocol)
    RAM ◀─rdata─ └───────────┘ ◀─R/B─── └──────────────┘
    controller: write request, read request; data streams as the master accepts it

    python examples/axi_memory.py [--vcd axi.vcd] [--vectors 40]
"""

from __future__ import annotations

import argparse

import numpy as np
import pyrtl

from sim.axi_model import AxiSlaveModel
from sim.waves import memory_vectors, simulate_until
from tcu_hw import numeric
from tcu_hw.arch import Options, preset
from tcu_hw.blocks.axi import AXI_INPUTS, AXI_PORT_ORDER, AxiMaster
from tcu_hw.blocks.lanes import to_int

ARCH = preset("cmoda7")                 # 4 lanes, FP16BP8: 8-byte vectors
WIDTH = 32                              # AXI data bits: 2 beats per vector
BASE = 500                              # DRAM vector address of the transfer


def build(x: np.ndarray) -> tuple[pyrtl.Block, AxiMaster]:
    n, w = ARCH.array_size, ARCH.dtype.width
    m = len(x)
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        axi = AxiMaster(ARCH, Options(axi_data_width=WIDTH), addr_bits=16, len_bits=12)
        for sig, width in AXI_INPUTS.items():
            getattr(axi.axi, sig).__ilshift__(pyrtl.Input(width or WIDTH, f"in_{sig}"))
        abits = max(1, (m - 1).bit_length())
        rom = pyrtl.RomBlock(n * w, abits, [to_int(v, w) for v in x], name="source_rom",
                             asynchronous=True, pad_with_zeros=True)
        ram = pyrtl.MemBlock(n * w, abits, name="readback", asynchronous=True)
        step = pyrtl.Register(2, "ctl_step")            # 0: write req, 1: read req, 2: done
        sent = pyrtl.Register(abits + 1, "ctl_sent")
        got = pyrtl.Register(abits + 1, "ctl_got")
        axi.req_valid <<= step < 2
        axi.req_write <<= step == 0
        axi.req_addr <<= BASE
        axi.req_len <<= m - 1
        step.next <<= pyrtl.select((step < 2) & axi.req_ready, step + 1, step)
        axi.wdata_valid <<= sent < m
        axi.wdata <<= rom[sent[:abits]]
        sent.next <<= pyrtl.select((sent < m) & axi.wdata_ready, sent + 1, sent)
        axi.rdata_ready <<= 1
        ram[got[:abits]] <<= pyrtl.MemBlock.EnabledWrite(axi.rdata, axi.rdata_valid)
        got.next <<= pyrtl.select(axi.rdata_valid, got + 1, got)
        axi.offset <<= 0
        axi.cache <<= 0
        done = pyrtl.Output(1, "done")
        done <<= got == m
    return block, axi


def run(m: int = 40, vcd: str | None = None, seed: int = 0):
    """Simulate; returns (vectors read back, vectors written, memory image, cycles, bursts)."""
    n = ARCH.array_size
    x = np.random.default_rng(seed).integers(-2000, 2000, (m, n))
    block, axi = build(x)
    vb = ARCH.vector_bytes
    slave = AxiSlaveModel(1 << 14, WIDTH, latency=6, stall=0.25, seed=seed)
    outs = [s for s in AXI_PORT_ORDER if s not in AXI_INPUTS]
    sim, cycles = simulate_until(
        block, "done", 200 * m + 500, vcd=vcd,
        inputs=lambda: {f"in_{k}": v for k, v in slave.outputs().items()},
        observe=lambda sim: slave.sample({s: sim.inspect(getattr(axi.axi, s).name)
                                          for s in outs}))
    back = memory_vectors(sim, block, "readback", m, n, ARCH.dtype.width)
    image = numeric.decode_vectors(bytes(slave.mem[BASE * vb:(BASE + m) * vb]), ARCH.dtype, n)
    return back, x, image, cycles, dict(slave.bursts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vcd", help="write the waveform here")
    p.add_argument("--vectors", type=int, default=40)
    args = p.parse_args(argv)
    back, x, image, cycles, bursts = run(args.vectors, args.vcd)
    ok = np.array_equal(image, x) and np.array_equal(back, x)
    print(f"wrote and read back {args.vectors} vectors over a {WIDTH}-bit AXI4 bus in "
          f"{cycles} cycles: {bursts['write']} write and {bursts['read']} read burst(s), "
          f"no protocol violation; data intact: {ok}")
    if args.vcd:
        print(f"waveform: {args.vcd}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
