"""A faster PyRTL CompiledSimulation for whole-program runs.

PyRTL's :class:`pyrtl.CompiledSimulation` keeps every memory in a 256-bucket hash map (a DRAM
model with 100k vectors would walk ~400-node lists per access) and marshals inputs and
outputs through Python every cycle. :class:`ArraySimulation` changes three things:

- memories are flat C arrays, readable and writable from Python as numpy views
  (:meth:`ArraySimulation.memory`), so images of thousands of vectors load in microseconds;
- :meth:`ArraySimulation.run_cycles` runs many cycles in one C call and returns only the
  last cycle's outputs (no per-cycle Python work);
- :meth:`ArraySimulation.reset` reloads a fresh copy of the compiled library, so one
  compilation serves many runs (the design's state lives in the library's globals).

It relies on PyRTL 1.0's code generator (it replaces the memory helpers and the memory
declarations). Every private PyRTL name it overrides, calls or reads is declared in
:data:`tcu_hw.pyrtl_compat.HOOKS` and checked when a simulation is built, so an unfit PyRTL
gives one clear error.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pyrtl

from tcu_hw.pyrtl_compat import check_compiled_simulation, unload_library

#: Refuse memory models larger than this (bytes of C array).
MAX_MEMORY_BYTES = 1 << 32

_HELPERS = """
typedef uint64_t val_t;
typedef struct arrmem { uint64_t depth; int limbs; val_t *data; } arrmem_t;

arrmem_t *create_array_mem(uint64_t depth, int limbs) {
    arrmem_t *m = (arrmem_t *) malloc(sizeof(arrmem_t));
    m->depth = depth;
    m->limbs = limbs;
    m->data = (val_t *) calloc(depth * (uint64_t) limbs, sizeof(val_t));
    return m;
}

EXPORT
val_t *lookup(arrmem_t *m, uint64_t key) { return m->data + key * m->limbs; }

void insert(arrmem_t *m, uint64_t key, val_t val[]) {
    memcpy(m->data + key * m->limbs, val, sizeof(val_t) * m->limbs);
}

EXPORT
val_t *mem_data(arrmem_t *m) { return m->data; }
"""


class ArraySimulation(pyrtl.CompiledSimulation):
    """CompiledSimulation with array memories, chunked runs and cheap resets.

    ``trace``: names of Outputs to return from :meth:`run_cycles` (all Outputs by default).
    ``opt``: gcc optimisation flag (``-O1`` like PyRTL; ``-O0`` compiles large designs much
    faster).
    """

    def __init__(self, block: pyrtl.Block | None = None, opt: str = "-O1",
                 register_value_map=None) -> None:
        self._dll = self._dir = None
        check_compiled_simulation(type(self))
        self._opt = opt
        self._so_master: str | None = None
        self._so_loaded: str | None = None
        block = pyrtl.working_block(block)
        for mem in {net.op_param[1] for net in block.logic_subset("m@")}:
            if isinstance(mem, pyrtl.RomBlock):
                continue
            limbs = (mem.bitwidth + 63) // 64
            size = (1 << mem.addrwidth) * limbs * 8
            if size > MAX_MEMORY_BYTES:
                raise ValueError(f"memory {mem.name!r} ({1 << mem.addrwidth} x {mem.bitwidth} "
                                 f"bits) is too large to simulate as an array")
        # the tracer needs one named wire; it keeps only Inputs and Outputs (none is fine)
        track = list(block.wirevector_subset(pyrtl.Output)) or \
            [w for w in block.wirevector_subset(pyrtl.Register)][:1]
        tracer = pyrtl.SimulationTrace(wires_to_track=track, block=block)
        super().__init__(tracer=tracer, register_value_map=register_value_map, block=block)
        self._mems = {mem.name: mem for mem in self.var_names if isinstance(mem, pyrtl.MemBlock)
                      and not isinstance(mem, pyrtl.RomBlock)}

    # ---------------------------------------------------------------- code generation
    def _declare_mem_helpers(self, write):
        write(_HELPERS)

    def _declare_mems(self, write, mems):
        for mem in sorted(mems, key=lambda m: m.name):
            self.var_names[mem] = var = self._clean_name("m", mem)
            write("EXPORT")
            write(f"arrmem_t *{var};")
        write("EXPORT")
        write("void initialize_mems() {")
        for mem in sorted(mems, key=lambda m: m.name):
            var = self.var_names[mem]
            write(f"{var} = create_array_mem({1 << mem.addrwidth}ULL, {self._limbs(mem)});")
            for addr, value in sorted(self._memory_value_map.get(mem, {}).items()):
                write(f"{{ val_t t[] = {self._make_initializer(mem, value)}; "
                      f"insert({var}, {addr}, t); }}")
        write("}")

    def _build_mem_read(self, write, op, op_param, args, dest):
        mem = op_param[1]
        if isinstance(mem, pyrtl.RomBlock):
            return super()._build_mem_read(write, op, op_param, args, dest)
        limbs = self._limbs(mem)
        addr = self._limb_name(args[0], 0)
        for dest_limb in range(self._limbs(dest)):
            mask = self._make_mask(dest, mem.bitwidth, dest_limb)
            write(f"{self._limb_name(dest, dest_limb)} = "
                  f"{self.var_names[mem]}->data[{addr} * {limbs} + {dest_limb}]{mask};")

    def _create_dll(self):
        self._dir = tempfile.mkdtemp(prefix="tcu_pyrtlsim_")
        src = os.path.join(self._dir, "pyrtlsim.c")
        with open(src, "w") as f:
            self._create_code(lambda s: f.write(f"{s}\n"))
        self._so_master = os.path.join(self._dir, "pyrtlsim.so")
        subprocess.check_call(["gcc", self._opt, "-std=c99", "-m64", "-shared", "-fPIC", src,
                               "-o", self._so_master])
        self._load(fresh_copy=False)

    def _load(self, fresh_copy: bool) -> None:
        if self._dll is not None:
            unload_library(self._dll)
            self._dll = None
            if self._so_loaded and self._so_loaded != self._so_master:
                os.unlink(self._so_loaded)
        path = self._so_master
        if fresh_copy:
            fd, path = tempfile.mkstemp(suffix=".so", dir=self._dir)
            os.close(fd)
            shutil.copyfile(self._so_master, path)
        self._so_loaded = path
        self._dll = ctypes.CDLL(path)
        self._sim_run_all = self._dll.sim_run_all
        self._sim_run_all.restype = None
        self._sim_run_all.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        self._initialize_mems = self._dll.initialize_mems
        self._initialize_mems.restype = None
        self._mem_lookup = self._dll.lookup
        self._mem_lookup.restype = ctypes.POINTER(ctypes.c_uint64)
        self._mem_data = self._dll.mem_data
        self._mem_data.restype = ctypes.POINTER(ctypes.c_uint64)
        self._mem_data.argtypes = [ctypes.c_void_p]

    # ------------------------------------------------------------------------- running
    def reset(self) -> None:
        """Back to the initial state (registers at reset values, memories as at start)."""
        self._load(fresh_copy=True)
        self._initialize_mems()

    def _pack_inputs(self, cycles: int, inputs) -> np.ndarray:
        ins = np.zeros((cycles, max(self._inputs_array_length, 1)), dtype=np.uint64)
        for name, value in (inputs or {}).items():
            meta = self._inputs_metadata[name]
            if np.ndim(value) == 0:
                value = int(value)
                for limb in range(meta.length):
                    ins[:, meta.start + limb] = (value >> (64 * limb)) & ((1 << 64) - 1)
            elif meta.length == 1:
                ins[:, meta.start] = np.asarray(value, dtype=np.uint64)
            else:
                for limb in range(meta.length):
                    ins[:, meta.start + limb] = [(int(v) >> (64 * limb)) & ((1 << 64) - 1)
                                                 for v in value]
        return ins

    def _run(self, cycles: int, inputs) -> np.ndarray:
        if cycles < 1:
            raise ValueError("run at least one cycle")
        ins = self._pack_inputs(cycles, inputs)
        outs = np.zeros((cycles, max(self._outputs_array_length, 1)), dtype=np.uint64)
        self._sim_run_all(cycles, ins.ctypes.data, outs.ctypes.data)
        return outs

    def run_cycles(self, cycles: int, inputs: dict | None = None) -> dict[str, int]:
        """Run ``cycles`` cycles and return the last cycle's Outputs. ``inputs`` maps Input
        names to a constant or to one value per cycle."""
        last = self._run(cycles, inputs)[-1]
        result = {}
        for name, meta in self._outputs_metadata.items():
            value = 0
            for limb in reversed(range(meta.start, meta.start + meta.length)):
                value = (value << 64) | int(last[limb])
            result[name] = value
        return result

    def run_trace(self, cycles: int, inputs: dict | None = None, names=None
                  ) -> dict[str, np.ndarray]:
        """Run ``cycles`` cycles and return Outputs (all, or those in ``names``) on every
        cycle (uint64 arrays; object arrays of Python ints for Outputs wider than 64 bits)."""
        outs = self._run(cycles, inputs)
        result = {}
        for name, meta in self._outputs_metadata.items():
            if names is not None and name not in names:
                continue
            if meta.length == 1:
                result[name] = outs[:, meta.start].copy()
            else:
                col = np.zeros(cycles, dtype=object)
                for limb in reversed(range(meta.start, meta.start + meta.length)):
                    col = (col << 64) | outs[:, limb].astype(object)
                result[name] = col
        return result

    # ------------------------------------------------------------------------ memories
    def has_memory(self, name: str) -> bool:
        """Whether the design has a memory of that name (unread memories are elided)."""
        return name in self._mems

    def memory(self, mem: pyrtl.MemBlock | str) -> np.ndarray:
        """A writable numpy view (depth, limbs) uint64 of a memory's contents (little-endian
        limbs: entry value = sum(limb[k] << 64k)). Valid until the next :meth:`reset`."""
        if isinstance(mem, str):
            if mem not in self._mems:
                raise KeyError(f"no memory {mem!r} in the simulated design (memories: "
                               f"{', '.join(sorted(self._mems))})")
            mem = self._mems[mem]
        var = ctypes.c_void_p.in_dll(self._dll, self.var_names[mem])
        limbs = self._limbs(mem)
        depth = 1 << mem.addrwidth
        ptr = self._mem_data(var)
        return np.ctypeslib.as_array(ptr, shape=(depth * limbs,)).reshape(depth, limbs)

    def __del__(self):
        try:
            super().__del__()
            if getattr(self, "_dir", None) and os.path.isdir(self._dir):
                shutil.rmtree(self._dir, ignore_errors=True)
        except Exception:            # interpreter shutdown: modules may already be gone
            pass

