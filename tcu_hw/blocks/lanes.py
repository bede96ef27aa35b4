"""How a vector of n scalars sits in a wire: lane i at bits [i·W, (i+1)·W), lane 0 lowest.

PyRTL helpers to split and join lanes, and numpy helpers to pack raw vectors into the integer
images that memories and ports hold (and back), used by simulators and tests.
"""

from __future__ import annotations

import numpy as np
import pyrtl
from pyrtl import WireVector


def split(vector: WireVector, n: int) -> list[WireVector]:
    """The n lanes of a vector wire (each vector.bitwidth // n bits)."""
    vector = pyrtl.as_wires(vector)                 # e.g. a memory read
    w = vector.bitwidth // n
    return [vector[i * w:(i + 1) * w] for i in range(n)]


def join(lanes: list[WireVector]) -> WireVector:
    """A vector wire from lanes (lane 0 in the low bits)."""
    return pyrtl.concat_list(list(lanes))


def pack(raw, width: int) -> np.ndarray:
    """(m, n) raw signed integers → (m, limbs) uint64 images of n·width-bit vectors."""
    raw = np.asarray(raw, dtype=np.int64)
    m, n = raw.shape
    bits = n * width
    limbs = (bits + 63) // 64
    u = (raw & ((1 << width) - 1)).astype(np.uint64)
    b = ((u[:, :, None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    b = b.reshape(m, bits)
    if limbs * 64 > bits:
        b = np.concatenate([b, np.zeros((m, limbs * 64 - bits), np.uint8)], axis=1)
    packed = np.packbits(b, axis=1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8").reshape(m, limbs)


def unpack(images, n: int, width: int) -> np.ndarray:
    """(m, limbs) uint64 images → (m, n) raw signed integers (int64)."""
    images = np.ascontiguousarray(np.asarray(images, dtype=np.uint64))
    m = images.shape[0]
    b = np.unpackbits(images.view(np.uint8).reshape(m, -1), axis=1, bitorder="little")
    b = b[:, :n * width].reshape(m, n, width).astype(np.int64)
    v = (b << np.arange(width, dtype=np.int64)).sum(axis=2)
    return v - ((v >> (width - 1)) << width)


def to_int(raw_vector, width: int) -> int:
    """One raw vector → its integer image (for constants and single values)."""
    out = 0
    for i, v in enumerate(raw_vector):
        out |= (int(v) & ((1 << width) - 1)) << (i * width)
    return out


def from_int(value: int, n: int, width: int) -> list[int]:
    """An integer image → the n raw signed lanes."""
    out = []
    for i in range(n):
        v = (int(value) >> (i * width)) & ((1 << width) - 1)
        out.append(v - (1 << width) if v >> (width - 1) else v)
    return out
