"""Built-in `.tarch` presets (Tensil's six boards and integer variants of two of them); see
:data:`tcu_hw.arch.PRESETS`."""
