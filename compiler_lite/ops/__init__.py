"""ONNX operators, one module per family; importing this package registers them all."""

from . import (elementwise, integer, linear, lut, pool, qnorm, qproduct,  # noqa: F401
               qsoftmax, qtable, resize, shape, softmax)
