"""The compiler pipeline: ONNX → graph → layers → memory plan → instructions → artifacts.

:func:`compile_model` does everything in memory and returns a :class:`Compiled`; nothing is
written until :meth:`Compiled.write`, which writes all files atomically (a failure anywhere
leaves no partial artifacts).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from tcu_hw import numeric
from tcu_hw.arch import Architecture, Options, beats_per_vector, board_axi_width, resolve_arch
from tcu_hw.artifacts import (ConstsEntry, ProgEntry, TensorEntry, TensorLayout, TModel,
                              io_layout_json, model_name)
from tcu_hw.asm import listing
from tcu_hw.errors import CompileError
from tcu_hw.files import write_all_atomic

from .emit import Emitter, LayerStats
from .frontend import Graph, load_graph
from .lower import Lowering, check_graph
from .plan import CONSTS_PORTS, INPUT_PORTS, STRATEGIES, MemoryPlan, Planner
from .prescale import prescale
from .quant import integer_graph, is_quantized
from .unfold import INPUT_LAYOUTS, unfold_inputs

RESIZE_MODES = ("onnx", "tensil")


@dataclass
class Compiled:
    """A compiled model, in memory."""

    name: str
    arch: Architecture
    graph: Graph
    program: list
    consts: np.ndarray                      # raw vectors of the constants image
    inputs: list[TensorLayout]
    outputs: list[TensorLayout]
    strategy: str
    layers: list[LayerStats]
    plan: MemoryPlan
    seconds: float
    notes: list[str] = field(default_factory=list)
    resize_mode: str = "onnx"
    axi_width: int = 128                    # the board's memory port (cycle estimate)

    @property
    def consts_to_local(self) -> bool:
        return self.plan.consts_to_local

    @property
    def output_lsb(self) -> dict[str, float | None]:
        """One LSB of each output as a float: the output's scale for an integer type, the
        fixed-point step otherwise, None for FLOAT32."""
        dt = self.arch.dtype
        return {t.name: t.scale if t.scale is not None else
                (None if dt.is_float else dt.error) for t in self.outputs}

    def tmodel(self, directory: Path = Path(".")) -> TModel:
        prog_bytes = len(self.program) * self.arch.layout.instruction_bytes
        consts = (ConstsEntry(f"{self.name}.tdata", 0, len(self.consts)),) \
            if len(self.consts) else ()
        mirror = self.plan.consts_mirror
        copies = tuple(ConstsEntry(c.file_name, mirror, c.size) for c in consts) \
            if mirror is not None else ()
        inputs = tuple(TensorEntry(t.name, t.base, t.vectors) for t in self.inputs)
        return TModel(self.name, ProgEntry(f"{self.name}.tprog", prog_bytes), consts, inputs,
                      tuple(TensorEntry(t.name, t.base, t.vectors) for t in self.outputs),
                      self.arch, self.consts_to_local, directory, copies,
                      tuple(TensorEntry(t.name, self.plan.input_mirror[t.name], t.vectors)
                            for t in self.inputs if t.name in self.plan.input_mirror))

    def host_images(self, raw_inputs: Mapping[str, np.ndarray] | None = None
                    ) -> tuple[dict, dict, dict]:
        """(DRAM0, DRAM1, local) images a host writes before a run, as
        :func:`sim.model.host_images` makes them from the files; ``raw_inputs``: raw vectors
        by input name."""
        from sim.model import memory_images
        consts = [(0, self.consts)]
        mirror = self.plan.consts_mirror
        given = self.inputs if raw_inputs else []
        inputs = {t.base: raw_inputs[t.name] for t in given}
        copies = [] if mirror is None else [(mirror, self.consts)]
        input_copies = {self.plan.input_mirror[t.name]: raw_inputs[t.name] for t in given
                        if t.name in self.plan.input_mirror}
        return memory_images(consts, copies, inputs, self.consts_to_local, input_copies)

    def program_bytes(self) -> bytes:
        return self.arch.layout.encode_program(self.program)

    def consts_bytes(self) -> bytes:
        return numeric.encode_vectors(self.consts, self.arch.dtype)

    def files(self, asm: bool = False) -> dict[str, bytes]:
        """File name → contents of every artifact."""
        out = {f"{self.name}.tprog": self.program_bytes(),
               f"{self.name}.tmodel": (self.tmodel().to_json() + "\n").encode(),
               f"{self.name}.tio.json": io_layout_json(self.arch, self.inputs,
                                                       self.outputs).encode()}
        if len(self.consts):
            out[f"{self.name}.tdata"] = self.consts_bytes()
        if asm:
            out[f"{self.name}.tasm"] = self.assembly().encode()
        return out

    def assembly(self) -> str:
        """The listing, with a comment line at the start of each layer (its program-counter
        range and nodes: what ``sim.run --window`` needs to look at one layer)."""
        lines = list(listing(self.program, self.arch.layout))
        out, pc = [], 0
        for k, s in enumerate(self.layers):
            out.append(f"; layer {k}: {s.name} (nodes {', '.join(s.nodes)}), pc {pc}.."
                       f"{pc + s.instructions - 1}")
            out += lines[pc:pc + s.instructions]
            pc += s.instructions
        return "\n".join(out) + "\n"

    def write(self, target: Path, asm: bool = False) -> list[Path]:
        """Write the artifacts into ``target`` (created if needed); returns their paths."""
        return write_all(target, self.files(asm))


def write_all(target, files: dict[str, bytes]) -> list[Path]:
    """Write every file or none (:func:`tcu_hw.files.write_all_atomic`)."""
    return write_all_atomic(target, files, CompileError)


def compile_model(model, arch, outputs=None, input_shapes=None, strategy: str = "local-vars",
                  resize_mode: str = "onnx", model_file: str | None = None,
                  progress=None, axi_width: int | None = None,
                  input_layout: str = "pixels", consts_ports: str = "dram1",
                  input_ports: str = "dram0") -> Compiled:
    """Compile an ONNX model (path or ModelProto) for an architecture (path, preset name or
    :class:`Architecture`); ``axi_width``: the board's memory port in bits, for the cycle
    estimate (default :func:`tcu_hw.arch.board_axi_width`); ``input_layout``: "pixels"
    (Tensil's: a pixel per vector) or "unfolded" (an input read by a convolution of few
    channels is stored with its kernel taps in the channels, :mod:`compiler_lite.unfold`);
    ``consts_ports``: "dram1" (Tensil's) or "both" (the host also writes the constants into
    DRAM0, and the constants loads are split over both ports, :data:`.plan.CONSTS_PORTS`);
    ``input_ports``: "dram0" (Tensil's) or "both" (the host also writes the inputs into
    DRAM1, and their loads are split over both ports, :data:`.plan.INPUT_PORTS`)."""
    t0 = time.perf_counter()
    if strategy not in STRATEGIES:
        raise CompileError(f"strategy {strategy!r} is unknown; allowed: {', '.join(STRATEGIES)}")
    if consts_ports not in CONSTS_PORTS:
        raise CompileError(f"consts_ports (--consts-ports) {consts_ports!r} is unknown; "
                           f"allowed: {', '.join(CONSTS_PORTS)}")
    if input_ports not in INPUT_PORTS:
        raise CompileError(f"input_ports (--input-ports) {input_ports!r} is unknown; "
                           f"allowed: {', '.join(INPUT_PORTS)}")
    if input_layout not in INPUT_LAYOUTS:
        raise CompileError(f"input layout {input_layout!r} is unknown; allowed: "
                           + ", ".join(INPUT_LAYOUTS))
    if resize_mode not in RESIZE_MODES:
        raise CompileError(f"resize mode {resize_mode!r} is unknown; allowed: "
                           + ", ".join(RESIZE_MODES))
    spec = arch
    arch = arch if isinstance(arch, Architecture) else resolve_arch(arch)
    axi_width = Options(axi_data_width=board_axi_width(spec, axi_width)).axi_data_width
    file_name = model_file or (str(model) if isinstance(model, (str, Path)) else "model.onnx")
    integer = arch.dtype.is_integer
    if input_layout == "unfolded" and integer:
        raise CompileError(f"{file_name}: input layout 'unfolded' is for fixed-point and "
                           f"FLOAT32 types (an integer model pads with its zero point); "
                           f"{arch.data_type} takes 'pixels'")
    say = progress or (lambda what: None)
    say(f"loading {file_name}")
    g = load_graph(model, input_shapes, outputs, source=file_name, keep_dequantize=integer)
    if integer:
        g = _integer(g, arch, file_name)
    check_graph(g, arch)
    source_shapes = {name: g.shape(name) for name in g.inputs}
    if not integer:                         # fixed point pads with zeros: inputs may unfold
        g, unfolds, unfold_notes = unfold_inputs(g, arch.array_size,
                                                 input_layout == "unfolded",
                                                 beats_per_vector(arch, axi_width),
                                                 arch.dram0_depth // 8)
        g.notes.extend(unfold_notes)
        if unfolds:
            check_graph(g, arch)
    else:
        unfolds = {}
    say(f"lowering {len(g.nodes)} nodes")
    low = Lowering(g if integer else prescale(g, arch.dtype), arch, resize_mode)
    low.run()
    say(f"planning memory for {len(low.layers)} layers")
    planner = Planner(arch, low.space, low.layers, strategy, source=file_name,
                      consts_ports=consts_ports, input_ports=input_ports)
    plan = planner.place()
    say("emitting instructions")
    em = Emitter(arch, low.space, low.layers, plan, source=file_name,
                 beats=beats_per_vector(arch, axi_width))
    program = em.emit()
    say(f"{len(program):,} instructions")
    name = model_name(file_name, spec if not isinstance(spec, Architecture) else "arch")
    ios_in = [dataclasses.replace(_io(low, b), shape=source_shapes[b.name],
                                  unfold=unfolds.get(b.name))
              for b in low.space.buffers if b.role == "input"]
    ios_out = []
    for out in g.outputs:
        b = next(b for b in low.space.buffers if getattr(b, "output_name", None) == out)
        ios_out.append(_io(low, b, out))
    return Compiled(name, arch, g, program, plan.image, ios_in, ios_out, strategy, em.stats,
                    plan, time.perf_counter() - t0, g.notes + low.notes, resize_mode,
                    axi_width)


def _integer(g: Graph, arch: Architecture, file_name: str) -> Graph:
    """The integer graph of a quantized model (:mod:`compiler_lite.quant`)."""
    if not is_quantized(g):
        raise CompileError(f"{file_name}: data type {arch.data_type} needs a quantized model "
                           f"(QDQ, as onnxruntime.quantization.quantize_static writes it, or "
                           f"QLinearConv/QLinearMatMul); this one is float: quantize it with "
                           f"--quantize {arch.data_type.lower()} --calibrate SAMPLES.npz, or "
                           f"choose a fixed-point type (FP16BP8, FP18BP10, FP32BP16)")
    return integer_graph(g, arch.dtype)


def _io(low: Lowering, b, name: str | None = None) -> TensorLayout:
    name = name or b.name
    shape = low.g.shape(name)
    q = low.g.io_quant.get(name)
    return TensorLayout(name, tuple(shape), tuple(b.order), b.home[1], b.vectors,
                        None if q is None else float(q.scale),
                        0 if q is None else int(q.zero_point))
