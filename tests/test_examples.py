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


def test_simulate_until_reports_a_design_that_never_finishes(tmp_path):
    import pyrtl

    from sim.waves import memory_vectors, simulate_until
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        count = pyrtl.Register(4, "count")
        count.next <<= count + 1
        mem = pyrtl.MemBlock(8, 2, "m")
        mem[count[:2]] <<= pyrtl.MemBlock.EnabledWrite(pyrtl.concat(count, count), count < 4)
        done = pyrtl.Output(1, "done")
        done <<= count == 6                                # seen in the 7th cycle
    sim, cycles = simulate_until(block, "done", 10, vcd=tmp_path / "w.vcd")
    assert cycles == 7 and (tmp_path / "w.vcd").read_text().startswith("$timescale")
    # lanes of 4 bits, signed: count 3 → bytes 0x33 → [3, 3]
    assert memory_vectors(sim, block, "m", 4, 2, 4).tolist() == [[0, 0], [1, 1], [2, 2], [3, 3]]
    with pytest.raises(RuntimeError, match="'done' did not rise within 5 cycles"):
        simulate_until(block, "done", 5)
