"""The packages import one way: no import cycles, not even through an import inside a
function (those are for optional dependencies and command-line entry points, never to dodge
a cycle), and the layers point one way (contract ← hardware ← tools, ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tcu_hw", "sim", "compiler_lite")
#: the contract layer: no PyRTL, no simulator, no compiler
CONTRACT = ("tcu_hw.arch", "tcu_hw.numeric", "tcu_hw.isa", "tcu_hw.asm", "tcu_hw.alu",
            "tcu_hw.artifacts", "tcu_hw.files", "tcu_hw.errors")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    if not level:
        return name or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def module_imports(function_level: bool = False) -> dict[str, set[str]]:
    """{module: modules of this repository it imports at module level} (``if
    TYPE_CHECKING:`` blocks excluded; with ``function_level``, imports anywhere)."""
    graph: dict[str, set[str]] = {}
    modules = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            modules[_module_name(path)] = path
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text())
        nodes = _everywhere(tree) if function_level else _top_level(tree.body)
        found = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != module:
                    found.add(t)
        graph[module] = found
    return graph


def _type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _everywhere(tree):
    """Every node, except under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if _type_checking(node):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _top_level(body):
    for node in body:
        if _type_checking(node):
            continue
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            for part in (node.body, getattr(node, "orelse", []),
                         *[h.body for h in getattr(node, "handlers", [])]):
                yield from _top_level(part)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if state.get(d) is None:
                found = visit(d)
                if found:
                    return found
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(graph):
        if state.get(m) is None:
            found = visit(m)
            if found:
                return found
    return None


@pytest.mark.parametrize("function_level", [False, True])
def test_no_import_cycles(function_level):
    cycle = _cycle(module_imports(function_level))
    assert cycle is None, "import cycle: " + " → ".join(cycle)


@pytest.mark.parametrize("module", CONTRACT)
def test_the_contract_layer_needs_no_hardware_or_tools(module):
    graph = module_imports(function_level=True)
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += graph.get(m, ())
    hardware_or_tools = ("tcu_hw.blocks", "tcu_hw.core", "tcu_hw.top", "tcu_hw.verilog", "sim",
                         "compiler_lite")
    bad = sorted(m for m in seen if m.startswith(hardware_or_tools))
    assert not bad, f"{module} reaches {bad}"
