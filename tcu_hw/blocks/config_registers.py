"""Configuration registers (TCU.md §4.7), the program counter, timeout and tracepoint flags.

Written by Configure instructions: ``value`` (28 bits) goes to register ``register``; widths
and reset values are :data:`tcu_hw.isa.CONFIG_REGISTER_SPEC` (the timeout's reset value is the
``decoder_timeout`` option). Unknown register numbers are ignored.

- ``pc`` counts dispatched instructions; Configure 0xA sets it (and does not also count).
- ``timeout`` is high while the decoder has held an instruction it could not dispatch for at
  least ``timeout_cycles`` consecutive cycles. :meth:`ConfigRegisters.watch` builds the same
  watchdog for any other wait (the top watches each DRAM port's slave and the instruction
  stream with it, so a slave that never answers or a stream cut mid-instruction also raises
  the top's ``timeout``).
- ``tracepoint_hit`` is high while ``pc == tracepoint``.
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import CONFIG_REGISTER_SPEC, CONFIG_VALUE_BITS, ConfigRegister
from .stream import SINK, Stream, Struct, named


class ConfigRegisters:
    """The Configure registers with the program counter and the timeout/tracepoint flags.

    Args:
        decoder_timeout: reset value of the timeout register (cycles).
        name: prefix of the wires and registers.

    Ports:
        write: :class:`~tcu_hw.blocks.stream.Stream` sink, always ready: ``register`` (4),
            ``value`` (28): a Configure.
        dispatched: input (1): an instruction left the decoder this cycle (counts the PC).
        stalled: input (1): the decoder holds an instruction it cannot dispatch.
        dram0_offset, dram1_offset: outputs (32).
        dram0_cache, dram1_cache: outputs (4).
        timeout_cycles: output (16), the timeout register.
        tracepoint: output (32).
        pc: output (32), the program counter.
        sample_interval: output (16).
        timeout: output (1), the decoder has stalled for ``timeout_cycles`` or more.
        tracepoint_hit: output (1), ``pc == tracepoint``.

    Latency: a write at cycle t shows on the outputs at t+1; ``timeout`` (and a
    :meth:`watch` flag) is high in a waiting cycle that follows ``timeout_cycles`` (or more)
    consecutive waiting cycles — from the (``timeout_cycles`` + 1)-th on — and low in the
    first cycle without the wait.
    """

    def __init__(self, decoder_timeout: int = 100, name: str = "cfg") -> None:
        self.write = Stream(Struct(register=4, value=CONFIG_VALUE_BITS), f"{name}_write", SINK,
                            always_ready=True)
        self.dispatched = WireVector(1, f"{name}_dispatched")
        self.stalled = WireVector(1, f"{name}_stalled")
        w = self.write.payload
        regs = {}
        for reg, (width, reset) in CONFIG_REGISTER_SPEC.items():
            if reg == ConfigRegister.TIMEOUT:
                reset = decoder_timeout
            r = Register(width, f"{name}_{reg.label}_q", reset_value=reset)
            hit = self.write.valid & (w.register == int(reg))
            v = w.value.zero_extended(max(width, CONFIG_VALUE_BITS))[:width]
            if reg == ConfigRegister.PROGRAM_COUNTER:
                r.next <<= pyrtl.select(hit, v, (r + self.dispatched)[:width])
            else:
                r.next <<= pyrtl.select(hit, v, r)
            regs[reg] = r
            label = {ConfigRegister.TIMEOUT: "timeout_cycles",
                     ConfigRegister.PROGRAM_COUNTER: "pc"}.get(reg, reg.label)
            setattr(self, label, named(r, f"{name}_{label}"))
        self._name = name
        self.timeout = self.watch(self.stalled, "timeout")
        self.tracepoint_hit = named(regs[ConfigRegister.PROGRAM_COUNTER] ==
                                    regs[ConfigRegister.TRACEPOINT], f"{name}_tracepoint_hit")

    def watch(self, waiting: WireVector, label: str) -> WireVector:
        """A flag that is high in a cycle with ``waiting`` (1) high that follows at least
        ``timeout_cycles`` consecutive waiting cycles: a 16-bit saturating count of the
        current run of waiting cycles, cleared in any cycle without it. Named
        ``<name>_<label>``."""
        waited = Register(16, f"{self._name}_{label}_waited")
        full = waited == 0xFFFF
        waited.next <<= pyrtl.select(waiting, pyrtl.select(full, waited, (waited + 1)[:16]),
                                     Const(0, 16))
        return named(waiting & (waited >= self.timeout_cycles), f"{self._name}_{label}")
