"""`python -m sim.run`: both backends on a model, bit-exact check, stats, waveforms, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.run import main
from tcu_hw.artifacts import read_csv

from ..conftest import requires_gcc

pytestmark = requires_gcc



@pytest.mark.parametrize("backend", ["emulator", "pyrtl"])
def test_backends_give_the_expected_outputs(xor_model, tmp_path, backend):
    tmodel, inp, expected = xor_model
    out, stats = tmp_path / "o.csv", tmp_path / "s.json"
    assert main(["--backend", backend, "-m", str(tmodel), "-i", str(inp), "-o", str(out),
                 "--stats", str(stats), "--check", "-q"]) == 0
    assert np.array_equal(read_csv(out, 2), expected / 256)
    d = json.loads(stats.read_text())
    assert d["bit_exact_vs_emulator"] is True
    if backend == "pyrtl":
        assert d["cycles"] > 0 and d["counters"]["matmul_vectors"] == 8
        assert d["error"] is False and d["pc"] == 17
    else:
        assert d["instructions"] == 17


def test_waveform_window(xor_model, tmp_path, capsys):
    tmodel, inp, _ = xor_model
    vcd = tmp_path / "w.vcd"
    assert main(["-m", str(tmodel), "-i", str(inp), "--vcd", str(vcd), "--window", "3:5",
                 "--raw", "--latency", "3", "--stall-probability", "0.5"]) == 0
    text = vcd.read_text()
    assert "$scope module array $end" in text and "$scope module cu $end" in text
    assert "cfg_program_counter" in text and "dec_dispatch" in text
    gtkw = (tmp_path / "w.gtkw").read_text()
    assert '[dumpfile] "w.vcd"' in gtkw and "-array" in gtkw
    assert "waveform:" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--backend", "emulator", "--vcd", "w.vcd"], "--vcd, --window and --around need --backend pyrtl"),
    (["--stall-probability", "1.5"], "DRAM timing"),
])
def test_bad_options(xor_model, capsys, argv, message):
    tmodel, inp, _ = xor_model
    assert main(["-m", str(tmodel), "-i", str(inp)] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_bad_window_is_a_usage_error(xor_model):
    tmodel, inp, _ = xor_model
    with pytest.raises(SystemExit) as e:
        main(["-m", str(tmodel), "-i", str(inp), "--window", "9:2"])
    assert e.value.code == 2


@pytest.mark.parametrize("flag, value", [("--latency", "4294967296"), ("--latency", "-1"),
                                         ("--cycles-per-vector", "4294967297"),
                                         ("--outstanding", "100000")])
def test_dram_timing_out_of_range_is_refused(xor_model, capsys, flag, value):
    """A setting the models would wrap (32-bit fields) is refused with the allowed range."""
    from sim.backends import MAX_DRAM_CYCLES
    from sim.pyrtl_backend import STALL_CYCLES
    assert MAX_DRAM_CYCLES < STALL_CYCLES            # a slow DRAM is never taken for a hang
    tmodel, inp, _ = xor_model
    assert main(["-m", str(tmodel), "-i", str(inp), flag, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: DRAM timing: need latency 0..5,000")
    assert "outstanding 1..256" in err and f"(got {int(value)})" in err


@pytest.mark.parametrize("backend", ["emulator", "pyrtl"])
def test_saturated_inputs_are_counted_as_sim_emulate_counts_them(xor_model, tmp_path, capsys,
                                                                 backend):
    from sim.emulate import main as emulate_main
    tmodel, inp, _ = xor_model
    values = read_csv(inp, 2)
    values[0, 0], values[1, 1], values[2, 0] = 1000.0, -1000.0, 127.0   # FP16BP8: ±128
    big = tmp_path / "big.csv"
    big.write_text("\n".join(",".join(str(v) for v in row) for row in values) + "\n")
    assert emulate_main(["-m", str(tmodel), "-i", str(big), "-o", str(tmp_path / "e.csv")]) == 0
    assert "(inputs 2;" in capsys.readouterr().err
    assert main(["--backend", backend, "-m", str(tmodel), "-i", str(big),
                 "-o", str(tmp_path / "r.csv")]) == 0
    assert "saturations:    inputs 2 (values outside FP16BP8's range, clamped)" in \
        capsys.readouterr().err


def test_plot_of_a_run(xor_model, tmp_path, capsys):
    """--plot profiles the model on the PyRTL core with the sampler and draws its timeline."""
    tmodel, inp, _ = xor_model
    plot = tmp_path / "xor.svg"
    assert main(["-m", str(tmodel), "-i", str(inp), "--plot", str(plot)]) == 0
    assert f"plot:           {plot} (" in capsys.readouterr().err
    text = plot.read_text()
    assert text.startswith("<?xml") and "sampler timeline" in text
