"""tcu_hw.pyrtl_compat: every private PyRTL hook is in the installed PyRTL as declared, a
missing or changed hook gives one clear error, and nothing else touches PyRTL's internals."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pyrtl
import pytest
from packaging.specifiers import SpecifierSet

from tcu_hw import pyrtl_compat as compat
from tcu_hw.pyrtl_compat import HOOKS, PyrtlVersionError

ROOT = Path(__file__).resolve().parents[2]
CS = pyrtl.CompiledSimulation


@pytest.mark.parametrize("hook", HOOKS, ids=str)
def test_hook_is_in_the_installed_pyrtl(hook):
    compat.check([hook])


def test_array_simulation_overrides_exactly_the_declared_hooks():
    from sim.pyrtl_sim import ArraySimulation
    compat.check_compiled_simulation(ArraySimulation)
    overrides = {h.name for h in HOOKS if h.kind == "override"}
    assert overrides == {"_declare_mem_helpers", "_declare_mems", "_build_mem_read",
                         "_create_dll"}


def test_reset_name_counters_restarts_names():
    names = []
    for _ in range(2):
        compat.reset_name_counters()
        with pyrtl.set_working_block(pyrtl.Block()):
            names.append((pyrtl.WireVector(4).name, pyrtl.Const(3).name,
                          pyrtl.MemBlock(4, 2).name))
    assert names[0] == names[1]


def test_missing_function_hook_is_named_with_versions(monkeypatch):
    monkeypatch.delattr(pyrtl.wire, "_reset_wire_indexers")
    monkeypatch.setattr(compat, "installed_version", lambda: "1.2")
    with pytest.raises(PyrtlVersionError) as e:
        compat.reset_name_counters()
    assert str(e.value) == (
        "tcu_hw needs pyrtl.wire._reset_wire_indexers() to restart temporary wire names "
        f"(tmpN, const_N) so Verilog is reproducible (tested with PyRTL {compat.TESTED}); the "
        f"installed PyRTL 1.2 does not have it: install '{compat.REQUIREMENT}'")


def test_missing_method_hook_stops_the_simulator_before_pyrtl_runs(monkeypatch):
    from sim.pyrtl_sim import ArraySimulation
    monkeypatch.delattr(CS, "_make_mask")
    with pytest.raises(PyrtlVersionError, match=re.escape(
            "pyrtl.CompiledSimulation._make_mask(dest, value_bitwidth, dest_limb) to mask "
            "memory reads (tested with PyRTL")) as e:
        ArraySimulation(block=pyrtl.Block())
    assert f"PyRTL {compat.installed_version()} does not have it" in str(e.value)


def test_every_missing_hook_is_listed(monkeypatch):
    monkeypatch.delattr(CS, "_limb_name")
    monkeypatch.delattr(CS, "_declare_mems")
    with pytest.raises(PyrtlVersionError) as e:
        compat.check_compiled_simulation()
    lines = str(e.value).splitlines()
    assert len(lines) == 2
    assert "._declare_mems(write, mems)" in lines[0] and "._limb_name(" in lines[1]


def test_changed_signature(monkeypatch):
    monkeypatch.setattr(CS, "_limbs", lambda self, w: 0)
    with pytest.raises(PyrtlVersionError, match=r"_limbs\(wire\) .* has _limbs\(w\): install"):
        compat.check_compiled_simulation()


def test_changed_record(monkeypatch):
    @dataclass
    class Meta:
        start: int

    monkeypatch.setattr(CS, "OutputMetadata", Meta)
    with pytest.raises(PyrtlVersionError, match="OutputMetadata .* has no field length in it"):
        compat.check_compiled_simulation()


@pytest.mark.parametrize("kind, problem", [("sets", "does not set it"),
                                           ("reads", "does not read it"),
                                           ("c", "does not generate it")])
def test_attribute_and_c_hooks_are_checked_in_pyrtl_source(monkeypatch, kind, problem):
    hooks = [h for h in HOOKS if h.kind == kind]
    monkeypatch.setattr(compat, "_compilesim_source", lambda: "")
    with pytest.raises(PyrtlVersionError) as e:
        compat.check(hooks)
    assert str(e.value).count(problem) == len(hooks)
    monkeypatch.setattr(compat, "_compilesim_source", lambda: None)    # no source: not checked
    compat.check(hooks)


def test_subclass_overrides_must_match_the_declared_hooks():
    from sim.pyrtl_sim import ArraySimulation

    class WrongSignature(ArraySimulation):
        def _build_mem_read(self, write, op, args, dest):
            pass

    class Undeclared(ArraySimulation):
        def _limbs(self, wire):
            return 1

    class Further(ArraySimulation):           # inherits ArraySimulation's overrides
        def _own_helper(self):
            pass

    compat.check_compiled_simulation(Further)
    with pytest.raises(TypeError, match=re.escape(
            "WrongSignature._build_mem_read(write, op, args, dest) does not match "
            "pyrtl.CompiledSimulation._build_mem_read(write, op, op_param, args, dest)")):
        compat.check_compiled_simulation(WrongSignature)
    with pytest.raises(TypeError) as e:
        compat.check_compiled_simulation(Undeclared)
    assert str(e.value) == ("Undeclared._limbs overrides a private PyRTL method not declared in "
                            "tcu_hw.pyrtl_compat.HOOKS")


def test_versions_agree_with_the_pin():
    """The installed PyRTL is one the compat module accepts, and pyproject.toml's pin admits
    every tested version."""
    pin = re.search(r'"pyrtl([^"]*)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert compat.installed_version() in SpecifierSet(compat.REQUIREMENT[len("pyrtl"):])
    for version in re.split(r", | and ", compat.TESTED):
        assert version in SpecifierSet(pin), (version, pin)


def _private_pyrtl_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "_ctypes"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyrtl"):
            private = any(part.startswith("_") for part in node.module.split("."))
            found += [f"{node.module}.{a.name}" for a in node.names
                      if private or a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id == "pyrtl":
                found.append(ast.unparse(node))
    return [f"{path.relative_to(ROOT)}:{use}" for use in found]


def test_only_the_compat_module_touches_pyrtl_internals():
    uses = []
    for folder in ("tcu_hw", "sim", "compiler_lite", "bench", "examples", "docs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path != ROOT / "tcu_hw" / "pyrtl_compat.py":
                uses += _private_pyrtl_uses(path)
    assert not uses, "PyRTL internals used outside tcu_hw/pyrtl_compat.py: " + ", ".join(uses)
