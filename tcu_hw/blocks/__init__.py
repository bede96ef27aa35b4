"""Hardware blocks (PyRTL), one module per block. Built by the hardware-core issue."""
