"""The operator registry: which ONNX ops the compiler lowers, each with a checker.

A checker returns every reason a node cannot be compiled (empty when it can), so that
:func:`check_graph` reports all unsupported nodes of a model in one error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tcu_hw.errors import CompileError

from .frontend import Graph, Node


@dataclass(frozen=True)
class OpSpec:
    lower: Callable
    check: Callable | None = None
    needs_lut: bool = False


OPS: dict[str, OpSpec] = {}


def op(*names: str, check: Callable | None = None, needs_lut: bool = False):
    """Register a lowering function for the ONNX ops ``names``."""
    def deco(fn):
        for name in names:
            OPS[name] = OpSpec(fn, check, needs_lut)
        return fn
    return deco


def check_graph(g: Graph, arch) -> None:
    """Raise one :class:`CompileError` listing every node the compiler cannot lower."""
    from . import ops  # noqa: F401 - registers the operators

    problems = []
    for node in g.nodes:
        spec = OPS.get(node.op) if node.domain in ("", "ai.onnx") else None
        if spec is None:
            where = f" from domain '{node.domain}'" if node.domain not in ("", "ai.onnx") else ""
            problems.append(f"{node.label}: operator{where} not supported")
            continue
        dynamic = [o for o in node.outputs if o and o not in g.shapes]
        if dynamic:
            problems.append(f"{node.label}: the shape of its output '{dynamic[0]}' is not "
                            f"static after shape inference")
            continue
        if spec.needs_lut and arch.lut_count < 1:
            hint = ""
            if any(o in g.outputs for o in node.outputs) and node.inputs:
                hint = f"; or stop before it with -o '{node.inputs[0]}'"
            problems.append(f"{node.label}: needs lookup tables: the architecture must have "
                            f"lut_count ≥ 1 and lut_depth ≥ 2 (it has lut_count "
                            f"{arch.lut_count}){hint}")
            continue
        reasons = spec.check(node, g, arch) if spec.check else []
        problems.extend(f"{node.label}: {r}" for r in reasons)
    if problems:
        supported = ", ".join(sorted(OPS))
        raise CompileError(f"{g.source}: {len(problems)} node(s) cannot be compiled:\n  "
                           + "\n  ".join(problems)
                           + f"\nsupported operators: {supported}")


def consts_of(node: Node, g: Graph, first: int = 1) -> list[str]:
    """Reasons for inputs from ``first`` on that are computed but must be constant."""
    return [f"input {k} ('{name}') must be a constant (it is computed by the model)"
            for k, name in enumerate(node.inputs) if k >= first and name and
            not g.is_const(name)]
