"""Float models → quantized (QDQ) models with onnxruntime's own quantizer, for the integer
data types (``python -m compiler_lite --quantize int8 --calibrate SAMPLES.npz``).

The model is first prepared with ``quant_pre_process`` (batch norms folded into the
convolutions, as onnxruntime asks), then ``quantize_static`` writes the QDQ model: weights
symmetric per output channel, activations per tensor with zero points, MinMax calibration
on the samples (each sample on its own, the batch axis split). Nothing here calibrates by
hand.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping

import numpy as np

from tcu_hw.errors import CompileError

#: --quantize choice → the integer data type it needs
KINDS = {"int8": "INT8", "int16": "INT16"}


def quantize_model(model, kind: str, samples: Mapping[str, np.ndarray], workdir) -> Path:
    """The QDQ model of float ONNX model ``model`` (a path) for ``kind`` (``int8`` or
    ``int16``), calibrated on ``samples`` (arrays keyed by input name, samples stacked on
    the first axis); written into ``workdir``, its path returned."""
    try:
        from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                              quantize_static)
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError:
        raise CompileError("--quantize needs onnxruntime: pip install onnxruntime (or the "
                           "check extra)") from None
    if kind not in KINDS:
        raise CompileError(f"--quantize {kind!r}: allowed: {', '.join(KINDS)}")
    counts = {k: len(np.asarray(v)) for k, v in samples.items()}
    if len(set(counts.values())) != 1 or not min(counts.values(), default=0):
        raise CompileError(f"calibration samples: every input needs the same number of "
                           f"samples (at least 1) on its first axis; got {counts}")
    count = next(iter(counts.values()))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{k: np.asarray(v[i:i + 1], dtype=np.float32)
                                for k, v in samples.items()} for i in range(count)])

        def get_next(self):
            return next(self.items, None)

    work = Path(workdir)
    prepared, out = work / "prepared.onnx", work / f"quantized_{kind}.onnx"
    model = _current_opset(model, work)
    qtype = QuantType.QInt8 if kind == "int8" else QuantType.QInt16
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)         # the quantizer's notes per tensor
    try:
        quant_pre_process(str(model), str(prepared), skip_symbolic_shape=True)
        quantize_static(str(prepared), str(out), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=qtype, weight_type=qtype)
    except Exception as e:  # noqa: BLE001 - onnxruntime raises many kinds
        lines = str(e).strip().splitlines() or [type(e).__name__]
        raise CompileError(f"{model}: onnxruntime could not quantize the model to {kind}: "
                           f"{lines[-1]}") from None
    finally:
        logging.getLogger().setLevel(level)
    return out


def _current_opset(model, work: Path) -> str:
    """``model``, converted first when its opset is older than the front end's minimum (the
    quantizer writes per-channel DequantizeLinear, which needs opset 13)."""
    import onnx

    from .frontend import convert_opset, load_model
    m = load_model(model, str(model))
    converted, _, _ = convert_opset(m, str(model))
    if converted is m:
        return str(model)
    path = work / "converted.onnx"
    onnx.save(converted, str(path))
    return str(path)
