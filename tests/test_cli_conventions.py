"""The command-line tools share one set of conventions (tcu_hw.cli.SHARED_FLAGS), each is a
console script, every option has help text, fixed values are choices, and ``--help`` is plain
text (no reStructuredText roles or double backticks)."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from importlib.metadata import entry_points

import pytest

from tcu_hw.cli import SHARED_FLAGS

#: the installed console scripts (pyproject.toml's [project.scripts])
SCRIPTS = {ep.name: ep.value for ep in entry_points(group="console_scripts")
           if ep.name.startswith("tcu-")}
#: the shared flags each tool must have (the ones that apply to what it does)
EXPECTED = {
    "tcu-gen": {"--arch", "--axi-data-width", "--target-dir", "--quiet"},
    "tcu-asm": {"--arch"},
    "tcu-compile": {"--arch", "--model", "--inputs", "--target-dir", "--axi-data-width",
                    "--quiet"},
    "tcu-emulate": {"--model", "--inputs", "--quiet"},
    "tcu-run": {"--model", "--inputs", "--axi-data-width", "--quiet"},
    "tcu-check": {"--arch", "--model", "--inputs", "--target-dir", "--axi-data-width",
                  "--quiet"},
    "tcu-cocotb": {"--model", "--inputs", "--axi-data-width", "--quiet"},
    "tcu-formal": {"--arch"},
}
#: options whose values are a fixed set
CHOICES = {"--backend", "--strategy", "--mem-impl", "--resize-mode", "--sim"}


def parser_of(script: str):
    module, _, _ = SCRIPTS[script].partition(":")
    return importlib.import_module(module).build_parser()


def test_every_tool_is_a_console_script():
    assert set(SCRIPTS) == set(EXPECTED)


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_shared_flags_are_spelled_the_same(script):
    actions = {s: a for a in parser_of(script)._actions for s in a.option_strings}
    for long in EXPECTED[script]:
        assert long in actions, f"{script} lacks {long}"
        assert SHARED_FLAGS[long] in actions[long].option_strings, \
            f"{script}: {long} without {SHARED_FLAGS[long]}"
    for long, short in SHARED_FLAGS.items():       # a short flag never means something else
        if short in actions:
            assert long in actions[short].option_strings, f"{script}: {short} is not {long}"


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_every_option_has_help_and_fixed_values_are_choices(script):
    for action in parser_of(script)._actions:
        assert action.help, f"{script}: {action.option_strings or action.dest} has no help"
        if set(action.option_strings) & CHOICES:
            assert action.choices, f"{script}: {action.option_strings} without choices"


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_help_runs_as_a_console_script_in_plain_text(script):
    exe = shutil.which(script)
    if exe is None:
        pytest.skip(f"{script} is not installed: pip install -e .")
    run = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: ")
    for long in EXPECTED[script]:
        assert f"{SHARED_FLAGS[long]}" in run.stdout and long in run.stdout
    assert not re.search(r"``|:(func|class|meth|mod|data):", run.stdout), run.stdout
