"""sim: the golden emulator (:mod:`sim.emulator`, CLI :mod:`sim.emulate`), model placement
(:mod:`sim.model`) and, later, the PyRTL and Verilator runners."""
