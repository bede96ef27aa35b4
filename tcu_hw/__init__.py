"""tcu_hw: a tensor compute unit generator on PyRTL, bit-compatible with Tensil.

The contract layer (no PyRTL): :mod:`tcu_hw.arch` (architectures and options),
:mod:`tcu_hw.numeric` (fixed-point arithmetic), :mod:`tcu_hw.isa` (instruction layout and
encoding), :mod:`tcu_hw.asm` (assembly text), :mod:`tcu_hw.alu` (SIMD semantics) and
:mod:`tcu_hw.artifacts` (files). Hardware blocks live in :mod:`tcu_hw.blocks`.
"""

__version__ = "0.1.0"
