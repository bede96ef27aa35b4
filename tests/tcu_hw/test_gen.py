"""`python -m tcu_hw.gen`: flags, RTL SUMMARY, architecture_params.h, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tcu_hw.gen import main

# Tensil's printed summary for pynqz1 (Tensil documentation, PYNQ-Z1 tutorial)
PYNQZ1_SUMMARY = """\
Data type: FP16BP8
Array size: 8
Consts memory size (vectors/scalars/bits): 1,048,576 8,388,608 20
Vars memory size (vectors/scalars/bits): 1,048,576 8,388,608 20
Local memory size (vectors/scalars/bits): 8,192 65,536 13
Accumulator memory size (vectors/scalars/bits): 2,048 16,384 11
Stride #0 size (bits): 3
Stride #1 size (bits): 3
Operand #0 size (bits): 16
Operand #1 size (bits): 24
Operand #2 size (bits): 16
Instruction size (bytes): 8"""

ULTRA96_SUMMARY_TAIL = """\
Local memory size (vectors/scalars/bits): 20,480 327,680 15
Accumulator memory size (vectors/scalars/bits): 4,096 65,536 12
Stride #0 size (bits): 3
Stride #1 size (bits): 3
Operand #0 size (bits): 24
Operand #1 size (bits): 24
Operand #2 size (bits): 16
Instruction size (bytes): 9"""


def test_default_arch_summary_and_params(tmp_path, capsys):
    assert main(["-t", str(tmp_path), "-s"]) == 0
    out = capsys.readouterr().out
    assert "RTL SUMMARY" in out and PYNQZ1_SUMMARY in out
    assert "Verilog backend is not built yet" in out
    header = (tmp_path / "architecture_params.h").read_text()
    assert "TENSIL_ARCHITECTURE_LOCAL_DEPTH           8192" in header


def test_tensil_style_summary_flag(tmp_path, capsys):
    assert main(["-a", "ultra96v2", "-d", "128", "-t", str(tmp_path), "-s", "true"]) == 0
    assert ULTRA96_SUMMARY_TAIL in capsys.readouterr().out
    assert main(["-a", "ultra96v2", "-t", str(tmp_path), "-s", "false"]) == 0
    assert "RTL SUMMARY" not in capsys.readouterr().out


def test_tarch_path(tmp_path, capsys):
    tarch = tmp_path / "mine.tarch"
    from tcu_hw.arch import preset
    preset("cmoda7").save(tarch)
    assert main(["-a", str(tarch), "-t", str(tmp_path / "out"), "-d", "32"]) == 0
    assert "top_mine.v" in capsys.readouterr().out
    assert (tmp_path / "out" / "architecture_params.h").exists()


@pytest.mark.parametrize("argv, message", [
    (["-a", "pynq"], "unknown architecture 'pynq'"),
    (["-a", "nothere.tarch"], "nothere.tarch: architecture file not found"),
    (["-a", "cmoda7", "-d", "128"], "AXI data width 128 cannot carry a 64-bit vector"),
    (["-d", "48"], "AXI data width 48 is not allowed"),
    (["--sample-block-size", "-1"], "sample block size -1 is not allowed"),
])
def test_bad_options(tmp_path, capsys, argv, message):
    assert main(argv + ["-t", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "architecture_params.h").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_directory(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["-t", str(locked / "sub")]) == 2
    assert "cannot create output directory" in capsys.readouterr().err


def test_file_in_the_way_of_the_directory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["-t", str(blocker)]) == 2
    assert "cannot create output directory" in capsys.readouterr().err


def test_module_entry_point(tmp_path):
    run = subprocess.run([sys.executable, "-m", "tcu_hw.gen", "--help"], capture_output=True,
                         text=True, check=True)
    for flag in ("--arch", "--axi-data-width", "--target-dir", "--summary",
                 "--sample-block-size", "--mem-impl"):
        assert flag in run.stdout
