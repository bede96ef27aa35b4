"""Hardware blocks (PyRTL), one module per block, each built from its own parameters.

Blocks speak one vocabulary (:mod:`tcu_hw.blocks.stream`): ready/valid :class:`Stream`
ports over :class:`Struct` payloads, :class:`DramPort` and :class:`RamPort` interfaces, and
:func:`connect`, which checks directions and widths. The datapath: :mod:`.systolic_array`,
:mod:`.accumulator`, :mod:`.simd`, :mod:`.local_memory` (on :mod:`.ram`), :mod:`.fixed` (the
MAC) and :mod:`.lanes`; control: :mod:`.decoder`, :mod:`.compute`, :mod:`.dram_engine`,
:mod:`.config_registers`, :mod:`.sampler`; I/O: :mod:`.axi` (AXI4 master) and :mod:`.axis`
(the instruction stream). :mod:`tcu_hw.core` and :mod:`tcu_hw.top` compose them.
"""

from .stream import (SINK, SOURCE, ConnectError, DramPort, RamPort, RegFifo, Stream, Struct,
                     connect, queue)

__all__ = ["SINK", "SOURCE", "ConnectError", "DramPort", "RamPort", "RegFifo", "Stream",
           "Struct", "connect", "queue"]
