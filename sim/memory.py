"""Sparse vector memory for the DRAM models: up to 2^32 vectors, pages allocated on write.

Reads of never-written vectors give zeros. Addresses are vector indices (already wrapped by
the caller); values are (k, lanes) arrays of the data type's raw dtype.
"""

from __future__ import annotations

import numpy as np

#: Elements per page (vectors per page = this / lanes, rounded to a power of two).
PAGE_ELEMENTS = 1 << 18


class PagedMemory:
    """``depth`` vectors of ``lanes`` scalars, stored as lazily allocated pages."""

    def __init__(self, depth: int, lanes: int, dtype) -> None:
        self.depth = int(depth)
        self.lanes = int(lanes)
        self.dtype = np.dtype(dtype)
        vectors = max(1, PAGE_ELEMENTS // self.lanes)
        self.shift = min(vectors.bit_length() - 1, max(self.depth - 1, 1).bit_length())
        self.mask = (1 << self.shift) - 1
        self.pages: dict[int, np.ndarray] = {}

    def clear(self) -> None:
        self.pages.clear()

    def _page(self, p: int) -> np.ndarray:
        page = self.pages.get(p)
        if page is None:
            page = self.pages[p] = np.zeros((1 << self.shift, self.lanes), dtype=self.dtype)
        return page

    def read(self, addrs) -> np.ndarray:
        """Vectors at ``addrs`` (an int array), as a new (k, lanes) array."""
        addrs = np.asarray(addrs, dtype=np.int64)
        pages = addrs >> self.shift
        lo, hi = int(pages.min()), int(pages.max())
        if lo == hi:
            page = self.pages.get(lo)
            if page is None:
                return np.zeros((addrs.size, self.lanes), dtype=self.dtype)
            return page[addrs & self.mask]
        out = np.zeros((addrs.size, self.lanes), dtype=self.dtype)
        for p in np.unique(pages):
            page = self.pages.get(int(p))
            if page is not None:
                sel = pages == p
                out[sel] = page[addrs[sel] & self.mask]
        return out

    def write(self, addrs, values) -> None:
        """Store ``values[i]`` at ``addrs[i]`` (addresses must be distinct)."""
        addrs = np.asarray(addrs, dtype=np.int64)
        values = np.asarray(values, dtype=self.dtype).reshape(-1, self.lanes)
        pages = addrs >> self.shift
        lo, hi = int(pages.min()), int(pages.max())
        if lo == hi:
            self._page(lo)[addrs & self.mask] = values
            return
        for p in np.unique(pages):
            sel = pages == p
            self._page(int(p))[addrs[sel] & self.mask] = values[sel]

    def read_range(self, base: int, count: int) -> np.ndarray:
        return self.read(np.arange(base, base + count, dtype=np.int64))

    def write_range(self, base: int, values) -> None:
        values = np.asarray(values).reshape(-1, self.lanes)
        if base < 0 or base + values.shape[0] > self.depth:
            raise IndexError(f"vectors {base}..{base + values.shape[0] - 1} are outside "
                             f"0..{self.depth - 1}")
        self.write(np.arange(base, base + values.shape[0], dtype=np.int64), values)

    def used(self) -> dict[int, np.ndarray]:
        """Allocated pages, for comparing whole memories: {first vector: page}."""
        return {p << self.shift: page for p, page in sorted(self.pages.items())}

    def equals(self, other: "PagedMemory") -> bool:
        """Same contents (never-allocated pages count as zeros)."""
        if (self.depth, self.lanes, self.shift) != (other.depth, other.lanes, other.shift):
            return False
        for p in set(self.pages) | set(other.pages):
            a, b = self.pages.get(p), other.pages.get(p)
            if a is None:
                a, b = b, a
            if b is None:
                if a.any():
                    return False
            elif not np.array_equal(a, b):
                return False
        return True
