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


def runs(a0, a1, *, s0: int, s1: int, max_count: int, flags=None, a0_free: bool = False
         ) -> list[tuple[int, int, int, int, int]]:
    """Split operations ``(a0[i], a1[i])`` into runs.

    ``s0``/``s1``: number of stride codes for each operand; ``max_count``: most vectors in
    one instruction; ``flags`` (optional ints): operations with different definite flags
    never share a run (``ANY`` joins either); ``a0_free``: operand 0 is ignored (MatMul with
    the zeroes flag). Returns ``(start, count, code0, code1, flag)`` per run.
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
    i = 0
    while i < m:
        if i == m - 1 or key[i] < 0:
            out.append((i, 1, 0, 0, int(f[i])))
            i += 1
            continue
        last = seg_end[i] + 1                   # run may cover i .. last
        last = min(last, i + max_count - 1)
        flag = int(f[i])
        if flag == ANY:
            firsts = [(int(t[i]), v) for v, t in nxt.items() if t[i] <= last]
            if firsts:
                pos, flag = min(firsts)
        if flag != ANY:
            for v, t in nxt.items():
                if v != flag and t[i] <= last:
                    last = min(last, int(t[i]) - 1)
        count = last - i + 1
        if count == 1:
            out.append((int(i), 1, 0, 0, flag))
        else:
            out.append((int(i), int(count), int(c0[i]), int(c1[i]), flag))
        i = last + 1
    return out
