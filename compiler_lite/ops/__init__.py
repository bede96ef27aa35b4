"""ONNX operators, one module per family; importing this package registers them all."""

from . import elementwise, linear, pool, resize, shape  # noqa: F401
