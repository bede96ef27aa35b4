"""Constants on both DRAM ports (``consts_ports="both"``, ``--consts-ports both``): the host also
writes the constants into DRAM0 (the .tmodel's ``dram0_consts``) and every constants load takes
part from each port. The same bits as the DRAM1-only program on the emulator, from the files,
and on the core; clear errors where it cannot be; and a layer's accumulators placed clear of
those the layer before it is still draining."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler_lite.compile import compile_model
from compiler_lite.emit import Emitter
from compiler_lite.golden import run_emulator
from sim.model import emulate
from tcu_hw.arch import preset
from tcu_hw.artifacts import ConstsEntry, read_tmodel
from tcu_hw.errors import ArtifactError, CompileError
from tcu_hw.isa import DataMove, DataMoveKind as K, MatMul

from ..conftest import requires_gcc, requires_verilator
from .helpers import make_model, ort_run, rand, small_arch
from .test_input_ports import input_loads
from .test_ports import residual_model

C, H = 16, 12


def compiled(ports="both", arch="zcu104", **kw):
    return compile_model(residual_model(), arch, consts_ports=ports, **kw)


def consts_loads(c, kind):
    """Vectors of the constants image loaded by moves of ``kind`` (DRAM0: from the copy)."""
    base = 0 if kind == K.DRAM1_TO_LOCAL else c.plan.consts_mirror
    return sum(i.size + 1 for i in c.program if isinstance(i, DataMove) and i.kind == kind
               and base <= i.other_address < base + len(c.consts))


@pytest.mark.parametrize("arch", ["zcu104", small_arch()])
def test_constants_load_through_both_ports_with_the_same_bits(arch):
    feeds = {"x": rand((1, C, H, H), 5)}
    both, one = compiled("both", arch), compiled("dram1", arch)
    ends = [t.base + t.vectors for t in both.inputs + both.outputs]
    assert both.plan.consts_mirror >= max(ends)               # after the inputs and outputs
    assert one.plan.consts_mirror is None
    from_dram0 = consts_loads(both, K.DRAM0_TO_LOCAL)
    assert from_dram0 > 0
    assert from_dram0 + consts_loads(both, K.DRAM1_TO_LOCAL) == \
        consts_loads(one, K.DRAM1_TO_LOCAL)
    got = run_emulator(both, feeds)
    np.testing.assert_array_equal(got.raw["y"], run_emulator(one, feeds).raw["y"])
    want = ort_run(residual_model(), feeds)["y"]
    assert np.sqrt(np.mean((got.outputs["y"] - want) ** 2)) < 0.02 * np.std(want)


def test_the_manifest_carries_the_copy_and_the_files_run(tmp_path):
    c = compiled()
    c.write(tmp_path)
    model = read_tmodel(tmp_path / f"{c.name}.tmodel")
    assert model.dram0_consts == (ConstsEntry(f"{c.name}.tdata", c.plan.consts_mirror,
                                              len(c.consts)),)
    assert model.consts == (ConstsEntry(f"{c.name}.tdata", 0, len(c.consts)),)
    t = c.inputs[0]
    raw = t.encode(rand((1, C, H, H), 6), c.arch.dtype, c.arch.array_size)[0]
    got = emulate(model, {t.name: raw}, raw=True).outputs["y"]
    gold = run_emulator(c, {"x": rand((1, C, H, H), 6)}).raw["y"]
    np.testing.assert_array_equal(got, gold)
    assert "dram0_consts" not in compiled("dram1").tmodel().to_json()
    with pytest.raises(ArtifactError, match=r"cannot run with them in local memory "
                                            r"\(--local-consts\)"):
        emulate(model, {t.name: raw}, raw=True, consts_to_local=True)


@requires_gcc
def test_both_ports_on_the_core():
    from .test_hardware import check
    c = compiled(arch=small_arch())
    assert consts_loads(c, K.DRAM0_TO_LOCAL) > 0
    check(c, {"x": rand((1, C, H, H), 8)})


def test_what_cannot_be_is_refused():
    with pytest.raises(CompileError, match="strategy local-consts keeps them in local memory"):
        compiled(strategy="local-consts")
    with pytest.raises(CompileError, match=r"consts_ports \(--consts-ports\) 'dram2' is "
                                           "unknown; allowed: dram1, both"):
        compiled("dram2")
    tiny = preset("zcu104").with_changes("tiny DRAM0", dram0_depth=1024)
    with pytest.raises(CompileError, match="the inputs, outputs and the constants' copy need "
                                           r"1041 vectors of DRAM0, the architecture has 1022"):
        compiled(arch=tiny)


def two_convs():
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    return make_model(nodes, {"x": (1, 64, 8, 8)}, ["y"],
                      {f"w{k}": rand((64, 64, 1, 1), k, 0.1) for k in (1, 2)})


def layer_accumulators(c, k):
    """Accumulator addresses the MatMuls of layer ``k`` write."""
    start = sum(s.instructions for s in c.layers[:k])
    ins = c.program[start:start + c.layers[k].instructions]
    return [i.accumulator_address for i in ins if isinstance(i, MatMul)]


def test_a_layer_leaves_the_accumulators_the_one_before_is_draining(monkeypatch):
    """The second layer's first MatMuls would overwrite what the first layer's last partition
    still stores: its accumulators go after them, with the same bits."""
    c = compile_model(two_convs(), "pynqz1")
    first, second = layer_accumulators(c, 0), layer_accumulators(c, 1)
    assert min(second) > max(first)
    monkeypatch.setattr(Emitter, "_place_accumulators", lambda self, part: part)
    plain = compile_model(two_convs(), "pynqz1")
    assert min(layer_accumulators(plain, 1)) == 0
    feeds = {"x": rand((1, 64, 8, 8), 9)}
    np.testing.assert_array_equal(run_emulator(c, feeds).raw["y"],
                                  run_emulator(plain, feeds).raw["y"])


@requires_verilator
def test_the_driver_writes_the_copies_for_the_generated_top(tmp_path):
    """Through the files and the driver, as a user runs it: the Verilator backend writes
    the constants' DRAM0 copy and the input's DRAM1 copy (``--input-ports both``,
    test_input_ports.py), and the generated top gives the emulator's bits."""
    from sim.driver import Driver
    c = compiled(arch="pynqz1", input_ports="both")
    assert consts_loads(c, K.DRAM0_TO_LOCAL) > 0 and input_loads(c, K.DRAM1_TO_LOCAL) > 0
    c.write(tmp_path)
    drv = Driver("pynqz1", backend="verilator")
    drv.load_model(tmp_path / f"{c.name}.tmodel")
    x = rand((1, C, H, H), 10)
    np.testing.assert_array_equal(drv.run({"x": x}).raw["y"], run_emulator(c, {"x": x}).raw["y"])


@pytest.mark.parametrize("flag, key, bad", [("--consts-ports", "dram0_consts", "dram0"),
                                            ("--input-ports", "dram1_inputs", "dram1")])
def test_the_command_lines_take_the_options(tmp_path, capsys, flag, key, bad):
    from compiler_lite.__main__ import main as compile_main
    from sim.check import main as check_main
    path = tmp_path / "m.onnx"
    path.write_bytes(residual_model().SerializeToString())
    assert compile_main(["-a", "zcu104", "-m", str(path), "-t", str(tmp_path / "a"), "-q",
                         flag, "both"]) == 0
    (tmodel,) = (tmp_path / "a").glob("*.tmodel")
    assert key in tmodel.read_text()
    assert check_main(["-a", "zcu104", "-m", str(path), "--backend", "emulator",
                       flag, "both"]) == 0
    assert "RESULT: PASS" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        compile_main(["-a", "zcu104", "-m", str(path), flag, bad])
    assert f"invalid choice: '{bad}'" in capsys.readouterr().err
