"""Configuration registers (TCU.md §4.7), the program counter, timeout and tracepoint flags.

Written by Configure instructions: ``value`` (28 bits) goes to register ``register``; widths
and reset values are :data:`tcu_hw.isa.CONFIG_REGISTER_SPEC` (the timeout's reset value is the
``decoder_timeout`` option). Unknown register numbers are ignored.

- ``pc`` counts dispatched instructions; Configure 0xA sets it (and does not also count).
- ``timeout`` is high while the decoder has held an instruction it could not dispatch for at
  least ``timeout_cycles`` consecutive cycles.
- ``tracepoint_hit`` is high while ``pc == tracepoint``.

Inputs (``name_`` prefix): ``write`` (1), ``register`` (4), ``value`` (28), ``dispatched``
(1), ``stalled`` (1). Outputs: one wire per register (``dram0_offset`` …
``sample_interval``, widths from the spec), ``pc`` (32), ``timeout_cycles``, ``timeout``,
``tracepoint_hit``. Latency: a write at cycle t shows on the outputs at t+1.
"""

from __future__ import annotations

import pyrtl
from pyrtl import Const, Register, WireVector

from ..isa import CONFIG_REGISTER_SPEC, CONFIG_VALUE_BITS, ConfigRegister
from .stream import name_ports


class ConfigRegisters:
    def __init__(self, decoder_timeout: int = 100, name: str = "cfg") -> None:
        self.write = WireVector(1, f"{name}_write")
        self.register = WireVector(4, f"{name}_register")
        self.value = WireVector(CONFIG_VALUE_BITS, f"{name}_value")
        self.dispatched = WireVector(1, f"{name}_dispatched")
        self.stalled = WireVector(1, f"{name}_stalled")
        for reg, (width, reset) in CONFIG_REGISTER_SPEC.items():
            if reg == ConfigRegister.TIMEOUT:
                reset = decoder_timeout
            r = Register(width, f"{name}_{reg.label}", reset_value=reset)
            hit = self.write & (self.register == int(reg))
            v = self.value.zero_extended(max(width, CONFIG_VALUE_BITS))[:width]
            if reg == ConfigRegister.PROGRAM_COUNTER:
                r.next <<= pyrtl.select(hit, v, (r + self.dispatched)[:width])
                self.pc = r
            else:
                r.next <<= pyrtl.select(hit, v, r)
            setattr(self, reg.label, r)
        self.timeout_cycles = self.timeout
        waited = Register(16, f"{name}_waited")
        full = waited == 0xFFFF
        waited.next <<= pyrtl.select(self.stalled, pyrtl.select(full, waited, (waited + 1)[:16]),
                                     Const(0, 16))
        self.timeout = WireVector(1, f"{name}_timeout_flag")
        self.timeout <<= self.stalled & (waited >= self.timeout_cycles)
        self.tracepoint_hit = WireVector(1, f"{name}_tracepoint_hit")
        self.tracepoint_hit <<= self.pc == self.tracepoint
        name_ports(self, name)
