"""Host driver: run a compiled model with ordinary numpy arrays, on any backend.

    from sim.driver import Driver
    drv = Driver("pynqz1", backend="pyrtl")          # emulator | pyrtl | verilator | pynq
    drv.load_model("build/digits_cnn_opset10_onnx_pynqz1.tmodel")
    result = drv.run({"x": images})                  # NCHW float32, as the ONNX model takes
    result.outputs["logits"]                         # (batch, 10), the model's own layout
    result.cycles, result.stats                      # simulated backends

Shaped like Tensil's PYNQ driver, but the driver does the layout work Tensil leaves to the
user: it reads the model's ``.tio.json`` (written by ``compiler_lite``) to turn each input into
vectors (channels-last, zero-padded lanes) and fixed point, and each output back into the
model's shape. A batch that is a multiple of the compiled batch size runs as several runs of
the program, one after the other. Models without a ``.tio.json`` (e.g. compiled by Tensil)
take and return arrays in vector layout, ``(vectors, n)``.

Backends: ``emulator`` (golden, instruction statistics), ``pyrtl`` (the PyRTL core with DRAM
models: cycles, per-unit counters, waveforms), ``verilator`` (the generated Verilog top through
AXI), ``pynq`` (a real board; see :mod:`sim.pynq_backend`, importable without ``pynq``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Mapping

import numpy as np

from tcu_hw import numeric
from tcu_hw.arch import Architecture, board_axi_width, resolve_arch
from tcu_hw.artifacts import TensorLayout, TModel, read_io_layout
from tcu_hw.errors import ArtifactError

from .backends import SIMULATED, SimOptions, SimulatedBackend
from .model import array_macs, input_raw, load_model

BACKENDS = (*SIMULATED, "pynq")


@dataclass
class DriverResult:
    """Outputs of :meth:`Driver.run`: floats in the model's layout (vector layout for models
    without an I/O layout), the raw vectors as read from DRAM0 (runs stacked), and what the
    backend measured (``cycles`` summed over runs; None for the emulator and boards; ``stats``
    one dict per run). ``macs``: the array's multiply-accumulates over all runs
    (:func:`sim.model.array_macs`), the same on every backend."""

    outputs: dict[str, np.ndarray]
    raw: dict[str, np.ndarray]
    runs: int
    cycles: int | None = None
    stats: list[dict] = field(default_factory=list)
    input_saturations: int = 0
    macs: int = 0

    @property
    def macs_per_cycle(self) -> float | None:
        return self.macs / self.cycles if self.cycles else None


class Driver:
    """Runs compiled models on one architecture and backend; see the module docstring.

    Backend options: those of :class:`sim.backends.SimOptions` for the simulated backends
    (``latency``, ``cycles_per_vector``, ``stall_probability``, ``axi_width``,
    ``outstanding``); ``overlay``, ``dma``, ``timeout`` for pynq.
    """

    def __init__(self, arch, backend: str = "emulator", **options) -> None:
        if backend not in BACKENDS:
            raise ArtifactError(f"backend {backend!r} is unknown; allowed: {', '.join(BACKENDS)}")
        self.arch = arch if isinstance(arch, Architecture) else resolve_arch(arch)
        self.backend = backend
        self.options = options
        self.model: TModel | None = None
        self.inputs: list[TensorLayout] | None = None
        self.outputs: list[TensorLayout] | None = None
        if backend == "pynq":
            from .pynq_backend import PynqBackend
            self._engine = PynqBackend(self.arch, **options)
        else:
            allowed = [f.name for f in fields(SimOptions)]
            unknown = sorted(set(options) - set(allowed))
            if unknown:
                raise ArtifactError(f"backend {backend!r}: unknown option(s) {unknown}; "
                                    f"allowed: {', '.join(allowed)}")
            if isinstance(arch, str):       # a preset's name names its board's width too
                options = {**options,
                           "axi_width": board_axi_width(arch, options.get("axi_width"))}
            self._engine = SimulatedBackend(self.arch, backend, SimOptions(**options))

    # ------------------------------------------------------------------------- loading

    def load_model(self, model) -> TModel:
        """Load a `.tmodel` (path or :class:`TModel`); its architecture must be the driver's.
        The model's ``.tio.json``, when present next to it, gives the I/O layouts."""
        m = load_model(model)
        diff = m.arch.differences(self.arch)
        if diff:
            raise ArtifactError(f"model {m.name!r} was compiled for another architecture than "
                                f"the driver's: {'; '.join(diff)}")
        self.model = m
        self._macs = array_macs(m)
        tio = m.directory / f"{Path(m.prog.file_name).stem}.tio.json"
        self.inputs = self.outputs = None
        if tio.is_file():
            ins, outs = read_io_layout(tio)
            if [t.name for t in ins] != m.input_names or \
                    [t.name for t in outs] != m.output_names:
                raise ArtifactError(f"{tio}: its inputs and outputs do not match "
                                    f"{m.name!r}'s manifest")
            self.inputs, self.outputs = ins, outs
        if self.backend == "pynq":
            self._engine.load(m)
        return m

    # ------------------------------------------------------------------------- running

    def _batches(self, inputs: Mapping[str, np.ndarray]) -> int:
        """How many runs of the program the given arrays make."""
        m = self.model
        runs = set()
        for name in m.input_names:
            a = np.asarray(inputs[name])
            if self.inputs is None:
                per = m.vectors(name)
                total = a.size // self.arch.array_size
                if a.size % self.arch.array_size or total % per or total == 0:
                    raise ArtifactError(
                        f"input {name!r}: {a.size} values is not a whole number of runs of "
                        f"{per} vectors × {self.arch.array_size} lanes (this model has no "
                        f".tio.json, so inputs are in vector layout)")
                runs.add(total // per)
                continue
            t = next(t for t in self.inputs if t.name == name)
            want = tuple(t.shape)
            if a.shape == want:
                runs.add(1)
            elif a.ndim == len(want) and a.shape[1:] == want[1:] and want[0] and \
                    a.shape[0] % want[0] == 0 and a.shape[0] > 0:
                runs.add(a.shape[0] // want[0])
            else:
                raise ArtifactError(f"input {name!r}: shape {list(a.shape)}; the model takes "
                                    f"{list(want)} (or a multiple of {want[0]} along axis 0 "
                                    f"for several runs)")
        if len(runs) != 1:
            raise ArtifactError(f"inputs make different numbers of runs: {sorted(runs)}")
        return runs.pop()

    def _raw_inputs(self, inputs, run: int, runs: int, raw: bool) -> tuple[dict, int]:
        """Run ``run``'s part of each input, in vector layout, checked and in fixed point."""
        n = self.arch.array_size
        out, sats = {}, 0
        for name in self.model.input_names:
            a = np.asarray(inputs[name])
            if self.inputs is None:
                per = self.model.vectors(name)
                vec = a.reshape(-1, n)[run * per:(run + 1) * per]
            else:
                t = next(t for t in self.inputs if t.name == name)
                b = t.shape[0]
                part = a[run * b:(run + 1) * b] if runs > 1 else a
                if t.scale is not None and not raw:      # quantized (integer types)
                    vec, q = t.encode(part, self.arch.dtype, n)
                    out[name], _ = input_raw(self.model, name, vec, raw=True)
                    sats += q
                    continue
                vec = t.to_vectors(part, n)
            out[name], s = input_raw(self.model, name, vec, raw=raw)
            sats += s
        return out, sats

    def run(self, inputs, raw: bool = False, vcd=None, window=None) -> DriverResult:
        """Run the loaded model. ``inputs``: {name: array} (or one array for a one-input
        model), floats in the model's layout (raw fixed-point integers with ``raw``).
        ``vcd``/``window``: a waveform of the program-counter window (pyrtl or verilator
        backend; FST for a ``.fst`` name on verilator)."""
        if self.model is None:
            raise ArtifactError("no model loaded: call load_model first")
        m = self.model
        if not isinstance(inputs, Mapping):
            if len(m.input_names) != 1:
                raise ArtifactError(f"model {m.name!r} has inputs {m.input_names}: pass a "
                                    f"dict")
            inputs = {m.input_names[0]: inputs}
        missing = [k for k in m.input_names if k not in inputs]
        extra = [k for k in inputs if k not in m.input_names]
        if missing or extra:
            raise ArtifactError(f"model {m.name!r} takes inputs {m.input_names}"
                                + (f"; missing {missing}" if missing else "")
                                + (f"; unknown {extra}" if extra else ""))
        if (vcd is not None or window is not None) and \
                self.backend not in ("pyrtl", "verilator"):
            raise ArtifactError("waveforms (vcd, window) need the pyrtl or verilator backend")
        runs = self._batches(inputs)
        raw_out: dict[str, list] = {k: [] for k in m.output_names}
        stats, cycles, sats = [], 0, 0
        for r in range(runs):
            ins, s = self._raw_inputs(inputs, r, runs, raw)
            sats += s
            outs, st = self._run_once(ins, vcd if r == 0 else None, window)
            stats.append(st)
            cycles += st.get("cycles", 0) or 0
            for k in m.output_names:
                raw_out[k].append(np.asarray(outs[k]))
        raw_all = {k: np.concatenate(v) for k, v in raw_out.items()}
        floats = {}
        dt, n = self.arch.dtype, self.arch.array_size
        for k, parts in raw_out.items():
            if self.outputs is None:
                floats[k] = numeric.to_float(raw_all[k], dt)
            else:
                t = next(t for t in self.outputs if t.name == k)
                floats[k] = np.concatenate([t.decode(p, dt, n) for p in parts])
        timed = self.backend in ("pyrtl", "verilator")
        return DriverResult(floats, raw_all, runs, cycles if timed else None, stats, sats,
                            self._macs * runs)

    def _run_once(self, raw_inputs: dict, vcd, window) -> tuple[dict, dict]:
        if self.backend == "pynq":
            return self._engine.run(raw_inputs)
        return self._engine.run(self.model, raw_inputs, vcd, window if vcd else None)
