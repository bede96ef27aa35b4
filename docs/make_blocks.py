"""Generate ``docs/blocks/*.md``: a page per hardware block, from the code itself.

Each page has the block's summary and behaviour (its module docstring), how to build it
(an example that runs as written, which tests/test_docs.py runs; the constructor's parameters
and the class docstring), its ports (found on an instance with
:func:`tcu_hw.blocks.stream.ports`: streams and interfaces, then every wire with its
direction and width) and a timing diagram simulated from a short stimulus, so the pages
cannot drift from the blocks. Stimuli drive a block's sink streams from test-bench source
streams joined with :func:`~tcu_hw.blocks.stream.connect`, and diagram rows name ports by
their attribute path (``input.valid``), so a renamed port fails here instead of going stale.
Blocks that only make sense inside the core (decoder, compute unit, DRAM engine) get their
diagram from a small program on :class:`sim.pyrtl_backend.PyrtlCore` with probes.
Docstrings become Markdown: roles and literals code spans, a role naming a block with a page
a link to it, literal blocks (``::``) fenced text.

    python docs/make_blocks.py            # rewrite docs/blocks/
    python docs/make_blocks.py --check    # exit 1 if a page is out of date (tests use this)
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyrtl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tcu_hw.arch import preset  # noqa: E402
from tcu_hw.blocks import stream as st  # noqa: E402
from tcu_hw.blocks.lanes import from_int, to_int  # noqa: E402
from tcu_hw.numeric import data_type  # noqa: E402

OUT = ROOT / "docs" / "blocks"
DT = data_type("FP16BP8")
HIGH, LOW = "‾", "_"


# ------------------------------------------------------------------ docstrings → Markdown

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")
# a Google-style entry: "name: ...", "a, b: ...", "name (width): ...", "Status outputs (...):"
_ENTRY = re.compile(r"[A-Za-z_][\w.\[\]]*\s*[(:,/]|[A-Z]\w*\s+\w+\s*[(:]")
_NAMES = re.compile(r"[\w.\[\]]+(?:, [\w.\[\]]+)*")
_PARAGRAPH = re.compile(r"(Args|Ports|Outputs|Status outputs|Attributes|Latency)\b[^:]*:")


def _target(name: str, links: dict[str, str], here: str | None) -> str | None:
    """The page a cross reference points to (``tcu_hw.blocks.ram``, ``.ram``,
    ``WeightLoader.push``), or None when there is none or it is this page."""
    if name.startswith("."):
        name = "tcu_hw.blocks" + name
    parts = name.split(".")
    key = ".".join(parts[:3]) if parts[:2] == ["tcu_hw", "blocks"] else parts[0]
    page = links.get(key)
    return page if page != here else None


def inline(text: str, links: dict[str, str] | None = None, here: str | None = None) -> str:
    """reStructuredText roles and ````literals```` as Markdown code spans
    (``:class:`~a.b.C``` → ```C```); a role naming a block that has a page (its module or
    its class, keys of ``links``; not the page ``here``) becomes a link to that page."""
    def role(m: re.Match) -> str:
        code = "`" + (m[2].rsplit(".", 1)[-1] if m[1] else m[2]) + "`"
        page = _target(m[2], links or {}, here)
        return f"[{code}]({page})" if page else code

    text = _ROLE.sub(role, text)
    return re.sub(r"``([^`]+?)``", r"`\1`", text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _entry(text: str) -> str:
    """A list item; a leading name list (``a, b: ...``) becomes code."""
    head, sep, rest = text.partition(": ")
    if sep and _NAMES.fullmatch(head) and not head[0].isupper():
        text = ", ".join(f"`{h}`" for h in head.split(", ")) + ": " + rest
    return "- " + text


def markdown(doc: str, links: dict[str, str] | None = None, here: str | None = None) -> str:
    """A (dedented) docstring as Markdown: literal blocks (``::``) fenced as text, Google-style
    sections (``Args:`` and an indented block) as lists, roles and literals as code spans,
    cross references to other block pages as links (:func:`inline`)."""
    lines, out, fenced = doc.splitlines(), [], []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.endswith("::"):
            text = line[:-2].rstrip()
            if text:
                out.append(text if line.endswith(" ::") else text + ":")
            i += 1
            block = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > _indent(line)):
                block.append(lines[i].rstrip())
                i += 1
            body = "\n".join(block).strip("\n").split("\n")
            cut = min((_indent(b) for b in body if b), default=0)
            fenced.append(len(out) + 1)
            out += ["", "```text", *[b[cut:] for b in body], "```", ""]
            continue
        if (_indent(line) == 0 and line.endswith(":") and not line.startswith("- ")
                and nxt.strip() and _indent(nxt) > 0):
            out += [line, ""]
            i += 1
            base = _indent(lines[i])
            items: list[str] = []
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) >= base:
                text = lines[i].strip()
                if not items or (_indent(lines[i]) == base and _ENTRY.match(text)):
                    items.append(text)
                else:
                    items[-1] += " " + text
                i += 1
            out += [_entry(t) for t in items] + [""]
            continue
        if _PARAGRAPH.match(line) and out and out[-1]:
            out.append("")                      # "Latency: ..." starts a paragraph
        out.append(line)
        i += 1
    # roles and literals outside the fenced blocks
    result, k = [], 0
    for start in fenced:
        end = out.index("```", start + 1)
        result += inline("\n".join(out[k:start]), links, here).split("\n") + out[start:end + 1]
        k = end + 1
    result += inline("\n".join(out[k:]), links, here).split("\n")
    return re.sub(r"\n{3,}", "\n\n", "\n".join(result)).strip()


# ------------------------------------------------------------------------------ ports

def interfaces(instance) -> list[tuple[str, object, list[str]]]:
    """(path, stream or interface, other paths to it) of every Stream and Interface an
    instance exposes, each once, under its shortest path."""
    found: dict[int, tuple[object, list[str]]] = {}
    for path, value in st.handshakes(instance):
        found.setdefault(id(value), (value, []))[1].append(path)
    out = []
    for obj, paths in found.values():
        paths = sorted(paths, key=len)
        out.append((paths[0], obj, paths[1:]))
    return out


def members(interface: st.Interface) -> list[tuple[str, object]]:
    """The public streams and signals of an interface, in declaration order."""
    return [(k, v if isinstance(v, st.Stream) else v[0])
            for k, v in interface.members().items()]


def port_rows(instance, block: pyrtl.Block) -> list[tuple[str, str, str, int]]:
    """(attribute path, wire name, direction, bits) of every port wire of an unconnected
    instance, each wire once (under its shortest path); a plain attribute is an output when
    the block drives it."""
    best: dict[int, tuple] = {}
    for path, wire, kind in st.ports(instance, block):
        row = (path, wire.name, kind, wire.bitwidth)
        if id(wire) not in best or len(path) < len(best[id(wire)][0]):
            best[id(wire)] = row
    return list(best.values())


def _fields(s: st.Stream) -> str:
    return ", ".join(f"`{k}` ({w})" for k, w in s.fields.widths.items() if w)


def _stream_role(s: st.Stream) -> str:
    if not s.always_ready:
        return s.role
    return f"{s.role}, always ready" + (" (cannot wait)" if s.role == st.SOURCE else "")


def streams_list(instance) -> list[str]:
    """One line per stream or interface: role, payload fields, wire prefix."""
    lines = []
    for path, obj, aliases in interfaces(instance):
        also = f" (also {', '.join(f'`{a}`' for a in aliases)})" if aliases else ""
        if isinstance(obj, st.Stream):
            text = f"{_stream_role(obj)}: {_fields(obj)}"
        else:
            driven = {id(w): d for m, w, d in obj.wires()}
            parts = []
            for name, m in members(obj):
                if isinstance(m, st.Stream):
                    parts.append(f"`{name}` {_stream_role(m)} of {_fields(m)}")
                else:
                    way = "output" if driven[id(m)] else "input"
                    parts.append(f"`{name}` {way} ({m.bitwidth})")
            text = f"`{type(obj).__name__}`, {obj.side} side: " + "; ".join(parts)
        lines.append(f"- `{path}`{also}: {text}; wires `{obj.name}_*`")
    return lines


def ports_section(instance, block: pyrtl.Block) -> list[str]:
    streams = streams_list(instance)
    intro = ("Plain inputs are WireVectors to drive with `<<=`; every output is a named wire. "
             "Widths for the example parameters above.")
    if not streams:
        return [intro, "", *ports_table(instance, block)]
    return ["Handshaking ports are streams (`valid`, `ready` and one wire per payload field; "
            "a transfer in each cycle where both are high) and interfaces (named groups of "
            "streams and signals). `connect(source, sink)` joins a stream to its peer, or an "
            "interface to its twin, and checks directions and widths; a sink can also be "
            "driven with `stream.drive(valid, **fields)`. An always-ready sink has no `ready` "
            "wire (it takes a transfer in every cycle); an always-ready source cannot wait, so "
            "it connects only to an always-ready sink. " + intro, "",
            "Streams and interfaces:", "", *streams, "", *ports_table(instance, block)]


def ports_table(instance, block: pyrtl.Block) -> list[str]:
    out = ["| port | wire | direction | bits |", "|---|---|---|---|"]
    out += [f"| `{a}` | `{w}` | {d} | {b} |" for a, w, d, b in port_rows(instance, block)]
    return out


# ------------------------------------------------------------------------- simulation

def _safe(path: str) -> str:
    return re.sub(r"\W+", "_", path).strip("_")


def bench(instance, block: pyrtl.Block) -> dict[str, pyrtl.Input]:
    """Drive every input of ``instance`` from a PyRTL Input, keyed by attribute path
    (``input.valid``, ``input.data``, ``r_addr``): each sink stream from a test-bench source
    stream (``drive`` + ``connect``), each source stream into a test-bench sink whose
    ``ready`` is an input, and every undriven plain wire directly."""
    inputs: dict[str, pyrtl.Input] = {}
    done: set[int] = set()

    def new(path: str, width: int) -> pyrtl.Input:
        inputs[path] = pyrtl.Input(width, f"stim_{_safe(path)}")
        return inputs[path]

    def stream(path: str, s: st.Stream) -> None:
        done.update(id(w) for _, w, _ in s.wires())
        if s.role == st.SINK:
            src = s.peer(f"tb_{_safe(path)}")
            src.drive(new(f"{path}.valid", 1), **{k: new(f"{path}.{k}", w)
                                                  for k, w in s.fields.widths.items() if w})
            st.connect(src, s)
        else:
            sink = s.peer(f"tb_{_safe(path)}")
            st.connect(s, sink)
            if not s.always_ready:
                sink.ready <<= new(f"{path}.ready", 1)

    for path, obj, _ in interfaces(instance):
        if isinstance(obj, st.Stream):
            stream(path, obj)
            continue
        for name, m in members(obj):
            if isinstance(m, st.Stream):
                stream(f"{path}.{name}", m)
    for path, wire, kind in st.ports(instance):
        if id(wire) in done or isinstance(wire, pyrtl.Const):
            continue
        done.add(id(wire))
        if kind == "input":
            wire <<= new(path, wire.bitwidth)
    return inputs


def traced(block: pyrtl.Block) -> list:
    return [w for w in block.wirevector_set
            if not w.name.startswith(("tmp", "const")) and not isinstance(w, pyrtl.Const)]


@dataclass
class Run:
    instance: object
    block: pyrtl.Block
    trace: dict


def simulate(make: Callable, steps, cycles: int | None = None) -> Run:
    """Build ``make()`` in a new block, drive its inputs (:func:`bench`) and simulate.
    ``steps``: a list of {attribute path: value} per cycle (missing inputs are 0), or a
    function ``(cycle, peek) -> dict`` where ``peek(path)`` reads a port in the previous
    cycle (for stimuli that wait for ``ready``)."""
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        instance = make()
        inputs = bench(instance, block)
        trace = pyrtl.SimulationTrace(wires_to_track=traced(block))
        sim = pyrtl.Simulation(tracer=trace, block=block)
        wires = {p: w for p, w, _ in st.ports(instance)}

        def peek(path: str) -> int:
            return sim.inspect(wires[path].name)

        for k in range(len(steps) if cycles is None else cycles):
            step = steps(k, peek) if callable(steps) else steps[k]
            unknown = set(step) - set(inputs)
            if unknown:
                raise KeyError(f"{type(instance).__name__}: no input {sorted(unknown)}; "
                               f"inputs are {sorted(inputs)}")
            sim.step({i.name: step.get(p, 0) for p, i in inputs.items()})
    return Run(instance, block, trace.trace)


def internal(block: pyrtl.Block, name: str) -> pyrtl.WireVector:
    """A named internal signal of a block (not a port), for a diagram row."""
    wire = block.get_wirevector_by_name(name)
    if wire is None:
        raise KeyError(f"no signal {name!r} in the design (renamed?)")
    return wire


def rows_of(instance, specs: list) -> list[tuple[str, str, str]]:
    """Diagram rows (label, wire name, kind) from specs: a port path (``"input.valid"``),
    (path, kind) or (label, port path or wire, kind); kind defaults to "bit" for 1-bit
    wires, else "int"."""
    wires = {p: w for p, w, _ in st.ports(instance)}
    rows = []
    for spec in specs:
        if isinstance(spec, str):
            spec = (spec, spec, None)
        elif len(spec) == 2:
            spec = (spec[0], *spec)
        label, ref, kind = spec
        if isinstance(ref, str):
            if ref not in wires:
                raise KeyError(f"{type(instance).__name__} has no port {ref!r}")
            ref = wires[ref]
        rows.append((label, ref.name, kind or ("bit" if ref.bitwidth == 1 else "int")))
    return rows


def diagram(trace: dict, rows: list[tuple], cycles: int, first: int = 0) -> str:
    """A text timing diagram: one line per signal, one 5-character column per cycle.
    ``rows``: (label, signal name, kind) with kind "bit", "int", "hex", "byte0" (the low
    byte), "low32" (the low 32 bits) or "lane0" (lane 0 of a vector, signed)."""
    width = 5
    label_w = max(len(r[0]) for r in rows) + 2
    head = "cycle".ljust(label_w) + "".join(str(first + c).rjust(width - 1).ljust(width)
                                            for c in range(cycles))
    lines = [head]
    for label, name, kind in rows:
        if name not in trace:
            raise KeyError(f"{name!r} is not traced")
        cells = []
        for v in list(trace[name])[:cycles]:
            v = int(v)
            if kind == "bit":
                cells.append((HIGH if v else LOW) * width)
                continue
            if kind == "lane0":
                v = from_int(v, 1, DT.width)[0]
            elif kind in ("byte0", "low32"):
                v &= 0xFF if kind == "byte0" else 0xFFFFFFFF
            text = "." if v == 0 and kind != "lane0" else (hex(v)[2:] if kind == "hex"
                                                           else str(v))
            cells.append(text[-(width - 1):].rjust(width - 1) + " ")
        lines.append(label.ljust(label_w) + "".join(cells))
    return "\n".join(lines)


def vec(values) -> int:
    return to_int(values, DT.width)


@dataclass
class Page:
    name: str                   # the class (or function) documented
    module: str
    ctor: str                   # the statement that builds the example instance
    timing: str                 # diagram text (or a Markdown table for functions)
    note: str
    fresh: Callable | None      # () -> (unconnected instance, its block), for the ports
    setup: tuple[str, ...] = ()  # imports and statements the example needs before ctor


def fresh(make: Callable) -> Callable:
    """A callable giving (instance, block) of a new, unconnected instance (for its ports)."""
    def build():
        block = pyrtl.Block()
        with pyrtl.set_working_block(block):
            return make(), block
    return build


#: the example's setup for blocks built from a data type, or from an architecture's layout
FP16 = ("from tcu_hw.numeric import FP16BP8",)
LAYOUT = ("from tcu_hw.arch import preset", 'layout = preset("cmoda7").layout')


def block_page(name, module, ctor, make, steps, rows, note, cycles=None, setup=()) -> Page:
    """A page whose diagram is simulated from ``steps`` on ``make()``."""
    run = simulate(make, steps, cycles)
    n = len(steps) if cycles is None else cycles
    return Page(name, module, ctor, diagram(run.trace, rows_of(run.instance, rows), n), note,
                fresh(make), tuple(setup))


# ------------------------------------------------------------------------------ stimuli

def systolic_array() -> Page:
    from tcu_hw.blocks.systolic_array import SystolicArray
    n = 4
    rng = np.random.default_rng(1)
    tile = rng.integers(-256, 256, (n + 1, n))
    x = rng.integers(-256, 256, (3, n))
    steps = [{"weights.valid": 1, "weights.data": vec(tile[r])} for r in range(n, -1, -1)]
    steps += [{"input.valid": 1, "input.data": vec(x[k]), "input.tag": k} for k in range(3)]
    steps += [{}] * 6
    rows = ["weights.valid", "pending", "fresh", "input.valid", "input.tag", "output.valid",
            "output.tag", ("output.data lane 0", "output.data", "lane0")]
    note = ("Five pushes on `weights` shift `[bias, rows]` into the staging chain (row 3 "
            "first, bias last); the first vector that enters `input` after them switches to "
            "that tile (`pending` falls), and as no vector in flight still reads the copy, "
            "the copy takes the tile in the same cycle (`fresh` stays low); each result "
            "leaves on `output` n + 1 = 5 cycles after its vector entered, with its tag.")
    return block_page("SystolicArray", "tcu_hw.blocks.systolic_array",
                      "array = SystolicArray(n=4, dt=FP16BP8, tag_width=2)",
                      lambda: SystolicArray(n, DT, tag_width=2), steps, rows, note, setup=FP16)


def weight_loader() -> Page:
    from tcu_hw.blocks.weight_loader import WeightLoader
    lay = preset("cmoda7").layout
    common = {"push_ok_next": 1}
    load = {"loads.valid": 1, "loads.laddr": 12, "loads.size": 3, "loads.uses": 1,
            "loads.lo": 9, "loads.hi": 12, "loads.epoch": 1}
    grants = [(0, 0), (0, 0), (1, 0), (0, 1), (0, 1), (1, 0), (1, 0), (0, 0), (0, 0)]
    steps = []
    for k, (a, b) in enumerate(grants):
        step = dict(common, **(load if k == 0 else {}))
        step["switched_next"] = 0 if k < 2 else 1
        step["local_a.grant"], step["local_b.grant"] = a, b
        step["local_a.rdata"] = step["local_b.rdata"] = 0x100 + k
        steps.append(step)
    rows = ["loads.valid", "switched_next", "read_addr", "local_a.want", "local_a.grant",
            "local_b.want", "local_b.grant", "push.valid", ("push.data", "hex"), "done_next"]
    note = ("A LoadWeights of four vectors (local 12 down to 9) with epoch 1 waits until the "
            "bank switch before it has happened (`switched_next` = 1); each read then takes "
            "port A when the compute unit grants it, else asks for port B, and its vector is "
            "pushed a cycle later (here `rdata` is a made-up word per cycle); `done_next` "
            "counts the LoadWeights fully pushed.")
    return block_page("WeightLoader", "tcu_hw.blocks.weight_loader",
                      "loader = WeightLoader(layout, vector_bits=64)",
                      lambda: WeightLoader(lay, 64), steps, rows, note, setup=LAYOUT)


def accumulator() -> Page:
    from tcu_hw.blocks.accumulator import Accumulator
    one = 256
    steps = [{"write.valid": 1, "write.addr": 3, "write.data": vec([one, 0, 0, 0])},
             {"write.valid": 1, "write.addr": 3, "write.data": vec([2 * one, 0, 0, 0]),
              "write.accumulate": 1},
             {"write.valid": 1, "write.addr": 3, "write.data": vec([3 * one, 0, 0, 0]),
              "write.accumulate": 1},
             {"r_addr": 3}, {"r_addr": 3}, {"r_addr": 3}, {}]
    rows = ["write.valid", "write.addr", "write.accumulate",
            ("write.data lane 0", "write.data", "lane0"), "busy", "pending.addr", "r_addr",
            ("r_data lane 0", "r_data", "lane0")]
    note = ("A write of 1.0 then two back-to-back accumulates (2.0, 3.0) to the same address "
            "(raw values, ×256): each add sees the previous result (forwarded), so the read "
            "returns 6.0 (1536); a read presented at cycle t sees writes presented at t-2 "
            "(`pending` is the write presented at t-1).")
    return block_page("Accumulator", "tcu_hw.blocks.accumulator",
                      "acc = Accumulator(depth=16, n=4, dt=FP16BP8)",
                      lambda: Accumulator(16, 4, DT), steps, rows, note, setup=FP16)


def local_memory() -> Page:
    from tcu_hw.blocks.local_memory import LocalMemory
    steps = [{"a.addr": 2, "a.write": 1, "a.wdata": 0x11},
             {"a.addr": 2, "b.addr": 2},
             {"b.addr": 5, "b.write": 1, "b.wdata": 0x22},
             {"a.addr": 5}, {}]
    rows = ["a.addr", "a.write", ("a.rdata", "hex"), "b.addr", "b.write", ("b.rdata", "hex")]
    note = ("Port `a` writes 0x11 to address 2; both ports read it in the next cycle and get "
            "it one cycle later (registered reads); a write on port `b` is seen by port `a` a "
            "cycle after it commits.")
    return block_page("LocalMemory", "tcu_hw.blocks.local_memory",
                      "local = LocalMemory(depth=16, width=64)", lambda: LocalMemory(16, 64), steps,
                      rows, note)


def ram() -> Page:
    from tcu_hw.blocks.ram import Ram
    steps = [{"waddr": 4, "write": 1, "wdata": 0x1234}, {"raddr[0]": 4, "raddr[1]": 4},
             {"raddr[1]": 7}, {}]
    rows = ["waddr", "write", "raddr[0]", ("rdata[0]", "hex"), "raddr[1]", ("rdata[1]", "hex")]
    note = ("A simple dual-port (`sdp`) RAM with two read ports: the address is registered, "
            "the data follows one cycle later (block RAM timing).")
    return block_page("Ram", "tcu_hw.blocks.ram", 'ram = Ram("ram", "sdp", width=16, '
                      'depth=16, reads=2)', lambda: Ram("ram", "sdp", 16, 16, reads=2), steps, rows,
                      note)


def simd() -> Page:
    from compiler_lite.ops.lut import tables
    from tcu_hw import numeric
    from tcu_hw.blocks.simd import SimdArray
    from tcu_hw.isa import SimdOp
    arch = preset("cmoda7").with_changes(lut_count=2, lut_depth=8, simd_registers_depth=3)
    tabs = [numeric.to_fixed(t_, arch.dtype)[0] for t_ in
            tables(lambda v: np.maximum(v, 0) * 0.5, "linear", -4, 4, arch, True)]
    steps = []
    for t_ in range(3):
        for i in range(2):
            steps.append({"lut.valid": 1, "lut.table": t_, "lut.index": i,
                          "lut.data": vec(tabs[t_][4 * i:4 * i + 4])})
    x = vec([512, -256, 128, 0])
    steps += [{"command.valid": 1, "command.op": SimdOp.LOOKUP, "command.dest": 1,
               "command.input": x},
              {"command.valid": 1, "command.op": SimdOp.MULTIPLY, "command.left": 1,
               "command.right": 3, "command.dest": 1},
              {"command.valid": 1, "command.op": SimdOp.ADD, "command.left": 1,
               "command.right": 2}, {}]
    run = simulate(lambda: SimdArray(4, DT, 3, 2, 8), steps)
    rows = rows_of(run.instance, [
        "lut.valid", "lut.table", "command.valid", "command.op", "command.dest",
        ("command.input lane 0", "command.input", "lane0"),
        ("R1 lane 0", internal(run.block, "simd_r1"), "lane0"), ("out lane 0", "out", "lane0")])
    note = ("Tables are loaded through `lut` a vector at a time (keys, values, slopes), then "
            "`Lookup → Multiply(R1, R3) → Add(R1, R2)` on `command` evaluates a "
            "piecewise-linear function: here 0.5·relu(x) of x = 2.0 (512) gives 1.0 (256). "
            "`out` is combinational in the cycle of the command; registers change at the end "
            "of it.")
    return Page("SimdArray", "tcu_hw.blocks.simd",
                "simd = SimdArray(n=4, dt=FP16BP8, registers=3, lut_count=2, lut_depth=8)",
                diagram(run.trace, rows, len(steps)), note,
                fresh(lambda: SimdArray(4, DT, 3, 2, 8)), FP16)


def axis() -> Page:
    from tcu_hw.blocks.axis import InstructionStream
    data = bytes(range(1, 1 + 9 * 4)) + bytes(4)
    words = [int.from_bytes(data[k:k + 8], "little") for k in range(0, len(data), 8)]
    offer = [1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    fed = {"words": 0, "offered": False}

    def steps(k, peek):
        # AXI-Stream source: hold the word until it is taken (valid & ready)
        if fed["offered"] and peek("words.ready"):
            fed["words"] += 1
        fed["offered"] = bool(offer[k]) and fed["words"] < len(words)
        step = {"instructions.ready": int(k not in (3, 4))}
        if fed["offered"]:
            step.update({"words.valid": 1, "words.data": words[fed["words"]]})
        return step

    rows = ["words.valid", "words.ready", "instructions.valid", "instructions.ready",
            ("instructions.data (byte 0)", "instructions.data", "byte0")]
    note = ("9-byte instructions from a 64-bit stream: a word is taken when `words.ready` is "
            "high (it fits after the instruction leaving this cycle; the source holds it until "
            "then); an instruction leaves each cycle one is complete and `instructions.ready` "
            "is high (`instructions.data` byte 0 shown: 1, 10, 19, 28 are the first bytes of "
            "instructions 0 to 3).")
    return block_page("InstructionStream", "tcu_hw.blocks.axis",
                      "stream = InstructionStream(instruction_bytes=9, data_width=64)",
                      lambda: InstructionStream(9, 64), steps, rows, note, cycles=len(offer))


def sampler() -> Page:
    from tcu_hw.blocks.sampler import Sampler
    steps = [{"interval": 3, "pc": k, "pairs": 0b01, "samples.ready": int(k not in (6, 7, 8))}
             for k in range(13)]
    rows = ["interval", "pc", "samples.valid", "samples.ready", "samples.last",
            ("samples.data (pc)", "samples.data", "low32"), "dropped"]
    note = ("Every 3 cycles a word (pc in bits 31:0) is offered on `samples`; `last` on every "
            "second word; while the consumer is not ready the word holds and newer samples "
            "are dropped.")
    return block_page("Sampler", "tcu_hw.blocks.sampler", "sampler = Sampler(block_size=2)",
                      lambda: Sampler(2), steps, rows, note)


def config_registers() -> Page:
    from tcu_hw.blocks.config_registers import ConfigRegisters
    from tcu_hw.isa import ConfigRegister
    steps = [{"write.valid": 1, "write.register": ConfigRegister.TIMEOUT, "write.value": 3},
             {"dispatched": 1}, {"dispatched": 1},
             {"write.valid": 1, "write.register": ConfigRegister.PROGRAM_COUNTER,
              "write.value": 40},
             {"dispatched": 1}, {"stalled": 1}, {"stalled": 1}, {"stalled": 1}, {"stalled": 1},
             {"dispatched": 1}, {}]
    rows = ["write.valid", "write.register", "write.value", "dispatched", "stalled", "pc",
            "timeout_cycles", "timeout"]
    note = ("Configure 0x8 sets the timeout to 3 cycles; the pc counts dispatched "
            "instructions and Configure 0xA sets it (40); the `timeout` flag rises after 3 "
            "consecutive stalled cycles.")
    return block_page("ConfigRegisters", "tcu_hw.blocks.config_registers",
                      "cfg = ConfigRegisters(decoder_timeout=100)",
                      lambda: ConfigRegisters(decoder_timeout=100), steps, rows, note)


def axi() -> Page:
    from sim.axi_model import AxiSlaveModel
    from tcu_hw.blocks.axi import AxiMaster
    sys.path.insert(0, str(ROOT / "examples"))
    import axi_memory as ex
    x = np.arange(56).reshape(14, 4) * 10
    block, master = ex.build(x)
    slave = AxiSlaveModel(1 << 14, ex.WIDTH, latency=3, stall=0.0, seed=0)
    inputs, observe = ex.bus(master, slave)
    cycles = 48
    with pyrtl.set_working_block(block):
        trace = pyrtl.SimulationTrace(wires_to_track=traced(block))
        sim = pyrtl.Simulation(tracer=trace, block=block)
        for _ in range(cycles):
            sim.step(inputs())
            observe(sim)
    t = dict(trace.trace)
    for ch in (master.aw, master.ar):                   # show the length only while valid
        t[ch.payload.len.name] = [v if ok else 0 for v, ok in
                                  zip(t[ch.payload.len.name], t[ch.valid.name])]
    rows = rows_of(master, ["core.req.valid", "core.req.write", "core.req.ready", "aw.valid",
                            "aw.len", "w.valid", "w.ready", "w.last", "b.valid", "ar.valid",
                            "ar.len", "r.valid", "r.last", "core.rdata.valid"])
    note = ("Fourteen 8-byte vectors written to vector 500 (byte 4000) over a 32-bit bus, "
            "two beats per vector: the write crosses 4 KiB at byte 4096, so it goes as a "
            "burst of 24 beats (`aw.len` 23) and one of 4 (`aw.len` 3); the read of the same "
            "vectors waits until both write responses are in. Read latency 3. (The design is "
            "`examples/axi_memory.py`; `AxiMaster.signals()` gives the AXI wires by Tensil's "
            "names, `awvalid` = `aw.valid`.)")
    ctor = "master = AxiMaster(" + ", ".join(f"{k}={v}" for k, v in ex.MASTER.items()) + ")"
    return Page("AxiMaster", "tcu_hw.blocks.axi", ctor, diagram(t, rows, cycles), note,
                fresh(lambda: AxiMaster(**ex.MASTER)))


def fixed() -> Page:
    from tcu_hw import numeric
    from tcu_hw.blocks import fixed as fx
    sys.path.insert(0, str(ROOT / "tests" / "tcu_hw" / "blocks"))
    from harness import run_vectors
    cases = [(-26, 68, 0), (3, 128, 0), (1, 128, 0), (-1, 128, 0), (-3, 128, 0),
             (32767, 256, 32767), (-32768, 256, -1), (256, 256, 256)]
    xs, ys, zs = (np.array(c) for c in zip(*cases))
    got = run_vectors(lambda x, y, z: fx.mac(x, y, z, DT),
                      {"x": (16, xs), "y": (16, ys), "z": (16, zs)}, 16)
    ref = numeric.mac(xs, ys, zs, DT)
    lines = ["| x (raw) | y (raw) | z (raw) | hardware | `numeric.mac` | note |",
             "|---:|---:|---:|---:|---:|---|"]
    notes = ["Tensil's golden: −0.1016 × 0.2656 → −0.0273", "product 384 → 1.5 LSB → 2 (even)",
             "product 128: exactly half → 0 (even)", "−128 → 0 (even)", "−384 → −2 (even)",
             "saturates at the top", "saturates at the bottom", "1 × 1 + 1 = 2"]
    for (x, y, z), g, r, note in zip(cases, got, ref, notes):
        lines.append(f"| {x} | {y} | {z} | {g} | {r} | {note} |")
    setup = ("import pyrtl", *FP16, 'x, y, z = (pyrtl.Input(16, name) for name in "xyz")',
             'p = pyrtl.Output(16, "p")')
    ctor = "\n".join(["p <<= fixed.mac(x, y, z, FP16BP8)", "sim = pyrtl.Simulation()",
                      'sim.step({"x": 3, "y": 128, "z": 0})',
                      'print(sim.inspect("p"))        # prints 2: the product 384 is 1.5 LSB, '
                      'rounded to even'])
    return Page("mac", "tcu_hw.blocks.fixed", ctor, "\n".join(lines),
                "Combinational; results of the PyRTL MAC for FP16BP8 (bp = 8), simulated, next "
                "to the contract's reference.", None, setup)


def core_pages() -> list[Page]:
    """Decoder, compute unit, accumulator drain and DRAM engine: a small program on the
    core, with probes."""
    from sim.pyrtl_backend import DramTiming, PyrtlCore
    from tcu_hw.asm import format_instruction
    from tcu_hw.blocks.acc_drain import AccDrain
    from tcu_hw.blocks.compute import ComputeUnit
    from tcu_hw.blocks.decoder import Decoder
    from tcu_hw.blocks.dram_engine import DramEngine
    from tcu_hw.isa import SIMD, DataMove, DataMoveKind as K, LoadWeights, MatMul, SimdOp
    arch = preset("cmoda7")
    n = arch.array_size
    program = [DataMove(K.DRAM1_TO_LOCAL, 0, 0, 0, 0, n),
               DataMove(K.DRAM0_TO_LOCAL, 8, 0, 0, 0, 3),
               LoadWeights(0, 0, n), MatMul(8, 0, 0, 0, 3), SIMD(SimdOp.ZERO, 0, 0, 1),
               SIMD(SimdOp.MAX, 0, 1, 0, read_address=1, write_address=1, read=True,
                    write=True),
               DataMove(K.ACC_TO_LOCAL_RELU, 16, 0, 0, 0, 3), MatMul(12, 0, 4, 0, 3),
               DataMove(K.LOCAL_TO_DRAM0, 16, 0, 8, 0, 3)]
    sim = PyrtlCore(arch, program_bits=8, probes=True)
    rng = np.random.default_rng(0)
    sim.run(program, dram0={0: rng.integers(-300, 300, (4, n))},
            dram1={0: rng.integers(-300, 300, (n + 1, n))}, timing=DramTiming(latency=4),
            window=(0, len(program)))
    first, signals = sim.trace
    t = {k: v for k, (w, v) in signals.items()}
    cycles = min(46, max(len(v) for v in t.values()))
    listing = "\n".join(f"{pc}: {format_instruction(i)}" for pc, i in enumerate(program))
    core = sim.core
    dec, cu, de = core.decoder, core.compute, core.dram
    drain = cu.drain

    def named(name):                            # a signal of the core that is not a port
        return internal(sim.block, name)

    lay = arch.layout
    common = (f"The program (cmoda7: n = 4; DRAM latency 4):\n\n```text\n{listing}\n```\n\n"
              "Cycles from the start of the run:")
    pages = [
        ("Decoder", "tcu_hw.blocks.decoder", "decoder = Decoder(layout, word)", dec, [
            ("instruction valid", named("dec_valid"), "bit"),
            ("incoming opcode", "fields.opcode", "int"),
            ("to_compute", named("dec_to_compute_q"), "bit"),
            ("to_dram", named("dec_to_dram_q"), "bit"), ("dispatch", named("dec_dispatch"), "bit"),
            ("waits for compute", named("dec_conflict_with_compute"), "bit"),
            ("waits for DRAM", named("dec_conflict_with_dram"), "bit"),
            ("pc", core.cfg.pc, "int")],
         common + " the decoder classifies each incoming instruction (`incoming opcode`) "
         "and the decode register holds its class (`to_compute`, `to_dram`); the core dispatches one instruction per cycle unless it "
         "writes local memory where an instruction still in flight in the other unit reads "
         "or writes. An instruction that only reads is dispatched at once and its reads are "
         "chained: the MatMul reads each input vector right after the DRAM0 load writes it "
         "(`cu_stall_chain` meanwhile), and the final DRAM store reads each vector right "
         "after the acc→local move writes it.",
         lambda: Decoder(lay, pyrtl.WireVector(8 * lay.instruction_bytes, "word"))),
        ("ComputeUnit", "tcu_hw.blocks.compute", "cu = ComputeUnit(arch.layout, arch.dtype)", cu, [
            "instructions.valid", "issue", ("index", named("cu_index"), "int"),
            ("local addr", named("cu_laddr"), "int"),
            ("acc/out addr", named("cu_oaddr"), "int"),
            ("stall: push", named("cu_stall_push"), "bit"),
            ("stall: acc", named("cu_stall_acc"), "bit"),
            ("stall: chain", named("cu_stall_chain"), "bit"),
            ("array.input.valid", cu.array.input.valid, "bit"),
            ("array.weights.valid", cu.array.weights.valid, "bit"),
            ("acc.write.valid", cu.acc.write.valid, "bit")],
         common + " the weight loader pushes the tile as the DRAM1 load writes it "
         "(`array.weights.valid`) while the MatMul waits for its pushes (`stall: push`, after "
         "its inputs arrived); then one micro-op (one vector) issues per cycle: the 4 MatMul "
         "vectors, the SIMDs and the next MatMul's vectors follow each other, while the "
         "accumulator drain moves the first block out beside them; results reach the "
         "accumulators n + 1 cycles after they enter the array.",
         lambda: ComputeUnit(lay, arch.dtype)),
        ("AccDrain", "tcu_hw.blocks.acc_drain", "drain = AccDrain(arch.layout, arch.dtype)",
         drain, ["moves.valid", ("cleared", named("drain_act_cleared"), "bit"),
                 "acc_hold", "acc_read", ("acc addr", named("drain_acc_addr"), "int"),
                 ("sequencer issue", named("cu_issue"), "bit"),
                 "local_a.want", "local_a.grant", "local_b.grant"],
         common + " the rectified move enters the drain behind the MatMul and the SIMDs "
         "that write its accumulators; it reads them once those have issued (`cleared`) and "
         "their writes have landed (`acc_hold`), and writes local memory through port A in "
         "the cycles the next MatMul leaves it, else port B, while the sequencer issues that "
         "MatMul.",
         lambda: AccDrain(lay, arch.dtype)),
        ("DramEngine", "tcu_hw.blocks.dram_engine",
         "dram = DramEngine(arch.layout, vector_bits=64)", de, [
            "moves.valid", ("DRAM1 requests active", named("dram_c1_rg_active"), "bit"),
            "dram1.req.valid", "dram1.rdata.valid",
            ("DRAM0 requests active", named("dram_c0_rg_active"), "bit"),
            "dram0.req.valid", "dram0.rdata.valid",
            ("DRAM1 local side", named("dram_c1_ls_active"), "bit"),
            ("DRAM0 local side", named("dram_c0_ls_active"), "bit"),
            ("port B addr", named("dram_local_addr"), "int"),
            ("port B write", named("dram_local_write"), "bit")],
         common + " each DRAM port has its own channel (run-ahead ring, queue, request "
         "generator, local side): the DRAM0 load's request goes out while the DRAM1 load's "
         "data is still arriving, and both local sides write local memory through port B, "
         "where the channel favoured last (a chained reader waited for it; at first DRAM0) "
         "goes first and the other takes the cycles it leaves.",
         lambda: DramEngine(lay, n * arch.dtype.width)),
    ]
    arch_setup = ("from tcu_hw.arch import preset", 'arch = preset("cmoda7")')
    setup = {"Decoder": ("import pyrtl", *LAYOUT,
                         'word = pyrtl.WireVector(8 * layout.instruction_bytes, "word")'),
             "ComputeUnit": arch_setup, "DramEngine": arch_setup, "AccDrain": arch_setup}
    return [Page(name, mod, ctor, diagram(t, rows_of(inst, rows), cycles, first), note,
                 fresh(make), setup[name])
            for name, mod, ctor, inst, rows, note, make in pages]


PAGES = [systolic_array, weight_loader, accumulator, simd, local_memory, ram, fixed, axi, axis,
         sampler, config_registers]


# ------------------------------------------------------------------------------ pages

def _signature(fn, returns: bool = False) -> str:
    """A signature with its annotations unquoted (and without the return annotation, for a
    constructor)."""
    sig = inspect.signature(fn)
    if not returns:
        sig = sig.replace(return_annotation=inspect.Signature.empty)
    return re.sub(r"(: |-> )'([^']*)'", r"\1\2", str(sig))


def build_it(p: Page, mod, links: dict[str, str], here: str) -> list[str]:
    """The "Build it" section: an example that runs as written (imports, the signatures as
    comments, ``from_arch`` too where there is one, the statement that builds the example
    instance) and the class docstring."""
    obj = getattr(mod, p.name)
    if inspect.isclass(obj):
        imports = [f"from {p.module} import {p.name}"]
        signatures = [f"# {p.name}{_signature(obj)}"]
        if hasattr(obj, "from_arch"):
            signatures.append(f"# {p.name}.from_arch{_signature(obj.from_arch)}")
    else:
        package, short = p.module.rsplit(".", 1)
        imports = [f"from {package} import {short}"]
        signatures = [f"# {short}.{p.name}{_signature(obj, returns=True)}"]
    imports += [line for line in p.setup if line.startswith(("import ", "from "))]
    imports = sorted(set(imports), key=lambda line: (line.startswith("from "), line))
    statements = [line for line in p.setup if not line.startswith(("import ", "from "))]
    return ["## Build it", "", "```python", *imports, "", *signatures, *statements, p.ctor,
            "```", "", markdown(inspect.getdoc(obj) or "", links, here), ""]


def page(p: Page, links: dict[str, str], here: str) -> str:
    mod = importlib.import_module(p.module)
    doc = inspect.getdoc(mod) or ""
    summary, _, rest = doc.partition("\n")
    parts = [f"# {p.name} — `{p.module}`", "", markdown(summary, links, here), "",
             *build_it(p, mod, links, here)]
    if p.fresh is not None:
        parts += ["## Ports", "", *ports_section(*p.fresh()), "", "## Timing", "",
                  "```text", p.timing, "```"]
    else:
        parts += ["## Examples", "", p.timing]
    parts += ["", p.note, "", "## Behaviour", "", markdown(rest.strip(), links, here), ""]
    text = "\n".join(parts)
    leaked = re.search(r":(class|func|meth|mod|data|attr):`|``", _prose(text))
    if leaked:
        raise ValueError(f"{p.name}: reStructuredText left in the page: {leaked[0]!r}")
    return text


def _prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def page_file(p: Page) -> str:
    return f"{p.module.rsplit('.', 1)[1]}.md"


def render_all() -> dict[str, str]:
    pages = [fn() for fn in PAGES] + core_pages()
    links = {key: page_file(p) for p in pages for key in (p.module, p.name)}
    index = ["# Hardware blocks", "", "One page per block of `tcu_hw/blocks/`, generated by "
             "`python docs/make_blocks.py` from the code (ports found on an instance, timing "
             "simulated), so they stay true. Every block is built from its own parameters "
             "(lanes, data type, depths and widths; `from_arch` derives them from "
             "an architecture) and exposes its handshaking ports as streams and interfaces "
             "(`tcu_hw.blocks.stream`) that `connect(source, sink)` joins; "
             "`tcu_hw.core.Core` composes them. Each page's first example runs as written "
             "(`tests/test_docs.py` runs it).", "", "| block | module | what it does |",
             "|---|---|---|"]
    out = {}
    for p in pages:
        fname = page_file(p)
        out[fname] = page(p, links, fname)
        summary = (inspect.getdoc(importlib.import_module(p.module)) or "").split("\n")[0]
        index.append(f"| [{p.name}]({fname}) | `{p.module}` | {markdown(summary, links)} |")
    out["README.md"] = "\n".join(index) + "\n"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    pages = render_all()
    out = Path(args.out)
    stale = []
    for name, text in pages.items():
        path = out / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            out.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if args.check and stale:
        print("out of date: " + ", ".join(stale) + " (run python docs/make_blocks.py)")
        return 1
    print(f"{len(pages)} pages {'checked' if args.check else 'written'} in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
