"""Waveforms: VCD files with value changes only, and a GTKWave save file grouped by block.

Signals are grouped into scopes by the prefix of their name (``array_``, ``acc_``, ``simd_``,
``cu_``, ``dec_``, ``local_``, ``dram_``, ``cfg_`` ...), so GTKWave or Surfer shows one folder
per block.
"""

from __future__ import annotations

from pathlib import Path

from tcu_hw.files import write_atomic


def _ident(k: int) -> str:
    chars = [chr(c) for c in range(33, 127)]
    out = ""
    k += 1
    while k:
        k, r = divmod(k - 1, len(chars))
        out = chars[r] + out
    return out


def scope_of(name: str) -> str:
    return name.split("_", 1)[0] if "_" in name else "top"


def vcd_text(signals: dict, first_cycle: int, top: str = "tcu") -> str:
    """VCD text for {name: (width, values per cycle)} starting at ``first_cycle`` (1 ns per
    cycle)."""
    names = sorted(signals, key=lambda s: (scope_of(s), s))
    ids = {name: _ident(k) for k, name in enumerate(names)}
    out = ["$timescale 1ns $end", f"$scope module {top} $end"]
    scope = None
    for name in names:
        s = scope_of(name)
        if s != scope:
            if scope is not None:
                out.append("$upscope $end")
            out.append(f"$scope module {s} $end")
            scope = s
        width = signals[name][0]
        out.append(f"$var wire {width} {ids[name]} {name} $end" if width == 1 else
                   f"$var wire {width} {ids[name]} {name} [{width - 1}:0] $end")
    if scope is not None:
        out.append("$upscope $end")
    out += ["$upscope $end", "$enddefinitions $end"]
    length = max((len(v[1]) for v in signals.values()), default=0)
    previous = {}
    for t in range(length):
        changes = []
        for name in names:
            width, values = signals[name]
            v = int(values[t])
            if previous.get(name) != v:
                previous[name] = v
                changes.append(f"{v}{ids[name]}" if width == 1 else
                               f"b{v:b} {ids[name]}")
        if changes:
            out.append(f"#{first_cycle + t}")
            out.extend(changes)
    out.append(f"#{first_cycle + length}")
    return "\n".join(out) + "\n"


def gtkw_text(vcd_path: str, signals: dict, top: str = "tcu") -> str:
    """A GTKWave save file that loads ``vcd_path`` with one group per block."""
    out = [f'[dumpfile] "{vcd_path}"', "[timestart] 0"]
    groups: dict[str, list[str]] = {}
    for name in sorted(signals):
        groups.setdefault(scope_of(name), []).append(name)
    for scope, names in groups.items():
        out += ["@800200", f"-{scope}"]
        for name in names:
            width = signals[name][0]
            out += ["@28", f"{top}.{scope}.{name}"] if width == 1 else \
                   ["@22", f"{top}.{scope}.{name}[{width - 1}:0]"]
        out += ["@1000200", f"-{scope}"]
    return "\n".join(out) + "\n"


def write_waves(vcd_path, first_cycle: int, signals: dict) -> Path:
    """Write the VCD and, next to it, a ``.gtkw`` save file; returns the save file's path."""
    vcd_path = Path(vcd_path)
    write_atomic(vcd_path, vcd_text(signals, first_cycle))
    gtkw = vcd_path.with_suffix(".gtkw")
    write_atomic(gtkw, gtkw_text(vcd_path.name, signals))
    return gtkw



def simulate_until(block, done: str = "done", limit: int = 10_000, inputs=None, observe=None,
                   vcd=None):
    """Simulate a small PyRTL design (``pyrtl.Simulation`` with a trace of every named wire)
    until its 1-bit wire ``done`` is high; returns ``(simulation, cycles)``.

    ``inputs()``: the input values for the next cycle ({input name: value}); ``observe(sim)``:
    called after every cycle (e.g. a Python bus model sampling outputs); ``vcd``: write the
    whole run as a VCD file. Raises RuntimeError when ``done`` stays low for ``limit`` cycles.
    """
    import pyrtl
    with pyrtl.set_working_block(block):
        trace = pyrtl.SimulationTrace()
        sim = pyrtl.Simulation(tracer=trace, block=block)
        for cycles in range(1, limit + 1):
            sim.step(inputs() if inputs else {})
            if observe:
                observe(sim)
            if sim.inspect(done):
                break
        else:
            raise RuntimeError(f"'{done}' did not rise within {limit} cycles")
        if vcd:
            with open(vcd, "w") as f:
                trace.print_vcd(f)
    return sim, cycles


def memory_vectors(sim, block, memory: str, count: int, lanes: int, width: int):
    """The first ``count`` entries of the MemBlock named ``memory`` as signed lanes
    (``count`` × ``lanes`` numpy array of ``width``-bit values)."""
    import numpy as np

    from tcu_hw.blocks.lanes import from_int
    mem = sim.inspect_mem(block.get_memblock_by_name(memory))
    return np.array([from_int(mem.get(k, 0), lanes, width) for k in range(count)])
