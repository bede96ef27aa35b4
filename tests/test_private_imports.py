"""No module uses another module's private (``_name``) definitions, by import or by attribute:
what two modules share is public (shared command-line types live in :mod:`tcu_hw.cli`; the
only uses of PyRTL internals are in :mod:`tcu_hw.pyrtl_compat`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("tcu_hw", "sim", "compiler_lite", "bench", "examples", "docs", "tests")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_repo_module(dotted: str) -> bool:
    rel = Path(*dotted.split("."))
    return (ROOT / f"{rel}.py").is_file() or (ROOT / rel / "__init__.py").is_file()


def _package(rel: Path, level: int) -> str:
    parts = list(rel.parent.parts)
    return ".".join(parts[:len(parts) - (level - 1)] if level > 1 else parts)


def private_uses(source: str, rel: Path) -> set[tuple[str, str, str]]:
    """``(file, module, name)`` for every ``from module import _name`` and every
    ``module._name`` where ``module`` is one of this repository's modules bound by an
    import, in the source of the file at ``rel`` (relative to the repository)."""
    where = rel.as_posix()
    tree = ast.parse(source)
    found, modules = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            module = "." * node.level + (node.module or "")
            base = (_package(rel, node.level) + ("." + node.module if node.module else "")
                    if node.level else node.module or "")
            for a in node.names:
                if _is_private(a.name):
                    found.add((where, module, a.name))
                elif _is_repo_module(f"{base}.{a.name}"):
                    modules[a.asname or a.name] = f"{base}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _is_repo_module(a.name):
                    modules[a.asname or a.name.split(".")[0]] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _is_private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            found.add((where, modules[node.value.id], node.attr))
    return found


def test_no_private_names_used_across_modules():
    found = set()
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found |= private_uses(path.read_text(), path.relative_to(ROOT))
    assert not found, f"private names used across modules: {sorted(found)}"


def test_the_check_sees_imports_and_attribute_uses():
    code = ("from tcu_hw import isa\nimport sim.run as r\nfrom .blocks import stream\n"
            "from tcu_hw.gen import _bool\nx = isa._mask\ny = r._window\nz = stream._x\n"
            "ok = isa.Layout, r.main, self._private\n")
    found = {(m, n) for _, m, n in private_uses(code, Path("tcu_hw/probe.py"))}
    assert found == {("tcu_hw.gen", "_bool"), ("tcu_hw.isa", "_mask"), ("sim.run", "_window"),
                     ("tcu_hw.blocks.stream", "_x")}
