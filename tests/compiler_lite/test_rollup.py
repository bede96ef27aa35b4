"""Roll-up of per-vector operations into strided runs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler_lite.rollup import ANY, runs, whole_runs


def test_examples():
    assert runs([0, 1, 2, 3, 5, 7, 9, 10], [0, 2, 4, 6, 8, 10, 12, 13], s0=8, s1=8,
                max_count=100) == [(0, 4, 0, 1, ANY), (4, 3, 1, 1, ANY), (7, 1, 0, 0, ANY)]
    assert runs(None, [0, 1, 2, 3], s0=8, s1=8, max_count=3, a0_free=True) == \
        [(0, 3, 0, 0, ANY), (3, 1, 0, 0, ANY)]
    assert runs([0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], s0=8, s1=8, max_count=99,
                flags=[ANY, 1, 1, 0, 0, ANY]) == [(0, 3, 0, 0, 1), (3, 3, 0, 0, 0)]
    # a stride beyond the stride depth is not encodable
    assert len(runs([0, 256], [0, 1], s0=8, s1=8, max_count=9)) == 2


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60), st.sampled_from([0, 1, 2])),
                min_size=1, max_size=60),
       st.integers(1, 4), st.integers(1, 4), st.integers(1, 20))
def test_runs_cover_every_operation_exactly(ops, s0, s1, max_count):
    a0 = np.array([o[0] for o in ops])
    a1 = np.array([o[1] for o in ops])
    fl = np.array([o[2] for o in ops])
    at = 0
    for start, count, c0, c1, flag in runs(a0, a1, s0=s0, s1=s1, max_count=max_count,
                                           flags=fl):
        assert start == at and 1 <= count <= max_count
        assert c0 < s0 and c1 < s1
        i = np.arange(count)
        assert np.array_equal(a0[start:start + count], a0[start] + i * (1 << c0))
        assert np.array_equal(a1[start:start + count], a1[start] + i * (1 << c1))
        definite = set(fl[start:start + count].tolist()) - {ANY}
        assert len(definite) <= 1 and (not definite or flag in definite)
        at += count
    assert at == len(ops)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.sampled_from([0, 1, 2]),
                          st.booleans()), min_size=1, max_size=40),
       st.lists(st.integers(1, 39), max_size=6), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 12))
def test_whole_runs_agree_with_runs(ops, cuts, s0, s1, max_count):
    """Per segment, :func:`whole_runs` answers exactly when :func:`runs` of the segment (with
    its free operations, all or none) is one run, and with that run's codes and flag."""
    a0, a1, fl, free = (np.array(v) for v in zip(*ops))
    # strided stretches are the interesting case: make some
    a1 = np.where(np.arange(len(a1)) % 3 == 0, a1, np.arange(len(a1)) * 2)
    starts = np.array(sorted({0, *[c for c in cuts if c < len(ops)]}))
    got = whole_runs(a0, a1, free, fl, starts, s0=s0, s1=s1, max_count=max_count)
    ends = np.append(starts[1:], len(ops))
    for (lo, hi), answer in zip(zip(starts, ends), got):
        fr = free[lo:hi]
        if fr.any() and not fr.all():
            assert answer is None
            continue
        ref = runs(a0[lo:hi], a1[lo:hi], s0=s0, s1=s1, max_count=max_count, flags=fl[lo:hi],
                   a0_free=bool(fr.all()))
        if len(ref) == 1:
            assert answer == ref[0][2:], (ref, answer)
        else:
            assert answer is None
