"""Every example in examples/ runs, checks itself, and writes its waveform."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_and_writes_a_waveform(path, tmp_path, capsys):
    module = runpy.run_path(str(path))
    vcd = tmp_path / f"{path.stem}.vcd"
    assert module["main"](["--vcd", str(vcd)]) == 0
    out = capsys.readouterr().out
    assert "waveform:" in out
    text = vcd.read_text()
    assert text.startswith("$timescale") and "$enddefinitions" in text


def test_there_are_examples_for_the_main_blocks():
    names = {p.stem for p in EXAMPLES}
    assert {"systolic_array_4x4", "simd_sigmoid", "axi_memory"} <= names
