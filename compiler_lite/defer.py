"""Moving instructions later in a program without changing what it computes.

A program's meaning is its instructions run one after the other (the golden emulator); the
hardware overlaps them but keeps that meaning (its hazard checks). So an instruction ``D``
may move past an instruction ``X`` when neither touches what the other writes: ``X`` does
not write what ``D`` reads, and does not read or write what ``D`` writes. The emitter uses
this to let a copy that nobody needs soon (a layer's raw output beside the rectified one
the next layer reads, :func:`compiler_lite.emit.trailing_saves`) drain after the next
layer's first MatMuls instead of sharing the accumulator port with the copy they wait for.

Footprints are spans ``(memory, lo, hi)`` (``hi`` inclusive) that cover an instruction's
strided addresses (:func:`tcu_hw.isa.address_run`, the ISA's address arithmetic, with the
base taken modulo its memory's address width as the hardware does), in local memory, the
accumulators, DRAM0, DRAM1 and the array's weight chain (LoadWeights writes it, every MatMul
reads it). An instruction whose footprint is not known here is never moved past: SIMD,
LoadLUT, Configure, a reserved kind, and any whose addresses wrap around or reach past its
memory's depth.
"""

from __future__ import annotations

from typing import Mapping

from tcu_hw.isa import (DataMove, DataMoveKind, LoadWeights, MatMul, NoOp, address_run,
                        clog2)

Span = tuple[str, int, int]
#: The weight chain, as a span.
WEIGHTS: Span = ("weights", 0, 0)


def depths_of(arch) -> Mapping[str, int]:
    """The memory depths (vectors) of an architecture, by span memory name
    (:attr:`tcu_hw.isa.Layout.memory_depths`)."""
    return arch.layout.memory_depths


def _spans(ins) -> tuple[list[Span], list[Span]] | None:
    """``(reads, writes)`` of ``ins`` before the depth check."""
    def span(memory: str, address: int, stride_code: int) -> Span:
        return memory, address, stride_code          # (resolved by footprint)

    if isinstance(ins, NoOp):
        return [], []
    if isinstance(ins, LoadWeights):
        reads = [] if ins.zeroes else [span("local", ins.local_address, ins.local_stride)]
        return reads, [WEIGHTS]
    if isinstance(ins, MatMul):
        acc = span("acc", ins.accumulator_address, ins.accumulator_stride)
        reads = [] if ins.zeroes else [span("local", ins.local_address, ins.local_stride)]
        return reads + [WEIGHTS] + ([acc] if ins.accumulate else []), [acc]
    if isinstance(ins, DataMove) and ins.known_kind is not None:
        kind = ins.known_kind
        local = span("local", ins.local_address, ins.local_stride)
        other = span(kind.memory, ins.other_address, ins.other_stride)
        if kind == DataMoveKind.LOCAL_TO_ACC_ACCUMULATE:
            return [local, other], [other]
        return ([other], [local]) if kind.to_local else ([local], [other])
    return None


def footprint(ins, depths: Mapping[str, int]) -> tuple[list[Span], list[Span]] | None:
    """``(reads, writes)`` of ``ins`` as spans, or None when not known here (see the
    module); ``depths``: vectors of each memory (:func:`depths_of`)."""
    fp = _spans(ins)
    if fp is None:
        return None
    out = ([], [])
    for spans, resolved in zip(fp, out):
        for memory, address, stride_code in spans:
            if memory == "weights":
                resolved.append(WEIGHTS)
                continue
            depth = depths[memory]
            run = address_run(address, stride_code, ins.size, clog2(depth))
            if run.wraps or run.highest >= depth:
                return None                     # (the hardware wraps it or refuses it)
            resolved.append((memory, run.lo, run.hi))
    return out


def _overlap(a: list[Span], b: list[Span]) -> bool:
    return any(m == n and lo <= hi2 and lo2 <= hi
               for m, lo, hi in a for n, lo2, hi2 in b)


def independent(moved: tuple[list[Span], list[Span]], ins,
                depths: Mapping[str, int]) -> bool:
    """Whether an instruction of footprint ``moved`` may go after ``ins``."""
    fp = footprint(ins, depths)
    if fp is None:
        return False
    reads, writes = moved
    other_reads, other_writes = fp
    return not (_overlap(writes, other_reads) or _overlap(writes, other_writes)
                or _overlap(reads, other_writes))


def defer(out: list, lo: int, hi: int, limit: int, depths: Mapping[str, int]) -> int:
    """Move ``out[lo:hi]`` later, past the instructions after it up to index ``limit``
    (exclusive) or the first one it may not pass; returns how many it passed."""
    block = out[lo:hi]
    fps = [footprint(ins, depths) for ins in block]
    if any(fp is None for fp in fps):
        return 0
    moved = ([s for fp in fps for s in fp[0]], [s for fp in fps for s in fp[1]])
    j = hi
    while j < min(limit, len(out)) and independent(moved, out[j], depths):
        j += 1
    out[lo:j] = out[hi:j] + block
    return j - hi
