"""compiler_lite: ONNX models to TCU programs (`.tprog`, `.tdata`, `.tmodel`) and golden vectors.

:func:`compiler_lite.compile.compile_model` loads a model with static shapes
(:mod:`.frontend`), lowers its nodes to layers on buffers (:mod:`.lower`, one module per op
family in :mod:`.ops`), gives every buffer a home (:mod:`.plan`), cuts each layer into
partitions and emits their instructions (:mod:`.partition`, :mod:`.emit`); golden outputs come
from :mod:`sim.emulator` (:mod:`.golden`). Widths, encoding and numbers come from
:mod:`tcu_hw`; ``python -m compiler_lite`` is the command line.
"""
