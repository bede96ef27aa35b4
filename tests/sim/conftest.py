"""Fixtures shared by the simulator tests."""

from __future__ import annotations

import numpy as np
import pytest

from tcu_hw import numeric
from tcu_hw.arch import Architecture
from tcu_hw.artifacts import ConstsEntry, ProgEntry, TensorEntry, TModel, write_csv, write_tmodel

from ..conftest import load_json


@pytest.fixture
def xor_model(tmp_path):
    """The batch-4 XOR golden as a .tmodel with its files, plus its inputs and outputs."""
    case = load_json("conformance", "xor", "xor_2x2_memory256_batch4.json")
    arch = Architecture.from_dict(case["arch"])
    prog = bytes.fromhex(case["program_hex"])
    consts = bytes.fromhex(case["consts_hex"])
    (tmp_path / "xor.tprog").write_bytes(prog)
    (tmp_path / "xor.tdata").write_bytes(consts)
    (inp,), (out,) = case["input_dram0"], case["output_dram0"]
    model = TModel("xor_pb_x", ProgEntry("xor.tprog", len(prog)),
                   (ConstsEntry("xor.tdata", 0, case["consts_vectors"]),),
                   (TensorEntry("x", inp["base"], inp["size"]),),
                   (TensorEntry("y", out["base"], out["size"]),), arch, False)
    write_tmodel(tmp_path / "xor.tmodel", model)
    (run,) = case["runs"]
    write_csv(tmp_path / "in.csv", numeric.to_float(np.array(run["input_raw"]), arch.dtype))
    return tmp_path / "xor.tmodel", tmp_path / "in.csv", np.array(run["output_raw"])
