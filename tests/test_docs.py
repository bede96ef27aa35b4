"""The generated documentation is up to date: block pages (ports and timing simulated from
the blocks) and the command-line reference (from the parsers)."""

from __future__ import annotations

import importlib
import re
import runpy
from pathlib import Path

import pytest

from .conftest import requires_gcc

ROOT = Path(__file__).resolve().parents[1]


@requires_gcc
def test_block_pages_match_the_blocks(tmp_path):
    make = runpy.run_path(str(ROOT / "docs" / "make_blocks.py"))
    pages = make["render_all"]()
    stale = [name for name, text in pages.items()
             if (ROOT / "docs" / "blocks" / name).read_text() != text]
    assert not stale, f"out of date (run python docs/make_blocks.py): {stale}"
    anonymous = [name for name, text in pages.items() if re.search(r"`tmp\d+`", text)]
    assert not anonymous, f"ports without a stable name (name_ports): {anonymous}"
    prose = {name: re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
             for name, text in pages.items()}
    rst = [name for name, text in prose.items()
           if re.search(r":(class|func|meth|mod|data|attr):`|``", text)]
    assert not rst, f"reStructuredText left in the Markdown pages: {rst}"
    assert {"systolic_array.md", "accumulator.md", "simd.md", "axi.md", "decoder.md",
            "compute.md", "dram_engine.md"} <= set(pages)


@pytest.mark.parametrize("module", ["tcu_hw.gen", "compiler_lite.__main__", "sim.check",
                                    "sim.run", "sim.emulate", "tcu_hw.asm"])
def test_cli_reference_lists_every_option(module):
    text = (ROOT / "docs" / "cli.md").read_text()
    parser = importlib.import_module(module).build_parser()
    assert f"## `python -m {module.replace('.__main__', '')}`" in text
    for action in parser._actions:
        for opt in action.option_strings:
            assert re.search(re.escape(opt) + r"\b", text), f"{module}: {opt} not documented"


def test_docs_link_to_existing_files():
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for link in re.findall(r"\]\(([^)#]+)\)", md.read_text()):
            if link.startswith("http"):
                continue
            assert (md.parent / link).exists(), f"{md.name}: broken link {link}"


def test_waveform_guide_names_real_signals():
    """Every signal docs/waveforms.md tells the reader to look at exists in the core (``*``
    stands for any suffix)."""
    import pyrtl

    from tcu_hw.arch import preset
    from tcu_hw.core import Core
    block = pyrtl.Block()
    with pyrtl.set_working_block(block):
        Core(preset("cmoda7"))
    names = {w.name for w in block.wirevector_set}
    text = (ROOT / "docs" / "waveforms.md").read_text()
    text = text[text.index("| group |"):]
    wanted = {t for t in re.findall(r"`([a-z][a-z0-9_*]*)`", text) if "_" in t}
    assert len(wanted) > 30
    missing = [t for t in sorted(wanted)
               if not any(re.fullmatch(re.escape(t).replace(r"\*", ".*") + ".*" if "*" in t
                                       else re.escape(t), n) for n in names)]
    assert not missing, f"docs/waveforms.md names signals the core does not have: {missing}"
