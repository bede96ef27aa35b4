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
