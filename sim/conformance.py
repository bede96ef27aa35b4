"""Tensil's conformance programs (``../shared/conformance``) as runnable cases.

A :class:`Case` is an architecture, a decoded program and its recorded runs; each
:class:`Run` has the initial memories (:class:`sim.compare.Images`) and the raw output
vectors Tensil's own tools recorded. The XOR cases come from Tensil's compiler tests (one JSON
file each, constants at ``consts_dram1_base``); the speech-commands case is Tensil's compiled
model with its six recorded inputs. Tests and ``bench/conformance_cycles.py`` run them on the
emulator and on every hardware backend.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from tcu_hw import numeric
from tcu_hw.arch import Architecture
from tcu_hw.errors import ArtifactError
from tcu_hw.files import read_bytes

from .compare import Images
from .model import consts_images, load_model, load_program

#: where the conformance data sits: next to the repository
CONFORMANCE = Path(__file__).resolve().parents[2] / "shared" / "conformance"
SPEECH_MODEL = "speech_commands_onnx_speech_robot.tmodel"


@dataclass(frozen=True)
class Run:
    """One recorded run: the initial memories and the raw vectors it must leave in DRAM0 at
    ``output_base`` (``len(expected)`` vectors)."""

    images: Images
    output_base: int
    expected: list


@dataclass(frozen=True)
class Case:
    name: str
    arch: Architecture
    program: list
    runs: list[Run]


def _json(path: Path):
    try:
        return json.loads(read_bytes(path, "conformance data", ArtifactError))
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{path}: not valid JSON ({e})") from None


def xor_names(root: Path = CONFORMANCE) -> list[str]:
    """The XOR cases present (file stems of ``xor/*.json``)."""
    return sorted(p.stem for p in (root / "xor").glob("*.json"))


def xor_case(name: str, root: Path = CONFORMANCE) -> Case:
    """An XOR case: the program, its constants in DRAM1 and every recorded run."""
    case = _json(root / "xor" / f"{name}.json")
    arch = Architecture.from_dict(case["arch"])
    program = arch.layout.decode_program(bytes.fromhex(case["program_hex"]), source=name)
    consts = numeric.decode_vectors(bytes.fromhex(case["consts_hex"]), arch.dtype,
                                    arch.array_size)
    (inp,), (out,) = case["input_dram0"], case["output_dram0"]
    runs = [Run(Images(dram0={inp["base"]: np.array(r["input_raw"])},
                       dram1={case["consts_dram1_base"]: consts}), out["base"], r["output_raw"])
            for r in case["runs"]]
    return Case(name, arch, program, runs)


def speech_case(indices: Iterable[int] = range(6), root: Path = CONFORMANCE) -> Case:
    """Tensil's compiled speech-commands model with the recorded inputs ``indices`` (0-5)."""
    d = root / "speech_robot"
    model = load_model(d / SPEECH_MODEL)
    entries = _json(d / "expected.json")["inputs"]
    (base, consts), = consts_images(model)
    n = model.arch.array_size
    runs = []
    for i in indices:
        if not 0 <= i < len(entries):
            raise ArtifactError(f"speech input {i} does not exist (0..{len(entries) - 1})")
        raw = np.frombuffer(read_bytes(d / entries[i]["files"]["raw_le_int16"],
                                       "speech input", ArtifactError), "<i2")
        runs.append(Run(Images(dram0={0: raw.reshape(-1, n).astype(np.int64)},
                               dram1={base: consts}), 0, entries[i]["expected_output_raw"]))
    return Case("speech_commands", model.arch, load_program(model), runs)
