"""The README's Python examples run as written (in a scratch directory, with ``../shared``
pointing at the shared data)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .conftest import SHARED, requires_gcc

ROOT = Path(__file__).resolve().parents[1]


@requires_gcc
def test_readme_python_examples(tmp_path):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has Python examples"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for code in blocks:
            code = code.replace("../shared/", f"{SHARED}/")
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)


def test_readme_commands_name_existing_things():
    """Files and modules the README's shell commands use exist."""
    text = (ROOT / "README.md").read_text()
    for path in re.findall(r"python (examples/\w+\.py|bench/\w+\.py|docs/\w+\.py)", text):
        assert (ROOT / path).is_file(), path
    for module in set(re.findall(r"python -m ([\w.]+)", text)):
        if module in ("pip", "pytest"):
            continue
        rel = Path(*module.split("."))
        assert (ROOT / f"{rel}.py").is_file() or (ROOT / rel / "__main__.py").is_file(), module
