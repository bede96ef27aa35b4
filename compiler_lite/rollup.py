"""Roll-up: consecutive per-vector operations whose two addresses both advance by a power-of-two
step become one instruction (TCU.md §4: vector i uses ``base + i·2^stride``, size = count − 1).

:func:`runs` is greedy from the left, one Python step per instruction (not per vector): it
finds where the pair of address differences changes with numpy, then takes the longest run
the stride codes, the size field and the per-operation flags allow.
"""

from __future__ import annotations

import numpy as np

#: flag values: a run takes the first definite flag and stops before a conflicting one
ANY = 2


def _pow2_code(d: np.ndarray, limit: int) -> np.ndarray:
    """Stride code of each difference (``d = 2^code``), or -1 when ``d`` is not a power of
    two below ``2^limit``."""
    d = np.asarray(d, dtype=np.int64)
    ok = (d > 0) & ((d & (d - 1)) == 0)
    code = np.frexp(d.astype(np.float64))[1].astype(np.int64) - 1
    code[~ok | (code >= limit)] = -1
    return code


def runs(a0, a1, *, s0: int, s1: int, max_count: int, flags=None, a0_free: bool = False,
         cut=None) -> list[tuple[int, int, int, int, int]]:
    """Split operations ``(a0[i], a1[i])`` into runs.

    ``s0``/``s1``: number of stride codes for each operand; ``max_count``: most vectors in
    one instruction; ``flags`` (optional ints): operations with different definite flags
    never share a run (``ANY`` joins either); ``a0_free``: operand 0 is ignored (MatMul with
    the zeroes flag); ``cut`` (optional, per pair of neighbours i, i+1): no run joins them
    (the runs of operations cut into pieces are those of each piece). Returns ``(start,
    count, code0, code1, flag)`` per run.
    """
    a1 = np.asarray(a1, dtype=np.int64)
    m = len(a1)
    if m == 0:
        return []
    a0 = np.zeros(m, dtype=np.int64) if a0_free else np.asarray(a0, dtype=np.int64)
    f = np.full(m, ANY, dtype=np.int64) if flags is None else np.asarray(flags, dtype=np.int64)
    out = []
    if m == 1:
        return [(0, 1, 0, 0, int(f[0]))]
    c1 = _pow2_code(np.diff(a1), s1)
    c0 = np.zeros(m - 1, dtype=np.int64) if a0_free else _pow2_code(np.diff(a0), s0)
    good = (c0 >= 0) & (c1 >= 0)
    if cut is not None:
        good &= ~np.asarray(cut, dtype=bool)
    key = np.where(good, c0 * 4096 + c1, -1)
    # seg_end[i]: last index j ≥ i of the constant stretch of key starting at or after i
    bounds = np.concatenate([np.nonzero(np.diff(key) != 0)[0], [m - 2]])
    seg_end = bounds[np.searchsorted(bounds, np.arange(m - 1))]
    # next index holding each definite flag value (for flag conflicts)
    nxt = {}
    definite = f[f != ANY]
    for v in (np.unique(definite) if len(definite) and (definite != definite[0]).any()
              else definite[:1]):
        pos = np.nonzero(f == v)[0]
        table = np.full(m + 1, m, dtype=np.int64)
        table[pos] = pos
        nxt[int(v)] = np.minimum.accumulate(table[::-1])[::-1]
    # plain lists: the loop below takes one element at a time
    key, seg_end, f, c0, c1 = (a.tolist() for a in (key, seg_end, f, c0, c1))
    nxt = {v: t.tolist() for v, t in nxt.items()}
    i = 0
    while i < m:
        if i == m - 1 or key[i] < 0:
            out.append((i, 1, 0, 0, f[i]))
            i += 1
            continue
        last = seg_end[i] + 1                   # run may cover i .. last
        last = min(last, i + max_count - 1)
        flag = f[i]
        if flag == ANY:
            firsts = [(t[i], v) for v, t in nxt.items() if t[i] <= last]
            if firsts:
                pos, flag = min(firsts)
        if flag != ANY:
            for v, t in nxt.items():
                if v != flag and t[i] <= last:
                    last = min(last, t[i] - 1)
        count = last - i + 1
        if count == 1:
            out.append((i, 1, 0, 0, flag))
        else:
            out.append((i, count, c0[i], c1[i], flag))
        i = last + 1
    return out


def whole_runs(a0, a1, free, flags, starts, *, s0: int, s1: int, max_count: int):
    """:func:`runs` of many segments at once, for the segments it answers with one run.

    The operations ``(a0[i], a1[i])`` are cut into segments from ``starts`` (increasing, the
    first 0) to the next start or the end; ``free[i]``: operand 0 of operation i is ignored
    (``a0_free``). Returns per segment ``(code0, code1, flag)`` when :func:`runs` of its
    operations (all free or none) is one run over the whole segment (a single operation:
    codes 0), else None (the segment needs :func:`runs`).
    """
    a0 = np.asarray(a0, dtype=np.int64)
    a1 = np.asarray(a1, dtype=np.int64)
    f = np.asarray(flags, dtype=np.int64)
    free = np.asarray(free, dtype=bool)
    m = len(a1)
    starts = np.asarray(starts, dtype=np.int64)
    size = np.diff(np.append(starts, m))
    nfree = np.add.reduceat(free.astype(np.int64), starts)
    all_free = nfree == size
    big = np.iinfo(np.int64).max
    fmin = np.minimum.reduceat(np.where(f == ANY, big, f), starts)
    fmax = np.maximum.reduceat(np.where(f == ANY, -big, f), starts)
    ok = ((fmin == big) | (fmin == fmax)) & (size <= max_count) & (all_free | (nfree == 0))
    flag = np.where(fmin == big, ANY, fmin)
    code0 = np.zeros(len(starts), dtype=np.int64)
    code1 = np.zeros(len(starts), dtype=np.int64)
    multi = np.nonzero(size > 1)[0]
    if len(multi):
        d0, d1 = np.diff(a0), np.diff(a1)
        c0, c1 = _pow2_code(d0, s0), _pow2_code(d1, s1)
        # changes[i]: how often the difference changes before difference i
        ch0 = np.concatenate([[0], np.cumsum(d0[1:] != d0[:-1])])
        ch1 = np.concatenate([[0], np.cumsum(d1[1:] != d1[:-1])])
        js = starts[multi]                      # first difference of the segment
        je = js + size[multi] - 2               # its last difference
        fr = all_free[multi]
        good = (ch1[je] == ch1[js]) & (c1[js] >= 0) & \
            (fr | ((ch0[je] == ch0[js]) & (c0[js] >= 0)))
        ok[multi] &= good
        code0[multi] = np.where(fr, 0, c0[js])
        code1[multi] = c1[js]
    return [(c0_, c1_, fl) if k else None
            for k, c0_, c1_, fl in zip(ok.tolist(), code0.tolist(), code1.tolist(),
                                       flag.tolist())]
