"""How far a compiled model's outputs are from float: the figures every data type is judged by.

Per output tensor, over every sample given:

- ``max|err|``: the largest absolute difference from the float reference, also in units of
  the data type's last place (LSB) for fixed point;
- ``rms/std``: rms(error) / std(reference), the error as a fraction of the output's spread
  (0 is exact; 1 is no better than predicting the mean);
- ``top-1`` and ``top-5`` agreement, for outputs shaped ``(samples, classes)`` (logits): the
  fraction of samples whose float top-1 class is the model's top-1 (top-5: among its five
  largest). Ties in the model's scores count by their chance under a random tie-break (a
  float winner tied with two others at the top counts 1/3 for top-1), so a flat output never
  looks accurate. Top-5 needs more than five classes.

Nothing here runs a model: :func:`compare_outputs` takes the arrays (``sim.check`` and the
compiler's ``--calibrate`` compute them on the golden emulator and onnxruntime).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

__all__ = ["OutputAccuracy", "output_accuracy", "compare_outputs", "topk_agreement",
           "accuracy_table"]


@dataclass(frozen=True)
class OutputAccuracy:
    """The figures of one output (see the module's docstring). ``lsb`` is the data type's
    last place (None for FLOAT32); ``top1``/``top5`` are None where they do not apply."""

    name: str
    shape: tuple
    samples: int
    max_abs: float
    rms_rel: float
    max_ref: float
    lsb: float | None = None
    top1: float | None = None
    top5: float | None = None

    @property
    def max_lsb(self) -> float | None:
        return None if not self.lsb else self.max_abs / self.lsb


def topk_agreement(got: np.ndarray, ref: np.ndarray, k: int) -> float:
    """Mean over rows of the chance that the float top-1 class of ``ref`` is among the top
    ``k`` of ``got`` (rows are samples, columns classes; ties in ``got`` broken at random)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.ndim != 2 or got.shape != ref.shape or got.shape[0] == 0:
        raise ValueError(f"top-k agreement needs two equal (samples, classes) arrays, got "
                         f"{got.shape} and {ref.shape}")
    target = got[np.arange(len(got)), ref.argmax(axis=1)][:, None]
    above = (got > target).sum(axis=1)                     # classes surely ranked higher
    tied = (got == target).sum(axis=1)                     # itself and its ties
    return float(np.clip((k - above) / tied, 0.0, 1.0).mean())


def output_accuracy(name: str, got, ref, lsb: float | None = None,
                    samples: int | None = None) -> OutputAccuracy:
    """The figures of one output: ``got`` (the compiled model) against ``ref`` (float), both
    in the model's layout with the samples stacked on the first axis."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"output {name!r}: shape {got.shape} differs from the reference's "
                         f"{ref.shape}")
    if ref.size == 0:
        return OutputAccuracy(name, ref.shape, samples or 0, 0.0, 0.0, 0.0, lsb)
    err = got - ref
    std = float(ref.std())
    rms = float(np.sqrt(np.mean(err * err)))
    rel = rms / std if std > 0 else (0.0 if rms == 0 else math.inf)
    top1 = top5 = None
    if ref.ndim == 2 and ref.shape[1] >= 2:
        top1 = topk_agreement(got, ref, 1)
        top5 = topk_agreement(got, ref, 5) if ref.shape[1] > 5 else None
    return OutputAccuracy(name, ref.shape, samples if samples is not None else ref.shape[0],
                          float(np.abs(err).max()), rel, float(np.abs(ref).max()), lsb,
                          top1, top5)


def compare_outputs(got: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray],
                    lsb: float | None = None, samples: int | None = None
                    ) -> list[OutputAccuracy]:
    """:func:`output_accuracy` of every output of ``ref``, in its order. ``lsb``: one LSB
    for every output, or {output: LSB} (a quantized model's outputs have scales of their
    own)."""
    missing = [k for k in ref if k not in got]
    if missing:
        raise ValueError(f"no result for output(s) {missing}")
    per = lsb if isinstance(lsb, Mapping) else {k: lsb for k in ref}
    return [output_accuracy(k, got[k], ref[k], per.get(k), samples) for k in ref]


def _percent(x: float | None, digits: str = ".1f") -> str:
    return "-" if x is None else f"{100 * x:{digits}}%"


def _label(name: str) -> str:
    return name if len(name) <= 24 else "…" + name[-23:]


def accuracy_table(rows: list[OutputAccuracy],
                   extra: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The rows as a fixed-width table: output, shape, max|err| (and in LSB), rms/std, top-1,
    top-5, max|float|, then one column per key of ``extra`` ({column: {output: text}}).
    rms/std shows three significant digits (0.00412% for a wide type), top-k one decimal."""
    extra = dict(extra or {})
    head = (f"{'output':<24} {'shape':<16} {'max|err|':>10} {'LSB':>7} {'rms/std':>8} "
            f"{'top-1':>6} {'top-5':>6} {'max|float|':>10}")
    lines = [head + "".join(f"  {k}" for k in extra)]
    for r in rows:
        lsb = "-" if r.max_lsb is None else f"{r.max_lsb:.1f}"
        line = (f"{_label(r.name):<24} {str(list(r.shape)):<16} {r.max_abs:>10.5f} "
                f"{lsb:>7} {_percent(r.rms_rel, '.3g'):>8} {_percent(r.top1):>6} "
                f"{_percent(r.top5):>6} {r.max_ref:>10.3f}")
        lines.append(line + "".join(f"  {col[r.name]}" for col in extra.values()))
    return "\n".join(lines)
