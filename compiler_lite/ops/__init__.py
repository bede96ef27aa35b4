"""ONNX operators, one module per family; importing this package registers them all."""

from . import (elementwise, integer, linear, lut, pool, qtable, resize, shape,  # noqa: F401
               softmax)
