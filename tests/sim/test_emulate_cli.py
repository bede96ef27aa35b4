"""`python -m sim.emulate`: Tensil-compatible CLI, outputs, runs, compare, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from sim.emulate import main

from tcu_hw.artifacts import read_csv, write_csv

from ..conftest import shared_path

SPEECH = "speech_commands_onnx_speech_robot"


def test_outputs_raw_and_float(xor_model, tmp_path, capsys):
    tmodel, inp, expected = xor_model
    assert main(["-m", str(tmodel), "-i", str(inp), "-o", str(tmp_path / "o.csv"), "--raw",
                 "-q"]) == 0
    assert (tmp_path / "o.csv").read_text() == "".join(
        f"{a},{b}\n" for a, b in expected.tolist())
    assert main(["-m", str(tmodel), "-i", str(inp), "-o", str(tmp_path / "f.csv")]) == 0
    assert np.array_equal(read_csv(tmp_path / "f.csv", 2), expected / 256)
    err = capsys.readouterr().err
    assert "EMULATOR SUMMARY" in err and "instructions:         17" in err
    assert main(["-m", str(tmodel), "-i", str(inp), "--raw", "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "OUTPUT y, RUN 0" and out[1:] == [f"{a},{b}" for a, b in expected.tolist()]


def test_runs_compare_and_stats(xor_model, tmp_path, capsys):
    tmodel, inp, expected = xor_model
    two = tmp_path / "two.csv"
    two.write_text(inp.read_text() * 2)
    want = tmp_path / "want.csv"
    write_csv(want, np.concatenate([expected, expected]) / 256)
    stats = tmp_path / "stats.json"
    assert main(["-m", str(tmodel), "-i", str(two), "-r", "2", "-c", str(want), "--stats",
                 str(stats)]) == 0
    d = json.loads(stats.read_text())
    assert d["runs"] == 2 and d["instructions"] == 34 and d["events"] == []
    assert "COMPARE y: all 16 values within one LSB" in capsys.readouterr().err
    wrong = np.concatenate([expected, expected]) / 256
    wrong[5, 0] += 0.5
    write_csv(want, wrong)
    assert main(["-m", str(tmodel), "-i", str(two), "-r", "2", "-c", str(want), "-q"]) == 1
    assert "first at vector 5 lane 0" in capsys.readouterr().err


@pytest.mark.parametrize("setup, message", [
    (lambda p, i: i.write_text("0,0,0\n" * 4), "line 1: 3 values, expected 2"),
    (lambda p, i: i.write_text("0,0\n" * 3), "3 vectors (lines), expected 4 for input 'x'"),
    (lambda p, i: i.write_text("0,0\n0,zero\n0,0\n0,0\n"), "line 2 column 2"),
    (lambda p, i: (p.parent / "xor.tprog").unlink(), "prog file 'xor.tprog' not found"),
    (lambda p, i: (p.parent / "xor.tdata").write_bytes(b"\0" * 5), "consts[0] says 6 vectors"),
    (lambda p, i: p.write_text("{}"), "name: missing key"),
    (lambda p, i: i.write_text("nan,0\n" * 4), "input 'x': 4 NaN or infinite value(s)"),
    (lambda p, i: i.write_text("inf,0\n" + "0,0\n" * 3), "1 NaN or infinite value(s)"),
])
def test_bad_input_gives_one_clear_error(xor_model, capsys, setup, message):
    tmodel, inp, _ = xor_model
    setup(tmodel, inp)
    assert main(["-m", str(tmodel), "-i", str(inp), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_file_count_must_match_the_model(xor_model, capsys):
    tmodel, inp, _ = xor_model
    assert main(["-m", str(tmodel), "-i", f"{inp},{inp}", "-q"]) == 2
    assert "has 1 input(s) (x), got 2 CSV file(s)" in capsys.readouterr().err
    assert main(["-m", str(tmodel), "-i", str(inp), "-o", "a.csv,b.csv", "-q"]) == 2
    assert "got 2 -o file(s)" in capsys.readouterr().err


def test_module_entry_point_speech(tmp_path):
    d = shared_path("conformance", "speech_robot")
    expected = json.loads((d / "expected.json").read_text())["inputs"][0]
    out = tmp_path / "out.csv"
    run = subprocess.run([sys.executable, "-m", "sim.emulate", "-m", str(d / f"{SPEECH}.tmodel"),
                          "-i", str(d / "input0_tensil_models_csv.csv"), "-o", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert np.array_equal(read_csv(out, 8), np.array(expected["expected_output_raw"]) / 256)
    bad = subprocess.run([sys.executable, "-m", "sim.emulate", "-m", str(tmp_path / "no.tmodel"),
                          "-i", "x.csv"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")
    assert "Traceback" not in bad.stderr


def test_output_paths_are_checked_before_running(xor_model, tmp_path, capsys):
    tmodel, inp, _ = xor_model
    assert main(["-m", str(tmodel), "-i", str(inp), "-o", str(tmp_path / "no" / "o.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["-m", str(tmodel), "-i", str(inp), "-o", str(tmp_path / "o.csv"),
                 "--stats", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--stats {tmp_path}: is a directory" in err
    assert not (tmp_path / "o.csv").exists()


def test_an_output_path_the_system_refuses_is_one_error(xor_model, tmp_path, capsys):
    """The directory exists but cannot hold the file (/proc): one error naming the path,
    no traceback."""
    tmodel, inp, _ = xor_model
    assert main(["-m", str(tmodel), "-i", str(inp), "-o", "/proc/out.csv"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: /proc/out.csv: cannot write it") and err.count("\n") == 1


def test_stats_on_a_full_disk_leave_no_file(xor_model, tmp_path, capsys, monkeypatch):
    """The statistics are written whole or not at all: on a full disk, one error and no
    partial (or temporary) file."""
    import errno
    import pathlib
    tmodel, inp, _ = xor_model
    real = pathlib.Path.write_text

    def full(self, data, *args, **kwargs):
        if self.name.startswith(".s.json"):
            real(self, data[:10], *args, **kwargs)           # part of it, then the disk fills
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    stats = tmp_path / "s.json"
    assert main(["-m", str(tmodel), "-i", str(inp), "-o", str(tmp_path / "o.csv"),
                 "--stats", str(stats), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {stats}: cannot write it: No space left on device\n"
    assert not stats.exists() and not list(tmp_path.glob(".s.json*"))
