"""Golden vectors: run a compiled model on the bit-accurate emulator; float reference outputs
from onnxruntime.

Inputs are ordinary arrays in the model's own layout (e.g. NCHW float32), keyed by input
name; they are converted to vector layout and fixed point here, and the outputs come back in
the model's layout, both raw (fixed point integers, as the hardware writes them) and as
floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from tcu_hw import numeric
from tcu_hw.errors import CompileError

from .compile import Compiled


#: the newest ONNX IR version every onnxruntime the project supports reads
ORT_MAX_IR_VERSION = 10


@dataclass
class GoldenRun:
    outputs: dict[str, np.ndarray]          # float, model layout
    raw: dict[str, np.ndarray]              # raw vectors (vectors, n) as in DRAM0
    input_saturations: int
    stats: object
    events: list


def run_emulator(c: Compiled, inputs: Mapping[str, np.ndarray], strict: bool = True
                 ) -> GoldenRun:
    """Run ``c`` on :class:`sim.emulator.Emulator` with ``inputs`` (model layout, float)."""
    from sim.emulator import Emulator
    from sim.model import write_images
    n = c.arch.array_size
    dt = c.arch.dtype
    names = [t.name for t in c.inputs]
    missing = [k for k in names if k not in inputs]
    extra = [k for k in inputs if k not in names]
    if missing or extra:
        raise CompileError(f"golden inputs: expected {names}"
                           + (f", missing {missing}" if missing else "")
                           + (f", unknown {extra}" if extra else ""))
    sats, raws = 0, {}
    for t in c.inputs:
        vec = t.to_vectors(np.asarray(inputs[t.name], dtype=np.float64), n)
        bad = numeric.nonfinite(vec)
        if bad:
            raise CompileError(f"golden inputs: tensor {t.name!r}: {bad}; the TCU computes on "
                               f"finite numbers")
        try:
            raws[t.name], s = t.encode(inputs[t.name], dt, n)
        except ValueError as e:
            raise CompileError(f"golden inputs: tensor {t.name!r}: {e}") from None
        sats += s
    emu = Emulator(c.arch, strict=strict)
    write_images(emu, c.host_images(raws))      # (the inputs' copies in DRAM1 as well)
    emu.run(c.program)
    raw_out, outs = {}, {}
    for t in c.outputs:
        r = emu.read_dram0(t.base, t.vectors)
        raw_out[t.name] = r
        outs[t.name] = t.decode(r, dt, n)
    return GoldenRun(outs, raw_out, sats, emu.stats, emu.events)


def result_saturations(counts: Mapping[str, int], dt) -> dict[str, int]:
    """Saturation counts worth a warning: every non-zero one, except, for an integer type,
    the narrowing of requantized values on their move to local memory (``acc_to_local``),
    which is the designed clamp to the type's range (a ReLU, docs/integer.md)."""
    return {k: int(v) for k, v in counts.items()
            if v and not (dt.is_integer and k == "acc_to_local")}


def read_inputs(path) -> dict[str, np.ndarray]:
    """An ``.npz`` of input arrays keyed by input name."""
    import zipfile
    path = Path(path)
    what = "(.npz of arrays keyed by input name, e.g. numpy.savez(path, x=array))"
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise ValueError("it holds one array, not arrays keyed by input name")
        with z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise CompileError(f"{path}: cannot read the inputs {what}: {e}") from None
    if not arrays:
        raise CompileError(f"{path}: no arrays in it {what}")
    bad = [k for k, a in arrays.items() if a.dtype.kind not in "biuf"]
    if bad:
        raise CompileError(f"{path}: arrays {bad} are not numbers {what}")
    return arrays


def golden_npz(c: Compiled, run: GoldenRun, inputs: Mapping[str, np.ndarray]) -> bytes:
    """The golden file: per output ``NAME`` (float, model layout) and ``NAME.raw`` (raw
    vectors as in DRAM0); per input ``input:NAME`` as given."""
    import io
    buf = io.BytesIO()
    arrays = {}
    for name, v in run.outputs.items():
        arrays[name] = v.astype(np.float32)
        arrays[f"{name}.raw"] = run.raw[name]
    for name, v in inputs.items():
        arrays[f"input:{name}"] = np.asarray(v)
    np.savez(buf, **arrays)
    return buf.getvalue()


def onnxruntime_outputs(model, feeds: Mapping[str, np.ndarray],
                        outputs: list[str] | None = None) -> dict[str, np.ndarray]:
    """The float reference: ``model`` (a path or an ``onnx.ModelProto``) run on onnxruntime's
    CPU provider for ``feeds`` (arrays keyed by input name, any batch size). ``outputs`` may
    name intermediate tensors (default: the graph outputs). The model is not modified."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise CompileError("the float reference needs onnxruntime: pip install onnxruntime "
                           "(or the check extra: pip install -e \".[check]\")") from None
    import onnx
    m = (onnx.load(str(model)) if isinstance(model, (str, Path))
         else onnx.ModelProto.FromString(model.SerializeToString()))
    for vi in list(m.graph.input) + list(m.graph.output):       # any batch size
        dims = vi.type.tensor_type.shape.dim
        if dims:
            dims[0].dim_param = "N"
    del m.graph.value_info[:]
    have = {o.name for o in m.graph.output}
    for name in outputs or []:
        if name not in have:
            m.graph.output.append(onnx.helper.make_tensor_value_info(
                name, onnx.TensorProto.FLOAT, None))
    m.ir_version = min(m.ir_version, ORT_MAX_IR_VERSION)
    names = list(outputs or [o.name for o in m.graph.output])
    options = ort.SessionOptions()
    options.log_severity_level = 4          # a failed batch is retried below: no error log
    session = ort.InferenceSession(m.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feeds = {k: np.asarray(v, dtype=np.float32) for k, v in feeds.items()}
    try:
        result = session.run(names, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime raises many kinds
        count = min((v.shape[0] for v in feeds.values() if v.ndim), default=0)
        if count <= 1:
            raise CompileError(f"{_label(model)}: onnxruntime could not run the model: "
                               f"{_last_line(e)}") from None
        # shapes fixed inside the model (a Reshape to [1, …]): one sample at a time
        try:
            result = [np.concatenate(parts) for parts in zip(*(
                session.run(names, {k: v[i:i + 1] for k, v in feeds.items()})
                for i in range(count)))]
        except Exception as e:  # noqa: BLE001
            raise CompileError(f"{_label(model)}: onnxruntime could not run the model: "
                               f"{_last_line(e)}") from None
    return dict(zip(names, result))


def _label(model) -> str:
    return str(model) if isinstance(model, (str, Path)) else "the model"


def _last_line(e: Exception) -> str:
    lines = str(e).strip().splitlines() or [type(e).__name__]
    return lines[-1]
