"""compiler_lite: ONNX models to TCU programs (`.tprog`, `.tdata`, `.tmodel`) and golden vectors.

Not built yet (see the compiler issue); it will use :mod:`tcu_hw` for the layout, encoding and
numbers and :mod:`sim.emulator` for golden vectors.
"""
