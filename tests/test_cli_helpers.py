"""tcu_hw.cli: the argument types the command-line tools share, and the commands using them."""

from __future__ import annotations

import argparse
import importlib

import pytest

from tcu_hw.cli import boolean, pc_around, pc_window


@pytest.mark.parametrize("text", ["true", "True", "YES", "1", "on"])
def test_boolean_true(text):
    assert boolean(text) is True


@pytest.mark.parametrize("text", ["false", "FALSE", "no", "0", "Off"])
def test_boolean_false(text):
    assert boolean(text) is False


def test_boolean_rejects_other_words():
    with pytest.raises(argparse.ArgumentTypeError, match="expected true or false, got 'maybe'"):
        boolean("maybe")


@pytest.mark.parametrize("parse, text, window", [
    (pc_window, "3:10", (3, 10)), (pc_window, "0x10:0x20", (16, 32)), (pc_window, "7:7", (7, 7)),
    (pc_around, "150", (146, 154)), (pc_around, "2:5", (0, 7)), (pc_around, "0x10:0", (16, 16)),
])
def test_pc_windows(parse, text, window):
    assert parse(text) == window


@pytest.mark.parametrize("parse, text, message", [
    (pc_window, "5", "expected PC_FROM:PC_TO, got '5'"),
    (pc_window, "a:b", "expected PC_FROM:PC_TO"),
    (pc_window, "1:2:3", "expected PC_FROM:PC_TO"),
    (pc_window, "10:3", "must have 0 <= PC_FROM <= PC_TO"),
    (pc_window, "-1:3", "must have 0 <= PC_FROM <= PC_TO"),
    (pc_around, "x", "expected PC\\[:RADIUS\\], got 'x'"),
    (pc_around, "3:y", "expected PC\\[:RADIUS\\]"),
    (pc_around, "-1", "PC and RADIUS must be >= 0"),
    (pc_around, "3:-1", "PC and RADIUS must be >= 0"),
])
def test_pc_window_errors(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse(text)


# each command parses its options with the shared types (required options given dummies)
COMMANDS = {
    "tcu_hw.gen": [],
    "compiler_lite.__main__": ["-a", "pynqz1", "-m", "m.onnx"],
    "sim.run": ["-m", "m.tmodel", "-i", "in.csv"],
    "sim.check": ["-a", "pynqz1", "-m", "m.onnx"],
}


@pytest.mark.parametrize("module, argv, expected", [
    ("tcu_hw.gen", ["-s", "no"], {"summary": False}),
    ("tcu_hw.gen", ["-s"], {"summary": True}),
    ("compiler_lite.__main__", ["-s", "on", "--layers-summary", "0"],
     {"summary": True, "layers_summary": False}),
    ("sim.run", ["--window", "3:10"], {"window": (3, 10)}),
    ("sim.run", ["--around", "150"], {"around": (146, 154)}),
    ("sim.check", ["--window", "0x10:0x20", "--around", "2:5"],
     {"window": (16, 32), "around": (0, 7)}),
])
def test_commands_use_the_shared_types(module, argv, expected):
    args = importlib.import_module(module).build_parser().parse_args(COMMANDS[module] + argv)
    assert {k: getattr(args, k) for k in expected} == expected


@pytest.mark.parametrize("module, argv, message", [
    ("tcu_hw.gen", ["-s", "maybe"], "argument -s/--summary: expected true or false"),
    ("compiler_lite.__main__", ["--layers-summary", "x"], "expected true or false, got 'x'"),
    ("sim.run", ["--window", "9:1"], "argument --window: window '9:1' must have"),
    ("sim.check", ["--around", "x"], "argument --around: expected PC[:RADIUS], got 'x'"),
])
def test_commands_report_bad_values(module, argv, message, capsys):
    parser = importlib.import_module(module).build_parser()
    with pytest.raises(SystemExit) as e:
        parser.parse_args(COMMANDS[module] + argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
