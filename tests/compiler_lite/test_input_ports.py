"""Inputs on both DRAM ports (``input_ports="both"``, ``--input-ports both``): the host also
writes each input into DRAM1 (the .tmodel's ``dram1_inputs``) and the input loads take part
from each port. The same bits as the DRAM0-only program on the emulator, from the files, on
the core (and through the driver and the command lines: test_consts_ports.py); clear
errors where it cannot be."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler_lite.compile import compile_model
from compiler_lite.golden import run_emulator
from sim.model import emulate
from tcu_hw.arch import preset
from tcu_hw.artifacts import TensorEntry, read_tmodel
from tcu_hw.errors import ArtifactError, CompileError
from tcu_hw.isa import DataMove, DataMoveKind as K

from ..conftest import requires_gcc
from .helpers import rand, small_arch
from .test_ports import residual_model

C, H = 16, 12


def compiled(ports="both", arch=small_arch(), **kw):
    return compile_model(residual_model(), arch, input_ports=ports, **kw)


def input_loads(c, kind):
    """Vectors of the input loaded by moves of ``kind`` (DRAM1: from the copy)."""
    t = c.inputs[0]
    base = t.base if kind == K.DRAM0_TO_LOCAL else c.plan.input_mirror[t.name]
    return sum(i.size + 1 for i in c.program if isinstance(i, DataMove) and i.kind == kind
               and base <= i.other_address < base + t.vectors)


@pytest.mark.parametrize("consts", ["dram1", "both"])
@pytest.mark.parametrize("arch", ["zcu104", small_arch()])
def test_inputs_load_through_both_ports_with_the_same_bits(arch, consts):
    both = compiled("both", arch, consts_ports=consts)
    one = compiled("dram0", arch, consts_ports=consts)
    assert one.plan.input_mirror == {} and "x" in both.plan.input_mirror
    assert both.plan.input_mirror["x"] >= len(both.consts)          # above the constants
    assert both.plan.dram1_scratch[0] >= both.plan.input_mirror["x"] + both.inputs[0].vectors
    from_dram1 = input_loads(both, K.DRAM1_TO_LOCAL)
    if consts == "both" or arch != "zcu104":    # (zcu104's DRAM1 is busy with constants)
        assert from_dram1 > 0
    assert from_dram1 + input_loads(both, K.DRAM0_TO_LOCAL) == \
        input_loads(one, K.DRAM0_TO_LOCAL)
    feeds = {"x": rand((1, C, H, H), 5)}
    np.testing.assert_array_equal(run_emulator(both, feeds).raw["y"],
                                  run_emulator(one, feeds).raw["y"])


def test_the_manifest_carries_the_copy_and_the_files_run(tmp_path):
    c = compiled()
    c.write(tmp_path)
    model = read_tmodel(tmp_path / f"{c.name}.tmodel")
    t = c.inputs[0]
    assert model.dram1_inputs == (TensorEntry("x", c.plan.input_mirror["x"], t.vectors),)
    raw = t.encode(rand((1, C, H, H), 6), c.arch.dtype, c.arch.array_size)[0]
    got = emulate(model, {t.name: raw}, raw=True).outputs["y"]
    np.testing.assert_array_equal(got, run_emulator(c, {"x": rand((1, C, H, H), 6)}).raw["y"])
    assert "dram1_inputs" not in compiled("dram0").tmodel().to_json()


def test_a_copy_over_the_staged_constants_is_refused(tmp_path):
    """With the constants in local memory the hosts still stage them in DRAM1: a copy of
    the input there is refused, naming both."""
    c = compiled(arch=small_arch(local_depth=8192), strategy="local-consts")
    assert c.plan.input_mirror["x"] >= len(c.consts)
    c.write(tmp_path)
    path = tmp_path / f"{c.name}.tmodel"
    d = json.loads(path.read_text())
    d["dram1_inputs"][0]["base"] = 0
    path.write_text(json.dumps(d))
    with pytest.raises(ArtifactError, match=r"dram1_inputs\[0\] 'x' \(vectors 0\.\.\d+\) "
                                            r"overlaps consts\[0\]"):
        read_tmodel(path)


@requires_gcc
def test_both_ports_on_the_core():
    from .test_hardware import check
    c = compiled()
    assert input_loads(c, K.DRAM1_TO_LOCAL) > 0
    check(c, {"x": rand((1, C, H, H), 8)})


def test_what_cannot_be_is_refused():
    with pytest.raises(CompileError, match=r"input_ports \(--input-ports\) 'dram1' is "
                                           "unknown; allowed: dram0, both"):
        compiled("dram1")
    tiny = preset("zcu104").with_changes("tiny DRAM1", dram1_depth=800)
    with pytest.raises(CompileError, match="input_ports both: the constants and the inputs' "
                                           r"copy need \d+ vectors of DRAM1, the "
                                           "architecture has 800"):
        compiled(arch=tiny)
