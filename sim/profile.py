"""Where a compiled model's cycles go on the PyRTL core: per-layer accounting, the sampler's
timeline, and a picture of both.

:func:`profile` runs a compiled model (``compiler_lite.compile_model``'s result) once on the
PyRTL core built with the performance sampler, with a counter mark at every layer's first
instruction. :func:`layer_rows` turns the marks into one row per layer (MAC floor, the
vectors of each kind of work, measured cycles and stall causes — what ``bench/roofline.py``
prints); :func:`timeline` decodes the sampler's words into which unit was busy or stalled
when; :func:`plot_profile` draws both (matplotlib, PNG or SVG by the file's suffix)::

    ┌ per layer: stacked MAC floor / padding / moves / SIMD / idle, measured cycles ┐
    └ timeline: array, accumulators, dataflow, DRAM0/1, local A/B, instructions     ┘

``python -m sim.check --plot FILE`` and ``python -m sim.run --plot FILE`` write it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tcu_hw.arch import Options
from tcu_hw.errors import ArtifactError
from tcu_hw.isa import SIMD, ConfigRegister, Configure, DataMove, LoadWeights, MatMul

#: the sampler's valid/ready pairs from bit 32 up (tcu_hw.blocks.sampler), as plotted
UNITS = ("array", "accumulators", "dataflow", "DRAM1", "DRAM0", "local port B",
         "local port A", "instructions")
#: samples the PyRTL testbench keeps (a ring)
SAMPLE_RING = 4096


@dataclass
class Profile:
    """A profiled run: the :class:`sim.pyrtl_backend.RunResult`, the instruction index where
    each layer starts (plus the end), the sampler words and their interval in cycles."""

    result: object
    bounds: list[int]
    samples: list[tuple[int, int]]
    interval: int

    @property
    def first_sample(self) -> int:
        """Index of the first kept sample (the ring keeps the last :data:`SAMPLE_RING`)."""
        return max(0, self.result.counters.get("samples", 0) - len(self.samples))

    @property
    def layer_starts(self) -> list[int]:
        """The cycle at which dispatch reached each layer's first instruction."""
        return [m["cycles"] for m in self.result.marks if m is not None]


def vector_split(program) -> dict:
    """Vectors (or instructions, for SIMD) of each kind of work in ``program``."""
    from compiler_lite.summary import DRAM_KINDS
    d = dict(matmul=0, weights=0, moves=0, simd=0, dram=0)
    for ins in program:
        if isinstance(ins, MatMul):
            d["matmul"] += ins.size + 1
        elif isinstance(ins, LoadWeights):
            d["weights"] += ins.size + 1
        elif isinstance(ins, DataMove):
            d["dram" if ins.kind in DRAM_KINDS else "moves"] += ins.size + 1
        elif isinstance(ins, SIMD):
            d["simd"] += 1
    return d


def profile(compiled, feeds: Mapping[str, np.ndarray], latency: int = 20,
            sample: bool = True) -> Profile:
    """Run ``compiled`` with ``feeds`` on the PyRTL core, marking every layer's start; with
    ``sample`` the core carries the sampler, set (by a Configure before the program) to an
    interval that spreads the ring of :data:`SAMPLE_RING` words over the whole run."""
    from .pyrtl_backend import board_timing, run_compiled
    bounds = np.cumsum([0] + [s.instructions for s in compiled.layers]).tolist()
    timing = board_timing(compiled.arch, latency, compiled.axi_width)
    if not sample:
        core, res = run_compiled(compiled, feeds, timing, marks=bounds)
        return Profile(res, bounds, [], 0)
    estimate = sum(s.cycles for s in compiled.layers) + latency * len(compiled.layers)
    interval = sample_interval(int(1.5 * estimate))
    head = [Configure(ConfigRegister.SAMPLE_INTERVAL, interval)]
    core, res = run_compiled(compiled, feeds, timing,
                             marks=[b + len(head) for b in bounds], head=head,
                             options=Options(sample_block_size=256))
    return Profile(res, bounds, core.samples(res.counters["samples"]), interval)


def sample_interval(cycles: int) -> int:
    """The sampler interval that spreads :data:`SAMPLE_RING` words over ``cycles``."""
    return min(0xFFFF, max(1, -(-int(cycles) // (SAMPLE_RING - 64))))


def profile_model(model, raw_inputs: Mapping[str, np.ndarray], latency: int = 20,
                  cycles: int = 0) -> Profile:
    """:func:`profile` for a `.tmodel` (no layers: only the sampler's timeline), run with
    raw inputs ({name: (vectors, n)}); ``cycles``: a known or expected run length, to size
    the sampling interval (default: 40 per instruction)."""
    from .model import load_model, load_program
    from .pyrtl_backend import board_timing, cached_core, program_bits_for
    model = load_model(model)
    count = len(load_program(model))
    interval = sample_interval(int(1.1 * (cycles or 40 * count)))
    head = [Configure(ConfigRegister.SAMPLE_INTERVAL, interval)]
    core = cached_core(model.arch, Options(sample_block_size=256),
                       program_bits=program_bits_for(count + 1))
    _, res = core.run_model(model, raw_inputs, board_timing(model.arch, latency), head=head)
    return Profile(res, [], core.samples(res.counters["samples"]), interval)


def layer_rows(compiled, prof: Profile) -> list[dict]:
    """One row per layer: ``layer``, ``macs``, ``floor`` (MAC-bound cycles), the vectors of
    :func:`vector_split`, ``beats128`` (128-bit AXI beats of its DRAM vectors), ``est`` (the
    compiler's estimate), measured ``cycles``, ``idle`` (cycles the compute unit issued
    nothing) and the stall counters ``hazard``, ``chain``, ``wwait``, ``dram_stall``,
    ``decoder`` over the layer."""
    c, res, bounds = compiled, prof.result, prof.bounds
    n = c.arch.array_size
    beat = max(1, -(-n * c.arch.dtype.bytes_per_scalar * 8 // 128))
    rows = []
    marks = list(res.marks)
    marks[-1] = dict(res.counters)          # the last layer runs to the end of the program
    for i, st in enumerate(c.layers):
        d = vector_split(c.program[bounds[i]:bounds[i + 1]])
        a, b = marks[i], marks[i + 1]
        delta = {k: b[k] - a[k] for k in a}
        rows.append({"layer": st.name, "macs": st.macs, "floor": st.macs / n ** 2, **d,
                     "beats128": d["dram"] * beat, "est": st.cycles,
                     "cycles": delta["cycles"],
                     "idle": delta["cycles"] - delta["compute_issue"],
                     "hazard": delta["hazard_stall"], "chain": delta["chain_stall"],
                     "wwait": delta["weight_wait"],
                     "dram_stall": delta["dram_stall"],
                     "decoder": delta["decoder_stall"]})
    return rows


def timeline(samples: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Sampler words → (program counters, states): ``states[k, u]`` is 0 idle, 1 stalled
    (valid without ready) or 2 busy (valid and ready) for unit ``UNITS[u]`` at sample k."""
    words = np.array([w for _, w in samples], dtype=np.uint64).reshape(-1)
    pc = (words & np.uint64(0xFFFFFFFF)).astype(np.int64)
    states = np.zeros((len(words), len(UNITS)), dtype=np.int8)
    for u in range(len(UNITS)):
        valid = (words >> np.uint64(32 + 2 * u)) & np.uint64(1)
        ready = (words >> np.uint64(33 + 2 * u)) & np.uint64(1)
        states[:, u] = np.where(valid == 1, np.where(ready == 1, 2, 1), 0)
    return pc, states


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ArtifactError("--plot needs matplotlib: pip install matplotlib (or the plot "
                            "extra: pip install -e \".[plot]\")") from None
    return plt


def plot_profile(path, title: str, rows: Sequence[dict] | None = None,
                 samples: Sequence[tuple[int, int]] = (), interval: int = 0,
                 layer_starts: Sequence[int] = (), first_sample: int = 0) -> Path:
    """Draw the per-layer split (``rows`` of :func:`layer_rows`) above the sampler's
    timeline (``samples`` every ``interval`` cycles from sample ``first_sample``, with
    ``layer_starts`` in cycles as lines) into ``path`` (PNG, SVG or PDF by its suffix);
    either part may be absent."""
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ArtifactError(f"--plot {path}: give a .png, .svg or .pdf file")
    plt = _pyplot()
    panels = [p for p in ("rows", "timeline") if (rows if p == "rows" else len(samples))]
    if not panels:
        raise ArtifactError(f"--plot {path}: nothing to draw")
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(max(8.0, 0.3 * len(rows or ())), 3.5 * len(panels)))
    axes = list(axes[:, 0])
    if rows:
        ax = axes.pop(0)
        parts = [("MAC floor", [r["floor"] for r in rows]),
                 ("padding", [max(0.0, r["matmul"] - r["floor"]) for r in rows]),
                 ("acc↔local moves", [r["moves"] for r in rows]),
                 ("SIMD", [r["simd"] for r in rows]),
                 ("idle", [max(0, r["idle"]) for r in rows])]
        bottom = np.zeros(len(rows))
        for label, values in parts:
            ax.bar(range(len(rows)), values, bottom=bottom, label=label)
            bottom += np.asarray(values, dtype=float)
        ax.plot(range(len(rows)), [r["cycles"] for r in rows], "k.", label="measured")
        ax.set_xticks(range(len(rows)), [r["layer"] for r in rows], rotation=90, fontsize=6)
        ax.set_ylabel("cycles")
        util = sum(r["floor"] for r in rows) / max(1, sum(r["cycles"] for r in rows))
        ax.set_title(f"{title}: per layer (MAC utilization {100 * util:.1f}%)", fontsize=9)
        ax.legend(fontsize=7)
    if len(samples):
        from matplotlib.colors import ListedColormap
        ax = axes.pop(0)
        _, states = timeline(samples)
        start = first_sample * interval
        ax.imshow(states.T, aspect="auto", interpolation="nearest",
                  cmap=ListedColormap(["white", "tab:red", "tab:green"]), vmin=0, vmax=2,
                  extent=(start, start + len(states) * interval, len(UNITS) - 0.5, -0.5))
        ax.set_yticks(range(len(UNITS)), UNITS, fontsize=7)
        for start in layer_starts:
            ax.axvline(start, color="0.6", linewidth=0.4)
        ax.set_xlabel(f"cycle (a sample every {interval} cycles; green busy, red stalled)")
        ax.set_title(f"{title}: sampler timeline", fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as e:
        raise ArtifactError(f"--plot {path}: cannot write it: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return path
