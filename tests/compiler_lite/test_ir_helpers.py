"""The compiler's sort-free set helpers give exactly what the numpy calls they replace give
(compile speed depends on them; programs must stay byte-identical)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler_lite.ir import Space, Tensor, congruent_pairs, distinct, first_indices, \
    lane_table, unique_columns, unique_pairs, unique_rows

ints = st.lists(st.integers(-50, 5000), min_size=1, max_size=200)


@settings(max_examples=200, deadline=None)
@given(ints)
def test_distinct_is_np_unique(values):
    v = np.array(values, dtype=np.int64)
    np.testing.assert_array_equal(distinct(v), np.unique(v))
    spread = v * 1_000_003                      # a wide range takes the sorting path
    np.testing.assert_array_equal(distinct(spread), np.unique(spread))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 300), st.integers(0, 70), st.integers(-3, 3)),
                min_size=1, max_size=150))
def test_unique_columns_is_np_unique_along_axis(cols):
    rows = [np.array(r, dtype=np.int64) for r in zip(*cols)]
    want, want_inv = np.unique(np.stack(rows), axis=1, return_inverse=True)
    got, got_inv = unique_columns(rows, return_inverse=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_inv, want_inv.reshape(-1))
    np.testing.assert_array_equal(unique_pairs(rows[0], rows[1]),
                                  np.unique(np.stack(rows[:2]), axis=1))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=12), st.data())
def test_space_owners_is_unique_of_owner(sizes, data):
    space = Space(4)
    for k, size in enumerate(sizes):
        space.new(f"b{k}", size)
    top = space.buffers[-1].start + sizes[-1]
    vec = np.array(data.draw(st.lists(st.integers(0, top - 1), min_size=1, max_size=40)))
    np.testing.assert_array_equal(space.owners(vec), np.unique(space.owner(vec)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0, 0.25, np.nan]),
                         min_size=3, max_size=3), min_size=1, max_size=30))
def test_unique_rows_is_np_unique_along_rows(rows):
    a = np.array(rows)
    want, inv = np.unique(a, axis=0, return_inverse=True)
    got, got_inv = unique_rows(a)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_inv, inv.reshape(-1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-20, 60), min_size=1, max_size=100))
def test_first_indices_is_np_unique_return_index(values):
    o = np.array(values, dtype=np.int64)
    np.testing.assert_array_equal(first_indices(o), np.unique(o, return_index=True)[1])


def test_lane_table_and_congruent_pairs():
    n = 4
    # a [2, 6] tensor in vectors 10..13: row r, column c at vector 10 + 2r + c // 4, lane c % 4
    r, c = np.meshgrid(np.arange(2), np.arange(6), indexing="ij")
    t = Tensor((10 + 2 * r + c // 4) * n + c % 4)
    vecs, table = lane_table(t, n, np.arange(6.0), fill=-1.0)
    np.testing.assert_array_equal(vecs, [10, 11, 12, 13])
    np.testing.assert_array_equal(table[1], [4, 5, -1, -1])
    np.testing.assert_array_equal(table[2], [0, 1, 2, 3])
    # a per-row [2, 1] operand broadcasts along the lanes: not congruent; a copy of t is
    same = Tensor(t.idx + 40 * n)
    np.testing.assert_array_equal(congruent_pairs(t, same, n), [[10, 11, 12, 13],
                                                                 [50, 51, 52, 53]])
    assert congruent_pairs(t, Tensor((np.arange(2)[:, None] + 30) * n), n) is None
