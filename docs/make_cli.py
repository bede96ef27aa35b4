"""Generate ``docs/cli.md``, the command-line reference, from the commands' own parsers.

    python docs/make_cli.py [--check]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "cli.md"

#: models and inputs the examples use: ../shared (next to the repository) holds them
DIGITS = "../shared/models/digits_cnn_opset10.onnx"
SPEECH = "S=../shared/conformance/speech_robot      # Tensil's compiled speech model, its inputs"
SPEECH_ARGS = "-m $S/speech_commands_onnx_speech_robot.tmodel -i $S/input0_tensil_models_csv.csv"
BUILT = "build/digits_cnn_opset10_onnx_pynqz1"       # what the compiler_lite examples write


def snippet(*lines: str, note: str = "") -> tuple[str, list[str]]:
    """A shell snippet; ``note`` annotates it for tests/test_docs.py (``slow``,
    ``needs: PROGRAM``, ``not run: REASON``)."""
    return note, list(lines)


#: (module, introduction, example snippets). The examples run in order in one directory
#: (tests/test_docs.py runs them), so later ones use the files earlier ones wrote.
COMMANDS = [
    ("tcu_hw.gen", "Generate the hardware: the Verilog top (a drop-in for Tensil's "
     "`top_<arch>.v`), `architecture_params.h`, a JSON manifest and a Verilator waiver.",
     [snippet("python -m tcu_hw.gen -a pynqz1 -s -t out",
              "python -m tcu_hw.gen -a ultra96v2 -d 128 -t vivado")]),
    ("compiler_lite", "Compile an ONNX model for an architecture: `.tprog`, `.tdata`, `.tmodel` "
     "(Tensil's files), `.tio.json` (the I/O layout), and on request an assembly listing "
     "(layers marked with their program-counter ranges) and golden outputs.",
     [snippet(f"python -m compiler_lite -a pynqz1 -m {DIGITS} -t build -s --layers-summary",
              "python -m compiler_lite -a ultra96v2 -m ../shared/models/resnet20v2_cifar.onnx "
              "\\\n    -o dense/BiasAdd:0 -t build"),
      snippet("# inputs: arrays keyed by input name, in the model's layout (here one 8x8 image)",
              "python -c \"import numpy as np; np.savez('in.npz', "
              "x=np.load('../shared/models/digits_test_x.npy')[:1])\"",
              f"python -m compiler_lite -a pynqz1 -m {DIGITS} -t build --tasm -i in.npz")]),
    ("sim.check", "One command from an ONNX model to a verified result: compile, run "
     "onnxruntime, the golden emulator and a hardware backend, compare.",
     [snippet(f"python -m sim.check -a pynqz1 -m {DIGITS} -i in.npz --vcd w.vcd --around 150"),
      snippet(f"python -m sim.check -a pynqz1 -m {DIGITS} --backend verilator",
              note="slow; needs: verilator")]),
    ("sim.run", "Run a compiled model (`.tmodel`) on a backend with inputs in the emulator's "
     "CSV form; cycles, counters, waveforms.",
     [snippet(SPEECH, f"python -m sim.run --backend emulator {SPEECH_ARGS}"),
      snippet(SPEECH, f"python -m sim.run --backend pyrtl {SPEECH_ARGS} \\\n"
              "    --check --vcd w.vcd --window 120:160", note="slow")]),
    ("sim.cocotb_run", "Verify the generated Verilog with cocotb: run a compiled model on the "
     "top (yours, or one generated for the model) under Icarus or Verilator with cocotbext-axi's "
     "AXI RAMs and random back-pressure, checked bit for bit against the emulator "
     "([cocotb.md](cocotb.md)).",
     [snippet(f"python -m sim.cocotb_run -m {BUILT}.tmodel --verilog out/top_pynqz1.v",
              f"python -m sim.cocotb_run -m {BUILT}.tmodel --stall 0.5 --seed 3 --waves "
              "--work-dir run1", note="slow; needs: iverilog"),
      snippet(f"python -m sim.cocotb_run -m {BUILT}.tmodel --verilog out/top_pynqz1.v "
              "--export tb")]),
    ("sim.formal", "Formal proofs of the generated top with SymbiYosys: AXI4 master rules, the "
     "instruction stream's handshake and forward progress on 2x2 and 4x4 architectures, "
     "and each property's broken variant ([formal.md](formal.md)).",
     [snippet("python -m sim.formal -p valid_held,no_ready_path",
              note="needs: yowasp-sby, yices-smt2")]),
    ("sim.emulate", "Tensil's emulator command: run a compiled model on the golden emulator.",
     [snippet(SPEECH, f"python -m sim.emulate {SPEECH_ARGS} -o out.csv")]),
    ("tcu_hw.asm", "Disassemble a program into assembly text.",
     [snippet(f"python -m tcu_hw.asm -a pynqz1 {BUILT}.tprog --bytes")]),
]


def render() -> str:
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"               # argparse wraps the help at this width
    try:
        return _render()
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _render() -> str:
    from tcu_hw.arch import PRESETS
    parts = ["# Command-line reference", "",
             "Every command prints one `error: …` line and exits with status 2 on bad input "
             "(never a traceback). `ARCH` is a `.tarch` file or one of the presets "
             + ", ".join(f"`{name}`" for name in PRESETS) + ". Generated by "
             "`python docs/make_cli.py` from the parsers themselves.", "",
             "The examples run in order from one directory next to `../shared` (the shared "
             "models and Tensil's compiled speech model), so later ones use the files earlier "
             "ones wrote (`tests/test_docs.py` runs them).", ""]
    for module, intro, examples in COMMANDS:
        mod = importlib.import_module(module if module != "compiler_lite" else
                                      "compiler_lite.__main__")
        parser = mod.build_parser()
        parts += [f"## `python -m {module}`", "", intro, "", f"`python -m {module} --help` "
                  "prints:", "", "```text", parser.format_help().rstrip(), "```", "",
                  "Examples:", ""]
        for note, lines in examples:
            parts += ([f"<!-- {note} -->"] if note else []) + ["```sh", *lines, "```", ""]
    return "\n".join(parts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.is_file() or OUT.read_text() != text:
            print("out of date: docs/cli.md (run python docs/make_cli.py)")
            return 1
        print("docs/cli.md is up to date")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
