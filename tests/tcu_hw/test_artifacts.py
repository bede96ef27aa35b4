"""`.tmodel`, `.tdata`, CSV and `architecture_params.h` files."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tcu_hw import numeric
from tcu_hw.arch import Architecture, preset
from tcu_hw.artifacts import (ConstsEntry, ProgEntry, TensorEntry, TModel, architecture_params_h,
                              format_csv, model_name, read_csv, read_tdata, read_tmodel,
                              tmodel_from_dict, write_csv, write_tdata, write_tmodel)
from tcu_hw.errors import ArtifactError

SPEECH = "speech_commands_onnx_speech_robot"


def test_model_name_rule():
    assert model_name("resnet20v2_cifar.onnx", "pynqz1.tarch") == "resnet20v2_cifar_onnx_pynqz1"
    assert model_name("models/speech commands:v1.onnx", "arch/speech_robot.tarch") == \
        "speech commands:v1_onnx_speech_robot"
    assert model_name("a-b+c.onnx", "ultra96v2") == "a_b_c_onnx_ultra96v2"


def test_speech_tmodel_reads_and_writes_identically(speech_dir):
    path = speech_dir / f"{SPEECH}.tmodel"
    model = read_tmodel(path)
    assert model.name == SPEECH
    assert model.load_consts_to_local is None and model.consts_to_local is False
    assert model.prog == ProgEntry(f"{SPEECH}.tprog", 642464)
    assert model.consts == (ConstsEntry(f"{SPEECH}.tdata", 0, 93937),)
    assert model.inputs == (TensorEntry("input_1", 0, 15996),)
    assert model.vectors("dense_1", outputs=True) == 2
    assert model.arch == Architecture.from_dict(
        json.loads((speech_dir / "speech_robot.tarch").read_text()))
    assert model.to_json() == path.read_text()


def test_tmodel_round_trip_with_several_entries_per_name(tmp_path):
    arch = preset("cmoda7")
    model = TModel("m_onnx_cmoda7", ProgEntry("m.tprog", 16),
                   (ConstsEntry("m.tdata", 0, 3),),
                   (TensorEntry("x", 10, 2), TensorEntry("x", 0, 4), TensorEntry("y", 20, 1)),
                   (TensorEntry("out", 30, 2),), arch, True, tmp_path)
    (tmp_path / "m.tprog").write_bytes(bytes(16))
    write_tdata(tmp_path / "m.tdata", np.arange(12).reshape(3, 4), arch)
    write_tmodel(tmp_path / "m.tmodel", model)
    text = (tmp_path / "m.tmodel").read_text()
    assert list(json.loads(text)) == ["name", "prog", "consts", "inputs", "outputs", "arch",
                                      "load_consts_to_local"]
    back = read_tmodel(tmp_path / "m.tmodel")
    assert back == model
    assert back.input_names == ["x", "y"]
    assert [e.base for e in back.entries("x")] == [0, 10]
    assert back.vectors("x") == 6
    with pytest.raises(ArtifactError, match="no input named 'z'; inputs: x, y"):
        back.entries("z")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 1000), st.integers(1, 50)),
                min_size=1, max_size=6),
       st.sampled_from([None, False, True]), st.sampled_from(["pynqz1", "cmoda7", "zcu104"]))
def test_tmodel_dict_round_trip(entries, lctl, board):
    model = TModel("name", ProgEntry("p.tprog", 8), (ConstsEntry("c.tdata", 0, 1),),
                   tuple(TensorEntry(*e) for e in entries), tuple(TensorEntry(*e) for e in entries),
                   preset(board), lctl)
    d = json.loads(model.to_json())
    assert ("load_consts_to_local" in d) == (lctl is not None)
    assert tmodel_from_dict(d) == model


def test_a_copy_of_the_constants_in_dram0_round_trips(speech_dir, tmp_path):
    """``dram0_consts`` (our extension: the host also writes the constants there) is read,
    written last, and left out when empty, so Tensil's files read and write identically."""
    path = _speech_copy(speech_dir, tmp_path)
    copy = {"file_name": f"{SPEECH}.tdata", "base": 20000, "size": 93937}
    _edit(path, dram0_consts=[copy])
    model = read_tmodel(path)
    assert model.dram0_consts == (ConstsEntry(f"{SPEECH}.tdata", 20000, 93937),)
    d = json.loads(model.to_json())
    assert list(d)[-1] == "dram0_consts" and d["dram0_consts"] == [copy]
    assert tmodel_from_dict(d, directory=tmp_path) == model


def test_a_copy_of_the_inputs_in_dram1_round_trips(speech_dir, tmp_path):
    """``dram1_inputs`` (our extension: the host also writes the inputs there) is read,
    written last, and left out when empty."""
    path = _speech_copy(speech_dir, tmp_path)
    copy = {"name": "input_1", "base": 100000, "size": 15996}
    _edit(path, dram1_inputs=[copy])
    model = read_tmodel(path)
    assert model.dram1_inputs == (TensorEntry("input_1", 100000, 15996),)
    d = json.loads(model.to_json())
    assert list(d)[-1] == "dram1_inputs" and d["dram1_inputs"] == [copy]
    assert tmodel_from_dict(d, directory=tmp_path) == model
    assert "dram1_inputs" not in read_tmodel(_speech_copy(speech_dir, tmp_path)).to_json()


def _speech_copy(speech_dir, tmp_path):
    for suffix in ("tmodel", "tprog", "tdata"):
        shutil.copy(speech_dir / f"{SPEECH}.{suffix}", tmp_path)
    return tmp_path / f"{SPEECH}.tmodel"


def _edit(path, **changes):
    d = json.loads(path.read_text())
    for key, value in changes.items():
        target = d
        *parents, last = key.split("__")
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
    path.write_text(json.dumps(d))


@pytest.mark.parametrize("changes, message", [
    ({"prog__file_name": "gone.tprog"}, "prog file 'gone.tprog' not found"),
    ({"consts__0__file_name": "gone.tdata"}, "consts[0] file 'gone.tdata' not found"),
    ({"prog__size": 8}, "prog.size is 8 bytes but"),
    ({"consts__0__size": 10}, "consts[0] says 10 vectors"),
    ({"name": KeyError}, "name: missing key"),
    ({"inputs__0__base": -1}, "inputs[0].base: expected a non-negative integer"),
    ({"inputs__0__size": "15996"}, "inputs[0].size: expected a non-negative integer"),
    ({"outputs": {}}, "outputs: expected a list"),
    ({"load_consts_to_local": "no"}, "load_consts_to_local: expected true or false"),
    ({"extra": 1}, "extra: unknown key"),
    ({"arch__array_size": 1}, "key 'array_size' = 1 is out of range"),
    ({"inputs__0__base": 131070}, "does not fit DRAM0"),
    ({"dram0_consts": {}}, "dram0_consts: expected a list"),
    ({"dram0_consts": [{"file_name": f"{SPEECH}.tdata", "base": 20000, "size": 10}]},
     "dram0_consts[0] says 10 vectors"),
    ({"dram0_consts": [{"file_name": f"{SPEECH}.tdata", "base": 100000, "size": 93937}]},
     "dram0_consts[0] (base 100000, 93937 vectors) does not fit DRAM0"),
    ({"dram0_consts": [{"file_name": f"{SPEECH}.tdata", "base": 100, "size": 93937}]},
     "inputs[0] 'input_1' (vectors 0..15995) overlaps dram0_consts[0] (vectors 100..94036)"),
    ({"dram0_consts": [{"file_name": f"{SPEECH}.tdata", "base": 20000, "size": 93937}],
      "load_consts_to_local": True}, "this model has load_consts_to_local true"),
    ({"dram1_inputs": [{"name": "x", "base": 100000, "size": 15996}]},
     "dram1_inputs[0] 'x': no such input; inputs: input_1"),
    ({"dram1_inputs": [{"name": "input_1", "base": 100000, "size": 15}]},
     "dram1_inputs[0] 'input_1': 15 vectors, the input has 15996"),
    ({"dram1_inputs": [{"name": "input_1", "base": 130000, "size": 15996}]},
     "dram1_inputs[0] 'input_1' (base 130000, 15996 vectors) does not fit DRAM1"),
    ({"dram1_inputs": [{"name": "input_1", "base": 90000, "size": 15996}]},
     "dram1_inputs[0] 'input_1' (vectors 90000..105995) overlaps consts[0] (vectors "
     "0..93936)"),
    ({"dram1_inputs": [{"name": "input_1", "base": 100000, "size": 15996},
                       {"name": "input_1", "base": 116000, "size": 15996}]},
     "dram1_inputs[1] 'input_1': a second copy of the same input"),
    ({"dram1_inputs": [{"name": "input_1", "base": 100000}]},
     "dram1_inputs[0].size: missing key"),
])
def test_tmodel_errors(speech_dir, tmp_path, changes, message):
    path = _speech_copy(speech_dir, tmp_path)
    _edit(path, **changes)
    with pytest.raises(ArtifactError) as err:
        read_tmodel(path)
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_tmodel_not_json(tmp_path):
    path = tmp_path / "x.tmodel"
    path.write_text("{name: 1")
    with pytest.raises(ArtifactError, match="x.tmodel: not valid JSON"):
        read_tmodel(path)
    with pytest.raises(ArtifactError, match="cannot read model manifest"):
        read_tmodel(tmp_path / "none.tmodel")


def test_tprog_length_checked_against_arch(speech_dir, tmp_path):
    path = _speech_copy(speech_dir, tmp_path)
    prog = tmp_path / f"{SPEECH}.tprog"
    prog.write_bytes(prog.read_bytes()[:-3])
    _edit(path, prog__size=642461)
    with pytest.raises(ArtifactError, match="not a multiple of the 8-byte instructions"):
        read_tmodel(path)


@pytest.mark.parametrize("dt_name", ["FP8BP4", "FP16BP8", "FP18BP10", "FP32BP16", "FLOAT32"])
def test_tdata_round_trip(tmp_path, dt_name):
    arch = Architecture.from_dict({**preset("cmoda7").to_dict(),
                                                   "data_type": dt_name})
    dt = arch.dtype
    rng = np.random.default_rng(0)
    raw = (rng.uniform(-100, 100, (5, 4)).astype(np.float32) if dt.is_float
           else rng.integers(dt.min_raw, dt.max_raw + 1, (5, 4)))
    write_tdata(tmp_path / "c.tdata", raw, arch)
    assert (tmp_path / "c.tdata").stat().st_size == 5 * 4 * dt.bytes_per_scalar
    assert np.array_equal(read_tdata(tmp_path / "c.tdata", arch), raw)
    (tmp_path / "bad.tdata").write_bytes(bytes(4 * dt.bytes_per_scalar + 1))
    with pytest.raises(ArtifactError, match="bad.tdata: .* not a whole number"):
        read_tdata(tmp_path / "bad.tdata", arch)


def test_speech_tdata(speech_dir):
    model = read_tmodel(speech_dir / f"{SPEECH}.tmodel")
    raw = read_tdata(speech_dir / f"{SPEECH}.tdata", model.arch)
    assert raw.shape == (93937, 8)
    assert numeric.encode_vectors(raw, model.arch.dtype) == \
        (speech_dir / f"{SPEECH}.tdata").read_bytes()


def test_csv_read_write(tmp_path, speech_dir):
    values = read_csv(speech_dir / "input0_tensil_models_csv.csv", 8)
    assert values.shape == (15996, 8)
    raw, sats = numeric.to_fixed(values, numeric.FP16BP8)
    expected = np.frombuffer((speech_dir / "input0_tensil_models_csv.bin").read_bytes(), "<i2")
    assert sats == 0 and np.array_equal(raw.ravel(), expected)
    write_csv(tmp_path / "v.csv", values[:10])
    assert np.array_equal(read_csv(tmp_path / "v.csv", 8), values[:10])
    assert format_csv([[1, -2]], raw=True) == "1,-2\n"
    assert format_csv([[0.5, -1.25]]) == "0.5,-1.25\n"


@pytest.mark.parametrize("text, message", [
    ("1,2,3,4\n1,2,3\n", "line 2: 3 values, expected 4"),
    ("1,2,3,4\n1,2,x,4\n", "line 2 column 3: 'x' is not a number"),
    ("1,2,3,4,5\n", "line 1: 5 values, expected 4"),
])
def test_csv_errors(tmp_path, text, message):
    path = tmp_path / "in.csv"
    path.write_text(text)
    with pytest.raises(ArtifactError) as err:
        read_csv(path, 4)
    assert str(err.value).startswith(f"{path} ")
    assert message in str(err.value)


def test_architecture_params_h():
    text = architecture_params_h(preset("pynqz1"))
    assert text.startswith("#pragma once\n\n")
    assert "#define TENSIL_ARCHITECTURE_DATA_TYPE             TENSIL_DATA_TYPE_FP16BP8\n" in text
    lines = [line.split() for line in text.splitlines()[2:]]
    assert [(k, v) for _, k, v in lines] == [
        ("TENSIL_ARCHITECTURE_DATA_TYPE", "TENSIL_DATA_TYPE_FP16BP8"),
        ("TENSIL_ARCHITECTURE_ARRAY_SIZE", "8"),
        ("TENSIL_ARCHITECTURE_DRAM0_DEPTH", "1048576"),
        ("TENSIL_ARCHITECTURE_DRAM1_DEPTH", "1048576"),
        ("TENSIL_ARCHITECTURE_LOCAL_DEPTH", "8192"),
        ("TENSIL_ARCHITECTURE_ACCUMULATOR_DEPTH", "2048"),
        ("TENSIL_ARCHITECTURE_SIMD_REGISTERS_DEPTH", "1"),
        ("TENSIL_ARCHITECTURE_STRIDE0_DEPTH", "8"),
        ("TENSIL_ARCHITECTURE_STRIDE1_DEPTH", "8")]
    lut = Architecture(**{**preset("pynqz1").to_dict(), "simd_registers_depth": 4,
                                       "lut_count": 2, "lut_depth": 16})
    assert "#define TENSIL_ARCHITECTURE_LUT_COUNT             2\n" in architecture_params_h(lut)
