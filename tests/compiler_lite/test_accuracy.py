"""The precision figures (compiler_lite.accuracy): exact values on arrays made for them, ties
counted by their chance, and the figures that do not apply left out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler_lite.accuracy import (accuracy_table, compare_outputs, output_accuracy,
                                    topk_agreement)


def test_error_figures_are_exact():
    ref = np.array([[1.0, -1.0, 3.0, -3.0]])             # std = sqrt(5)
    got = ref + np.array([[0.5, -0.5, 0.0, 0.0]])        # rms = sqrt(0.125)
    r = output_accuracy("y", got, ref, lsb=1 / 256)
    assert r.max_abs == 0.5 and r.max_lsb == 128 and r.max_ref == 3.0
    assert r.rms_rel == pytest.approx(math.sqrt(0.125 / 5), rel=1e-12)
    assert r.samples == 1 and r.shape == (1, 4)


def test_top_k_counts_ties_by_their_chance():
    ref = np.array([[3.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]] * 4)
    got = np.array([[5, 5, 5, 0, 0, 0, 0],          # winner tied with 2 others: 1/3
                    [1, 9, 0, 0, 0, 0, 0],          # second: 0 for top-1, 1 for top-5
                    [9, 0, 0, 0, 0, 0, 0],          # agrees
                    [0, 1, 1, 1, 1, 1, 1]],         # last of all, tied with none below
                   dtype=float)
    assert topk_agreement(got, ref, 1) == pytest.approx((1 / 3 + 0 + 1 + 0) / 4)
    assert topk_agreement(got, ref, 5) == pytest.approx((1 + 1 + 1 + 0) / 4)
    flat = np.zeros_like(ref)
    assert topk_agreement(flat, ref, 1) == pytest.approx(1 / 7)      # a flat output: chance
    assert topk_agreement(flat, ref, 5) == pytest.approx(5 / 7)


def test_top_k_applies_to_logits_only():
    logits = output_accuracy("l", np.eye(6), np.eye(6))
    assert logits.top1 == 1.0 and logits.top5 == 1.0
    few = output_accuracy("f", np.eye(5), np.eye(5))
    assert few.top1 == 1.0 and few.top5 is None           # top-5 of 5 classes says nothing
    image = output_accuracy("i", np.ones((1, 3, 2, 2)), np.ones((1, 3, 2, 2)))
    assert image.top1 is None and image.top5 is None and image.rms_rel == 0.0
    const = output_accuracy("c", np.full((2, 1), 2.0), np.ones((2, 1)))
    assert const.rms_rel == math.inf and const.top1 is None


def test_mismatches_are_refused():
    with pytest.raises(ValueError, match="shape"):
        output_accuracy("y", np.zeros((1, 3)), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="no result for output"):
        compare_outputs({"a": np.zeros(2)}, {"a": np.zeros(2), "b": np.zeros(2)})
    with pytest.raises(ValueError, match="samples, classes"):
        topk_agreement(np.zeros(3), np.zeros(3), 1)


def test_table_has_a_row_per_output_and_the_extra_columns():
    rows = compare_outputs({"a": np.eye(6), "b": np.ones((1, 2, 2))},
                           {"a": np.eye(6) * 2, "b": np.ones((1, 2, 2))}, lsb=0.25)
    text = accuracy_table(rows, {"bit-exact": {"a": "yes", "b": "NO"}})
    head, a, b = text.splitlines()
    assert head.split()[:5] == ["output", "shape", "max|err|", "LSB", "rms/std"]
    assert head.endswith("bit-exact") and a.endswith("yes") and b.endswith("NO")
    # a: err = -I (6x6), rms = sqrt(1/6); ref = 2I, std = sqrt(5)/3: 54.8%
    assert a.split()[3:8] == ["1.00000", "4.0", "54.8%", "100.0%", "100.0%"]
    assert b.split()[4:9] == ["0.00000", "0.0", "0%", "-", "-"]
