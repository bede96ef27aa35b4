"""ONNX operators, one module per family; importing this package registers them all."""

from . import elementwise, integer, linear, lut, pool, resize, shape, softmax  # noqa: F401
