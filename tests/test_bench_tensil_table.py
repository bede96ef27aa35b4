"""bench/tensil_table.py: Tensil's benchmark rows on reduced networks (the full table is a
bench run of half an hour)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .conftest import requires_verilator

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "bench"))
import tensil_table  # noqa: E402  (bench/ is a folder of scripts)


def rows_of(tmp_path, monkeypatch, *argv) -> list[dict]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    out = tmp_path / "rows.json"
    assert tensil_table.main([*argv, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_estimates_for_every_board(tmp_path, monkeypatch, capsys):
    rows = rows_of(tmp_path, monkeypatch, "--backend", "estimate", "--networks",
                   "resnet20v2,yolov4_tiny_192", "--size", "yolov4_tiny=64")
    assert [(r["network"], r["array"], r["axi"]) for r in rows] == [
        (n, a, w) for n in ("resnet20v2", "yolov4_tiny_192")
        for a, w in ((8, 128), (12, 64), (16, 128))]
    for r in rows:
        assert "error" not in r, r
        assert r["mac_floor"] <= r["cycles"] and 0 < r["utilization"] <= 1
        assert r["ms"] == pytest.approx(r["cycles"] / (1000 * (300 if r["array"] == 16 else 150)))
        # Tensil's figures sit beside full-size rows only
        assert (r["tensil_ms"] is not None) == (r["network"] == "resnet20v2")
    table = capsys.readouterr().out
    assert "Tensil ms" in table and "Ultra96-V2" in table and "×" in table


def test_bad_arguments_are_named():
    with pytest.raises(SystemExit, match="unknown board.*pynq"):
        tensil_table.main(["--boards", "pynq"])
    with pytest.raises(SystemExit, match="NETWORK=SIZE"):
        tensil_table.main(["--size", "yolo=64"])
    with pytest.raises(SystemExit, match="NETWORK=SIZE"):
        tensil_table.main(["--size", "yolov4_tiny=0"])
    with pytest.raises(SystemExit, match="--check needs"):
        tensil_table.main(["--check", "--backend", "estimate"])


def test_a_simulator_that_cannot_run_is_named(monkeypatch):
    """$VERILATOR pointing nowhere: one line naming the row and what to fix, not an
    OSError from deep in subprocess."""
    monkeypatch.setenv("VERILATOR", "/nonexistent/verilator")
    with pytest.raises(SystemExit, match="resnet20v2 on Pynq Z1: Verilator '/nonexistent/"
                                         "verilator' cannot run .*\\$VERILATOR"):
        tensil_table.main(["--networks", "resnet20v2", "--boards", "pynqz1"])


@pytest.mark.slow
@requires_verilator
def test_reduced_networks_run_bit_exact_on_the_generated_top(tmp_path, monkeypatch):
    """YOLOv4-tiny and ResNet-50v2 at 64 on the Pynq Z1 benchmark architecture (12×12 at 64
    bits) under Verilator: bit-exact with the emulator, and no faster than the MACs allow."""
    rows = rows_of(tmp_path, monkeypatch, "--backend", "verilator", "--check", "--boards",
                   "pynqz1", "--networks", "yolov4_tiny_192,resnet50v2",
                   "--size", "yolov4_tiny=64", "--size", "resnet50v2=64")
    for r in rows:
        assert "error" not in r, r
        assert r["bit_exact"] and r["mac_floor"] <= r["cycles"] < 3 * r["estimate"], r
