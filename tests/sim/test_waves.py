"""Waveforms: the streamed VCD (pyvcd) holds exactly the simulated values, the GTKWave save
file groups them by block, and the Verilator trace builds dump VCD and FST."""

from __future__ import annotations

import numpy as np
import pytest
from vcd.reader import TokenKind, tokenize

from sim.backends import SimulatedBackend
from sim.conformance import xor_case
from sim.model import load_model, read_input_csvs
from sim.pyrtl_backend import PyrtlCore
from sim.verilator_backend import VerilatorError, VerilatorTop
from sim.waves import VcdStream, block_groups, gtkw_text, write_waves
from tcu_hw.arch import Options, board_axi_width
from tcu_hw.errors import ArtifactError, TcuError
from tcu_hw.top import port_list

from ..conftest import requires_gcc, requires_verilator, shared_path


def read_vcd(path) -> tuple[dict, dict, list[int]]:
    """({scope.name: width}, {scope.name: [(time, value)]}, every timestamp) of a VCD."""
    widths, changes, times, scope, names, now = {}, {}, [], [], {}, None
    with open(path, "rb") as f:
        for tok in tokenize(f):
            if tok.kind is TokenKind.SCOPE:
                scope.append(tok.scope.ident)
            elif tok.kind is TokenKind.UPSCOPE:
                scope.pop()
            elif tok.kind is TokenKind.VAR:
                name = ".".join(scope + [tok.var.reference])
                names.setdefault(tok.var.id_code, []).append(name)
                widths[name] = tok.var.size
            elif tok.kind is TokenKind.CHANGE_TIME:
                now = tok.time_change
                times.append(now)
            elif tok.kind in (TokenKind.CHANGE_SCALAR, TokenKind.CHANGE_VECTOR):
                change = tok.data
                for name in names[change.id_code]:
                    changes.setdefault(name, []).append((now, int(change.value)))
    return widths, changes, times


def per_cycle(changes: list, first: int, cycles: int) -> list[int]:
    """A signal's value on each of ``cycles`` cycles from its value changes."""
    values, k, value = [], 0, None
    for t in range(first, first + cycles):
        while k < len(changes) and changes[k][0] <= t:
            value = changes[k][1]
            k += 1
        values.append(value)
    return values


# ------------------------------------------------------------------------- the VCD stream
def test_stream_writes_every_value_chunk_by_chunk(tmp_path):
    rng = np.random.default_rng(3)
    cycles = 300
    signals = {"cu_issue": (1, rng.integers(0, 2, cycles).astype(np.uint64)),
               "cfg_pc": (32, np.repeat(np.arange(30, dtype=np.uint64), 10)),
               "acc_wide": (100, np.array([int(x) << 60 for x in rng.integers(0, 1 << 40, cycles)],
                                          dtype=object)),
               "idle": (1, np.ones(cycles, np.uint64))}
    path = tmp_path / "w.vcd"
    with VcdStream(path, {k: w for k, (w, _) in signals.items()}) as vcd:
        for a, b in ((0, 1), (1, 130), (130, 130), (130, 300)):     # uneven, one empty
            vcd.write(57 + a, {k: v[a:b] for k, (_, v) in signals.items()})
    assert (vcd.first_cycle, vcd.cycles) == (57, cycles)
    widths, changes, times = read_vcd(path)
    assert widths == {"tcu.cu.cu_issue": 1, "tcu.cfg.cfg_pc": 32, "tcu.acc.acc_wide": 100,
                      "tcu.top.idle": 1}
    for name, (_, values) in signals.items():
        full = next(k for k in widths if k.endswith("." + name))
        assert per_cycle(changes[full], 57, cycles) == [int(v) for v in values], name
    assert times[0] == 57 and times[-1] == 57 + cycles          # one cycle past the last
    assert changes["tcu.top.idle"] == [(57, 1)]                 # changes only
    assert not list(tmp_path.glob(".*tmp*"))


def test_stream_refuses_a_gap_and_leaves_no_file_when_it_fails(tmp_path):
    path = tmp_path / "w.vcd"
    with pytest.raises(ValueError, match="cycle 10"):
        with VcdStream(path, {"a": 1}) as vcd:
            vcd.write(0, {"a": np.zeros(5, np.uint64)})
            vcd.write(10, {"a": np.zeros(5, np.uint64)})
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TcuError, match="cannot write it"):
        VcdStream(tmp_path / "missing" / "w.vcd", {"a": 1}).write(0, {"a": np.zeros(1)})


def test_gtkw_groups_signals_by_block():
    text = gtkw_text("w.vcd", block_groups({"cu_issue": 1, "cfg_pc": 32, "cu_laddr": 13}))
    assert text.splitlines() == [
        '[dumpfile] "w.vcd"', "[timestart] 0",
        "@800200", "-cfg", "@22", "tcu.cfg.cfg_pc[31:0]", "@1000200", "-cfg",
        "@800200", "-cu", "@28", "tcu.cu.cu_issue", "@22", "tcu.cu.cu_laddr[12:0]",
        "@1000200", "-cu"]


# ----------------------------------------------------------------- the PyRTL core's window
@pytest.fixture(scope="module")
def xor_core():
    case = xor_case("xor_2x2_memory256", shared_path("conformance"))
    return case, PyrtlCore(case.arch, probes=True)


@requires_gcc
def test_streamed_window_equals_the_simulation(xor_core, tmp_path):
    case, core = xor_core
    run = case.runs[0]
    core.run(case.program, dram0=run.images.dram0, dram1=run.images.dram1, window=(3, 6))
    first, signals = core.trace
    path = tmp_path / "w.vcd"
    with VcdStream(path, {name: width for name, width in core.probe_names.values()}) as vcd:
        core.run(case.program, dram0=run.images.dram0, dram1=run.images.dram1, window=(3, 6),
                 on_trace=vcd.write)
    assert core.trace is None and (vcd.first_cycle, vcd.cycles) == (first, len(
        signals["cfg_pc"][1]))
    widths, changes, _ = read_vcd(path)
    assert len(widths) == len(signals) > 100
    for name, (width, values) in signals.items():
        full = f"tcu.{name.split('_', 1)[0] if '_' in name else 'top'}.{name}"
        assert widths[full] == width
        assert per_cycle(changes[full], first, len(values)) == [int(v) for v in values], name
    # the in-memory writer (examples, docs) gives the same file
    write_waves(tmp_path / "m.vcd", first, signals)
    assert (tmp_path / "m.vcd").read_text() == path.read_text()
    assert "tcu.cu.cu_issue" in (tmp_path / "m.gtkw").read_text()


def run_xor_with_waves(xor_model, backend: str, vcd):
    """The batch-4 XOR model on ``backend`` with a waveform of pcs 3..5, outputs checked:
    (the backend, the model, its raw inputs, the run's stats)."""
    tmodel, inp, expected = xor_model
    model = load_model(tmodel)
    raw, _ = read_input_csvs(model, [inp])
    sim = SimulatedBackend(model.arch, backend)
    outs, stats = sim.run(model, raw, vcd=vcd, window=(3, 5))
    assert np.array_equal(outs["y"].ravel()[:expected.size], expected.ravel())
    return sim, model, raw, stats


@requires_gcc
def test_backend_streams_the_waveform(xor_model, tmp_path):
    v = run_xor_with_waves(xor_model, "pyrtl", tmp_path / "w.vcd")[3]["vcd"]
    assert v["format"] == "vcd" and v["cycles"] > 0 and v["signals"] > 100
    widths, changes, times = read_vcd(tmp_path / "w.vcd")
    assert len(widths) == v["signals"] and times[0] == v["first_cycle"]
    pcs = per_cycle(changes["tcu.cfg.cfg_pc"], v["first_cycle"], v["cycles"])
    assert pcs[0] == 3 and max(pcs) > 5                  # enters the window, runs past it
    assert '[dumpfile] "w.vcd"' in (tmp_path / "w.gtkw").read_text()


@pytest.mark.parametrize("backend, vcd, window, message", [
    ("emulator", "w.vcd", None, "need --backend pyrtl or verilator"),
    ("pyrtl", None, (1, 2), "add --vcd"),
    ("pyrtl", "w.fst", None, "FST waveforms need --backend verilator"),
])
def test_backend_refuses_waveforms_it_cannot_write(xor_model, backend, vcd, window, message):
    tmodel, inp, _ = xor_model
    model = load_model(tmodel)
    raw, _ = read_input_csvs(model, [inp])
    with pytest.raises(ArtifactError, match=message):
        SimulatedBackend(model.arch, backend).run(model, raw, vcd=vcd, window=window)


# ---------------------------------------------------------------- the Verilator trace builds
def traced_top(arch, trace):
    """The top as :class:`SimulatedBackend` builds it (shares the build cache)."""
    return VerilatorTop(arch, Options(axi_data_width=board_axi_width(arch)),
                        arch_name="model", trace=trace)


@requires_verilator
@requires_gcc
def test_verilator_vcd_covers_the_window_with_the_top_ports(tmp_path):
    case = xor_case("xor_2x2_memory256", shared_path("conformance"))
    run = case.runs[0]
    top = traced_top(case.arch, "vcd")
    path = tmp_path / "w.vcd"
    result = top.run(case.program, dram0=run.images.dram0, dram1=run.images.dram1,
                     trace_path=path, trace_window=(10, 40))
    assert top.read_dram0(run.output_base, len(run.expected)).tolist() == run.expected
    assert result.stats["trace"] == {"first_cycle": 10, "cycles": 31}
    widths, changes, times = read_vcd(path)
    for name, _, width, _ in port_list(case.arch, top.options):
        assert widths[f"TOP.{name}"] == width, name
    assert times[0] == 10_000 and times[-1] == 40_500           # 1 ns a cycle, both edges
    assert changes["TOP.clock"][:3] == [(10_000, 0), (10_500, 1), (11_000, 0)]
    # a program-counter window: from the first cycle the core's pc reaches 3
    result = top.run(case.program, dram0=run.images.dram0, dram1=run.images.dram1,
                     trace_path=path, trace_pcs=(3, 5))
    traced = result.stats["trace"]
    _, changes, times = read_vcd(path)
    pc = per_cycle(changes["TOP.top_model.core.cfg_pc"], traced["first_cycle"] * 1000, 1)
    assert pc == [3] and times[0] == traced["first_cycle"] * 1000
    with pytest.raises(VerilatorError, match="trace_window"):
        top.run(case.program, trace_window=(1, 2))


@requires_verilator
@requires_gcc
def test_verilator_fst_and_the_backend(xor_model, tmp_path):
    backend, model, raw, stats = run_xor_with_waves(xor_model, "verilator", tmp_path / "w.fst")
    v = stats["vcd"]
    assert v["format"] == "fst" and v["cycles"] > 0 and v["first_cycle"] > 0
    data = (tmp_path / "w.fst").read_bytes()
    # an FST file opens with its header block: type 0, then the block's length (329 bytes)
    assert data[0] == 0 and int.from_bytes(data[1:9], "big") == 329 and len(data) > 329
    gtkw = (tmp_path / "w.gtkw").read_text()
    assert '[dumpfile] "w.fst"' in gtkw and "-m_axi_dram0" in gtkw and \
        "TOP.top_model.core.cfg_pc[31:0]" in gtkw and "-cu" in gtkw
    # the same run without a waveform uses the plain build, and a plain build has no trace
    _, plain = backend.run(model, raw)
    assert plain["cycles"] == stats["cycles"] and "vcd" not in plain
    with pytest.raises(VerilatorError, match="trace build"):
        VerilatorTop(model.arch, Options(axi_data_width=board_axi_width(model.arch)),
                     arch_name="model").run([], trace_path=tmp_path / "x.vcd")
    with pytest.raises(VerilatorError, match="give one of vcd, fst"):
        traced_top(model.arch, "lxt")
