"""bench/logic_depth.py counts logic levels the way the clock's guard needs: a LUT a level,
a carry chain one level on entry, registers and block RAM ending paths; names the nets on
the deepest path; refuses cells whose timing it does not know, combinational loops, and
netlist files or architectures it cannot use, by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "bench"))
import logic_depth  # noqa: E402


def _module(cells, nets):
    return {"cells": {name: {"type": kind, "connections": conn}
                      for name, (kind, conn) in cells.items()},
            "netnames": {name: {"hide_name": 0, "bits": bits} for name, bits in nets.items()}}


def _ff(d, q):
    return "TRELLIS_FF", {"DI": [d], "Q": [q], "CLK": [1]}


def test_a_chain_of_luts_between_registers_counts_each_lut():
    # ff(q=10) -> lut -> 11 -> lut -> 12 -> lut -> 13 -> ff; a short side path 10 -> lut -> 20
    cells = {"r0": _ff(2, 10), "a": ("LUT4", {"A": [10], "B": ["0"], "Z": [11]}),
             "b": ("LUT4", {"A": [11], "Z": [12]}), "c": ("PFUMX", {"ALUT": [12], "Z": [13]}),
             "r1": _ff(13, 14), "s": ("LUT4", {"D": [10], "Z": [20]}), "r2": _ff(20, 21)}
    nets = {"start": [10], "x_LUT4_Z": [11], "middle": [12], "end": [13], "side": [20]}
    deepest, second = logic_depth.deepest_paths(_module(cells, nets), 2)
    assert deepest.levels == 3
    assert deepest.nets == ["start", "x", "middle", "end"]      # mapped names by their root
    assert second.levels == 1 and second.nets == ["start", "side"]


def test_a_carry_chain_counts_once_and_a_register_ends_the_path():
    # two CCU2C cells chained through CIN/COUT: one level in, none along the chain
    cells = {"r0": _ff(2, 10),
             "c0": ("CCU2C", {"A0": [10], "B0": [3], "CIN": [4], "S0": [11], "COUT": [12]}),
             "c1": ("CCU2C", {"A0": [5], "CIN": [12], "S0": [13], "COUT": [14]}),
             "l": ("LUT4", {"A": [13], "Z": [15]}), "r1": _ff(15, 16),
             "l2": ("LUT4", {"A": [16], "Z": [17]})}
    path = logic_depth.deepest_paths(_module(cells, {}))[0]
    assert path.levels == 2


def test_unknown_cells_and_loops_are_refused():
    with pytest.raises(ValueError, match="'odd' has type 'MYSTERY'"):
        logic_depth.deepest_paths(_module({"odd": ("MYSTERY", {"A": [2], "Z": [3]})}, {}))
    loop = {"a": ("LUT4", {"A": [10], "Z": [11]}), "b": ("LUT4", {"A": [11], "Z": [10]})}
    with pytest.raises(ValueError, match="combinational loop"):
        logic_depth.deepest_paths(_module(loop, {}))


def test_a_netlist_file_is_read_or_refused_by_name(tmp_path):
    good = tmp_path / "net.json"
    top = _module({"a": ("LUT4", {"A": [10], "Z": [11]})}, {})
    good.write_text(json.dumps({"modules": {"other": {"attributes": {}},
                                            "top_x": {**top, "attributes": {"top": "01"}}}}))
    assert logic_depth.deepest_paths(logic_depth.netlist_top(good))[0].levels == 1
    for text, why in (("{not json", "not a Yosys write_json netlist"),
                      ('{"modules": {"m": {"attributes": {}}}}', "0 modules are marked top")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ValueError, match=f"bad.json: {why}"):
            logic_depth.netlist_top(bad)
    with pytest.raises(ValueError, match="missing.json: not a Yosys"):
        logic_depth.netlist_top(tmp_path / "missing.json")


def test_the_command_line_names_a_bad_architecture():
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "logic_depth.py"), "--arch",
                          "nosuchboard"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 1
    assert run.stderr.startswith("error: unknown architecture 'nosuchboard'"), run.stderr
    assert "Traceback" not in run.stderr
