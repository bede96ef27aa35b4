"""The operator registry: which ONNX ops the compiler lowers, each with a checker.

The modules of :mod:`compiler_lite.ops` fill :data:`OPS` with :func:`op` when imported. A
checker returns every reason a node cannot be compiled (empty when it can), so that
:func:`compiler_lite.lower.check_graph` reports all unsupported nodes of a model in one error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .frontend import Graph, Node


@dataclass(frozen=True)
class OpSpec:
    lower: Callable
    check: Callable | None = None
    needs_lut: bool = False
    domain: str = ""


OPS: dict[str, OpSpec] = {}


def op(*names: str, check: Callable | None = None, needs_lut: bool = False,
       domain: str = ""):
    """Register a lowering function for the ONNX ops ``names`` (``domain`` "tcu": the
    integer operators :mod:`compiler_lite.quant` makes, not a model's own)."""
    def deco(fn):
        for name in names:
            OPS[name] = OpSpec(fn, check, needs_lut, domain)
        return fn
    return deco


def model_operators() -> list[str]:
    """The ONNX operators a model may use, sorted (the integer path's own left out)."""
    return sorted(k for k, spec in OPS.items() if not spec.domain)


def consts_of(node: Node, g: Graph, first: int = 1) -> list[str]:
    """Reasons for inputs from ``first`` on that are computed but must be constant."""
    return [f"input {k} ('{name}') must be a constant (it is computed by the model)"
            for k, name in enumerate(node.inputs) if k >= first and name and
            not g.is_const(name)]
