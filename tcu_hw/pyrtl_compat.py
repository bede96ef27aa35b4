"""Every use of PyRTL's private API, declared and checked in one place.

tcu_hw relies on a few PyRTL internals (names starting with ``_``), which any PyRTL release
may rename:

- two name counters that :mod:`tcu_hw.verilog` resets before each build, so the same design
  always gives the same Verilog (:func:`reset_name_counters`);
- the C code generator of :class:`pyrtl.CompiledSimulation`, which
  :class:`sim.pyrtl_sim.ArraySimulation` extends (it overrides four private methods, calls
  others, reads attributes PyRTL sets and sets attributes PyRTL reads;
  :func:`check_compiled_simulation`).

Each is a :class:`Hook` in :data:`HOOKS` (what, where, the signature expected, why). They are
checked when used: a missing or changed hook raises :class:`PyrtlVersionError` naming the
hook, the installed PyRTL and the tested versions, instead of an ``AttributeError`` deep
inside a build. Tested with PyRTL :data:`TESTED`. PyRTL 1.0.2 has the same hooks (the
simulator works) but its Verilog export is not lint-clean; 1.0.0 has an older code generator
without these hooks.
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass, fields, is_dataclass

import pyrtl

from .errors import TcuError

#: PyRTL versions tcu_hw is tested with, and what to install.
TESTED = "1.0.3"
REQUIREMENT = "pyrtl>=1.0.3,<1.1"


class PyrtlVersionError(TcuError, RuntimeError):
    """The installed PyRTL lacks (or changed) a private hook tcu_hw relies on."""


@dataclass(frozen=True)
class Hook:
    """One private PyRTL name tcu_hw relies on.

    ``kind``: ``function`` (module function we call), ``method`` (CompiledSimulation method
    we call), ``override`` (method ArraySimulation overrides; PyRTL calls it), ``record``
    (nested dataclass whose ``params`` fields we read), ``sets`` (attribute PyRTL sets and we
    read), ``reads`` (attribute we set and PyRTL reads), ``c`` (text PyRTL's generated C
    contains). ``params``: parameter names without ``self`` (or the fields, or the C text
    looked for).
    """

    owner: str
    name: str
    kind: str
    params: tuple[str, ...]
    why: str

    def __str__(self) -> str:
        if self.kind == "c":
            return f"{self.name} in the C code {self.owner} generates"
        if self.kind in ("sets", "reads", "record"):
            return f"{self.owner}.{self.name}"
        return f"{self.owner}.{self.name}({', '.join(self.params)})"


_CS = "pyrtl.CompiledSimulation"
HOOKS: tuple[Hook, ...] = (
    Hook("pyrtl.wire", "_reset_wire_indexers", "function", (),
         "to restart temporary wire names (tmpN, const_N) so Verilog is reproducible"),
    Hook("pyrtl.memory", "_reset_memory_indexer", "function", (),
         "to restart memory names so Verilog is reproducible"),
    Hook(_CS, "_declare_mem_helpers", "override", ("write",),
         "to declare flat-array memories instead of hash maps"),
    Hook(_CS, "_declare_mems", "override", ("write", "mems"),
         "to declare and initialize the array memories"),
    Hook(_CS, "_build_mem_read", "override", ("write", "op", "op_param", "args", "dest"),
         "to read array memories directly, ROMs through PyRTL's"),
    Hook(_CS, "_create_dll", "override", (),
         "to compile with our flags and reload fresh copies of the library on reset"),
    Hook(_CS, "_create_code", "method", ("write",), "to write the C simulator"),
    Hook(_CS, "_limbs", "method", ("wire",), "to count the 64-bit words of a value"),
    Hook(_CS, "_limb_name", "method", ("wire", "wire_limb"), "to name the limbs of a C variable"),
    Hook(_CS, "_make_mask", "method", ("dest", "value_bitwidth", "dest_limb"),
         "to mask memory reads"),
    Hook(_CS, "_clean_name", "method", ("prefix", "obj"), "for C names of memories"),
    Hook(_CS, "_make_initializer", "method", ("wire", "value"),
         "for initial memory contents"),
    Hook(_CS, "InputMetadata", "record", ("start", "length"),
         "to pack inputs for sim_run_all"),
    Hook(_CS, "OutputMetadata", "record", ("start", "length"),
         "to unpack outputs of sim_run_all"),
    *(Hook(_CS, name, "sets", (), why) for name, why in (
        ("var_names", "for the C variable of each memory"),
        ("_memory_value_map", "for initial memory contents"),
        ("_inputs_metadata", "to pack inputs"),
        ("_outputs_metadata", "to unpack outputs"),
        ("_inputs_array_length", "to size the input array"),
        ("_outputs_array_length", "to size the output array"))),
    *(Hook(_CS, name, "reads", (), why) for name, why in (
        ("_dll", "as the loaded library, which PyRTL's __del__ unloads"),
        ("_dir", "as the build directory, which PyRTL's __del__ removes"),
        ("_initialize_mems", "as the C initializer PyRTL's __init__ calls"),
        ("_sim_run_all", "as the C entry point PyRTL's run() calls"),
        ("_mem_lookup", "as the C lookup inspect_mem() uses"))),
    Hook(_CS, "sim_run_all(nsteps, inputs, outputs)", "c",
         ("void sim_run_all(uint64_t nsteps, uint64_t inputs[], uint64_t outputs[])",),
         "as the entry point ArraySimulation calls through ctypes"),
    Hook(_CS, "insert(mem, addr, value)", "c", ("insert(",),
         "for memory writes, which our C helpers implement"),
    Hook(_CS, "EXPORT", "c", ("#define EXPORT",), "to export our C helpers"),
)


def installed_version() -> str:
    """The installed PyRTL's version (``unknown`` if its metadata is missing)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("pyrtl")
    except PackageNotFoundError:
        return getattr(pyrtl, "__version__", "unknown")


@functools.lru_cache(maxsize=1)
def _compilesim_source() -> str | None:
    """The text of PyRTL's compilesim module (None when only bytecode is installed)."""
    try:
        return inspect.getsource(inspect.getmodule(pyrtl.CompiledSimulation))
    except (OSError, TypeError):
        return None


def _params(func) -> tuple[str, ...] | None:
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None
    return tuple(params[1:] if params[:1] == ["self"] else params)


def _problem(hook: Hook) -> str | None:
    """What is wrong with ``hook`` in the installed PyRTL (None: it is as expected)."""
    if hook.kind in ("sets", "reads", "c"):
        source = _compilesim_source()
        if source is None:                     # cannot tell: trust the version pin
            return None
        if hook.kind == "c":
            return None if hook.params[0] in source else "does not generate it"
        pattern = rf"self\.{hook.name}\s*=" if hook.kind == "sets" else rf"\.{hook.name}\b"
        return None if re.search(pattern, source) else f"does not {hook.kind[:-1]} it"
    owner = pyrtl.CompiledSimulation if hook.owner == _CS else \
        getattr(pyrtl, hook.owner.split(".")[1], None)
    obj = getattr(owner, hook.name, None)
    if obj is None:
        return "does not have it"
    if hook.kind == "record":
        have = [f.name for f in fields(obj)] if is_dataclass(obj) else []
        missing = [p for p in hook.params if p not in have]
        return f"has no field {', '.join(missing)} in it" if missing else None
    have = _params(obj)
    if have is not None and have != hook.params:
        return f"has {hook.name}({', '.join(have)})"
    return None


def _message(hook: Hook, problem: str) -> str:
    return (f"tcu_hw needs {hook} {hook.why} (tested with PyRTL {TESTED}); the installed "
            f"PyRTL {installed_version()} {problem}: install '{REQUIREMENT}'")


def check(hooks) -> None:
    """Raise :class:`PyrtlVersionError` listing every hook in ``hooks`` that the installed
    PyRTL lacks or has changed."""
    errors = [_message(h, p) for h in hooks if (p := _problem(h)) is not None]
    if errors:
        raise PyrtlVersionError("\n".join(errors))


def reset_name_counters() -> None:
    """Restart PyRTL's counters of temporary wire and memory names (``tmp0``, ``const_0``,
    memory ids), so that building the same design again gives the same names."""
    hooks = [h for h in HOOKS if h.kind == "function"]
    check(hooks)
    for h in hooks:
        getattr(getattr(pyrtl, h.owner.split(".")[1]), h.name)()


def check_compiled_simulation(subclass: type | None = None) -> None:
    """Check every CompiledSimulation hook; with ``subclass``, also that it (with its bases
    below CompiledSimulation) overrides exactly the ``override`` hooks, each with PyRTL's
    signature (a TypeError: a bug in tcu_hw)."""
    base = pyrtl.CompiledSimulation
    check([h for h in HOOKS if h.owner == _CS])
    if subclass is None:
        return
    defined = {}                  # private name -> (class defining it, its function)
    for cls in reversed(subclass.__mro__[:subclass.__mro__.index(base)]):
        defined.update((name, (cls, value)) for name, value in vars(cls).items()
                       if name.startswith("_") and not name.startswith("__"))
    overrides = {h.name: h for h in HOOKS if h.kind == "override"}
    errors = [f"{subclass.__name__} does not override {name}, declared as an override in "
              f"tcu_hw.pyrtl_compat.HOOKS" for name in overrides if name not in defined]
    for name, (cls, func) in defined.items():
        if name in overrides and _params(func) != overrides[name].params:
            errors.append(f"{cls.__name__}.{name}({', '.join(_params(func) or ())}) does "
                          f"not match {overrides[name]}")
        elif name not in overrides and hasattr(base, name):
            errors.append(f"{cls.__name__}.{name} overrides a private PyRTL method not "
                          f"declared in tcu_hw.pyrtl_compat.HOOKS")
    if errors:
        raise TypeError("\n".join(errors))


def unload_library(dll) -> None:
    """Unload a shared library loaded with :class:`ctypes.CDLL` (as PyRTL's own
    ``CompiledSimulation.__del__`` does, through CPython's private ``_ctypes``)."""
    import _ctypes
    _ctypes.dlclose(dll._handle)
