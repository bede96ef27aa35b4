"""Built-in `.tarch` presets (Tensil's six boards); see :data:`tcu_hw.arch.PRESETS`."""
