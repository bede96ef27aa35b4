"""sim: the golden emulator (:mod:`sim.emulator`, CLI :mod:`sim.emulate`), model placement
(:mod:`sim.model`), the PyRTL core with DRAM models (:mod:`sim.pyrtl_backend` on
:mod:`sim.pyrtl_sim`), the generated Verilog under Verilator (:mod:`sim.verilator_backend`),
the host driver for every backend (:mod:`sim.driver`), and the commands :mod:`sim.run` and
:mod:`sim.check`."""
