"""The cocotb testbench for users (sim.cocotb_tb, run by sim.cocotb_run): the generated top
behind its AXI4 adapter, cocotbext-axi's AxiRam on both DRAM masters and AxiStreamSource on the
instruction stream with random back-pressure, outputs checked against the emulator. Tensil's
XOR conformance program as a model under Icarus; a wrong expected output, a hang and a
broken AXI rule fail the run; your own generated top with its manifest; Verilator where the
installed version allows."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from sim.cocotb_run import (CocotbError, axi4_adapter, build_parser, dram_addresses, main,
                            run_cocotb, unavailable)
from sim.model import load_model, read_input_csvs
from tcu_hw.arch import Architecture, Options, preset
from tcu_hw.errors import ArtifactError
from tcu_hw.top import port_list

from ..conftest import ROOT, load_json, shared_path

ICARUS = unavailable("icarus")
needs_icarus = pytest.mark.skipif(ICARUS is not None, reason=ICARUS or "")


def xor_inputs(xor_model):
    path, csv, expected = xor_model
    model = load_model(path)
    raw, _ = read_input_csvs(model, [csv])
    return path, raw, expected


# ------------------------------------------------------------------ no simulator needed

def test_adapter_presents_axi4_masters():
    """Every port of the top passes through under its own name except AXI3's WID (dropped)
    and 2-bit AxLOCK (AXI4's 1 bit); the port list comes from tcu_hw.top.port_list."""
    arch = preset("cmoda7")
    options = Options(axi_data_width=64, sample_block_size=4)
    ports = port_list(arch, options)
    text = axi4_adapter("top_x", ports)
    declared = {name: msb for msb, name in
                re.findall(r"^\s+(?:input|output) (?:\[(\d+):0\] )?(\w+)", text, re.M)}
    assert "module top_x_axi4 (" in text and "top_x top (" in text
    for name, _, width, _ in ports:
        if name.endswith("_wid"):
            assert name not in declared
            assert f".{name}(axi3_{name})" in text
        elif name.endswith(("_awlock", "_arlock")):
            assert width == 2 and declared[name] == ""             # 1 bit
            assert f"assign {name} = axi3_{name}[0];" in text
        else:
            assert declared[name] == (str(width - 1) if width > 1 else ""), name
            assert f".{name}({name})" in text
    assert "sample_tdata" in declared and "idle" in declared


@pytest.mark.skipif(shutil.which("verilator") is None, reason="needs Verilator to lint")
def test_adapter_is_lint_clean(tmp_path):
    from tcu_hw.verilog import verilog, waiver
    arch, options = preset("cmoda7"), Options(axi_data_width=64)
    (tmp_path / "top_x.v").write_text(verilog(arch, options, "x"))
    (tmp_path / "top_x_axi4.v").write_text(axi4_adapter("top_x", port_list(arch, options)))
    (tmp_path / "top_x.vlt").write_text(waiver("x"))
    run = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", "top_x_axi4",
                          "top_x.vlt", "top_x.v", "top_x_axi4.v"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0 and "Warning" not in run.stderr, run.stderr[-2000:]


def test_dram_regions_are_64k_aligned_and_apart():
    arch = preset("cmoda7")
    a0, a1 = dram_addresses(arch)
    assert a0 == 1 << 16 and a1 % (1 << 16) == 0
    assert a1 >= a0 + arch.dram0_depth * arch.vector_bytes
    with pytest.raises(ArtifactError, match="multiple of 64 KiB"):
        dram_addresses(arch, 0x1234)
    with pytest.raises(ArtifactError, match="overlap"):
        dram_addresses(arch, 0x10000, 0x10000)


# ------------------------------------------------------------------ Icarus

@needs_icarus
@pytest.mark.parametrize("seed", [1, 2])
def test_xor_conformance_program_under_icarus(xor_model, seed):
    """Tensil's XOR program (2×2, FP16BP8, AXI 32) as a .tmodel: bit-exact against the
    emulator and against the outputs Tensil's tools recorded, under 30% back-pressure on every
    AXI channel and the instruction stream; both DRAM regions were used through the offset
    registers."""
    path, raw, recorded = xor_inputs(xor_model)
    result = run_cocotb(path, raw, raw=True, stall=0.3, feed_stall=0.3, seed=seed)
    assert result.passed, result.failures
    assert result.outputs["y"].tolist() == recorded.tolist()
    assert np.array_equal(result.expected["y"], recorded)
    s = result.stats
    assert result.cycles == s["cycles"] > 0 and s["axi_data_width"] == 32
    assert s["status"]["error"] == 0 and s["status"]["idle"] == 1
    assert s["dram0"]["write_bursts"] > 0 and s["dram1"]["read_bursts"] > 0
    assert s["dram0_address"] == 0x10000 and s["dram1_address"] >= 0x20000


@needs_icarus
def test_wrong_expected_output_fails(xor_model, tmp_path):
    """The check can fail: one wrong value in the expected outputs fails the run and names
    the output, the vector and the lane; the log is kept."""
    path, raw, recorded = xor_inputs(xor_model)
    wrong = recorded.copy()
    wrong[2, 1] += 1
    result = run_cocotb(path, raw, raw=True, expected={"y": wrong}, stall=0.0, feed_stall=0.0,
                        work_dir=tmp_path)
    assert not result.passed
    (failure,) = result.failures
    assert "output y: 1 of 8 values differ" in failure and "vector 2 lane 1" in failure
    assert result.outputs["y"].tolist() == recorded.tolist()
    assert result.log is not None and "FAIL" in result.log.read_text()


@needs_icarus
def test_a_run_that_does_not_finish_fails(xor_model, tmp_path):
    path, raw, _ = xor_inputs(xor_model)
    result = run_cocotb(path, raw, raw=True, max_cycles=20, work_dir=tmp_path / "a")
    assert not result.passed
    assert "did not complete in 20 cycles" in result.failures[0]
    result = run_cocotb(path, raw, raw=True, stall_cycles=3, stall=0.9, feed_stall=0.9,
                        seed=5, work_dir=tmp_path / "b")
    assert not result.passed and "nothing moved for 3 cycles" in result.failures[0]


def test_axi_rules_are_checked():
    """The testbench's per-burst check (beside AxiRam's own WLAST and 4 KiB assertions)."""
    pytest.importorskip("cocotbext.axi")
    from sim.cocotb_tb import Region
    r = Region("m_axi_dram1", 0x20000, 0x1000, 8)
    assert r.check("read", 0x20000, 15, 3, 1) is None
    assert "crosses 4 KiB" in r.check("read", 0x20ff8, 1, 3, 1)
    assert "outside its region" in r.check("write", 0x10000, 0, 3, 1)
    assert "does not match the 8-byte bus" in r.check("read", 0x20000, 0, 2, 1)
    assert "not INCR" in r.check("write", 0x20000, 0, 3, 2)
    assert r.bursts == {"read": 3, "write": 2}


@needs_icarus
def test_your_generated_top_with_its_manifest(xor_model, tmp_path, capsys):
    """``python -m sim.cocotb_run --verilog out/top_<arch>.v``: the top python -m tcu_hw.gen
    wrote, found by its manifest (module, ports, reset, architecture); a top for another
    architecture or without its manifest is one error line."""
    from tcu_hw.gen import main as gen
    path, _, _ = xor_model
    arch = load_model(path).arch
    tarch = tmp_path / "xor2.tarch"
    tarch.write_text(json.dumps(arch.to_dict()))
    assert gen(["-a", str(tarch), "-d", "32", "-t", str(tmp_path / "out")]) == 0
    top = tmp_path / "out" / "top_xor2.v"
    csv = xor_model[1]
    assert main(["-m", str(path), "-i", str(csv), "--verilog", str(top), "--seed", "7"]) == 0
    err = capsys.readouterr().err
    assert "output y: bit-exact" in err and "RESULT: PASS" in err
    assert re.search(r"cycles: +\d[\d,]* \(AXI 32 bits", err)

    other = tmp_path / "other.tarch"
    other.write_text(json.dumps({**arch.to_dict(), "local_depth": 128}))
    assert gen(["-a", str(other), "-d", "32", "-t", str(tmp_path / "o2")]) == 0
    assert main(["-m", str(path), "--verilog", str(tmp_path / "o2" / "top_other.v")]) == 2
    assert "another architecture than the model's: local_depth 128 vs 256" in \
        capsys.readouterr().err
    (tmp_path / "out" / "top_xor2.json").unlink()
    assert main(["-m", str(path), "--verilog", str(top)]) == 2
    assert "its manifest top_xor2.json is missing" in capsys.readouterr().err


@needs_icarus
def test_a_broken_top_fails(xor_model, tmp_path):
    """A hardware bug fails the run: the same generated top with DRAM1's read data inverted
    in its wrapper gives outputs that differ from the emulator's."""
    from tcu_hw.gen import main as gen
    path, raw, _ = xor_inputs(xor_model)
    tarch = tmp_path / "xor2.tarch"
    tarch.write_text(json.dumps(load_model(path).arch.to_dict()))
    assert gen(["-a", str(tarch), "-d", "32", "-t", str(tmp_path)]) == 0
    top = tmp_path / "top_xor2.v"
    text = top.read_text()
    assert ".m_axi_dram1_rdata(m_axi_dram1_rdata)" in text
    top.write_text(text.replace(".m_axi_dram1_rdata(m_axi_dram1_rdata)",
                                ".m_axi_dram1_rdata(~m_axi_dram1_rdata)"))
    result = run_cocotb(path, raw, raw=True, verilog=top, work_dir=tmp_path / "run")
    assert not result.passed
    assert "differ from the emulator" in result.failures[0]


def test_bad_options_are_one_error_line(xor_model, capsys):
    path, _, _ = xor_model
    assert main(["-m", str(path), "--stall", "1.5"]) == 2
    assert capsys.readouterr().err.startswith("error: back-pressure must be in [0, 1)")
    assert main(["-m", str(path), "--waves"]) == 2
    assert "--waves needs --work-dir" in capsys.readouterr().err


@needs_icarus
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make: apt install make")
def test_export_for_your_own_cocotb_flow(xor_model, tmp_path, capsys):
    """``--export DIR`` writes the adapter, the run and a Makefile on cocotb's Makefile.sim;
    ``make -C DIR`` runs the same testbench and leaves its verdict in result.json."""
    path, csv, recorded = xor_model
    assert main(["-m", str(path), "-i", str(csv), "--export", str(tmp_path / "tb")]) == 0
    assert "make -C" in capsys.readouterr().out
    tb = tmp_path / "tb"
    assert {"Makefile", "config.json", "inputs.npz", "top_tcu.v", "top_tcu_axi4.v"} <= \
        {f.name for f in tb.iterdir()}
    subprocess.run(["make", "-C", str(tb)], capture_output=True, text=True, timeout=300)
    result = json.loads((tb / "result.json").read_text())
    assert result["failures"] == [] and result["outputs"]["y"] == recorded.tolist()


def test_cli_reference_lists_every_option():
    text = (ROOT / "docs" / "cli.md").read_text()
    assert "## `python -m sim.cocotb_run`" in text
    for action in build_parser()._actions:
        for opt in action.option_strings:
            assert re.search(re.escape(opt) + r"\b", text), f"{opt} not in docs/cli.md"


# ------------------------------------------------------------------ Verilator

def test_xor_conformance_program_under_verilator(xor_model):
    problem = unavailable("verilator")
    if problem:
        pytest.skip(problem)
    path, raw, recorded = xor_inputs(xor_model)
    result = run_cocotb(path, raw, raw=True, simulator="verilator", stall=0.3, feed_stall=0.3)
    assert result.passed, result.failures
    assert result.outputs["y"].tolist() == recorded.tolist()


def test_verilator_too_old_is_a_clear_error(xor_model):
    problem = unavailable("verilator")
    if problem is None or "Verilator 5.036 or later" not in problem:
        pytest.skip("the installed Verilator works with cocotb")
    with pytest.raises(CocotbError, match="needs Verilator 5.036 or later"):
        run_cocotb(xor_model[0], simulator="verilator")


# ------------------------------------------------------------------ longer runs

@needs_icarus
@pytest.mark.slow
@pytest.mark.parametrize("name", ["xor_2x2_memory256_batch16", "xor_4x4_memory256",
                                  "xor4_2x2_memory128_stride2_batch4"])
def test_more_xor_programs(name, tmp_path):
    from tcu_hw.artifacts import ConstsEntry, ProgEntry, TensorEntry, TModel, write_tmodel
    case = load_json("conformance", "xor", f"{name}.json")
    arch = Architecture.from_dict(case["arch"])
    (tmp_path / "p.tprog").write_bytes(bytes.fromhex(case["program_hex"]))
    (tmp_path / "p.tdata").write_bytes(bytes.fromhex(case["consts_hex"]))
    (inp,), (out,) = case["input_dram0"], case["output_dram0"]
    write_tmodel(tmp_path / "p.tmodel", TModel(
        name, ProgEntry("p.tprog", len(case["program_hex"]) // 2),
        (ConstsEntry("p.tdata", case["consts_dram1_base"], case["consts_vectors"]),),
        (TensorEntry("x", inp["base"], inp["size"]),),
        (TensorEntry("y", out["base"], out["size"]),), arch, False))
    for k, run in enumerate(case["runs"][:2]):
        result = run_cocotb(tmp_path / "p.tmodel", {"x": np.array(run["input_raw"])},
                            raw=True, stall=0.5, feed_stall=0.5, seed=k + 1)
        assert result.passed, result.failures
        assert result.outputs["y"].tolist() == run["output_raw"]


@needs_icarus
@pytest.mark.parametrize("stall", [0.3, pytest.param(0.0, marks=pytest.mark.slow),
                                   pytest.param(0.7, marks=pytest.mark.slow)])
def test_compiled_cnn_on_pynqz1(tmp_path, stall):
    """A model compiled by compiler_lite (the digits CNN on pynqz1: 8×8 array, the board's
    64-bit AXI by default) with seeded random inputs, bit-exact against the emulator."""
    from compiler_lite.compile import compile_model
    compiled = compile_model(str(shared_path("models", "digits_cnn_opset10.onnx")), "pynqz1")
    compiled.write(tmp_path)
    (tmodel,) = tmp_path.glob("*.tmodel")
    result = run_cocotb(tmodel, stall=stall, feed_stall=stall, seed=3)
    assert result.passed, result.failures
    assert result.stats["axi_data_width"] == 64 and result.cycles > 1000
