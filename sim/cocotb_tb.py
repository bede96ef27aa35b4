"""The cocotb testbench of a generated top: a host and its memory around the AXI4 adapter.

Runs inside the simulator (Icarus or Verilator), started by :func:`sim.cocotb_run.run_cocotb`
or ``python -m sim.cocotb_run``, or by any cocotb flow with
``COCOTB_TEST_MODULES=sim.cocotb_tb``, the adapter ``top_<arch>_axi4`` as the top level and
``TCU_COCOTB_CONFIG`` naming a :class:`sim.cocotb_run.RunConfig` JSON file
(:func:`sim.cocotb_run.export_run` writes all of it). What the one test, :func:`run_model`, does:

1. Memory: one cocotbext-axi memory shared by two ``AxiRam`` slaves, one per DRAM master, as
   on a board; DRAM0 and DRAM1 are 64 KiB-aligned regions in it
   (:func:`sim.cocotb_run.dram_addresses`). The model's inputs go to their DRAM0 bases, its
   constants to DRAM1, the flush probe's pattern to DRAM0[depth-1] (images built by
   :func:`sim.model.dram_image`, placement by :func:`sim.model.place`).
2. Instructions: an ``AxiStreamSource`` sends the host's stream as one frame (Configure of
   both DRAM offsets, the constants preload of ``load_consts_to_local`` models, the program,
   the flush probe: :func:`sim.model.host_program`), NoOps padding the last word.
3. Back-pressure: every channel of both RAMs (AW, W, B, AR, R) and the instruction stream get
   seeded random pause generators (:func:`pauses`).
4. Checks, every cycle: each AR and AW burst must be INCR, of the bus's beat size, inside its
   master's region and within one 4 KiB page (``AxiRam`` also checks WLAST); the run is hung
   when no handshake happens on any channel for ``stall_cycles`` cycles (the rule of the other
   simulators). It is done when DRAM0[depth-2] holds the pattern (TCU.md §7).
5. Verdict: every output, gathered from DRAM0 (:func:`sim.model.gather`), must equal the golden
   emulator's bit for bit (or the configuration's expected vectors), the top must be ``idle``
   soon after the probe and its ``error`` flag must be clear. The result, passed or not, is
   written to the configuration's ``result`` file (cycles, outputs, failures, AXI bursts and
   beats, status outputs).
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
import warnings

import numpy as np

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiBus, AxiRam, AxiStreamBus, AxiStreamFrame, AxiStreamSource
from cocotbext.axi.axi_channels import AxiARMonitor, AxiAWMonitor

from tcu_hw import numeric
from tcu_hw.isa import DRAM_OFFSET_SHIFT, ConfigRegister, Configure

from .cocotb_run import CONFIG_ENV, RunConfig, dram_addresses
from .model import dram_image, emulate, gather, host_images, host_program, probe_pattern

#: (valid, ready) of every AXI4 channel: a handshake on any of them is progress
HANDSHAKES = (("awvalid", "awready"), ("wvalid", "wready"), ("bvalid", "bready"),
              ("arvalid", "arready"), ("rvalid", "rready"))
#: AXI burst type INCR
INCR = 1
#: cycles the top may take after the flush probe to drain (write responses) and be idle
IDLE_CYCLES = 1000


def pauses(rng: random.Random, probability: float):
    """An endless pause pattern for a cocotbext-axi channel: each cycle paused with
    ``probability`` (seeded by ``rng``)."""
    while True:
        yield rng.random() < probability


class Region:
    """One DRAM region of the shared memory: checks the bursts of its master."""

    def __init__(self, name: str, address: int, size: int, beat_bytes: int) -> None:
        self.name, self.address, self.size, self.beat_bytes = name, address, size, beat_bytes
        self.bursts = {"read": 0, "write": 0}
        self.beats = {"read": 0, "write": 0}

    def check(self, kind: str, addr: int, length: int, size: int, burst: int) -> str | None:
        """None, or what is wrong with one burst."""
        self.bursts[kind] += 1
        ch = "AR" if kind == "read" else "AW"
        nbytes = (length + 1) * self.beat_bytes
        if burst != INCR:
            return f"{self.name} {ch} burst type {burst} is not INCR"
        if 1 << size != self.beat_bytes:
            return f"{self.name} {ch} size {size} does not match the {self.beat_bytes}-byte bus"
        if addr % self.beat_bytes:
            return f"{self.name} {ch} address {addr:#x} is not beat-aligned"
        if addr % 4096 + nbytes > 4096:
            return f"{self.name} {ch} burst at {addr:#x} ({nbytes} bytes) crosses 4 KiB"
        if not (self.address <= addr and addr + nbytes <= self.address + self.size):
            return (f"{self.name} {ch} burst at {addr:#x} ({nbytes} bytes) is outside its "
                    f"region [{self.address:#x}, {self.address + self.size:#x})")
        return None


def _mismatch(name: str, got: np.ndarray, want: np.ndarray, source: str) -> str | None:
    if got.shape == want.shape and np.array_equal(got, want):
        return None
    if got.shape != want.shape:
        return f"output {name}: shape {got.shape}, {source} has {want.shape}"
    bad = np.argwhere(got != want)
    v, lane = bad[0]
    return (f"output {name}: {len(bad)} of {got.size} values differ from {source} (first at "
            f"vector {v} lane {lane}: got {got[v, lane]}, expected {want[v, lane]})")


@cocotb.test()
async def run_model(dut):
    """Load the model, run it through AXI with random back-pressure, check the outputs."""
    log = logging.getLogger("cocotb.tcu")
    path = os.environ.get(CONFIG_ENV)
    assert path, (f"set {CONFIG_ENV} to a testbench configuration (python -m sim.cocotb_run "
                  f"writes one)")
    cfg = RunConfig.read(path)
    model = cfg.load_model()
    arch = model.arch
    vb, n = arch.vector_bytes, arch.array_size
    raw_inputs = dict(np.load(cfg.inputs))
    if cfg.expected:
        expected, source = dict(np.load(cfg.expected)), "the expected outputs"
    else:
        expected = emulate(model, raw_inputs, raw=True).outputs
        source = "the emulator"

    logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)   # per-burst logs
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="cocotbext")
    active = 0 if cfg.reset_active_low else 1
    dut.reset.value = active
    for name, value in cfg.tie.items():
        getattr(dut, name).value = value
    Clock(dut.clock, 10, unit="ns").start()

    # --------------------------------------------------------------- memory and masters
    a0, a1 = dram_addresses(arch, cfg.dram0_address, cfg.dram1_address)
    size0, size1 = arch.dram0_depth * vb, arch.dram1_depth * vb
    reset_kw = {"reset_active_level": bool(active)}
    buses = [AxiBus.from_prefix(dut, f"m_axi_dram{k}") for k in range(2)]
    rams = [AxiRam(buses[0], dut.clock, dut.reset, size=max(a0 + size0, a1 + size1), **reset_kw)]
    rams.append(AxiRam(buses[1], dut.clock, dut.reset, size=rams[0].size, mem=rams[0].mem,
                       **reset_kw))                                  # one memory, two ports
    beat_bytes = len(dut.m_axi_dram0_wdata) // 8
    regions = [Region("m_axi_dram0", a0, size0, beat_bytes),
               Region("m_axi_dram1", a1, size1, beat_bytes)]
    stream = AxiStreamSource(AxiStreamBus.from_prefix(dut, "instruction"), dut.clock, dut.reset,
                             **reset_kw)
    rng = random.Random(cfg.seed)
    stream.set_pause_generator(pauses(random.Random(rng.getrandbits(32)), cfg.feed_stall))
    for ram in rams:
        for channel in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
                        ram.read_if.ar_channel, ram.read_if.r_channel):
            channel.set_pause_generator(pauses(random.Random(rng.getrandbits(32)), cfg.stall))
    monitors = []                                 # every AR and AW burst, to check its rules
    for region, bus in zip(regions, buses):
        monitors += [(region, "read", "ar", AxiARMonitor(bus.read.ar, dut.clock, dut.reset,
                                                         **reset_kw)),
                     (region, "write", "aw", AxiAWMonitor(bus.write.aw, dut.clock, dut.reset,
                                                          **reset_kw))]

    # --------------------------------------------------------------- what a host does
    dram0, dram1, _ = host_images(model, raw_inputs, consts_to_local=False)
    rams[0].write(a0, bytes(dram_image(arch, arch.dram0_depth, dram0)))
    rams[0].write(a1, bytes(dram_image(arch, arch.dram1_depth, dram1)))
    pattern = probe_pattern(arch)
    probe_src, probe_dst = a0 + (arch.dram0_depth - 1) * vb, a0 + (arch.dram0_depth - 2) * vb
    rams[0].write(probe_src, pattern)
    head = [Configure(ConfigRegister.DRAM0_OFFSET, a0 >> DRAM_OFFSET_SHIFT),
            Configure(ConfigRegister.DRAM1_OFFSET, a1 >> DRAM_OFFSET_SHIFT)]
    data = arch.layout.encode_program(host_program(model, head))
    data += bytes((-len(data)) % beat_bytes)                                   # NoOps

    await ClockCycles(dut.clock, 4)
    dut.reset.value = 1 - active
    await RisingEdge(dut.clock)
    stream.send_nowait(AxiStreamFrame(data))

    # --------------------------------------------------------------- run to the probe
    # (what counts a handshake, valid, ready): the instruction stream, then every AXI channel
    handshakes = [("instruction", dut.instruction_tvalid, dut.instruction_tready)]
    for region in regions:
        for v, r in HANDSHAKES:
            kind = {"rvalid": "read", "wvalid": "write"}.get(v)
            handshakes.append(((region, kind) if kind else None, getattr(dut, f"{region.name}_{v}"),
                               getattr(dut, f"{region.name}_{r}")))
    failures: list[str] = []
    cycles, quiet, fed, completed = 0, 0, 0, False
    started = time.perf_counter()
    edge = RisingEdge(dut.clock)
    while True:
        await edge
        cycles += 1
        moved = False
        for counter, valid, ready in handshakes:
            if valid.value == 1 and ready.value == 1:
                moved = True
                if counter == "instruction":
                    fed += beat_bytes
                elif counter is not None:
                    counter[0].beats[counter[1]] += 1
        for region, kind, p, monitor in monitors:
            while not monitor.empty():
                t = monitor.recv_nowait()
                bad = region.check(kind, int(getattr(t, f"{p}addr")), int(getattr(t, f"{p}len")),
                                   int(getattr(t, f"{p}size")), int(getattr(t, f"{p}burst")))
                if bad:
                    failures.append(f"AXI rule broken at cycle {cycles}: {bad}")
        if failures:
            break
        quiet = 0 if moved else quiet + 1
        if fed >= len(data) and rams[0].read(probe_dst, vb) == pattern:
            completed = True                                           # TCU.md §7
            break
        if quiet >= cfg.stall_cycles or (cfg.max_cycles and cycles >= cfg.max_cycles):
            why = (f"nothing moved for {quiet:,} cycles" if quiet >= cfg.stall_cycles
                   else f"the flush probe did not complete in {cfg.max_cycles:,} cycles")
            failures.append(f"the top stopped: {why} at cycle {cycles:,} ({fed} of "
                            f"{len(data)} instruction bytes fed)")
            break
    seconds = time.perf_counter() - started
    if completed and "idle" in cfg.status:          # the probe's write response may be pending
        for _ in range(IDLE_CYCLES):
            if dut.idle.value == 1:
                break
            await edge
        else:
            failures.append(f"the top was not idle {IDLE_CYCLES:,} cycles after the flush "
                            f"probe completed")

    # --------------------------------------------------------------- verdict
    def read0(base: int, count: int) -> np.ndarray:
        return numeric.decode_vectors(rams[0].read(a0 + base * vb, count * vb), arch.dtype, n)

    outputs = {name: gather(model, name, read0) for name in model.output_names}
    flags = {name: int(getattr(dut, name).value) for name in cfg.status}
    if not completed and flags:
        failures[-1] += "; status " + ", ".join(f"{k} {v}" for k, v in flags.items())
    if completed:
        for name in model.output_names:
            want = np.asarray(expected[name]).reshape(-1, n) if name in expected else None
            bad = f"output {name}: not in {source}" if want is None else \
                _mismatch(name, outputs[name], want, source)
            if bad:
                failures.append(bad)
        if flags.get("error"):
            failures.append("the top raised its error flag")
    stats = {"cycles": cycles, "completed": completed, "sim_seconds": seconds, "status": flags,
             "cycles_per_second": cycles / max(seconds, 1e-9),
             "instruction_bytes": len(data), "axi_data_width": beat_bytes * 8,
             "dram0_address": a0, "dram1_address": a1, "stall": cfg.stall,
             "feed_stall": cfg.feed_stall, "seed": cfg.seed,
             **{f"dram{k}": {"read_bursts": r.bursts["read"], "write_bursts": r.bursts["write"],
                             "read_beats": r.beats["read"], "write_beats": r.beats["write"]}
                for k, r in enumerate(regions)}}
    result = {"failures": failures, "cycles": None if failures else cycles, "stats": stats,
              "outputs": {k: v.tolist() for k, v in outputs.items()},
              "expected": {k: np.asarray(v).tolist() for k, v in expected.items()},
              "checked_against": source}
    with open(cfg.result, "w") as f:
        json.dump(result, f, default=int)
    log.info("%s after %d cycles (%.0f cycles/s)", "PASS" if not failures else "FAIL", cycles,
             stats["cycles_per_second"])
    assert not failures, "; ".join(failures)
