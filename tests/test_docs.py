"""The documentation is true: the generated pages are up to date (block pages: ports and
timing simulated from the blocks; the command-line reference: from the parsers), and every
snippet in ``docs/`` (and every shell snippet of the README) runs as written.

Snippets: a ```python block is executed in-process (a fresh PyRTL working block each), a
```sh block with bash; each document's snippets run in order in one scratch directory with
``../shared`` beside it, so a snippet may use the files an earlier one wrote. Other blocks
(```text for outputs and diagrams, ```verilog, ...) are never run; a block that shows output
is ```text and introduced by a line of prose ("Output:", "It prints:"), never placed straight
after the command. An HTML comment on the line before a runnable block annotates it:

- ``<!-- not run: REASON -->``: never run (needs a board, Vivado, installs packages, a GUI);
  the reason is required;
- ``<!-- slow -->`` (or ``<!-- slow: REASON -->``): run only in the slow tier; later snippets
  must not need its files;
- ``<!-- needs: PROGRAM[, PROGRAM] -->``: skipped when a program is not on PATH;

several separated by ``;``. The README's Python snippets are run by tests/test_readme.py.
"""

from __future__ import annotations

import importlib
import os
import re
import runpy
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import SHARED, requires_gcc, shared_path

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


CLI_MODULES = ["tcu_hw.gen", "compiler_lite.__main__", "sim.check", "sim.run", "sim.emulate",
               "tcu_hw.asm", "sim.cocotb_run", "sim.formal"]


@pytest.mark.parametrize("module", CLI_MODULES)
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


@pytest.mark.parametrize("module", CLI_MODULES)
def test_cli_help_is_plain_text(module):
    """``--help`` (and so docs/cli.md) shows no reStructuredText markup."""
    text = importlib.import_module(module).build_parser().format_help()
    rst = re.findall(r".{0,30}(?::(?:class|func|meth|mod|data|attr):`|``).{0,30}", text)
    assert not rst, f"{module} --help shows reStructuredText: {rst}"


def test_cli_reference_is_current():
    make = runpy.run_path(str(ROOT / "docs" / "make_cli.py"))
    assert (ROOT / "docs" / "cli.md").read_text() == make["render"](), \
        "docs/cli.md is out of date: run python docs/make_cli.py"


# ---------------------------------------------------------------------------- snippets

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUNNABLE = ("python", "sh")
FENCE = re.compile(r"^```(\S*)\s*$")
NOTE = re.compile(r"^<!--(.*)-->$")


@dataclass
class Snippet:
    doc: Path
    line: int                       # of the opening fence, 1-based
    lang: str
    code: str
    notes: dict[str, str]           # annotation key -> value ("" when it has none)
    after: str | None               # the language of a block just before (blank lines between)

    @property
    def where(self) -> str:
        name = self.doc.relative_to(ROOT) if self.doc.is_relative_to(ROOT) else self.doc.name
        return f"{name}:{self.line}"


def snippets(doc: Path) -> list[Snippet]:
    """Every fenced block of a Markdown file, with the annotation before it."""
    lines = doc.read_text().splitlines()
    out, i, last_close, last_lang = [], 0, None, None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"{doc.name}:{i + 1}: unclosed code block"
        before = [t.strip() for t in lines[last_close + 1 if last_close is not None else 0:i]]
        prose = [t for t in before if t]
        notes = {}
        note = NOTE.match(prose[-1]) if prose else None
        if note:
            for item in filter(None, (t.strip() for t in note[1].split(";"))):
                key, _, value = item.partition(":")
                notes[key.strip()] = value.strip()
        out.append(Snippet(doc, i + 1, m[1], "\n".join(lines[i + 1:end]) + "\n", notes,
                           None if prose else last_lang))
        last_close = i = end
        last_lang = m[1]
        i += 1
    return out


def problems(doc: Path) -> list[str]:
    """What breaks the conventions in a document: a block without a language, an unknown
    annotation, ``not run`` without its reason, an annotation on a block that never runs, an
    output glued to the command before it (not introduced by prose)."""
    out = []
    for s in snippets(doc):
        if not s.lang:
            out.append(f"{s.where}: a code block without a language (```text for output, "
                       "```sh or ```python for what runs)")
        unknown = set(s.notes) - {"not run", "slow", "needs"}
        if unknown:
            out.append(f"{s.where}: unknown annotation {sorted(unknown)}")
        if "not run" in s.notes and not s.notes["not run"]:
            out.append(f"{s.where}: <!-- not run: REASON --> needs its reason")
        if s.notes and s.lang not in RUNNABLE:
            out.append(f"{s.where}: an annotation on a ```{s.lang} block, which never runs")
        if s.after in RUNNABLE and s.lang not in RUNNABLE:
            out.append(f"{s.where}: a ```{s.lang} block (output?) right after a ```{s.after} "
                       "block; introduce it (e.g. \"Output:\")")
    return out


def test_snippets_follow_the_conventions():
    found = [p for doc in DOCS for p in problems(doc)]
    assert not found, "\n".join(found)


def test_convention_check_finds_each_problem(tmp_path):
    doc = tmp_path / "bad.md"
    doc.write_text("<!-- not run -->\n```sh\nls\n```\n\n```text\nout\n```\n\n"
                   "<!-- slow; needs: iverilog -->\n```python\npass\n```\n\n"
                   "<!-- later -->\n```\nx\n```\n")
    found = problems(doc)
    assert [f.split(": ", 1)[0] for f in found] == ["bad.md:2", "bad.md:6", "bad.md:16",
                                                    "bad.md:16", "bad.md:16"], found
    assert snippets(doc)[2].notes == {"slow": "", "needs": "iverilog"}


def _runs(s: Snippet) -> bool:
    """Whether the test runs the snippet (the README's Python is tests/test_readme.py's)."""
    readme_python = s.lang == "python" and s.doc == ROOT / "README.md"
    return s.lang in RUNNABLE and not readme_python and "not run" not in s.notes


def _cases():
    for doc in DOCS:
        found = [s for s in snippets(doc) if _runs(s)]
        name = str(doc.relative_to(ROOT))
        if any("slow" not in s.notes for s in found):
            yield pytest.param(doc, False, id=name)
        if any("slow" in s.notes for s in found):
            yield pytest.param(doc, True, id=f"{name}+slow", marks=pytest.mark.slow)


def _run_python(s: Snippet) -> None:
    import pyrtl
    pyrtl.reset_working_block()
    try:
        exec(compile(s.code, s.where, "exec"), {"__name__": "__main__"})
    finally:
        pyrtl.reset_working_block()


def _run_sh(s: Snippet, cwd: Path, env: dict) -> None:
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", s.code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        pytest.fail(f"{s.where}: exit status {done.returncode}\n{s.code}{tail}")


@requires_gcc
@pytest.mark.parametrize("doc, slow", list(_cases()))
def test_doc_snippets_run(doc, slow, tmp_path, monkeypatch, request):
    """A document's snippets run in order in one scratch directory with ``../shared`` next
    to it (the slow case runs the ``slow`` ones too, and stands in for the other when both
    are selected)."""
    slow_case = request.node.nodeid.replace("]", "+slow]")
    if not slow and any(item.nodeid == slow_case for item in request.session.items):
        pytest.skip(f"{slow_case} runs these snippets with the slow ones")
    shared_path()
    (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    work = tmp_path / "work"
    work.mkdir()
    shim = tmp_path / "bin"                 # `python` is this interpreter
    shim.mkdir()
    (shim / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shim / "python").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])))
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(ROOT))
    skipped = []
    for s in snippets(doc):
        if not _runs(s) or ("slow" in s.notes and not slow):
            continue
        missing = [p.strip() for p in s.notes.get("needs", "").split(",")
                   if p.strip() and shutil.which(p.strip()) is None]
        if missing:
            skipped.append(f"{s.where} (needs {', '.join(missing)})")
            continue
        if s.lang == "python":
            _run_python(s)
        else:
            _run_sh(s, work, env)
    if skipped:
        pytest.skip("ran the others; skipped " + "; ".join(skipped))
