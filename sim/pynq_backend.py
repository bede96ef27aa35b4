"""The ``pynq`` backend of :class:`sim.driver.Driver`: a TCU bitstream on a PYNQ board.

Importing this module never needs ``pynq``; creating a :class:`PynqBackend` does (it runs on
the board, with the overlay that holds the TCU and an AXI DMA feeding its instruction
stream, wired as in ``constraints/README.md``).

What a run does (TCU.md §7):

1. DRAM0 (inputs, outputs, intermediates) and DRAM1 (constants) are contiguous buffers from
   ``pynq.allocate``, aligned to 64 KiB; the model's constants are copied into DRAM1 once per
   load, each input's vectors to its DRAM0 base.
2. The instruction stream is ``Configure`` DRAM0 and DRAM1 offsets (address >> 16) and the
   timeout, then (for ``load_consts_to_local`` models) DataMoves that copy the constants into
   local memory, the program, and the flush probe; NoOps pad it to whole stream words. The DMA
   sends it to ``instruction_*``.
3. The host polls DRAM0[depth-2] until it holds the pattern it put in DRAM0[depth-1]: every
   instruction before the probe has then completed. Outputs are read from their DRAM0 bases.
"""

from __future__ import annotations

import time

import numpy as np

from tcu_hw import numeric
from tcu_hw.arch import Architecture
from tcu_hw.errors import TcuError
from tcu_hw.isa import DRAM_OFFSET_SHIFT, ConfigRegister, Configure

from .model import (dram1_extent, gather, host_images, host_program, place_input,
                    probe_pattern)

ALIGN = 1 << DRAM_OFFSET_SHIFT      # a DRAM offset register counts 64 KiB units


class BoardError(TcuError):
    """The pynq backend is not available here, or the board did not complete a run."""


def _pynq():
    try:
        import pynq
    except ImportError:
        raise BoardError("the pynq backend runs on a PYNQ board with the TCU bitstream: "
                         "install the pynq package there (pip install pynq); use the "
                         "emulator, pyrtl or verilator backend elsewhere") from None
    return pynq


class _Region:
    """A 64 KiB-aligned window of a contiguous buffer: ``bytes`` view and device address."""

    def __init__(self, pynq, size: int) -> None:
        self.buffer = pynq.allocate(shape=(size + ALIGN,), dtype=np.uint8)
        base = int(self.buffer.device_address)
        skip = (-base) % ALIGN
        self.address = base + skip
        self.view = self.buffer[skip:skip + size]

    def flush(self) -> None:
        self.buffer.flush()

    def invalidate(self) -> None:
        self.buffer.invalidate()

    def free(self) -> None:
        self.buffer.freebuffer()


class PynqBackend:
    """See the module docstring. ``overlay``: a ``pynq.Overlay`` (or a path to the
    bitstream); ``dma``: the name of its AXI DMA; ``timeout``: the decoder timeout register;
    ``poll_seconds``: how long to wait for the flush probe; ``stream_bytes``: the instruction
    stream's data width in bytes (the generator's AXI width / 8)."""

    def __init__(self, arch: Architecture, overlay=None, dma: str = "axi_dma_0",
                 timeout: int = 100, poll_seconds: float = 10.0, stream_bytes: int = 8,
                 **_ignored) -> None:
        pynq = _pynq()
        self.pynq = pynq
        self.arch = arch
        if overlay is None or isinstance(overlay, str):
            if overlay is None:
                raise BoardError("the pynq backend needs overlay= (a pynq.Overlay or the "
                                 "path of the TCU bitstream)")
            overlay = pynq.Overlay(overlay)
        try:
            self.dma = getattr(overlay, dma)
        except AttributeError:
            raise BoardError(f"the overlay has no AXI DMA named {dma!r}") from None
        self.timeout = timeout
        self.poll_seconds = poll_seconds
        self.stream_bytes = stream_bytes
        self.vb = arch.vector_bytes
        self.dram0 = _Region(pynq, arch.dram0_depth * self.vb)
        self.dram1 = None
        self.model = None

    def _vectors(self, region: _Region, base: int, raw) -> None:
        blob = numeric.encode_vectors(np.asarray(raw).reshape(-1, self.arch.array_size),
                                      self.arch.dtype)
        region.view[base * self.vb:base * self.vb + len(blob)] = np.frombuffer(blob, np.uint8)

    def _read(self, region: _Region, base: int, count: int) -> np.ndarray:
        blob = region.view[base * self.vb:(base + count) * self.vb].tobytes()
        return numeric.decode_vectors(blob, self.arch.dtype, self.arch.array_size)

    def load(self, model) -> None:
        """Copy the model's constants to DRAM1 (a region as large as the program uses,
        :func:`sim.model.dram1_extent`) and their copies to DRAM0, and prepare its
        instruction stream."""
        dram0, dram1, _ = host_images(model, None, consts_to_local=False)
        size = max(dram1_extent(model), 1)      # the constants and the program's scratch
        if self.dram1 is not None:
            self.dram1.free()
        self.dram1 = _Region(self.pynq, size * self.vb)
        for region, images in ((self.dram0, dram0), (self.dram1, dram1)):
            for base, raw in images.items():
                self._vectors(region, base, raw)
            region.flush()
        lay = self.arch.layout
        head = [Configure(ConfigRegister.DRAM0_OFFSET, self.dram0.address >> DRAM_OFFSET_SHIFT),
                Configure(ConfigRegister.DRAM1_OFFSET, self.dram1.address >> DRAM_OFFSET_SHIFT),
                Configure(ConfigRegister.TIMEOUT, self.timeout)]
        data = lay.encode_program(host_program(model, head))
        data += bytes((-len(data)) % self.stream_bytes)
        self.stream = self.pynq.allocate(shape=(len(data),), dtype=np.uint8)
        self.stream[:] = np.frombuffer(data, np.uint8)
        self.stream.flush()
        self.model = model

    def run(self, raw_inputs: dict) -> tuple[dict, dict]:
        m, depth = self.model, self.arch.dram0_depth
        for name in m.input_names:
            placed, copies = place_input(m, name, raw_inputs[name])
            for region, writes in ((self.dram0, placed), (self.dram1, copies)):
                for base, chunk in writes:
                    self._vectors(region, base, chunk)
        pattern = np.frombuffer(probe_pattern(self.arch), np.uint8)
        self.dram0.view[(depth - 1) * self.vb:depth * self.vb] = pattern
        self.dram0.view[(depth - 2) * self.vb:(depth - 1) * self.vb] = 0
        self.dram0.flush()
        start = time.perf_counter()
        self.dma.sendchannel.transfer(self.stream)
        self.dma.sendchannel.wait()
        while True:
            self.dram0.invalidate()
            if np.array_equal(self.dram0.view[(depth - 2) * self.vb:(depth - 1) * self.vb],
                              pattern):
                break
            if time.perf_counter() - start > self.poll_seconds:
                raise BoardError(f"the TCU did not complete {m.name!r} within "
                                 f"{self.poll_seconds} s (flush probe never returned)")
            time.sleep(1e-4)
        seconds = time.perf_counter() - start
        outs = {name: gather(m, name, lambda b, c: self._read(self.dram0, b, c))
                for name in m.output_names}
        return outs, {"seconds": seconds}
