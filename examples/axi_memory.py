"""The AXI4 master converter against a memory, simulated with a waveform.

Imports one block, :class:`tcu_hw.blocks.axi.AxiMaster`, built from its own parameters:
vectors of 4 lanes of 16 bits (8 bytes) on a 32-bit AXI bus, two beats per vector. A small
PyRTL controller owns a :class:`tcu_hw.blocks.stream.DramPort` (core side) that
:func:`tcu_hw.blocks.stream.connect` joins to the master's ``core`` port (memory side) in one
call. Through it the controller asks the master to write 40 vectors from a ROM to DRAM vector
500 and to read them back into a RAM; the master turns each request into INCR bursts (at most
256 beats, never across 4 KiB: vector 500 × 8 bytes starts at byte 4000, so the first burst
stops at 4096) and keeps the read behind the write. The memory is
:class:`sim.axi_model.AxiSlaveModel`, a Python AXI slave with read latency and random stalls
that fails on any protocol violation; it reaches the master's AXI wires by Tensil's signal
names (:meth:`~tcu_hw.blocks.axi.AxiMaster.signals`).

::

    ROM ────── wdata ─▶ ┐ ctl            core ┌───────────┐ ─AW/W─▶ ┌──────────────┐
    controller ─ req ─▶ ├ ══ connect ═══════▶ │ AxiMaster │         │ AXI slave    │ (Python,
    RAM ◀───── rdata ── ┘ (DramPort)          └───────────┘ ◀─R/B── └──────────────┘  checks the
                                                                                    protocol)
    controller: write request, then read request; data streams as the master accepts it

    python examples/axi_memory.py [--vcd axi.vcd] [--vectors 40]
"""

from __future__ import annotations

import argparse

import numpy as np
import pyrtl

from sim.axi_model import AxiSlaveModel
from sim.waves import memory_vectors, simulate_until
from tcu_hw import numeric
from tcu_hw.blocks.axi import AXI_INPUTS, AxiMaster
from tcu_hw.blocks.lanes import to_int
from tcu_hw.blocks.stream import DramPort, connect

DT = numeric.data_type("FP16BP8")       # the lanes' values (16 bits each)
LANES = 4                               # 4 lanes: 8-byte vectors
WIDTH = 32                              # AXI data bits: 2 beats per vector
BASE = 500                              # DRAM vector address of the transfer
#: the master's parameters (core side: 16-bit vector addresses, up to 4096 vectors a request)
MASTER = dict(addr_bits=16, len_bits=12, lanes=LANES, lane_bits=DT.width, data_width=WIDTH)


def build(x: np.ndarray) -> tuple[pyrtl.Block, AxiMaster]:
    """The design: master + controller + ROM + read-back RAM; an Input ``in_<signal>`` per
    AXI signal the slave drives, output ``done``."""
    n, w = LANES, DT.width
    m = len(x)
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        axi = AxiMaster(**MASTER)
        for sig, wire in axi.signals().items():
            if sig in AXI_INPUTS:
                wire <<= pyrtl.Input(wire.bitwidth, f"in_{sig}")
        axi.offset <<= 0                                # DRAM base: byte 0
        axi.cache <<= 0

        ctl = DramPort(MASTER["addr_bits"], MASTER["len_bits"], n * w, "ctl", side="core")
        connect(ctl, axi.core)
        abits = max(1, (m - 1).bit_length())
        rom = pyrtl.RomBlock(n * w, abits, [to_int(v, w) for v in x], name="source_rom",
                             asynchronous=True, pad_with_zeros=True)
        ram = pyrtl.MemBlock(n * w, abits, name="readback", asynchronous=True)
        step = pyrtl.Register(2, "ctl_step")            # 0: write req, 1: read req, 2: done
        sent = pyrtl.Register(abits + 1, "ctl_sent")
        got = pyrtl.Register(abits + 1, "ctl_got")
        ctl.req.drive(step < 2, write=step == 0, addr=BASE, len=m - 1)
        step.next <<= pyrtl.select(ctl.req.fire, step + 1, step)
        ctl.wdata.drive(sent < m, data=rom[sent[:abits]])
        sent.next <<= pyrtl.select(ctl.wdata.fire, sent + 1, sent)
        ctl.rdata.ready <<= 1
        ram[got[:abits]] <<= pyrtl.MemBlock.EnabledWrite(ctl.rdata.payload.data,
                                                         ctl.rdata.fire)
        got.next <<= pyrtl.select(ctl.rdata.fire, got + 1, got)
        done = pyrtl.Output(1, "done")
        done <<= got == m
    return block, axi


def bus(axi: AxiMaster, slave: AxiSlaveModel):
    """``(inputs, observe)`` joining a Python slave to the simulated master: ``inputs()`` is
    the next cycle's ``in_<signal>`` values (what the slave presents), ``observe(sim)`` hands
    the master's outputs of the cycle just simulated to the slave."""
    outs = {sig: wire.name for sig, wire in axi.signals().items() if sig not in AXI_INPUTS}

    def inputs() -> dict:
        return {f"in_{sig}": v for sig, v in slave.outputs().items()}

    def observe(sim) -> None:
        slave.sample({sig: sim.inspect(name) for sig, name in outs.items()})
    return inputs, observe


def run(m: int = 40, vcd: str | None = None, seed: int = 0):
    """Simulate; returns (vectors read back, vectors written, memory image, cycles, bursts)."""
    x = np.random.default_rng(seed).integers(-2000, 2000, (m, LANES))
    block, axi = build(x)
    vb = LANES * DT.width // 8
    slave = AxiSlaveModel(1 << 14, WIDTH, latency=6, stall=0.25, seed=seed)
    inputs, observe = bus(axi, slave)
    sim, cycles = simulate_until(block, "done", 200 * m + 500, vcd=vcd, inputs=inputs,
                                 observe=observe)
    back = memory_vectors(sim, block, "readback", m, LANES, DT.width)
    image = numeric.decode_vectors(bytes(slave.mem[BASE * vb:(BASE + m) * vb]), DT, LANES)
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
