"""The host driver on every simulated backend with real models, and the pynq backend against
a stand-in for the board (the ``pynq`` package is absent here)."""

from __future__ import annotations

import sys
import types

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler_lite.compile import compile_model
from sim.driver import Driver
from sim.pynq_backend import BoardError
from tcu_hw.errors import ArtifactError
from tcu_hw.isa import DataMove, DataMoveKind

from ..compiler_lite.helpers import make_model, ort_run, rand
from ..conftest import requires_gcc, requires_verilator, shared_path


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """The digits CNN compiled for batch 4, written to files."""
    d = tmp_path_factory.mktemp("digits")
    path = shared_path("models", "digits_cnn_opset10.onnx")
    c = compile_model(path, "pynqz1", input_shapes={"x": (4, 1, 8, 8)})
    c.write(d)
    x = np.load(shared_path("models", "digits_test_x.npy"))[:8]
    ref = ort_run(onnx.load(path), {"x": x})["logits"]
    return d / f"{c.name}.tmodel", x, ref


@pytest.fixture(scope="module")
def two_io(tmp_path_factory):
    """A model with an image and a vector input and two outputs of different ranks."""
    d = tmp_path_factory.mktemp("twoio")
    m = make_model([helper.make_node("Conv", ["img", "w"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["c"], ["feat"]),
                    helper.make_node("Flatten", ["feat"], ["f"]),
                    helper.make_node("Concat", ["f", "v"], ["cat"], axis=1),
                    helper.make_node("Gemm", ["cat", "g"], ["logits"])],
                   {"img": (2, 3, 5, 4), "v": (2, 7)}, ["logits", "feat"],
                   {"w": rand((6, 3, 3, 3), 1, 0.3), "g": rand((127, 5), 2, 0.1)})
    c = compile_model(m, "pynqz1", model_file="twoio.onnx")
    c.write(d)
    feeds = {"img": rand((4, 3, 5, 4), 3), "v": rand((4, 7), 4)}     # two runs of batch 2
    ref = {k: np.concatenate([ort_run(m, {"img": feeds["img"][i:i + 2],
                                           "v": feeds["v"][i:i + 2]})[k] for i in (0, 2)])
           for k in ("logits", "feat")}
    return d / f"{c.name}.tmodel", feeds, ref


def _check(result, ref, tol):
    for k, v in ref.items():
        assert result.outputs[k].shape == v.shape, k
        assert np.abs(result.outputs[k] - v).max() < tol, k


BACKENDS = ["emulator", pytest.param("pyrtl", marks=requires_gcc)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_digits_batch_of_two_runs(digits, backend):
    tmodel, x, ref = digits
    drv = Driver("pynqz1", backend=backend)
    drv.load_model(tmodel)
    res = drv.run({"x": x})
    assert res.runs == 2
    _check(res, {"logits": ref}, 0.25)
    assert (res.outputs["logits"].argmax(1) == ref.argmax(1)).all()
    # the array's MACs: the same on every backend, as the emulator counts them run by run
    if backend == "emulator":
        assert res.macs == sum(st["macs"] for st in res.stats) > 0
    if backend == "pyrtl":
        assert res.cycles > 0 and res.macs_per_cycle > 0
        emu = Driver("pynqz1")
        emu.load_model(tmodel)
        np.testing.assert_array_equal(emu.run({"x": x}).raw["logits"], res.raw["logits"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_inputs_and_outputs(two_io, backend):
    tmodel, feeds, ref = two_io
    drv = Driver("pynqz1", backend=backend)
    drv.load_model(tmodel)
    res = drv.run(feeds)
    assert res.runs == 2
    _check(res, ref, 0.06)


@requires_verilator
def test_verilator_backend(digits):
    tmodel, x, ref = digits
    drv = Driver("pynqz1", backend="verilator")
    drv.load_model(tmodel)
    res = drv.run({"x": x[:4]})
    emu = Driver("pynqz1")
    emu.load_model(tmodel)
    np.testing.assert_array_equal(emu.run({"x": x[:4]}).raw["logits"], res.raw["logits"])
    assert res.cycles > 0


def test_tensil_model_in_vector_layout(speech_dir):
    """A Tensil-compiled model has no .tio.json: vectors in, vectors out."""
    drv = Driver(speech_dir / "speech_robot.tarch")
    drv.load_model(speech_dir / "speech_commands_onnx_speech_robot.tmodel")
    raw = np.fromfile(speech_dir / "input0_tensil_models_csv.bin", dtype="<i2").reshape(-1, 8)
    res = drv.run({"input_1": raw}, raw=True)
    import json
    want = json.loads((speech_dir / "expected.json").read_text())["inputs"][0]
    assert res.outputs["dense_1"].shape == (2, 8)
    assert np.asarray(res.raw["dense_1"]).reshape(-1).tolist() == \
        np.asarray(want["expected_output_raw"]).reshape(-1).tolist()


def test_errors(digits, two_io):
    tmodel, x, _ = digits
    with pytest.raises(ArtifactError, match="compiled for another architecture than the "
                                            "driver's: .*array_size 8 vs 4"):
        Driver("cmoda7").load_model(tmodel)
    drv = Driver("pynqz1")
    with pytest.raises(ArtifactError, match="no model loaded"):
        drv.run(x)
    drv.load_model(tmodel)
    with pytest.raises(ArtifactError, match=r"input 'x': shape \[3, 1, 8, 8\]; the model "
                                            r"takes \[4, 1, 8, 8\] \(or a multiple of 4"):
        drv.run(x[:3])
    with pytest.raises(ArtifactError, match="takes inputs \\['x'\\]; missing"):
        drv.run({"y": x})
    with pytest.raises(ArtifactError, match="backend 'fpga' is unknown"):
        Driver("pynqz1", backend="fpga")
    with pytest.raises(ArtifactError, match=r"unknown option\(s\) \['latncy'\]; allowed: "
                                            r"latency, cycles_per_vector"):
        Driver("pynqz1", backend="pyrtl", latncy=3)
    with pytest.raises(ArtifactError, match=r"DRAM timing: .*0 <= stall_probability < 1 "
                                            r"\(got 2\)"):
        Driver("pynqz1", backend="pyrtl", stall_probability=2)
    # raw inputs are checked against the data type on every backend
    with pytest.raises(ArtifactError, match=r"input 'x': raw values outside FP16BP8 range "
                                            r"-32768..32767"):
        drv.run({"x": np.full(x.shape, 40000)}, raw=True)
    with pytest.raises(ArtifactError, match="input 'x': raw values must be integers"):
        drv.run({"x": x}, raw=True)
    two, feeds, _ = two_io
    drv = Driver("pynqz1")
    drv.load_model(two)
    with pytest.raises(ArtifactError, match="different numbers of runs"):
        drv.run({"img": feeds["img"], "v": feeds["v"][:2]})


# ------------------------------------------------------------------------------ pynq

def test_pynq_backend_is_import_safe_and_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynq", None)
    with pytest.raises(BoardError, match=r"runs on a PYNQ board .*\(pip install pynq\)"):
        Driver("cmoda7", backend="pynq")


class FakeBuffer(np.ndarray):
    """What pynq.allocate returns: an array with a physical address."""

    def flush(self):
        pass

    def invalidate(self):
        pass

    def freebuffer(self):
        FakeBoard.buffers.pop(self.device_address, None)


class FakeBoard:
    """A stand-in for the board: the DMA executes the stream it receives on the golden
    emulator, with DRAM0/DRAM1 at the addresses the program configures (as the TCU does)."""

    buffers: dict = {}
    next_address = 0x1234_5000                  # deliberately not 64 KiB aligned

    def __init__(self, arch):
        self.arch = arch
        self.sendchannel = self
        self.streams = []

    @classmethod
    def allocate(cls, shape, dtype):
        buf = np.zeros(shape, dtype).view(FakeBuffer)
        buf.device_address = cls.next_address
        cls.buffers[cls.next_address] = buf
        cls.next_address += (buf.nbytes + 0x3000)
        return buf

    def transfer(self, stream):
        from sim.emulator import Emulator
        from tcu_hw import numeric
        from tcu_hw.isa import ConfigRegister
        arch, vb = self.arch, self.arch.vector_bytes
        program = arch.layout.decode_program(bytes(stream))
        self.streams.append(program)
        emu = Emulator(arch)
        emu.run([i for i in program if i.name == "Configure"])      # the offsets
        views = []
        for k, reg in ((0, ConfigRegister.DRAM0_OFFSET), (1, ConfigRegister.DRAM1_OFFSET)):
            addr = emu.config[reg] << 16
            buf = next(b for a, b in self.buffers.items() if a <= addr < a + b.nbytes)
            view = buf[addr - buf.device_address:]
            depth = (arch.dram0_depth if k == 0 else min(arch.dram1_depth, len(view) // vb))
            raw = numeric.decode_vectors(view[:depth * vb].tobytes(), arch.dtype,
                                         arch.array_size)
            (emu.write_dram0 if k == 0 else emu.write_dram1)(0, raw)
            views.append((view, depth))
        emu.run(program)
        out = numeric.encode_vectors(emu.read_dram0(0, views[0][1]), arch.dtype)
        views[0][0][:len(out)] = np.frombuffer(out, np.uint8)

    def wait(self):
        pass


def test_pynq_backend_against_a_stand_in_board(monkeypatch, tmp_path):
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["c"], ["y"])],
                   {"x": (1, 3, 6, 6)}, ["y"], {"w": rand((5, 3, 3, 3), 1, 0.3)})
    for strategy, ports in (("local-vars", "dram1"), ("local-vars-and-consts", "dram1"),
                            ("local-isolated", "both")):       # (both: the copies too)
        c = compile_model(m, "cmoda7", model_file="small.onnx", strategy=strategy,
                          consts_ports=ports, input_ports="both" if ports == "both" else "dram0")
        copy = c.plan.input_mirror.get("x")
        assert (copy is not None) == (ports == "both")
        assert copy is None or any(
            isinstance(i, DataMove) and i.kind == DataMoveKind.DRAM1_TO_LOCAL and
            copy <= i.other_address < copy + c.inputs[0].vectors for i in c.program)
        c.write(tmp_path / strategy)
        board = FakeBoard(c.arch)
        fake = types.SimpleNamespace(allocate=FakeBoard.allocate, Overlay=None)
        monkeypatch.setitem(sys.modules, "pynq", fake)
        overlay = types.SimpleNamespace(axi_dma_0=board)
        drv = Driver("cmoda7", backend="pynq", overlay=overlay)
        drv.load_model(tmp_path / strategy / f"{c.name}.tmodel")
        x = rand((2, 3, 6, 6), 5)
        res = drv.run({"x": x})
        emu = Driver("cmoda7")
        emu.load_model(tmp_path / strategy / f"{c.name}.tmodel")
        np.testing.assert_array_equal(res.raw["y"], emu.run({"x": x}).raw["y"])
        first = board.streams[0]
        assert [i.name for i in first[:3]] == ["Configure"] * 3
        assert all(i.value << 16 in range(0, 1 << 44) for i in first[:2])
        assert (first[0].value << 16) % (1 << 16) == 0


@requires_verilator
def test_core_and_top_agree_at_the_boards_width(digits):
    """By default both simulators take the board's memory port (pynqz1: 64 bits, so a
    128-bit vector is two beats, and the core's DRAM models move one every two cycles):
    their cycle counts agree within 2%."""
    tmodel, x, _ = digits
    runs = {}
    for backend in ("pyrtl", "verilator"):
        drv = Driver("pynqz1", backend=backend)
        drv.load_model(tmodel)
        runs[backend] = drv.run({"x": x[:4]})
        assert runs[backend].stats[0]["axi_data_width"] == 64
    assert runs["pyrtl"].stats[0]["cycles_per_vector"] == 2
    core, top = runs["pyrtl"].cycles, runs["verilator"].cycles
    assert abs(core - top) <= 0.02 * top, (core, top)


def test_explicit_zero_width_or_vector_time_is_refused():
    """0 is not "the default": it is refused, naming what is allowed."""
    from sim.backends import SimOptions
    from tcu_hw.errors import OptionsError
    with pytest.raises(ArtifactError, match=r"cycles_per_vector 1\.\.5,000 or None \(got 0\)"):
        SimOptions(cycles_per_vector=0)
    with pytest.raises(OptionsError, match="AXI data width 0 is not allowed"):
        SimOptions(axi_width=0)


def test_a_vector_no_bus_width_divides_still_compiles_and_simulates():
    """A 3-lane FP16 array (48-bit vectors) has no AXI top, but the compiler's estimate and
    the core's DRAM models round its beats up (32-bit port: two per vector)."""
    from tcu_hw.arch import preset
    arch = preset("cmoda7").with_changes("n3", array_size=3)
    m = make_model([helper.make_node("Gemm", ["x", "w"], ["y"])], {"x": (2, 5)}, ["y"],
                   {"w": rand((5, 4), 1, 0.5)})
    c = compile_model(m, arch)
    assert c.axi_width == 32
    from sim.backends import SimulatedBackend
    assert SimulatedBackend(arch, "pyrtl").cycles_per_vector == 2
